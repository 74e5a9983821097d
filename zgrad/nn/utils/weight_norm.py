"""``zgrad.nn.utils.weight_norm``: the forward-pre-hook form of weight normalization, as
``torch.nn.utils.weight_norm`` (deprecated there in favour of
:func:`zgrad.nn.utils.parametrizations.weight_norm`, but still common in audio and GAN code and
in their checkpoints).

``weight_norm(module)`` replaces the parameter ``weight`` by two parameters, ``weight_g`` (the
norms, size 1 except along ``dim``) and ``weight_v`` (the direction), and registers a forward
pre-hook that recomputes ``module.weight = weight_g * weight_v / ||weight_v||`` (a plain
attribute) before every forward.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

from zgrad.nn.module import Module, Parameter
from zgrad.nn.utils.parametrizations import _norm_except_dim, _weight_norm
from zgrad.tensor import Tensor
from zgrad.warning_location import user_stacklevel

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]

T_module = TypeVar("T_module", bound=Module)


class WeightNorm:
    """The forward pre-hook of :func:`weight_norm` for one parameter ``name``."""

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        """``g * v / ||v||`` from the module's ``<name>_g`` and ``<name>_v``."""
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> "WeightNorm":
        """Split ``module.<name>`` into ``<name>_g`` and ``<name>_v`` and register the hook.

        Raises:
            RuntimeError: ``name`` already has a weight_norm hook.
        """
        warnings.warn("`zgrad.nn.utils.weight_norm` is deprecated in favor of "
                      "`zgrad.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=user_stacklevel())
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        """Make ``<name>`` a parameter again, holding the current ``g * v / ||v||``."""
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: T_module, name: str = "weight", dim: int | None = 0) -> T_module:
    """Weight normalization (Salimans & Kingma, 2016) by a forward pre-hook: the parameter
    ``name`` becomes ``<name>_g`` (its norm over every dim but ``dim``; over the whole tensor for
    ``dim=None``) and ``<name>_v``, and ``module.<name>`` is recomputed from them before each
    forward. Emits PyTorch's FutureWarning (deprecated in favour of
    ``zgrad.nn.utils.parametrizations.weight_norm``).

    Returns:
        ``module``.

    Raises:
        RuntimeError: the parameter already has weight normalization.
    """
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: T_module, name: str = "weight") -> T_module:
    """Undo :func:`weight_norm`: ``name`` is one parameter again, holding the normalized weight.

    Raises:
        ValueError: ``name`` has no weight normalization (PyTorch's message).
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")

"""``zgrad.nn.utils.spectral_norm``: the forward-pre-hook form of spectral normalization, as
``torch.nn.utils.spectral_norm`` (the form most GAN code and checkpoints use; the
parametrization is :func:`zgrad.nn.utils.parametrizations.spectral_norm`).

``spectral_norm(module)`` renames the parameter ``weight`` to ``weight_orig``, adds buffers
``weight_u`` and ``weight_v`` (the power-iteration vectors) and registers a forward pre-hook that
sets ``module.weight = weight_orig / sigma`` (a plain attribute) before every forward, running
``n_power_iterations`` steps first in training mode.
"""

from __future__ import annotations

from typing import Any, TypeVar

from zgrad.creation_random import randn
from zgrad.engine.grad_mode import no_grad
from zgrad.nn.module import Module, Parameter
from zgrad.nn.utils.parametrizations import _is_conv_transpose
from zgrad.ops.products import dot, mv
from zgrad.ops.vector import normalize
from zgrad.tensor import Tensor

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]

T_module = TypeVar("T_module", bound=Module)


class SpectralNorm:
    """The forward pre-hook of :func:`spectral_norm` for one parameter ``name``."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """``weight`` with ``dim`` first and the other dims flattened."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        """``<name>_orig / sigma``; first ``n_power_iterations`` steps updating ``<name>_u`` and
        ``<name>_v`` in place if ``do_power_iteration``."""
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                detached = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(mv(detached.t(), u), dim=0, eps=self.eps))
                    u.copy_(normalize(mv(detached, v), dim=0, eps=self.eps))
                u, v = u.clone(), v.clone()  # later in-place updates must not reach the graph
        sigma = dot(u, mv(weight_mat, v))
        return weight / sigma

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> "SpectralNorm":
        """Rename ``name`` to ``<name>_orig``, add the ``_u``/``_v`` buffers and the hook.

        Raises:
            RuntimeError: ``name`` already has a spectral_norm hook.
            ValueError: the parameter is None, or ``n_power_iterations`` is not positive.
        """
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = normalize(randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=fn.eps)
            v = normalize(randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        setattr(module, fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        """Make ``<name>`` a parameter again holding ``<name>_orig / sigma`` (no further iteration)."""
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(module: T_module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> T_module:
    """Spectral normalization (Miyato et al., 2018) by a forward pre-hook: before each forward,
    ``module.<name> = <name>_orig / sigma``, ``sigma`` the largest singular value of the weight
    (as a matrix with ``dim`` as rows; ``dim`` defaults to 1 for transposed convolutions, else 0)
    estimated by power iteration with the buffers ``<name>_u`` and ``<name>_v``, which advance by
    ``n_power_iterations`` steps per forward in training mode only.

    Returns:
        ``module``.

    Raises:
        RuntimeError: the parameter already has spectral normalization.
        ValueError: the parameter is None, or ``n_power_iterations`` is not positive.
    """
    if dim is None:
        dim = 1 if _is_conv_transpose(module) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: T_module, name: str = "weight") -> T_module:
    """Undo :func:`spectral_norm`: ``name`` is a plain parameter again, holding the normalized weight.

    Raises:
        ValueError: ``name`` has no spectral normalization (PyTorch's message).
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")

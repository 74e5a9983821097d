"""The optimizer base: parameter groups, per-parameter state, ``zero_grad`` and ``step``."""

from __future__ import annotations

import threading
import warnings
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping

from zgrad.optim import state_dict as _state_dict
from zgrad.tensor import Tensor

__all__ = ["Optimizer", "check_betas", "check_non_negative"]

# How PyTorch's optimizers name their hyperparameters in "Invalid ..." errors.
_LABELS = {"lr": "learning rate", "eps": "epsilon value"}


def check_non_negative(**values: float) -> None:
    """Check hyperparameters that must be at least 0, in the order given (NaN fails too).

    Raises:
        ValueError: the first that is not, with PyTorch's message ("Invalid learning rate: -1",
            "Invalid momentum value: -1").
    """
    for name, value in values.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {_LABELS.get(name, name + ' value')}: {value}")


def check_betas(betas: tuple[float, float]) -> None:
    """Check Adam-style ``betas``, each in [0, 1), in order (NaN fails too).

    Raises:
        ValueError: the first that is not, with PyTorch's message ("Invalid beta parameter at
            index 1: 1.0").
    """
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


class Optimizer:
    """Base of local optimizers.

    ``params`` is an iterable of tensors, or of dicts ``{"params": [...], **group_options}``.
    Subclasses implement :meth:`_update` for one parameter, with one fused kernel. PyTorch's
    implementation options are accepted where PyTorch has them (``foreach``, ``fused``,
    ``capturable``: every update here is one fused kernel per parameter whatever they say);
    ``differentiable=True`` is refused (see :meth:`add_param_group`). :meth:`step` reads
    ``.grad``; :meth:`step_with_gradients` applies gradients given explicitly (as the distributed
    optimizer does with a context's gradients). Steps are serialized by a lock, so concurrent
    callers on one optimizer never interleave updates.

    ``state`` is a ``collections.defaultdict(dict)`` keyed by parameter, as PyTorch's: an
    optimizer written for PyTorch can start a parameter's state with ``state = self.state[p]``.
    """

    # Whether each state array has its parameter's shape, which load_state_dict then checks
    # (LBFGS's are flat vectors over all the parameters).
    _state_shaped_like_params = True
    # State entries kept as Python floats where PyTorch keeps 0-d float32 tensors (NAdam's
    # mu_product, ASGD's eta and mu): the state dict holds them as such tensors, as PyTorch's.
    _float32_scalar_state: frozenset[str] = frozenset()

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options, as ``torch.optim.Optimizer``'s: options
        it lacks come from the defaults, other keys are kept (schedulers and users store their
        own), ``(name, tensor)`` pairs record ``param_names``. The dict itself is added.

        Raises:
            TypeError: ``param_group`` is not a dict, its params are a set (unordered) or hold
                something other than tensors.
            ValueError: a non-leaf or non-C-contiguous tensor, a parameter already in another
                group, names for some parameters only, or groups with and without names.
            NotImplementedError: ``differentiable=True``: the fused kernels update parameters in
                place outside autograd, so a step cannot be differentiated through.
            RuntimeError: ``fused=True`` together with ``foreach=True`` (PyTorch's error).
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__} "
                                f"(at index {i})")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not p.is_contiguous():
                raise ValueError(f"optimizer needs C-contiguous parameters; parameter {i} of shape {list(p.shape)} is not")
        param_group["params"] = params
        for name, default in self.defaults.items():
            param_group.setdefault(name, default)
        if param_group.get("differentiable"):
            raise NotImplementedError(
                f"{type(self).__name__}: differentiable=True is not supported: zgrad updates parameters in place "
                "with a fused kernel outside autograd, so a step cannot be differentiated through; pass "
                "differentiable=False (the default)")
        if param_group.get("fused") and param_group.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        if len(params) != len(set(params)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will cause "
                          "an error; see github.com/pytorch/pytorch/issues/40967 for more information", stacklevel=3)
        existing: set[Tensor] = set()
        for group in self.param_groups:
            existing.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        if not existing.isdisjoint(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state in PyTorch's layout: ``{"state": {index: {...}}, "param_groups":
        [{..., "params": [indices]}]}``, state arrays as tensors sharing their memory, ``step`` as a
        0-d float32 tensor (:mod:`zgrad.optim.state_dict`)."""
        with self._lock:
            return _state_dict.pack(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the options and state of ``state_dict`` (from :meth:`state_dict`, or PyTorch's of
        the same optimizer converted by name): state goes to this optimizer's parameters by
        position, copied into each parameter's dtype and device.

        Raises:
            ValueError: the groups or their sizes differ from this optimizer's (PyTorch's
                messages), a state array's shape differs from its parameter's, or a group turns
                on an option this optimizer does not implement.
        """
        state, groups = _state_dict.unpack(self, state_dict)
        with self._lock:
            self.state = state
            self.param_groups = groups

    def _state_shape(self, param: Tensor, name: str) -> tuple[int, ...] | None:
        """The shape :meth:`load_state_dict` requires of state array ``name`` of ``param``: the
        parameter's, or None (no check) where the state is not shaped like the parameters."""
        return tuple(param.shape) if self._state_shaped_like_params else None

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the ``.grad`` of every parameter (set to None, or zero it in place)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad._data[...] = 0

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a ``.grad``; parameters without one are left unchanged."""
        loss = closure() if closure is not None else None
        grads = {p: p.grad for group in self.param_groups for p in group["params"] if p.grad is not None}
        self.step_with_gradients(grads)
        return loss

    def step_with_gradients(self, gradients: Mapping[Tensor, Any]) -> None:
        """Update the parameters present in ``gradients`` (tensors or arrays) and leave the others."""
        with self._lock:
            for group in self.param_groups:
                updates = []
                for p in group["params"]:
                    grad = gradients.get(p)
                    if grad is None:
                        continue
                    array = grad._data if isinstance(grad, Tensor) else grad
                    if array.shape != p.shape:
                        raise ValueError(f"gradient of shape {list(array.shape)} for a parameter of shape {list(p.shape)}")
                    if array.dtype != p.dtype:
                        array = array.astype(p.dtype)
                    updates.append((p, array, self.state.setdefault(p, {})))
                self._update_group(group, updates)

    def _update_group(self, group: dict[str, Any], updates: list[tuple[Tensor, Any, dict[str, Any]]]) -> None:
        """Update the (parameter, gradient array, state) of ``updates``, all of ``group``: one
        :meth:`_update` each, unless an optimizer takes them together."""
        for param, grad, state in updates:
            self._update(param, grad, group, state)

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        raise NotImplementedError

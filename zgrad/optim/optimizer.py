"""The optimizer base: parameter groups, per-parameter state, ``zero_grad`` and ``step``."""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Mapping

from zgrad.tensor import Tensor

__all__ = ["Optimizer"]


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
    """

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (missing ones from the defaults).

        Raises:
            TypeError: a parameter is not a Tensor.
            ValueError: a parameter is not a C-contiguous leaf, or an option is unknown.
            NotImplementedError: ``differentiable=True``: the fused kernels update parameters in
                place outside autograd, so a step cannot be differentiated through.
            RuntimeError: ``fused=True`` together with ``foreach=True`` (PyTorch's error).
        """
        params = list(group["params"])
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__} at index {i}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not p._data.flags.c_contiguous:
                raise ValueError(f"optimizer needs C-contiguous parameters; parameter {i} of shape {list(p.shape)} is not")
        unknown = set(group) - set(self.defaults) - {"params"}
        if unknown:
            raise ValueError(f"unknown optimizer option(s) {sorted(unknown)}; allowed: {sorted(self.defaults)}")
        group = {**self.defaults, **group, "params": params}
        if group.get("differentiable"):
            raise NotImplementedError(
                f"{type(self).__name__}: differentiable=True is not supported: zgrad updates parameters in place "
                "with a fused kernel outside autograd, so a step cannot be differentiated through; pass "
                "differentiable=False (the default)")
        if group.get("fused") and group.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        self.param_groups.append(group)

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
                for p in group["params"]:
                    grad = gradients.get(p)
                    if grad is None:
                        continue
                    array = grad._data if isinstance(grad, Tensor) else grad
                    if array.shape != p.shape:
                        raise ValueError(f"gradient of shape {list(array.shape)} for a parameter of shape {list(p.shape)}")
                    if array.dtype != p.dtype:
                        array = array.astype(p.dtype)
                    self._update(p, array, group, self.state.setdefault(p, {}))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        raise NotImplementedError

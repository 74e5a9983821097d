"""Stochastic gradient descent, PyTorch's update rule, on one fused kernel per parameter."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.optim._state import full_like, unused
from zgrad.optim.optimizer import Optimizer
from zgrad.tensor import Tensor

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD with optional momentum (and dampening, Nesterov) and L2 weight decay, as
    ``torch.optim.SGD``.

    d = ±g + wd*p (minus g with ``maximize``); b = d (first step) else momentum*b + (1-dampening)*d;
    d = d + momentum*b if nesterov else b; p -= lr*d. State: ``momentum_buffer`` (with momentum).
    ``foreach`` and ``fused`` are accepted and change nothing (one fused kernel per parameter);
    ``differentiable=True`` raises NotImplementedError.

    Raises:
        ValueError: a negative ``lr``, ``momentum`` or ``weight_decay``, or ``nesterov`` without
            momentum or with dampening (PyTorch's messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        momentum = group["momentum"]
        buf = state.get("momentum_buffer")
        first = buf is None
        if momentum != 0 and first:
            buf = state["momentum_buffer"] = full_like(param)  # the first step copies d_p into it
        dispatch.backend_of(param._data).sgd_step(
            param._data, grad, buf if momentum != 0 else unused(param),
            float(group["lr"]), float(momentum), float(group["dampening"]), float(group["weight_decay"]),
            bool(group["nesterov"]), first, bool(group["maximize"]),
        )

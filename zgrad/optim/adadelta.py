"""Adadelta, PyTorch's update rule, on one fused kernel per parameter."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.optim._state import full_like
from zgrad.optim.optimizer import Optimizer, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta as ``torch.optim.Adadelta``.

    g = ±grad + wd*p; v = rho*v + (1-rho)*g²; delta = sqrt(u + eps) / sqrt(v + eps) * g;
    u = rho*u + (1-rho)*delta²; p -= lr*delta. State: ``step`` (an int), ``square_avg`` (v) and
    ``acc_delta`` (u). ``foreach`` and ``capturable`` are accepted and change nothing (one fused
    kernel per parameter); ``differentiable=True`` raises NotImplementedError.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``, or ``rho`` outside [0, 1]
            (PyTorch's messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        check_non_negative(lr=lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_non_negative(eps=eps, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        if not state:
            state.update(step=0, square_avg=full_like(param), acc_delta=full_like(param))
        state["step"] += 1
        dispatch.backend_of(param._data).adadelta_step(
            param._data, grad, state["square_avg"], state["acc_delta"], float(group["lr"]), float(group["rho"]),
            float(group["eps"]), float(group["weight_decay"]), bool(group["maximize"]),
        )

"""Adamax (Adam with the infinity norm), PyTorch's update rule, on one fused kernel per parameter."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.optim._state import full_like
from zgrad.optim.optimizer import Optimizer, check_betas, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax as ``torch.optim.Adamax``.

    g = ±grad + wd*p; m.lerp_(g, 1-beta1); u = max(beta2*u, |g| + eps) (NaN wins, as
    ``torch.maximum``); p -= lr/(1-beta1**t) * m/u. State: ``step`` (an int), ``exp_avg`` (m),
    ``exp_inf`` (u). ``foreach`` and ``capturable`` are accepted and change nothing (one fused
    kernel per parameter); ``differentiable=True`` raises NotImplementedError.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``, or a beta outside [0, 1)
            (PyTorch's messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        check_non_negative(lr=lr, eps=eps)
        check_betas(betas)
        check_non_negative(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        if not state:
            state.update(step=0, exp_avg=full_like(param), exp_inf=full_like(param))
        state["step"] += 1
        beta1, beta2 = group["betas"]
        dispatch.backend_of(param._data).adamax_step(
            param._data, grad, state["exp_avg"], state["exp_inf"], state["step"], float(group["lr"]), float(beta1),
            float(beta2), float(group["eps"]), float(group["weight_decay"]), bool(group["maximize"]),
        )

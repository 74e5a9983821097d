"""RAdam, PyTorch's update rule (variance rectification, L2 or decoupled weight decay), on one fused kernel."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.optim._state import full_like
from zgrad.optim.optimizer import Optimizer, check_betas, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """RAdam (rectified Adam) as ``torch.optim.RAdam``.

    g = ±grad (+ wd*p, or p *= 1 - lr*wd with ``decoupled_weight_decay``); m.lerp_(g, 1-beta1);
    v = beta2*v + (1-beta2)*g²; with rho_inf = 2/(1-beta2) - 1 and
    rho_t = rho_inf - 2t*beta2**t/(1-beta2**t): while rho_t > 5,
    p -= m/(1-beta1**t) * lr * sqrt(1-beta2**t)/(sqrt(v) + eps) * r_t with the rectification
    r_t = sqrt((rho_t-4)(rho_t-2)rho_inf / ((rho_inf-4)(rho_inf-2)rho_t)); before that,
    p -= m/(1-beta1**t) * lr. State: ``step`` (an int), ``exp_avg``, ``exp_avg_sq``. ``foreach``
    and ``capturable`` are accepted and change nothing (one fused kernel per parameter);
    ``differentiable=True`` raises NotImplementedError.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``, or a beta outside [0, 1)
            (PyTorch's messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        check_non_negative(lr=lr, eps=eps)
        check_betas(betas)
        check_non_negative(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        if not state:
            state.update(step=0, exp_avg=full_like(param), exp_avg_sq=full_like(param))
        state["step"] += 1
        beta1, beta2 = group["betas"]
        dispatch.backend_of(param._data).radam_step(
            param._data, grad, state["exp_avg"], state["exp_avg_sq"], state["step"], float(group["lr"]), float(beta1),
            float(beta2), float(group["eps"]), float(group["weight_decay"]), bool(group["maximize"]),
            bool(group["decoupled_weight_decay"]),
        )

"""NAdam, PyTorch's update rule (momentum decay, L2 or decoupled weight decay), on one fused kernel."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.kernels.optim_host import nadam_mu_product
from zgrad.optim._state import full_like
from zgrad.optim.optimizer import Optimizer, check_betas, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam (Adam with Nesterov momentum) as ``torch.optim.NAdam``.

    g = ±grad (+ wd*p, or p *= 1 - lr*wd with ``decoupled_weight_decay``); m.lerp_(g, 1-beta1);
    v = beta2*v + (1-beta2)*g²; denom = sqrt(v / (1 - beta2**t)) + eps;
    p += -lr*(1-mu_t)/(1-Π mu) * g/denom - lr*mu_{t+1}/(1-Π mu * mu_{t+1}) * m/denom with
    mu_t = beta1*(1 - 0.5*0.96**(t*momentum_decay)). State: ``step`` (an int), ``mu_product`` (the
    running product, a float rounded to float32 as PyTorch's float32 tensor holds it; a 0-d
    float32 tensor in the state dict), ``exp_avg``, ``exp_avg_sq``. ``foreach`` and ``capturable``
    are accepted and change nothing (one fused kernel per parameter); ``differentiable=True``
    raises NotImplementedError.

    Raises:
        ValueError: a negative ``lr``, ``eps``, ``weight_decay`` or ``momentum_decay``, or a beta
            outside [0, 1) (PyTorch's messages).
    """

    _float32_scalar_state = frozenset({"mu_product"})

    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        check_non_negative(lr=lr, eps=eps)
        check_betas(betas)
        check_non_negative(weight_decay=weight_decay, momentum_decay=momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        if not state:
            state.update(step=0, mu_product=1.0, exp_avg=full_like(param), exp_avg_sq=full_like(param))
        beta1, beta2 = group["betas"]
        momentum_decay = float(group["momentum_decay"])
        state["step"] += 1
        state["mu_product"] = nadam_mu_product(state["mu_product"], state["step"], float(beta1), momentum_decay)
        dispatch.backend_of(param._data).nadam_step(
            param._data, grad, state["exp_avg"], state["exp_avg_sq"], state["step"], state["mu_product"],
            float(group["lr"]), float(beta1), float(beta2), float(group["eps"]), float(group["weight_decay"]),
            momentum_decay, bool(group["maximize"]), bool(group["decoupled_weight_decay"]),
        )

"""RMSprop, PyTorch's update rule (momentum, centered), on one fused kernel per parameter."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.optim._state import full_like, unused
from zgrad.optim.optimizer import Optimizer, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop as ``torch.optim.RMSprop``.

    g = ±grad + wd*p; v = alpha*v + (1-alpha)*g²; avg = sqrt(v - ḡ²) + eps with the running mean
    ḡ of g when ``centered``, else sqrt(v) + eps; with momentum b = momentum*b + g/avg and
    p -= lr*b, else p -= lr*g/avg. State: ``step`` (an int), ``square_avg``, ``momentum_buffer``
    (momentum > 0), ``grad_avg`` (centered). ``foreach`` and ``capturable`` are accepted and change
    nothing (one fused kernel per parameter); ``differentiable=True`` raises NotImplementedError.

    Raises:
        ValueError: a negative ``lr``, ``eps``, ``momentum``, ``weight_decay`` or ``alpha``
            (PyTorch's messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        check_non_negative(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        if not state:
            state.update(step=0, square_avg=full_like(param))
        momentum, centered = float(group["momentum"]), bool(group["centered"])
        if momentum > 0 and "momentum_buffer" not in state:
            state["momentum_buffer"] = full_like(param)
        if centered and "grad_avg" not in state:
            state["grad_avg"] = full_like(param)
        state["step"] += 1
        dispatch.backend_of(param._data).rmsprop_step(
            param._data, grad, state["square_avg"], state["grad_avg"] if centered else unused(param),
            state["momentum_buffer"] if momentum > 0 else unused(param), float(group["lr"]), float(group["alpha"]),
            float(group["eps"]), float(group["weight_decay"]), momentum, centered, bool(group["maximize"]),
        )

"""Averaged SGD, PyTorch's update rule, on one fused kernel per parameter."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.kernels.optim_host import asgd_schedules, float32_scalar
from zgrad.optim._state import full_like
from zgrad.optim.optimizer import Optimizer, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """Averaged stochastic gradient descent as ``torch.optim.ASGD``.

    g = ±grad + wd*p; p = p*(1 - lambd*eta) - eta*g; ax += (p - ax)*mu (ax = p while mu == 1);
    then eta = lr / (1 + lambd*lr*t)**alpha and mu = 1 / max(1, t - t0) for the next step. State:
    ``step`` (an int), ``eta`` and ``mu`` (floats rounded to float32, as PyTorch's float32
    tensors hold them; 0-d float32 tensors in the state dict), ``ax`` (the average). ``foreach``
    and ``capturable`` are accepted and change nothing (one fused kernel per parameter);
    ``differentiable=True`` raises NotImplementedError.

    Raises:
        ValueError: a negative ``lr`` or ``weight_decay`` (PyTorch's messages).
    """

    _float32_scalar_state = frozenset({"eta", "mu"})

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        check_non_negative(lr=lr, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        lr, lambd = float(group["lr"]), float(group["lambd"])
        if not state:
            state.update(step=0, eta=float32_scalar(lr), mu=1.0, ax=full_like(param))
        state["step"] += 1
        dispatch.backend_of(param._data).asgd_step(
            param._data, grad, state["ax"], state["eta"], state["mu"], lambd, float(group["weight_decay"]),
            bool(group["maximize"]),
        )
        state["eta"], state["mu"] = asgd_schedules(state["step"], lr, lambd, float(group["alpha"]), float(group["t0"]))

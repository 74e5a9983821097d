"""Adagrad, PyTorch's update rule (learning-rate decay, initial accumulator), on one fused kernel."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.optim._state import full_like
from zgrad.optim.optimizer import Optimizer, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad as ``torch.optim.Adagrad``.

    g = ±grad + wd*p; sum += g²; p -= clr * g / (sqrt(sum) + eps) with
    clr = lr / (1 + (step - 1) * lr_decay). State: ``step`` (an int) and ``sum``, created for every
    parameter when the optimizer is built, as PyTorch does. As in PyTorch, every ``sum`` starts at
    the constructor's ``initial_accumulator_value`` (a parameter group's own value is kept in the
    group but not used), also for groups added later. ``foreach`` and ``fused`` are accepted and
    change nothing (one fused kernel per parameter); ``differentiable=True`` raises
    NotImplementedError.

    Raises:
        ValueError: a negative ``lr``, ``lr_decay``, ``weight_decay``,
            ``initial_accumulator_value`` or ``eps`` (PyTorch's messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        check_non_negative(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                           initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, self.state.setdefault(p, {}))

    def _init_state(self, param: Tensor, state: dict[str, Any]) -> None:
        state.update(step=0, sum=full_like(param, self.defaults["initial_accumulator_value"]))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        if not state:
            self._init_state(param, state)
        state["step"] += 1
        dispatch.backend_of(param._data).adagrad_step(
            param._data, grad, state["sum"], state["step"], float(group["lr"]), float(group["lr_decay"]),
            float(group["weight_decay"]), float(group["eps"]), bool(group["maximize"]),
        )

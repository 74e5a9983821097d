"""Rprop (resilient backpropagation), PyTorch's update rule, on one fused kernel per parameter."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.optim._state import full_like
from zgrad.optim.optimizer import Optimizer, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Rprop as ``torch.optim.Rprop``: a step size per element, grown by ``etas[1]`` where the
    gradient keeps its sign and shrunk by ``etas[0]`` where it flips, within ``step_sizes``.

    g = ±grad; s *= etaplus where g*prev > 0, etaminus where g*prev < 0 (and g = 0 there);
    s = clamp(s, *step_sizes); p -= sign(g)*s; prev = g. The step sizes start at ``lr``. State:
    ``step`` (an int), ``prev``, ``step_size``. ``foreach`` and ``capturable`` are accepted and
    change nothing (one fused kernel per parameter); ``differentiable=True`` raises
    NotImplementedError.

    Raises:
        ValueError: a negative ``lr``, or ``etas`` not 0 < etaminus < 1 < etaplus (PyTorch's
            messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        check_non_negative(lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        if not state:
            state.update(step=0, prev=full_like(param), step_size=full_like(param, float(group["lr"])))
        state["step"] += 1
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        dispatch.backend_of(param._data).rprop_step(
            param._data, grad, state["prev"], state["step_size"], float(etaminus), float(etaplus),
            float(step_size_min), float(step_size_max), bool(group["maximize"]),
        )

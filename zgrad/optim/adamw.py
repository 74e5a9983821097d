"""AdamW: Adam with decoupled weight decay, as ``torch.optim.AdamW``."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.optim.adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    """Adam whose weight decay shrinks the parameter (p *= 1 - lr * weight_decay) before the
    update instead of entering the gradient; default weight_decay 1e-2. The same fused kernel as
    :class:`~zgrad.optim.Adam` (``decoupled_weight_decay=True``), the same state and options.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``, or a beta outside [0, 1)
            (PyTorch's messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

"""``CTCLoss``: the connectionist temporal classification loss, as PyTorch's, over
:func:`zgrad.ops.loss_ctc.ctc_loss`."""

from __future__ import annotations

from typing import Any

from zgrad.nn.loss import _Loss
from zgrad.ops.loss_ctc import ctc_loss

__all__ = ["CTCLoss"]


class CTCLoss(_Loss):
    """-log of the summed probability of every alignment of each target with its input frames;
    see :func:`zgrad.nn.functional.ctc_loss` for the shapes, reductions and ``zero_infinity``.

    Args:
        blank: the blank label. reduction: 'none' | 'mean' | 'sum' (checked when called, as
            PyTorch's). zero_infinity: make infinite losses and their gradients 0.
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any) -> Any:
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                        self.zero_infinity)

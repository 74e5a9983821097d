"""``MultiMarginLoss`` and ``MultiLabelMarginLoss``: the multi-class hinge losses, as PyTorch's,
over the functions of :mod:`zgrad.ops.loss_multi_margin`."""

from __future__ import annotations

from typing import Any

from zgrad.nn.loss import _Loss, _WeightedLoss
from zgrad.ops.loss_multi_margin import multi_margin_loss, multilabel_margin_loss

__all__ = ["MultiLabelMarginLoss", "MultiMarginLoss"]


class MultiMarginLoss(_WeightedLoss):
    """sum over i != y of max(0, margin - x[y] + x[i]) ** p (times ``weight[y]``) / C per sample;
    ``weight`` (C,) is a buffer.

    Raises:
        ValueError: ``p`` other than 1 or 2 (PyTorch's message).
        AssertionError: a weight that is not 1-D (as PyTorch).
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Any = None, size_average: Any = None,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise AssertionError("MultiMarginLoss: weight must be 1-D")
        self.p, self.margin = p, margin

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002 - torch's name
        return multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                 reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """sum over target classes j and other classes i of max(0, 1 - (x[j] - x[i])) / C per sample;
    a target row lists its classes up to the first -1."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return multilabel_margin_loss(input, target, reduction=self.reduction)

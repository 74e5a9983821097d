"""Margin, embedding and likelihood loss modules: ``CosineEmbeddingLoss``, ``MarginRankingLoss``,
``HingeEmbeddingLoss``, ``TripletMarginLoss``, ``TripletMarginWithDistanceLoss``, ``SoftMarginLoss``,
``MultiLabelSoftMarginLoss``,
``PoissonNLLLoss`` and ``GaussianNLLLoss``, as PyTorch's."""

from __future__ import annotations

from typing import Any

from zgrad.nn.loss import _Loss, _WeightedLoss
from zgrad.ops.loss_likelihood import gaussian_nll_loss, poisson_nll_loss
from zgrad.ops.loss_margin import (
    cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss, multilabel_soft_margin_loss, soft_margin_loss,
    triplet_margin_loss, triplet_margin_with_distance_loss,
)
from zgrad.nn.distance import PairwiseDistance

__all__ = ["CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
           "MultiLabelSoftMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
           "TripletMarginWithDistanceLoss"]


class CosineEmbeddingLoss(_Loss):
    """1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for target -1."""

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        return cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """max(0, -target * (x1 - x2) + margin)."""

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        return margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """x for target 1, max(0, margin - x) for target -1."""

    def __init__(self, margin: float = 1.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002 - torch's name
        return hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) with the p-norm distance.

    Raises:
        ValueError: ``margin`` <= 0 (PyTorch's message).
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Any, positive: Any, negative: Any) -> Any:
        return triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                   swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) for a distance function ``d``
    (default: a ``PairwiseDistance()`` child module, as PyTorch's).

    Raises:
        ValueError: ``margin`` <= 0 (PyTorch's message).
    """

    def __init__(self, *, distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             "instead")
        self.distance_function = distance_function if distance_function is not None else PairwiseDistance()
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Any, positive: Any, negative: Any) -> Any:
        return triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                 margin=self.margin, swap=self.swap, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """log(1 + exp(-target * x))."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """The per-class binary cross-entropy of sigmoid(x), averaged over the classes; ``weight``
    rescales each class (a buffer)."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """The Poisson negative log-likelihood of the target under the (log-)rate input."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average: Any = None, eps: float = 1e-8,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Any, target: Any) -> Any:
        return poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """The Gaussian negative log-likelihood of the target under mean ``input`` and variance ``var``."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Any, target: Any, var: Any) -> Any:  # noqa: A002
        return gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)

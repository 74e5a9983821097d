"""Loss modules: ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``, ``L1Loss``, ``BCELoss``,
``BCEWithLogitsLoss``, ``SmoothL1Loss``, ``HuberLoss``, ``KLDivLoss``, as PyTorch's."""

from __future__ import annotations

import warnings
from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.loss_functions import cross_entropy, l1_loss, mse_loss, nll_loss
from zgrad.ops.loss_pointwise import (
    binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss, kl_div, smooth_l1_loss,
)

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss",
           "NLLLoss", "NLLLoss2d", "SmoothL1Loss"]


class _Loss(Module):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            raise NotImplementedError("size_average and reduce are deprecated in PyTorch and not supported by zgrad; "
                                      "use reduction='none' | 'mean' | 'sum'")
        self.reduction = reduction


class _WeightedLoss(_Loss):
    """A loss with optional per-class weights, kept as the buffer ``weight`` (as PyTorch)."""

    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """``cross_entropy(input, target)`` with the module's ``weight``, ``ignore_index``,
    ``reduction`` and ``label_smoothing``; see :func:`zgrad.nn.functional.cross_entropy`."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002 - torch's name
        try:
            return cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                                 reduction=self.reduction, label_smoothing=self.label_smoothing)
        except IndexError as error:  # "Target 7 is out of bounds. ...", named by the module
            error.args = (f"{self!r}: {error}",)
            raise


class NLLLoss(_WeightedLoss):
    """``nll_loss(input, target)`` of log-probabilities with the module's options."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        try:
            return nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                            reduction=self.reduction)
        except IndexError as error:
            error.args = (f"{self!r}: {error}",)
            raise


class NLLLoss2d(NLLLoss):
    """Deprecated :class:`NLLLoss` (warns, as PyTorch)."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                 reduction: str = "mean") -> None:
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement and see "
                      "https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for more details.", UserWarning,
                      stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class MSELoss(_Loss):
    """Squared error, reduced by ``reduction`` ('mean', 'sum' or 'none')."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Absolute error, reduced by ``reduction`` ('mean', 'sum' or 'none')."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return l1_loss(input, target, reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities; ``weight`` rescales each element (a buffer)."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """Binary cross-entropy of ``sigmoid(input)`` computed from the logits; ``weight`` and
    ``pos_weight`` (the weight of positives, per class) are buffers."""

    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 pos_weight: Any = None) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Squared error below ``beta`` (halved, over beta), absolute error above."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Squared error below ``delta`` (halved), ``delta`` times absolute error above."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """The KL divergence of log-probabilities ``input`` from ``target`` ('batchmean' is the true
    divergence per sample); ``log_target`` when the target is given as log-probabilities."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)

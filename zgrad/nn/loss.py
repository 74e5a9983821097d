"""Loss modules: ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``, ``L1Loss``, as PyTorch's."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.loss_functions import cross_entropy, l1_loss, mse_loss, nll_loss

__all__ = ["CrossEntropyLoss", "L1Loss", "MSELoss", "NLLLoss"]


class _Loss(Module):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            raise NotImplementedError("size_average and reduce are deprecated in PyTorch and not supported by zgrad; "
                                      "use reduction='none' | 'mean' | 'sum'")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


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


class MSELoss(_Loss):
    """Squared error, reduced by ``reduction`` ('mean', 'sum' or 'none')."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Absolute error, reduced by ``reduction`` ('mean', 'sum' or 'none')."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return l1_loss(input, target, reduction=self.reduction)

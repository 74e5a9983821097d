"""``zgrad.nn.modules.loss``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.loss_margin import (
    CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss, MarginRankingLoss, MultiLabelSoftMarginLoss,
    PoissonNLLLoss, SoftMarginLoss, TripletMarginLoss,
)
from zgrad.nn.loss import (
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss,
)

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss",
    "SmoothL1Loss",
]
__all__ += ["CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
            "MultiLabelSoftMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss"]
from zgrad.nn.loss import NLLLoss2d  # noqa: E402
from zgrad.nn.loss_ctc import CTCLoss  # noqa: E402
from zgrad.nn.loss_margin import TripletMarginWithDistanceLoss  # noqa: E402
from zgrad.nn.loss_multi_margin import MultiLabelMarginLoss, MultiMarginLoss  # noqa: E402

__all__ += ["CTCLoss", "MultiLabelMarginLoss", "MultiMarginLoss", "NLLLoss2d", "TripletMarginWithDistanceLoss"]

"""``zgrad.optim.lr_scheduler``: PyTorch 2.13's learning-rate schedulers (``torch.optim.lr_scheduler``)."""

from zgrad.optim.lr_scheduler.base import LRScheduler, _LRScheduler
from zgrad.optim.lr_scheduler.composite import ChainedScheduler, SequentialLR
from zgrad.optim.lr_scheduler.cosine import CosineAnnealingLR, CosineAnnealingWarmRestarts
from zgrad.optim.lr_scheduler.cyclic import CyclicLR, OneCycleLR
from zgrad.optim.lr_scheduler.decay import (
    ConstantLR, ExponentialLR, LambdaLR, LinearLR, MultiStepLR, MultiplicativeLR, PolynomialLR, StepLR,
)
from zgrad.optim.lr_scheduler.plateau import ReduceLROnPlateau

__all__ = [
    "ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR", "ExponentialLR",
    "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR", "OneCycleLR", "PolynomialLR",
    "ReduceLROnPlateau", "SequentialLR", "StepLR", "_LRScheduler",
]

"""``zgrad.optim``: local optimizers with fused update kernels, and learning-rate schedulers."""

from zgrad.optim.adam import Adam
from zgrad.optim.optimizer import Optimizer
from zgrad.optim.sgd import SGD
from zgrad.optim import lr_scheduler

__all__ = ["Adam", "Optimizer", "SGD", "lr_scheduler"]

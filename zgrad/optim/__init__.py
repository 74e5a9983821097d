"""``zgrad.optim``: local optimizers with fused update kernels."""

from zgrad.optim.adam import Adam
from zgrad.optim.optimizer import Optimizer
from zgrad.optim.sgd import SGD

__all__ = ["Adam", "Optimizer", "SGD"]

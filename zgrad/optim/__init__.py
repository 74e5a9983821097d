"""``zgrad.optim``: local optimizers with fused update kernels."""

from zgrad.optim.adadelta import Adadelta
from zgrad.optim.adagrad import Adagrad
from zgrad.optim.adam import Adam
from zgrad.optim.adamw import AdamW
from zgrad.optim.optimizer import Optimizer
from zgrad.optim.rmsprop import RMSprop
from zgrad.optim.sgd import SGD

__all__ = ["Adadelta", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "SGD"]

"""``zgrad.optim``: local optimizers (fused update kernels; LBFGS on tensor ops), and learning-rate schedulers."""

from zgrad.optim.adadelta import Adadelta
from zgrad.optim.adagrad import Adagrad
from zgrad.optim.adam import Adam
from zgrad.optim.adamw import AdamW
from zgrad.optim.lbfgs import LBFGS
from zgrad.optim.optimizer import Optimizer
from zgrad.optim.rmsprop import RMSprop
from zgrad.optim.sgd import SGD
from zgrad.optim import lr_scheduler

__all__ = ["Adadelta", "Adagrad", "Adam", "AdamW", "LBFGS", "Optimizer", "RMSprop", "SGD", "lr_scheduler"]

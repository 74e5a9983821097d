"""``zgrad.optim``: local optimizers (fused update kernels; Adafactor and LBFGS on tensor ops), and
learning-rate schedulers."""

from zgrad.optim.adadelta import Adadelta
from zgrad.optim.adafactor import Adafactor
from zgrad.optim.adagrad import Adagrad
from zgrad.optim.adam import Adam
from zgrad.optim.adamax import Adamax
from zgrad.optim.adamw import AdamW
from zgrad.optim.asgd import ASGD
from zgrad.optim.lbfgs import LBFGS
from zgrad.optim.nadam import NAdam
from zgrad.optim.optimizer import Optimizer
from zgrad.optim.radam import RAdam
from zgrad.optim.rmsprop import RMSprop
from zgrad.optim.rprop import Rprop
from zgrad.optim.sgd import SGD
from zgrad.optim import lr_scheduler, swa_utils

__all__ = ["ASGD", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "Rprop", "SGD", "lr_scheduler", "swa_utils"]

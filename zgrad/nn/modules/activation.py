"""``zgrad.nn.modules.activation``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.layers import ReLU, Sigmoid, Tanh
from zgrad.nn.activation import ELU, GELU, LeakyReLU, LogSoftmax, PReLU, Softmax

__all__ = ["ELU", "GELU", "LeakyReLU", "LogSoftmax", "PReLU", "ReLU", "Sigmoid", "Softmax", "Tanh"]

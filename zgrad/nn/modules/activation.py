"""``zgrad.nn.modules.activation``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.layers import ReLU, Sigmoid, Tanh
from zgrad.nn.activation import ELU, GELU, LeakyReLU, LogSoftmax, PReLU, Softmax
from zgrad.nn.activation_smooth import Mish, SiLU, Softplus
from zgrad.nn.attention import MultiheadAttention

__all__ = ["ELU", "GELU", "LeakyReLU", "LogSoftmax", "Mish", "MultiheadAttention", "PReLU", "ReLU", "SiLU", "Sigmoid",
           "Softmax", "Softplus", "Tanh"]

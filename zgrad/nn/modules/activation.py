"""``zgrad.nn.modules.activation``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.layers import ReLU, Sigmoid, Tanh
from zgrad.nn.activation import ELU, GELU, LeakyReLU, LogSoftmax, PReLU, Softmax
from zgrad.nn.activation_smooth import Mish, SiLU, Softplus
from zgrad.nn.activation_piecewise import Hardshrink, Hardsigmoid, Hardswish, Hardtanh, ReLU6, Softshrink, Threshold
from zgrad.nn.activation_composed import CELU, GLU, LogSigmoid, SELU, Softmax2d, Softmin, Softsign, Tanhshrink
from zgrad.nn.attention import MultiheadAttention

__all__ = ["ELU", "GELU", "LeakyReLU", "LogSoftmax", "Mish", "MultiheadAttention", "PReLU", "ReLU", "SiLU", "Sigmoid",
           "Softmax", "Softplus", "Tanh"]
__all__ += ["CELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LogSigmoid", "ReLU6", "SELU",
            "Softmax2d", "Softmin", "Softshrink", "Softsign", "Tanhshrink", "Threshold"]
from zgrad.nn.noise_layers import RReLU  # noqa: E402 - PyTorch keeps it here too

__all__ += ["RReLU"]

"""zgrad: distributed automatic differentiation over a broker-less ZeroMQ mesh.

Importing zgrad opens no socket, starts no thread and compiles nothing; Numba kernels compile
(and are cached on disk) the first time they run.
"""

import numpy as _np

from zgrad import accelerator, autograd, futures, nn, optim
from zgrad.creation import (
    arange, empty, from_dlpack, from_numpy, full, ones, ones_like, rand, randn, tensor, zeros, zeros_like,
)
from zgrad.device import Device as device
from zgrad.engine.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from zgrad.errors import ZgradError
from zgrad.ops import (
    add, cat, div, exp, log, log_softmax, matmul, mean, mul, neg, permute, pow, relu, reshape, sigmoid, softmax,
    stack, sub, sum, tanh, transpose,
)
from zgrad.random import manual_seed
from zgrad.tensor import Tensor

float16 = _np.dtype(_np.float16)
float32 = _np.dtype(_np.float32)
float64 = _np.dtype(_np.float64)
int64 = _np.dtype(_np.int64)
int32 = _np.dtype(_np.int32)
bool_ = _np.dtype(_np.bool_)

__version__ = "0.1.0"

__all__ = [
    "Tensor", "ZgradError", "accelerator", "add", "futures", "nn", "optim", "arange", "autograd", "bool_", "cat", "device", "div", "empty",
    "enable_grad", "exp", "float16", "float32", "float64", "from_dlpack", "from_numpy", "full", "int32", "int64",
    "is_grad_enabled", "log", "log_softmax", "manual_seed", "matmul", "mean", "mul", "neg", "no_grad", "ones",
    "ones_like", "permute", "pow", "rand", "randn", "relu", "reshape", "set_grad_enabled", "sigmoid", "softmax", "stack",
    "sub", "sum", "tanh", "tensor", "transpose", "zeros", "zeros_like",
]

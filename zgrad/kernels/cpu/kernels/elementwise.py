"""Element-wise Numba kernels over 1-D C-contiguous arrays (the caller ravels).

Each kernel is one pass over memory: it reads its inputs once and writes ``out`` once, where the
equivalent numpy expression makes a temporary per operator. Computation is in the arrays' dtype.
"""

from __future__ import annotations

from numba import prange

from zgrad.kernels.cpu.kernels import vector_math
from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, parallel_kernel

__all__ = [
    "exp_forward",
    "log_forward",
    "relu_backward",
    "relu_forward",
    "sigmoid_backward",
    "sigmoid_forward",
    "tanh_backward",
    "tanh_forward",
]


@parallel_kernel()
def relu_forward(x, out):
    """out = max(x, 0); NaN stays NaN."""
    for i in prange(x.size):
        out[i] = vector_math.relu(x[i])


@parallel_kernel()
def relu_backward(grad, x, out):
    """out = 0 where x <= 0 else grad (a NaN input passes its gradient, as PyTorch's)."""
    zero = out.dtype.type(0)
    for i in prange(out.size):
        out[i] = zero if x[i] <= zero else grad[i]


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def sigmoid_forward(x, out):
    """out = 1 / (1 + exp(-x)), stable for large |x|."""
    for i in prange(x.size):
        out[i] = vector_math.sigmoid(x[i])


@parallel_kernel()
def sigmoid_backward(grad, y, out):
    """out = grad * y * (1 - y), with y the sigmoid output."""
    one = out.dtype.type(1)
    for i in prange(out.size):
        out[i] = grad[i] * y[i] * (one - y[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def tanh_forward(x, out):
    """out = tanh(x)."""
    for i in prange(x.size):
        out[i] = vector_math.tanh(x[i])


@parallel_kernel()
def tanh_backward(grad, y, out):
    """out = grad * (1 - y * y), with y the tanh output."""
    one = out.dtype.type(1)
    for i in prange(out.size):
        out[i] = grad[i] * (one - y[i] * y[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def exp_forward(x, out):
    """out = exp(x)."""
    for i in prange(x.size):
        out[i] = vector_math.exp(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def log_forward(x, out):
    """out = log(x)."""
    for i in prange(x.size):
        out[i] = vector_math.log(x[i])

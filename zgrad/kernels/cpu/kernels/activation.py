"""Element-wise Numba kernels of the activations: GELU, leaky ReLU, SiLU, Mish and Softplus (see
:data:`zgrad.kernels.vocabulary.SMOOTH_ACTIVATIONS`), and dropout's masking.

Arrays are 1-D C-contiguous (the caller ravels), except dropout's data, which is 2-D (R, S) with
one mask value per row. Computation is in the arrays'
dtype, with PyTorch's formulas.
"""

from __future__ import annotations

import math

from numba import prange

from zgrad.kernels.cpu.kernels import vector_math
from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, parallel_kernel
from zgrad.kernels.vocabulary import MISH, SILU

__all__ = [
    "dropout_backward",
    "dropout_forward",
    "gelu_backward",
    "gelu_forward",
    "leaky_relu_backward",
    "leaky_relu_forward",
    "smooth_activation_backward",
    "smooth_activation_forward",
]

_TANH_BETA = math.sqrt(2.0 / math.pi)  # PyTorch's kBeta = M_SQRT2 * M_2_SQRTPI * 0.5
_TANH_KAPPA = 0.044715


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def gelu_forward(x, tanh_approximation, out):
    """out = x * Phi(x), or its tanh approximation 0.5 x (1 + tanh(beta (x + kappa x^3)))."""
    F = out.dtype.type
    half, one = F(0.5), F(1)
    if tanh_approximation:
        beta, kappa = F(_TANH_BETA), F(_TANH_KAPPA)
        for i in prange(x.size):
            v = x[i]
            out[i] = half * v * (one + vector_math.tanh(beta * (v + kappa * v * v * v)))
    else:
        for i in prange(x.size):
            out[i] = vector_math.gelu(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def gelu_backward(grad, x, tanh_approximation, out):
    """out = grad * d gelu(x) / dx."""
    F = out.dtype.type
    half, one = F(0.5), F(1)
    if tanh_approximation:
        beta, kappa = F(_TANH_BETA), F(_TANH_KAPPA)
        for i in prange(x.size):
            v = x[i]
            v_sq = v * v
            t = vector_math.tanh(beta * (v + kappa * v_sq * v))
            left_derivative = half * (one + t)
            right_derivative = half * v * (one - t * t) * beta * (one + F(3) * kappa * v_sq)
            out[i] = grad[i] * (left_derivative + right_derivative)
    else:
        for i in prange(x.size):
            out[i] = grad[i] * vector_math.gelu_derivative(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def smooth_activation_forward(x, code, beta, threshold, out):
    """out = silu(x), mish(x) or softplus(x; beta, threshold) by ``code``, PyTorch's formulas."""
    F = out.dtype.type
    one = F(1)
    if code == SILU:
        for i in prange(x.size):
            v = x[i]
            out[i] = v / (one + vector_math.exp(-v))
    elif code == MISH:
        for i in prange(x.size):
            v = x[i]
            out[i] = v * vector_math.tanh(vector_math.log1p(vector_math.exp(v)))
    else:
        b, limit = F(beta), F(threshold)
        for i in prange(x.size):
            v = x[i]
            scaled = v * b
            out[i] = v if scaled > limit else vector_math.log1p(vector_math.exp(scaled)) / b


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def smooth_activation_backward(grad, x, code, beta, threshold, out):
    """out = grad * d activation(x) / dx, the activation as in :func:`smooth_activation_forward`."""
    F = out.dtype.type
    one = F(1)
    if code == SILU:
        for i in prange(x.size):
            v = x[i]
            s = one / (one + vector_math.exp(-v))
            out[i] = grad[i] * s * (one + v * (one - s))
    elif code == MISH:
        for i in prange(x.size):
            v = x[i]
            s = one / (one + vector_math.exp(-v))
            t = vector_math.tanh(vector_math.log1p(vector_math.exp(v)))
            out[i] = grad[i] * (t + v * s * (one - t * t))
    else:
        b, limit = F(beta), F(threshold)
        for i in prange(x.size):
            scaled = x[i] * b
            if scaled > limit:
                out[i] = grad[i]
            else:
                z = vector_math.exp(scaled)
                out[i] = grad[i] * z / (z + one)


@parallel_kernel()
def leaky_relu_forward(x, negative_slope, out):
    """out = x if x > 0 else x * negative_slope."""
    slope, zero = out.dtype.type(negative_slope), out.dtype.type(0)
    for i in prange(x.size):
        v = x[i]
        out[i] = v if v > zero else v * slope


@parallel_kernel()
def leaky_relu_backward(grad, x, negative_slope, out):
    """out = grad if x > 0 else grad * negative_slope."""
    slope, zero = out.dtype.type(negative_slope), out.dtype.type(0)
    for i in prange(x.size):
        out[i] = grad[i] if x[i] > zero else grad[i] * slope


@parallel_kernel()
def dropout_forward(x, noise, p, keep, out):
    """keep[r] = noise[r] >= p; out[r] = x[r] * keep[r] / (1 - p), for each row r of (R, S) ``x``.

    One mask value covers a row: rows are single elements for ``dropout`` and whole channels for
    ``dropout2d``.
    """
    F = out.dtype.type
    threshold = noise.dtype.type(p)
    scale, zero = F(1.0 / (1.0 - p)) if p < 1.0 else F(0), F(0)
    for r in prange(x.shape[0]):
        kept = noise[r] >= threshold
        keep[r] = kept
        factor = scale if kept else zero
        for s in range(x.shape[1]):
            out[r, s] = x[r, s] * factor


@parallel_kernel()
def dropout_backward(grad, keep, p, out):
    """out[r] = grad[r] * keep[r] / (1 - p), ``keep`` as saved by :func:`dropout_forward`."""
    F = out.dtype.type
    scale, zero = F(1.0 / (1.0 - p)) if p < 1.0 else F(0), F(0)
    for r in prange(grad.shape[0]):
        factor = scale if keep[r] else zero
        for s in range(grad.shape[1]):
            out[r, s] = grad[r, s] * factor

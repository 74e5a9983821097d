"""Element-wise Numba kernels of the math functions numpy has no ufunc for (erf, erfc, erfinv,
rsqrt), over 1-D C-contiguous float32 or float64 arrays (the caller ravels), computed in that dtype.
"""

from __future__ import annotations

import math

from numba import prange

from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel
from zgrad.kernels.special_math import erfinv as _erfinv_scalar

__all__ = ["erf_forward", "erfc_forward", "erfinv_forward", "rsqrt_forward"]

_erfinv = kernel(_erfinv_scalar)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def erf_forward(x, out):
    """out = erf(x)."""
    for i in prange(x.size):
        out[i] = math.erf(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def erfc_forward(x, out):
    """out = erfc(x) = 1 - erf(x), without the cancellation for large x."""
    for i in prange(x.size):
        out[i] = math.erfc(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def erfinv_forward(x, max_steps, out):
    """out = erfinv(x) (see :func:`zgrad.kernels.special_math.erfinv`)."""
    T = out.dtype.type
    for i in prange(x.size):
        out[i] = _erfinv(x[i], max_steps, T)


@parallel_kernel()
def rsqrt_forward(x, out):
    """out = 1 / sqrt(x)."""
    one = out.dtype.type(1)
    for i in prange(x.size):
        out[i] = one / math.sqrt(x[i])

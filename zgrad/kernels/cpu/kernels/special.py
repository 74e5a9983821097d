"""Element-wise Numba kernels of the math functions numpy has no ufunc for (erf, erfc, erfinv,
rsqrt) or whose numpy loop is a libm call per element (tan, atan, asin, acos, atan2, exp2,
log1p, expm1, sinh, cosh, atanh, log2, log10, logaddexp, logaddexp2, float32 hypot and fmod),
and one-pass sign, nan_to_num, rounding, reciprocal and copysign (numpy's loops for the last
three are not vectorised, or take two passes). 1-D C-contiguous float32 or float64 arrays (the caller
ravels), computed in that dtype (float32 hypot and fmod in float64).

erf, erfc, tan, atan, asin, acos, atan2, exp2, expm1 and sinh are :mod:`vector_math`'s; the
rest of the second group is written on its exp and log, which LLVM vectorises: log1p by Kahan's
correction (``log(u) * x / (u - 1)`` with ``u = 1 + x``, exact where ``u`` is inexact), the others
from those. Each stays within a few ulp of the correctly rounded result and
gives PyTorch's inf, NaN and signed zeros.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange
from numba.extending import register_jitable

from zgrad.kernels._jit import MATH_OPTIONS, PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel
from zgrad.kernels.cpu.kernels import vector_math
from zgrad.kernels.special_math import erfinv as _erfinv_scalar
from zgrad.kernels.special_math import erfinv_estimate

__all__ = [
    "erf_forward", "erfc_forward", "atan_forward", "asin_forward", "acos_forward", "atan2_forward", "exp2_forward", "tan_forward", "erfinv_forward", "rsqrt_forward", "log1p_forward", "expm1_forward",
    "sinh_forward", "cosh_forward", "atanh_forward", "log2_forward", "log10_forward", "logaddexp_forward",
    "logaddexp2_forward", "hypot_float32_forward", "fmod_float32_forward", "sign_forward", "nan_to_num_forward", "lerp_forward",
    "lerp_scalar_forward", "ROUNDING", "rounding_forward", "reciprocal_forward", "copysign_forward",
]

_erfinv = kernel(_erfinv_scalar)
_LN2 = 0.6931471805599453
_LOG2_E = 1.4426950408889634
_LOG10_E = 0.4342944819032518


@register_jitable(**MATH_OPTIONS)
def _log1p(x, one):
    """log(1 + x); ``one`` is 1 in x's type."""
    u = x + one
    if u == one or u == math.inf:
        return x
    return vector_math.log(u) * (x / (u - one))


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def erf_forward(x, out):
    """out = erf(x)."""
    for i in prange(x.size):
        out[i] = vector_math.erf(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def erfc_forward(x, out):
    """out = erfc(x) = 1 - erf(x), without the cancellation for large x."""
    for i in prange(x.size):
        out[i] = vector_math.erfc(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def tan_forward(x, out):
    """out = tan(x): vector_math's, then libm's for the elements beyond its reduction's limit."""
    for i in prange(x.size):
        out[i] = vector_math.tan(x[i])
    for i in prange(x.size):
        if not vector_math.tan_in_range(x[i]):
            out[i] = math.tan(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def atan_forward(x, out):
    """out = atan(x)."""
    for i in prange(x.size):
        out[i] = vector_math.atan(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def asin_forward(x, out):
    """out = asin(x)."""
    for i in prange(x.size):
        out[i] = vector_math.asin(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def acos_forward(x, out):
    """out = acos(x)."""
    for i in prange(x.size):
        out[i] = vector_math.acos(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def atan2_forward(a, b, out):
    """out = atan2(a, b), the angle of the point (b, a)."""
    for i in prange(out.size):
        out[i] = vector_math.atan2(a[i], b[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def exp2_forward(x, out):
    """out = 2**x."""
    for i in prange(x.size):
        out[i] = vector_math.exp2(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def erfinv_forward(x, max_steps, out):
    """out = erfinv(x) (see :func:`zgrad.kernels.special_math.erfinv`); with no Halley steps
    (float32) its estimate alone, on vector_math's log, in a loop that vectorises."""
    T = out.dtype.type
    if max_steps == 0:
        one = T(1)
        for i in prange(x.size):
            v = x[i]
            a = abs(v)
            y = math.copysign(erfinv_estimate(-vector_math.log((one - a) * (one + a)), T) * a, v)
            out[i] = y if a < one else (math.copysign(T(math.inf), v) if a == one else T(math.nan))
    else:
        for i in prange(x.size):
            out[i] = _erfinv(x[i], max_steps, T)


@parallel_kernel()
def rsqrt_forward(x, out):
    """out = 1 / sqrt(x)."""
    one = out.dtype.type(1)
    for i in prange(x.size):
        out[i] = one / math.sqrt(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def log1p_forward(x, out):
    """out = log(1 + x), accurate for small x."""
    one = out.dtype.type(1)
    for i in prange(x.size):
        out[i] = _log1p(x[i], one)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def expm1_forward(x, out):
    """out = exp(x) - 1, accurate for small x."""
    for i in prange(x.size):
        out[i] = vector_math.expm1(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def sinh_forward(x, out):
    """out = sinh(x)."""
    for i in prange(x.size):
        out[i] = vector_math.sinh(x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def cosh_forward(x, out):
    """out = cosh(x) = (h / 2) * h + (1 / 2h) / h with h = exp(|x| / 2): no overflow before
    cosh's own."""
    half = out.dtype.type(0.5)
    for i in prange(x.size):
        h = vector_math.exp(abs(x[i]) * half)
        out[i] = (half * h) * h + (half / h) / h


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def atanh_forward(x, out):
    """out = atanh(x) = log1p(2|x| / (1 - |x|)) / 2, x's sign."""
    one = out.dtype.type(1)
    for i in prange(x.size):
        a = abs(x[i])
        out[i] = math.copysign(out.dtype.type(0.5) * _log1p((a + a) / (one - a), one), x[i])


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def log2_forward(x, out):
    """out = log2(x)."""
    scale = out.dtype.type(_LOG2_E)
    for i in prange(x.size):
        out[i] = vector_math.log(x[i]) * scale


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def log10_forward(x, out):
    """out = log10(x)."""
    scale = out.dtype.type(_LOG10_E)
    for i in prange(x.size):
        out[i] = vector_math.log(x[i]) * scale


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def logaddexp_forward(a, b, out):
    """out = log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|))."""
    ln2 = out.dtype.type(_LN2)
    for i in prange(out.size):
        x, y = a[i], b[i]
        if x == y:  # also +-inf with itself
            out[i] = x + ln2
        else:
            m = x if x > y else y
            out[i] = m + vector_math.log1p_unit(vector_math.exp(-abs(x - y))) if x == x and y == y else x + y


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def logaddexp2_forward(a, b, out):
    """out = log2(2**a + 2**b) = max + log1p(2**-|a - b|) / ln2."""
    log2_e, one = out.dtype.type(_LOG2_E), out.dtype.type(1)
    for i in prange(out.size):
        x, y = a[i], b[i]
        if x == y:
            out[i] = x + one
        else:
            m = x if x > y else y
            tail = vector_math.log1p_unit(vector_math.exp2(-abs(x - y))) * log2_e
            out[i] = m + tail if x == x and y == y else x + y


@parallel_kernel()
def hypot_float32_forward(a, b, out):
    """out = sqrt(a**2 + b**2) for float32 operands, in float64: no overflow, one rounding."""
    for i in prange(out.size):
        u, v = np.float64(a[i]), np.float64(b[i])
        out[i] = math.sqrt(u * u + v * v) if not (math.isinf(u) or math.isinf(v)) else math.inf


_FMOD_EXACT_QUOTIENT = 2.0**28


@parallel_kernel()
def fmod_float32_forward(a, b, out):
    """out = fmod(a, b) (the remainder of a / b truncated, a's sign) for float32 operands, exactly:
    in float64, a - trunc(a / b) b is exact while |a / b| < 2**28 (the float64 quotient cannot round
    across an integer, q b has at most 52 bits, and the remainder is a float32); libm's fmod for
    the rest (b = 0 or +-inf, a = +-inf, NaN, huge quotients) in a second loop."""
    for i in prange(out.size):
        u, v = np.float64(a[i]), np.float64(b[i])
        q = u / v
        exact = abs(q) < _FMOD_EXACT_QUOTIENT and abs(v) < math.inf
        out[i] = math.copysign(u - np.trunc(q) * v, u) if exact else math.nan
    for i in prange(out.size):
        if out[i] != out[i]:
            out[i] = np.fmod(a[i], b[i])


@parallel_kernel()
def sign_forward(x, out):
    """out = -1, 0 or 1 by x's sign; 0 for NaN and -0.0 (PyTorch's sign)."""
    one, zero = out.dtype.type(1), out.dtype.type(0)
    for i in prange(x.size):
        v = x[i]
        out[i] = one if v > zero else (-one if v < zero else zero)


# The functions of rounding_forward, by its ``mode``.
ROUNDING = ("floor", "ceil", "round", "trunc", "frac")


@parallel_kernel()
def rounding_forward(x, mode, out):
    """out = floor, ceil, round (half to even), trunc or frac (x - trunc(x): +0.0 at integers, NaN
    at +-inf, as PyTorch) of x, by ``mode`` (a position in :data:`ROUNDING`)."""
    for i in prange(x.size):
        v = x[i]
        if mode == 0:
            out[i] = np.floor(v)
        elif mode == 1:
            out[i] = np.ceil(v)
        elif mode == 2:
            out[i] = np.rint(v)
        elif mode == 3:
            out[i] = np.trunc(v)
        else:
            out[i] = v - np.trunc(v)


@parallel_kernel()
def reciprocal_forward(x, out):
    """out = 1 / x, correctly rounded."""
    one = out.dtype.type(1)
    for i in prange(x.size):
        out[i] = one / x[i]


@parallel_kernel()
def copysign_forward(a, b, out):
    """out = |a| with b's sign bit."""
    for i in prange(out.size):
        out[i] = math.copysign(a[i], b[i])


@parallel_kernel()
def nan_to_num_forward(x, nan, posinf, neginf, out):
    """out = x with NaN replaced by ``nan``, +inf by ``posinf`` and -inf by ``neginf``."""
    for i in prange(x.size):
        v = x[i]
        out[i] = nan if v != v else (posinf if v == math.inf else (neginf if v == -math.inf else v))


@parallel_kernel()
def lerp_scalar_forward(start, end, weight, out):
    """out = lerp(start, end, weight) for a number ``weight``, from the nearer end as PyTorch."""
    near_start = abs(weight) < out.dtype.type(0.5)
    one_minus = out.dtype.type(1) - weight
    for i in prange(out.size):
        difference = end[i] - start[i]
        out[i] = start[i] + weight * difference if near_start else end[i] - difference * one_minus


@parallel_kernel()
def lerp_forward(start, end, weight, out):
    """out = lerp(start, end, weight) element-wise, from the nearer end as PyTorch."""
    half, one = out.dtype.type(0.5), out.dtype.type(1)
    for i in prange(out.size):
        w = weight[i]
        difference = end[i] - start[i]
        out[i] = start[i] + w * difference if abs(w) < half else end[i] - difference * (one - w)

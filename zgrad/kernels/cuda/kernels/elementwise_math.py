"""CUDA device functions of the element-wise math functions (the names of
:data:`zgrad.kernels.vocabulary.UNARY_MATH` / ``BINARY_MATH``, plus ``fmod_int`` and
``nan_to_num``; the special functions come from :mod:`elementwise_special`), in the form of :mod:`zgrad.kernels.cuda.kernels.elementwise`, whose kernel tables
take them in (``UNARY_MATH_OPS``, ``BINARY_MATH_OPS``).

The float functions run on floating operands only (dispatch casts integers first, and answers
the predicates of integers itself). Rounding is written with ``fmod`` and ``copysign`` rather than
``math.floor``, which Numba types as returning an integer (wrong at inf, NaN and beyond 2**63).
"""

from __future__ import annotations

from zgrad.kernels.cuda.kernels.common import device, math
from zgrad.kernels.cuda.kernels.elementwise_special import BINARY_SPECIAL_OPS, UNARY_SPECIAL_OPS
from zgrad.kernels.special_math import erfinv

__all__ = ["UNARY_MATH_OPS", "BINARY_MATH_OPS", "TERNARY_MATH_OPS", "BOOL_OUT_MATH", "INTEGER_MATH"]

_INTEGRAL_FROM = 4503599627370496.0  # 2**52: every float of this magnitude or more is an integer
_LOG2_E = 1.4426950408889634

_erfinv = device(erfinv)


# --- unary: f(x, p, q, T) ------------------------------------------------------------------------

@device
def _sin(x, p, q, T):
    return math.sin(x)


@device
def _cos(x, p, q, T):
    return math.cos(x)


@device
def _tan(x, p, q, T):
    return math.tan(x)


@device
def _asin(x, p, q, T):
    return math.asin(x)


@device
def _acos(x, p, q, T):
    return math.acos(x)


@device
def _atan(x, p, q, T):
    return math.atan(x)


@device
def _sinh(x, p, q, T):
    return math.sinh(x)


@device
def _cosh(x, p, q, T):
    return math.cosh(x)


@device
def _asinh(x, p, q, T):
    return math.asinh(x)


@device
def _acosh(x, p, q, T):
    return math.acosh(x)


@device
def _atanh(x, p, q, T):
    return math.atanh(x)


@device
def _erf(x, p, q, T):
    return math.erf(x)


@device
def _erfc(x, p, q, T):
    return math.erfc(x)


@device
def _erfinv_op(x, p, q, T):
    return _erfinv(x, int(p), T)  # p: the most Halley steps


@device
def _log1p(x, p, q, T):
    return math.log1p(x)


@device
def _expm1(x, p, q, T):
    return math.expm1(x)


@device
def _log2(x, p, q, T):
    return math.log2(x)


@device
def _log10(x, p, q, T):
    return math.log10(x)


@device
def _exp2(x, p, q, T):
    return math.pow(T(2), x)


@device
def _rsqrt(x, p, q, T):
    return T(1) / math.sqrt(x)


@device
def _reciprocal(x, p, q, T):
    return T(1) / x


@device
def _trunc(x, p, q, T):
    if not abs(x) < T(_INTEGRAL_FROM):  # inf, NaN, or already an integer
        return x
    return math.copysign(x - math.fmod(x, T(1)), x)


@device
def _floor(x, p, q, T):
    t = _trunc(x, p, q, T)
    return t - T(1) if t > x else t


@device
def _ceil(x, p, q, T):
    t = _trunc(x, p, q, T)
    return t + T(1) if t < x else t


@device
def _round(x, p, q, T):
    """Half to even, as PyTorch's (and C's nearbyint); the result keeps x's sign (-0.0 from -0.4)."""
    f = _floor(x, p, q, T)
    d = x - f
    r = f + T(1) if (d > T(0.5) or (d == T(0.5) and math.fmod(f, T(2)) != T(0))) else f
    return math.copysign(r, x)


@device
def _frac(x, p, q, T):
    return x - _trunc(x, p, q, T)


# The predicates write a bool out: p and q are typed as x's dtype (p = 1, q = 0 from the host).

@device
def _isnan(x, p, q, T):
    return math.isnan(x)


@device
def _isinf(x, p, q, T):
    return math.isinf(x)


@device
def _isposinf(x, p, q, T):
    return math.isinf(x) and x > q


@device
def _isneginf(x, p, q, T):
    return math.isinf(x) and x < q


@device
def _isfinite(x, p, q, T):
    return not (math.isinf(x) or math.isnan(x))


@device
def _signbit(x, p, q, T):
    return math.copysign(p, x) < q


@device
def _bitwise_not(x, p, q, T):
    return ~x


# --- binary: f(a, b, p, q, T) --------------------------------------------------------------------

@device
def _atan2(a, b, p, q, T):
    return math.atan2(a, b)


@device
def _fmod(a, b, p, q, T):
    return math.fmod(a, b)


@device
def _fmod_int(a, b, p, q, T):
    """C's remainder of integers (the sign of ``a``) from Python's (the sign of ``b``)."""
    r = a % b
    return r - b if (r != 0 and (r < 0) != (a < 0)) else r


@device
def _hypot(a, b, p, q, T):
    return math.hypot(a, b)


@device
def _logaddexp(a, b, p, q, T):
    if a != a or b != b:
        return a + b
    m = a if a > b else b
    if a == b:  # also +-inf with itself, where a - b is NaN
        return a + T(0.6931471805599453)
    return m + math.log1p(math.exp(-abs(a - b)))


@device
def _logaddexp2(a, b, p, q, T):
    if a != a or b != b:
        return a + b
    m = a if a > b else b
    if a == b:
        return a + T(1)
    return m + math.log1p(math.pow(T(2), -abs(a - b))) * T(_LOG2_E)


@device
def _copysign(a, b, p, q, T):
    return math.copysign(a, b)


@device
def _bitwise_and(a, b, p, q, T):
    return a & b


@device
def _bitwise_or(a, b, p, q, T):
    return a | b


@device
def _bitwise_xor(a, b, p, q, T):
    return a ^ b


# The shifts: p is the bit width of out's dtype; a shift by a negative amount or by the width or
# more gives what PyTorch gives: 0, or -1 for a negative value shifted right.

@device
def _bitwise_left_shift(a, b, p, q, T):
    if b < 0 or b >= p:
        return T(0)
    return a << b


@device
def _bitwise_right_shift(a, b, p, q, T):
    if b < 0 or b >= p:
        return T(-1) if a < 0 else T(0)
    return a >> b


@device
def _nan_to_num(x, neginf, p, q, T):
    """x with NaN replaced by p, +inf by q and -inf by ``neginf`` (a broadcast scalar operand)."""
    if x != x:
        return p
    if math.isinf(x):
        return q if x > T(0) else neginf
    return x


# --- ternary: f(a, b, c, p, q, T) ----------------------------------------------------------------

@device
def _lerp(start, end, weight, p, q, T):
    """PyTorch's lerp: from the nearer end, so weight 0 gives start and weight 1 gives end exactly."""
    difference = end - start
    if abs(weight) < T(0.5):
        return start + weight * difference
    return end - difference * (T(1) - weight)


UNARY_MATH_OPS = {
    "sin": _sin, "cos": _cos, "tan": _tan, "asin": _asin, "acos": _acos, "atan": _atan, "sinh": _sinh,
    "cosh": _cosh, "asinh": _asinh, "acosh": _acosh, "atanh": _atanh, "erf": _erf, "erfc": _erfc,
    "erfinv": _erfinv_op, "log1p": _log1p, "expm1": _expm1, "log2": _log2, "log10": _log10, "exp2": _exp2,
    "rsqrt": _rsqrt, "reciprocal": _reciprocal, "floor": _floor, "ceil": _ceil, "round": _round,
    "trunc": _trunc, "frac": _frac, "isnan": _isnan, "isinf": _isinf, "isposinf": _isposinf,
    "isneginf": _isneginf, "isfinite": _isfinite, "signbit": _signbit, "bitwise_not": _bitwise_not,
    **UNARY_SPECIAL_OPS,
}
BINARY_MATH_OPS = {
    "atan2": _atan2, "fmod": _fmod, "fmod_int": _fmod_int, "hypot": _hypot, "logaddexp": _logaddexp,
    "logaddexp2": _logaddexp2, "copysign": _copysign, "bitwise_and": _bitwise_and, "bitwise_or": _bitwise_or,
    "bitwise_xor": _bitwise_xor, "bitwise_left_shift": _bitwise_left_shift,
    "bitwise_right_shift": _bitwise_right_shift, "nan_to_num": _nan_to_num, **BINARY_SPECIAL_OPS,
}
TERNARY_MATH_OPS = {"lerp": _lerp}
# Ops with a bool out, and ops on integers only (left out of the float PTX signatures).
BOOL_OUT_MATH = {"isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit"}
INTEGER_MATH = {"bitwise_not", "fmod_int", "gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                "bitwise_right_shift"}

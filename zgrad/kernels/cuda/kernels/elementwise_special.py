"""CUDA device functions of the element-wise special functions of
:data:`zgrad.kernels.vocabulary.UNARY_MATH` / ``BINARY_MATH`` (lgamma, digamma, trigamma, the
Bessel functions I0 and I1, erfcx, frexp's two parts, nextafter, fmax, fmin, gcd, lcm, the
Hurwitz zeta function, the incomplete gamma functions, the orthogonal polynomials), in the form of
:mod:`zgrad.kernels.cuda.kernels.elementwise` (``f(x, p, q, T)``, ``f(a, b, p, q, T)``), which
:mod:`elementwise_math` gathers into its tables.

The special functions are the scalar functions of :mod:`zgrad.kernels.special_gamma`,
:mod:`zgrad.kernels.special_bessel` and :mod:`zgrad.kernels.special_math` that the CPU kernels
also compile, computed in out's dtype (float32 stays float32 on the GPU).
"""

from __future__ import annotations

from zgrad.kernels import special_bessel, special_gamma, special_polynomials
from zgrad.kernels.cuda.kernels.common import device, math
from zgrad.kernels.special_math import erfcx

__all__ = ["UNARY_SPECIAL_OPS", "BINARY_SPECIAL_OPS"]

_erfcx = device(erfcx)
_digamma = device(special_gamma.digamma)
_trigamma = device(special_gamma.trigamma)
_zeta = device(special_gamma.zeta)
_igamma = device(special_gamma.gammainc)
_igammac = device(special_gamma.gammaincc)
_igamma_derivative = device(special_gamma.gammainc_derivative)
_i0 = device(special_bessel.i0)
_i0e = device(special_bessel.i0e)
_i1 = device(special_bessel.i1)
_i1e = device(special_bessel.i1e)
_polynomial = device(special_polynomials.orthogonal_polynomial)
_bessel_j = device(special_bessel.bessel_j)
_bessel_y = device(special_bessel.bessel_y)
_bessel_k = device(special_bessel.bessel_k)


@device
def _lgamma(x, p, q, T):
    return math.lgamma(x)


@device
def _digamma_op(x, p, q, T):
    return _digamma(x, T)


@device
def _trigamma_op(x, p, q, T):
    return _trigamma(x, T)


@device
def _i0_op(x, p, q, T):
    return _i0(x, T)


@device
def _i0e_op(x, p, q, T):
    return _i0e(x, T)


@device
def _i1_op(x, p, q, T):
    return _i1(x, T)


@device
def _i1e_op(x, p, q, T):
    return _i1e(x, T)


@device
def _erfcx_op(x, p, q, T):
    return _erfcx(x, T)


@device
def _frexp_mantissa(x, p, q, T):
    return math.frexp(x)[0]


@device
def _frexp_exponent(x, p, q, T):
    return T(math.frexp(x)[1])  # as a float: dispatch casts it to int32


@device
def _nextafter(a, b, p, q, T):
    return math.nextafter(a, b)


@device
def _fmax(a, b, p, q, T):
    """The larger of a and b, the other where one is NaN."""
    if b != b or a >= b:
        return a
    return b


@device
def _fmin(a, b, p, q, T):
    """The smaller of a and b, the other where one is NaN."""
    if b != b or a <= b:
        return a
    return b


@device
def _gcd(a, b, p, q, T):
    """The greatest common divisor of integers, non-negative (Euclid's algorithm)."""
    a, b = T(abs(a)), T(abs(b))
    while b != T(0):
        a, b = b, T(a % b)
    return a


@device
def _lcm(a, b, p, q, T):
    """The least common multiple of integers, non-negative; 0 where either is 0."""
    g = _gcd(a, b, p, q, T)
    if g == T(0):
        return T(0)
    return T(abs(T(a // g) * b))


@device
def _zeta_op(a, b, p, q, T):
    return _zeta(a, b, T)


@device
def _igamma_op(a, b, p, q, T):
    return _igamma(a, b, T)


@device
def _igammac_op(a, b, p, q, T):
    return _igammac(a, b, T)


@device
def _igamma_derivative_op(a, b, p, q, T):
    return _igamma_derivative(a, b, T)


@device
def _bessel_j0(x, p, q, T):
    return _bessel_j(x, 0, T)


@device
def _bessel_j1(x, p, q, T):
    return _bessel_j(x, 1, T)


@device
def _bessel_y0(x, p, q, T):
    return _bessel_y(x, 0, T)


@device
def _bessel_y1(x, p, q, T):
    return _bessel_y(x, 1, T)


@device
def _modified_bessel_k0(x, p, q, T):
    return _bessel_k(x, 0, False, T)


@device
def _modified_bessel_k1(x, p, q, T):
    return _bessel_k(x, 1, False, T)


@device
def _scaled_modified_bessel_k0(x, p, q, T):
    return _bessel_k(x, 0, True, T)


@device
def _scaled_modified_bessel_k1(x, p, q, T):
    return _bessel_k(x, 1, True, T)


@device
def _orthogonal_polynomial(x, n, p, q, T):
    """The orthogonal polynomial number p of degree n at x (at 2x - 1 where q is 1)."""
    return _polynomial(x + x - T(1) if q == T(1) else x, n, int(p), T)


UNARY_SPECIAL_OPS = {
    "lgamma": _lgamma, "digamma": _digamma_op, "trigamma": _trigamma_op, "i0": _i0_op, "i0e": _i0e_op,
    "i1": _i1_op, "i1e": _i1e_op, "erfcx": _erfcx_op, "frexp_mantissa": _frexp_mantissa,
    "frexp_exponent": _frexp_exponent, "bessel_j0": _bessel_j0, "bessel_j1": _bessel_j1,
    "bessel_y0": _bessel_y0, "bessel_y1": _bessel_y1, "modified_bessel_k0": _modified_bessel_k0,
    "modified_bessel_k1": _modified_bessel_k1, "scaled_modified_bessel_k0": _scaled_modified_bessel_k0,
    "scaled_modified_bessel_k1": _scaled_modified_bessel_k1,
}
BINARY_SPECIAL_OPS = {
    "nextafter": _nextafter, "fmax": _fmax, "fmin": _fmin, "gcd": _gcd, "lcm": _lcm, "zeta": _zeta_op,
    "igamma": _igamma_op, "igammac": _igammac_op, "igamma_derivative": _igamma_derivative_op,
    "orthogonal_polynomial": _orthogonal_polynomial,
}

"""Scalar functions of the gamma family both backends' kernels compile (a Numba CPU kernel, a CUDA
device function), written once in plain Python: digamma, trigamma, the Hurwitz zeta function and
the regularized incomplete gamma functions. ``T`` is the scalar type computed in: every constant
is made a ``T`` so that a float32 CUDA kernel stays in float32.

Each guards its poles and domain edges before calling ``math`` (so that, run as Python in the
CUDA simulator, no call raises), and gives PyTorch's values there: digamma -inf at +0, +inf at
-0, NaN at the negative integers; zeta inf at s = 1 and at q a non-positive integer, NaN for
s < 1; the incomplete gamma functions NaN for a negative argument.
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

__all__ = ["digamma", "trigamma", "zeta", "gammainc", "gammaincc", "gammainc_derivative"]

_PI = 3.141592653589793
# (2k)! / B_2k for k = 1..12: the coefficients of the Euler-Maclaurin tail of zeta.
_ZETA_TAIL = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
              -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
              1.8152105401943546773e17, -7.1661652561756670113e18)
_EPSILON = 1.1102230246251565e-16  # float64's unit roundoff; float32 stops earlier in its own rounding


@register_jitable
def _is_integer(x, T):
    """Whether x is an integer, +-inf included (as C's x == floor(x))."""
    return abs(x) == T(math.inf) or x % T(1) == T(0)


def digamma(x, T):
    """psi(x) = d/dx log Gamma(x): the reflection psi(1 - x) - pi / tan(pi x) below 0 (with x's
    fraction, exact, in the tangent), the recurrence psi(x) = psi(x + 1) - 1/x up to 10, then
    the asymptotic series log x - 1/2x - sum B_2k / (2k x^2k)."""
    if x != x or x == T(math.inf):
        return x
    if x == T(0):
        return math.copysign(T(math.inf), -x)
    result = T(0)
    if x < T(0):
        if x == -T(math.inf) or _is_integer(x, T):
            return T(math.nan)
        result = -T(_PI) / math.tan(T(_PI) * (x % T(1)))
        x = T(1) - x
    while x < T(10):
        result -= T(1) / x
        x += T(1)
    inverse_square = T(1) / (x * x)
    series = inverse_square * (T(1 / 12) - inverse_square * (T(1 / 120) - inverse_square * (
        T(1 / 252) - inverse_square * (T(1 / 240) - inverse_square * (T(1 / 132) - inverse_square * (
            T(691 / 32760) - inverse_square * T(1 / 12)))))))
    return result + math.log(x) - T(0.5) / x - series


def trigamma(x, T):
    """psi'(x): the reflection pi^2 / sin^2(pi x) - psi'(1 - x) below 1/2, the recurrence
    psi'(x) = psi'(x + 1) + 1/x^2 up to 10, then the asymptotic series
    1/x + 1/2x^2 + sum B_2k / x^(2k+1). inf at the non-positive integers."""
    if x != x:
        return x
    if x == T(math.inf):
        return T(0)
    result = T(0)
    sign = T(1)
    if x < T(0.5):
        if x == -T(math.inf):
            return T(math.nan)
        if x <= T(0) and _is_integer(x, T):
            return T(math.inf)
        s = math.sin(T(_PI) * (x % T(1)))
        result = -T(_PI) * T(_PI) / (s * s)
        sign = -T(1)
        x = T(1) - x
    while x < T(10):
        result += T(1) / (x * x)
        x += T(1)
    inverse = T(1) / x
    inverse_square = inverse * inverse
    series = T(1) + inverse * T(0.5) + inverse_square * (T(1 / 6) - inverse_square * (T(1 / 30) - inverse_square * (
        T(1 / 42) - inverse_square * (T(1 / 30) - inverse_square * (T(5 / 66) - inverse_square * T(691 / 2730))))))
    return sign * (result + series * inverse)


def zeta(s, q, T):
    """The Hurwitz zeta function sum_k (k + q)^-s (the Riemann one at q = 1): direct terms until
    k + q > 9, then the Euler-Maclaurin tail. inf at s = 1 and at q a non-positive integer; NaN for
    s < 1, and for q < 0 with s not an integer (checked in PyTorch's order, so that a NaN of one
    argument gives those answers too); 0 at q = inf (PyTorch's is NaN)."""
    if s == T(1):
        return T(math.inf)
    if s < T(1):
        return T(math.nan)
    if q <= T(0):
        if q == -T(math.inf) or _is_integer(q, T):
            return T(math.inf)
        if not _is_integer(s, T):
            return T(math.nan)
    if s != s or q != q:
        return s + q
    if q == T(math.inf):
        return T(0)
    total = math.pow(q, -s)
    a = q
    term = T(0)
    i = 0
    while i < 9 or a <= T(9):
        i += 1
        a += T(1)
        term = math.pow(a, -s)
        total += term
        if abs(term) < abs(total) * T(_EPSILON):
            return total
    if term == T(0):  # underflowed: so has the tail (whose factors would overflow in float32)
        return total
    w = a
    total += term * w / (s - T(1)) - T(0.5) * term
    factor = T(1)
    k = T(0)
    for coefficient in _ZETA_TAIL:
        factor *= s + k
        term /= w
        correction = factor * term / T(coefficient)
        total += correction
        if abs(correction) < abs(total) * T(_EPSILON):
            break
        k += T(1)
        factor *= s + k
        term /= w
        k += T(1)
    return total


@register_jitable
def _log_prefactor(a, x, T):
    """log(x^a e^-x / Gamma(a))."""
    return a * math.log(x) - x - math.lgamma(a)


@register_jitable
def _lower_series(a, x, T):
    """gammainc(a, x) by its power series, for x < a + 1."""
    term = T(1) / a
    total = term
    n = a
    for _ in range(2000):
        n += T(1)
        term *= x / n
        total += term
        if abs(term) < abs(total) * T(_EPSILON):
            break
    return total * math.exp(_log_prefactor(a, x, T))


@register_jitable
def _upper_fraction(a, x, T):
    """gammaincc(a, x) by its continued fraction (modified Lentz), for x >= a + 1."""
    tiny = T(1e-30)
    b = x + T(1) - a
    c = T(1) / tiny
    d = T(1) / b
    h = d
    for i in range(1, 2000):
        an = -T(i) * (T(i) - a)
        b += T(2)
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = T(1) / d
        delta = d * c
        h *= delta
        if abs(delta - T(1)) < T(_EPSILON):
            break
    return h * math.exp(_log_prefactor(a, x, T))


@register_jitable
def _incomplete_edges(a, x, T):
    """The regularized lower incomplete gamma P(a, x) where a formula is not needed (NaN for a
    negative argument, the limits at 0 and inf, checked in PyTorch's order, so that a NaN of one
    argument gives those answers too; NaN for the rest with a NaN), else -1."""
    if x < T(0) or a < T(0):
        return T(math.nan)
    if a == T(0):
        return T(1) if x > T(0) else T(math.nan)
    if x == T(0):
        return T(0)
    if a == T(math.inf):
        return T(math.nan) if x == T(math.inf) else T(0)
    if x == T(math.inf):
        return T(1)
    if a != a or x != x:
        return T(math.nan)
    return -T(1)


def gammainc(a, x, T):
    """P(a, x) = gamma(a, x) / Gamma(a), the regularized lower incomplete gamma function: its
    series below x = a + 1, 1 - its complement's continued fraction above."""
    edge = _incomplete_edges(a, x, T)
    if edge != -T(1):
        return edge
    if x < a + T(1):
        return _lower_series(a, x, T)
    return T(1) - _upper_fraction(a, x, T)


def gammaincc(a, x, T):
    """Q(a, x) = 1 - P(a, x), the regularized upper incomplete gamma function, computed directly
    on the side where it is small."""
    edge = _incomplete_edges(a, x, T)
    if edge != -T(1):
        return T(1) - edge
    if x < a + T(1):
        return T(1) - _lower_series(a, x, T)
    return _upper_fraction(a, x, T)


def gammainc_derivative(a, x, T):
    """d/dx P(a, x) = x^(a-1) e^-x / Gamma(a) (0 at x = 0 for a > 1, inf for a < 1)."""
    if not (a > T(0) and x >= T(0)) or x == T(math.inf):
        return T(0) if x == T(math.inf) else T(math.nan)
    if x == T(0):
        return T(0) if a > T(1) else (T(1) if a == T(1) else T(math.inf))
    return math.exp((a - T(1)) * math.log(x) - x - math.lgamma(a))

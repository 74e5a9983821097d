"""The modified Bessel functions of the first kind of orders 0 and 1, plain and exponentially
scaled (``i0``, ``i0e``, ``i1``, ``i1e``), as scalar functions both backends' kernels compile (a
Numba CPU kernel, a CUDA device function). ``T`` is the scalar type computed in.

Up to |x| = 30 the power series sum (x/2)^(2k+n) / (k! (k+n)!), whose terms are all positive
(no cancellation: a few ulp); above, Hankel's asymptotic expansion of e^-x I_n(x), whose terms
at |x| > 30 fall below float64's rounding before they start to grow.
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

__all__ = ["i0", "i0e", "i1", "i1e"]

_SERIES_UP_TO = 30.0
_TWO_PI = 6.283185307179586
_EPSILON = 1.1102230246251565e-16


@register_jitable
def _scaled(a, order, T):
    """e^-a I_order(a) for a finite a >= 0 and order 0 or 1."""
    if a <= T(_SERIES_UP_TO):
        half = a * T(0.5)
        quarter_square = half * half
        term = half if order == 1 else T(1)
        total = term
        for k in range(1, 500):
            term *= quarter_square / (T(k) * T(k + order))
            total += term
            if term < total * T(_EPSILON):
                break
        return total * math.exp(-a)
    four_order_square = T(4 * order * order)
    term = T(1)
    total = T(1)
    for k in range(1, 60):
        odd = T(2 * k - 1)
        term *= (odd * odd - four_order_square) / (T(8 * k) * a)
        total += term
        if abs(term) < abs(total) * T(_EPSILON):
            break
    return total / math.sqrt(T(_TWO_PI) * a)


@register_jitable
def _unscaled(x, order, T):
    """I_order(x): e^|x| times the scaled value, in two halves of e^|x| so that neither
    overflows before I_order does."""
    a = abs(x)
    if a == T(math.inf):
        return math.copysign(T(math.inf), x) if order == 1 else T(math.inf)
    half_exp = math.exp(a * T(0.5))
    value = half_exp * (_scaled(a, order, T) * half_exp)
    return math.copysign(value, x) if order == 1 else value


def i0(x, T):
    """I0(x), even; inf at +-inf."""
    if x != x:
        return x
    return _unscaled(x, 0, T)


def i0e(x, T):
    """e^-|x| I0(x); 0 at +-inf."""
    if x != x:
        return x
    return T(0) if abs(x) == T(math.inf) else _scaled(abs(x), 0, T)


def i1(x, T):
    """I1(x), odd; +-inf at +-inf."""
    if x != x:
        return x
    return _unscaled(x, 1, T)


def i1e(x, T):
    """e^-|x| I1(x), odd; +-0 at +-inf."""
    if x != x:
        return x
    if abs(x) == T(math.inf):
        return math.copysign(T(0), x)
    return math.copysign(_scaled(abs(x), 1, T), x)

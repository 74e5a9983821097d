"""The classical orthogonal polynomials of ``torch.special`` (Chebyshev of the four kinds, the
physicists' and probabilists' Hermite, Laguerre, Legendre) as one scalar function both backends'
kernels compile (a Numba CPU kernel, a CUDA device function), the polynomial picked by its
position in :data:`zgrad.kernels.vocabulary.ORTHOGONAL_POLYNOMIALS`. ``T`` is the scalar type
computed in.

The degree is ``n`` truncated to an integer (0 for a negative or NaN one, as PyTorch: the
polynomial of a negative degree is 0); degree 0 is 1 everywhere, NaN included (as PyTorch). Each polynomial runs its three-term recurrence, except the
Chebyshev ones of high degree inside (-1, 1), which use their closed forms in theta = acos(x)
(cos(n theta), ...), and the values at +-1, which are exact.
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

from zgrad.kernels.vocabulary import ORTHOGONAL_POLYNOMIALS

__all__ = ["orthogonal_polynomial"]

(CHEBYSHEV_T, CHEBYSHEV_U, CHEBYSHEV_V, CHEBYSHEV_W, HERMITE_H, HERMITE_HE, LAGUERRE_L, LEGENDRE_P) = (
    ORTHOGONAL_POLYNOMIALS.index(name) for name in (
        "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
        "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"))


@register_jitable
def _chebyshev_closed_form(x, n, kind, T):
    """The Chebyshev polynomial of ``kind`` at x in (-1, 1) from theta = acos(x)."""
    theta = math.acos(x)
    half = T(n) + T(0.5)
    if kind == CHEBYSHEV_T:
        return math.cos(T(n) * theta)
    if kind == CHEBYSHEV_U:
        s = math.sin(theta)
        return math.sin((T(n) + T(1)) * theta) / s
    if kind == CHEBYSHEV_V:
        return math.cos(half * theta) / math.cos(theta * T(0.5))
    return math.sin(half * theta) / math.sin(theta * T(0.5))


@register_jitable
def _chebyshev_at_one(x, n, kind, T):
    """The Chebyshev polynomial of ``kind`` at x = +-1."""
    even = n % 2 == 0
    if kind == CHEBYSHEV_T:
        return T(1) if x > T(0) or even else -T(1)
    if kind == CHEBYSHEV_U:
        return T(n + 1) if x > T(0) or even else -T(n + 1)
    if kind == CHEBYSHEV_V:
        return T(1) if x > T(0) else (T(2 * n + 1) if even else -T(2 * n + 1))
    return T(2 * n + 1) if x > T(0) else (T(1) if even else -T(1))


def orthogonal_polynomial(x, degree, kind, T):
    """The orthogonal polynomial ``kind`` (a position in ORTHOGONAL_POLYNOMIALS) of degree
    ``degree`` (truncated to an integer) at x, in ``T``."""
    if degree != degree or degree < T(0):
        return T(0)
    n = int(degree)
    if kind <= CHEBYSHEV_W:
        if abs(x) == T(1):
            return _chebyshev_at_one(x, n, kind, T)
        if abs(x) < T(1) and n > (6 if kind == CHEBYSHEV_T else 8):
            return _chebyshev_closed_form(x, n, kind, T)
    if kind == LEGENDRE_P and abs(x) == T(1):
        return T(1) if x > T(0) or n % 2 == 0 else -T(1)
    if n == 0:
        return T(1)
    previous = T(1)
    if kind == CHEBYSHEV_T or kind == LEGENDRE_P or kind == HERMITE_HE:
        current = x
    elif kind == CHEBYSHEV_U or kind == HERMITE_H:
        current = x + x
    elif kind == CHEBYSHEV_V:
        current = x + x - T(1)
    elif kind == CHEBYSHEV_W:
        current = x + x + T(1)
    else:  # LAGUERRE_L
        current = T(1) - x
    for k in range(1, n):
        if kind <= CHEBYSHEV_W:
            following = (x + x) * current - previous
        elif kind == HERMITE_H:
            following = (x + x) * current - T(2 * k) * previous
        elif kind == HERMITE_HE:
            following = x * current - T(k) * previous
        elif kind == LAGUERRE_L:
            following = ((T(2 * k + 1) - x) * current - T(k) * previous) / T(k + 1)
        else:  # LEGENDRE_P
            following = (T(2 * k + 1) * x * current - T(k) * previous) / T(k + 1)
        previous = current
        current = following
    return current

"""Scalar special functions both backends' kernels compile (a Numba CPU kernel, a CUDA device
function), written once in plain Python: today the inverse error function, which neither
Python's ``math`` nor CUDA's libdevice provides, and its first estimate (``register_jitable``, so
that the CPU backend's float32 kernel can call it beside its own vectorisable log).
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

__all__ = ["erfcx", "erfinv", "erfinv_estimate"]

_TWO_OVER_SQRT_PI = 1.1283791670955126


@register_jitable
def erfinv_estimate(w, T):
    """Giles' single-precision approximation of erfinv(a) / a from w = -log((1 - a)(1 + a)), in
    ``T``: within a few ulp of float32 for a in [0, 1). Both of its polynomials are computed and
    one is picked, so that a loop over elements stays branch-free (and vectorises on the CPU)."""
    central = w - T(2.5)
    p = T(2.81022636e-08)
    p = T(3.43273939e-07) + p * central
    p = T(-3.5233877e-06) + p * central
    p = T(-4.39150654e-06) + p * central
    p = T(0.00021858087) + p * central
    p = T(-0.00125372503) + p * central
    p = T(-0.00417768164) + p * central
    p = T(0.246640727) + p * central
    p = T(1.50140941) + p * central
    tail = math.sqrt(w) - T(3)
    q = T(-0.000200214257)
    q = T(0.000100950558) + q * tail
    q = T(0.00134934322) + q * tail
    q = T(-0.00367342844) + q * tail
    q = T(0.00573950773) + q * tail
    q = T(-0.0076224613) + q * tail
    q = T(0.00943887047) + q * tail
    q = T(1.00167406) + q * tail
    q = T(2.83297682) + q * tail
    return p if w < T(5) else q


def erfinv(x, max_steps, T):
    """The inverse error function of ``x`` computed in ``T`` (the scalar type of the result):
    +-inf at +-1, NaN outside [-1, 1] and at NaN.

    Giles' single-precision approximation ("Approximating the erfinv function", 2010), within a few
    ulp of float32, then up to ``max_steps`` Halley steps (0 for float32; 8 for float64, which
    needs one or two except deep in the tails, where the approximation is far off): each step
    stops the refinement once its correction is below 1e-6 relative, the next would be below
    float64's rounding (Halley's steps converge cubically). Above 0.5 a step measures its
    residual through erfc(y) - (1 - |x|), both exact there, so precision holds up to |x| = 1.
    """
    a = abs(x)
    if not a <= T(1):  # NaN, or outside the domain
        return T(math.nan)
    if a == T(1):
        return T(math.inf) if x > T(0) else -T(math.inf)
    w = -math.log((T(1) - a) * (T(1) + a))
    y = erfinv_estimate(w, T) * a
    for _ in range(max_steps):
        residual = math.erf(y) - a if a < T(0.5) else (T(1) - a) - math.erfc(y)
        newton = residual / (T(_TWO_OVER_SQRT_PI) * math.exp(-y * y))
        y = y - newton / (T(1) + y * newton)  # Halley: erf'' = -2y erf'
        if abs(newton) <= T(1e-6) * y:
            break
    return math.copysign(y, x)


_ASYMPTOTIC_ERFCX_FROM = 6.0
_ONE_OVER_SQRT_PI = 0.5641895835477563
_EPSILON = 1.1102230246251565e-16


def erfcx(x, T):
    """The scaled complementary error function exp(x^2) erfc(x) in ``T``: that product below 6
    (relative error up to about x^2 ulp, from the rounding of x^2 in the exponent), the
    asymptotic series 1 / (x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k from 6 on (its smallest
    term there is below float64's rounding). inf below -26.7, where exp(x^2) overflows float64."""
    if x != x:
        return x
    if x < T(-26.7):
        return T(math.inf)
    if x < T(_ASYMPTOTIC_ERFCX_FROM):
        return math.exp(x * x) * math.erfc(x)
    inverse_twice_square = T(0.5) / (x * x)
    term = T(1)
    total = T(1)
    for k in range(1, 40):
        term *= -T(2 * k - 1) * inverse_twice_square
        total += term
        if abs(term) < total * T(_EPSILON):
            break
    return total * T(_ONE_OVER_SQRT_PI) / x

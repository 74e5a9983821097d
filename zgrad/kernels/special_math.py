"""Scalar special functions both backends' kernels compile (a Numba CPU kernel, a CUDA device
function), written once in plain Python: today the inverse error function, which neither
Python's ``math`` nor CUDA's libdevice provides.
"""

from __future__ import annotations

import math

__all__ = ["erfinv"]

_TWO_OVER_SQRT_PI = 1.1283791670955126


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
    if w < T(5):
        w = w - T(2.5)
        p = T(2.81022636e-08)
        p = T(3.43273939e-07) + p * w
        p = T(-3.5233877e-06) + p * w
        p = T(-4.39150654e-06) + p * w
        p = T(0.00021858087) + p * w
        p = T(-0.00125372503) + p * w
        p = T(-0.00417768164) + p * w
        p = T(0.246640727) + p * w
        p = T(1.50140941) + p * w
    else:
        w = math.sqrt(w) - T(3)
        p = T(-0.000200214257)
        p = T(0.000100950558) + p * w
        p = T(0.00134934322) + p * w
        p = T(-0.00367342844) + p * w
        p = T(0.00573950773) + p * w
        p = T(-0.0076224613) + p * w
        p = T(0.00943887047) + p * w
        p = T(1.00167406) + p * w
        p = T(2.83297682) + p * w
    y = p * a
    for _ in range(max_steps):
        residual = math.erf(y) - a if a < T(0.5) else (T(1) - a) - math.erfc(y)
        newton = residual / (T(_TWO_OVER_SQRT_PI) * math.exp(-y * y))
        y = y - newton / (T(1) + y * newton)  # Halley: erf'' = -2y erf'
        if abs(newton) <= T(1e-6) * y:
            break
    return math.copysign(y, x)

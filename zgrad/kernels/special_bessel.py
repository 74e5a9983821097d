"""The modified Bessel functions of the first kind of orders 0 and 1, plain and exponentially
scaled (``i0``, ``i0e``, ``i1``, ``i1e``), and the Bessel functions of the first kind of orders 0
and 1 and of the second kind (``bessel_j``, ``bessel_y``, see their docstrings), as scalar functions both backends' kernels compile (a
Numba CPU kernel, a CUDA device function). ``T`` is the scalar type computed in.

Up to |x| = 30 the power series sum (x/2)^(2k+n) / (k! (k+n)!), whose terms are all positive
(no cancellation: a few ulp); above, Hankel's asymptotic expansion of e^-x I_n(x), whose terms
at |x| > 30 fall below float64's rounding before they start to grow.
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

__all__ = ["i0", "i0e", "i1", "i1e", "bessel_j", "bessel_y", "bessel_k"]

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


_MILLER_UP_TO = 25.0
_MILLER_EXTRA_TERMS = 30
_RESCALE_ABOVE = 1e15
_HALF_PI = 1.5707963267948966
_SQRT_TWO_OVER_PI = 0.7978845608028654


@register_jitable
def _miller(a, T):
    """(J0(a), J1(a), S0, S1) for 0 < a <= 25 by Miller's backward recurrence
    J_(k-1) = (2k/a) J_k - J_(k+1) from far above, normalized by J_0 + 2 sum J_2k = 1 (stable: the
    recurrence grows toward the wanted values; rescaled as it grows), with the Neumann sums of Y0
    and Y1 over the same values: S0 = sum_k (-1)^k J_2k / k and
    S1 = sum_k (-1)^k (J_(2k-1) - J_(2k+1)) / 2k."""
    top = 2 * (int(a) // 2) + 2 * _MILLER_EXTRA_TERMS
    above = T(0)
    current = T(1e-30)
    norm = T(0)
    s0 = T(0)
    s1 = T(0)
    j1 = T(0)
    for k in range(top, 0, -1):
        below = T(2 * k) / a * current - above
        above = current
        current = below
        m = k - 1
        if m % 2 == 0 and m > 0:
            half = m // 2
            norm += T(2) * current
            s0 += (current if half % 2 == 0 else -current) / T(half)
        elif m % 2 == 1:
            k_first = (m + 1) // 2
            c = (T(1) if k_first % 2 == 0 else -T(1)) / T(m + 1)
            if m >= 3:
                k_second = (m - 1) // 2
                c -= (T(1) if k_second % 2 == 0 else -T(1)) / T(m - 1)
            s1 += c * current
            if m == 1:
                j1 = current
        if abs(current) > T(_RESCALE_ABOVE):
            current /= T(_RESCALE_ABOVE)
            above /= T(_RESCALE_ABOVE)
            norm /= T(_RESCALE_ABOVE)
            s0 /= T(_RESCALE_ABOVE)
            s1 /= T(_RESCALE_ABOVE)
            j1 /= T(_RESCALE_ABOVE)
    norm += current
    return current / norm, j1 / norm, s0 / norm, s1 / norm


@register_jitable
def _hankel(a, order, second_kind, T):
    """J_order(a) (Y_order(a) where ``second_kind``) for a > 25 by Hankel's asymptotic expansion
    sqrt(2/(pi a)) (P cos chi - Q sin chi) (Y: P sin chi + Q cos chi), chi = a - (order/2 + 1/4) pi,
    with cos chi and sin chi from libm's cos a and sin a (whose argument reduction is exact) and
    the constant angle's."""
    four_order_square = T(4 * order * order)
    p = T(1)
    q = T(0)
    term = T(1)
    for k in range(1, 40):
        odd = T(2 * k - 1)
        term *= (four_order_square - odd * odd) / (T(8 * k) * a)
        if abs(term) < T(1e-17):
            break
        if k % 4 == 1:
            q += term
        elif k % 4 == 2:
            p -= term
        elif k % 4 == 3:
            q -= term
        else:
            p += term
    phase = T(_HALF_PI) * (T(order) + T(0.5))
    cos_phase, sin_phase = math.cos(phase), math.sin(phase)
    cos_chi = math.cos(a) * cos_phase + math.sin(a) * sin_phase
    sin_chi = math.sin(a) * cos_phase - math.cos(a) * sin_phase
    combined = p * sin_chi + q * cos_chi if second_kind else p * cos_chi - q * sin_chi
    return T(_SQRT_TWO_OVER_PI) / math.sqrt(a) * combined


def bessel_j(x, order, T):
    """J_order(x), the Bessel function of the first kind of order 0 or 1: a series below 1e-4,
    Miller's recurrence up to 25, Hankel's expansion above; J0 even, J1 odd, 0 at +-inf."""
    if x != x:
        return x
    a = abs(x)
    if a == T(math.inf):
        return T(0)
    if a < T(1e-4):
        value = T(1) - a * a * T(0.25) if order == 0 else a * T(0.5) - a * a * a * T(0.0625)
    elif a <= T(_MILLER_UP_TO):
        j0, j1, _, _ = _miller(a, T)
        value = j0 if order == 0 else j1
    else:
        value = _hankel(a, order, False, T)
    return -value if order == 1 and x < T(0) else value


_EULER_GAMMA = 0.5772156649015329
_TWO_OVER_PI = 0.6366197723675814


def bessel_y(x, order, T):
    """Y_order(x), the Bessel function of the second kind of order 0 or 1: Neumann's series over
    Miller's values of J up to 25 (Y0 = 2/pi (log(x/2) + gamma) J0 - 4/pi S0,
    Y1 = -2/(pi x) J0 + 2/pi (log(x/2) + gamma) J1 + 4/pi S1), Hankel's expansion above; -inf at 0,
    NaN below, 0 at inf."""
    if x != x:
        return x
    if x < T(0):
        return T(math.nan)
    if x == T(0):
        return -T(math.inf)
    if x == T(math.inf):
        return T(0)
    if x > T(_MILLER_UP_TO):
        return _hankel(x, order, True, T)
    j0, j1, s0, s1 = _miller(x, T)
    logarithm = math.log(x * T(0.5)) + T(_EULER_GAMMA)
    if order == 0:
        return T(_TWO_OVER_PI) * (logarithm * j0 - T(2) * s0)
    return T(_TWO_OVER_PI) * (logarithm * j1 - j0 / x + T(2) * s1)


_K_SERIES_UP_TO = 2.0
_SQRT_HALF_PI = 1.2533141373155003


@register_jitable
def _bessel_k_series(x, order, T):
    """K_order(x) for 0 < x <= 2 by the series
    K0 = -(log(x/2) + gamma) I0 + sum (x^2/4)^k / k!^2 H_k and
    K1 = 1/x + log(x/2) I1 - x/4 sum (x^2/4)^k / (k! (k+1)!) (psi(k+1) + psi(k+2)), H_k the
    harmonic numbers, psi(k+1) = H_k - gamma."""
    quarter_square = x * x * T(0.25)
    logarithm = math.log(x * T(0.5))
    harmonic = T(0)
    term = T(1)
    if order == 0:
        total = T(0)
        for k in range(1, 60):
            harmonic += T(1) / T(k)
            term *= quarter_square / (T(k) * T(k))
            total += term * harmonic
            if term * harmonic < total * T(_EPSILON):
                break
        i0_value = _scaled(x, 0, T) * math.exp(x)
        return total - (logarithm + T(_EULER_GAMMA)) * i0_value
    total = -T(2) * T(_EULER_GAMMA) + T(1)  # psi(1) + psi(2) for k = 0
    for k in range(1, 60):
        harmonic += T(1) / T(k)
        term *= quarter_square / (T(k) * T(k + 1))
        increment = term * (T(2) * harmonic + T(1) / T(k + 1) - T(2) * T(_EULER_GAMMA))
        total += increment
        if abs(increment) < abs(total) * T(_EPSILON):
            break
    i1_value = _scaled(x, 1, T) * math.exp(x)
    return T(1) / x + logarithm * i1_value - x * T(0.25) * total


@register_jitable
def _bessel_k_scaled_fraction(x, order, T):
    """e^x K_order(x) for x > 2 by Steed's evaluation of Thompson and Barnett's continued fraction
    (order 0, and order 1 from the same pass)."""
    b = T(2) * (T(1) + x)
    d = T(1) / b
    h = d
    delta_h = d
    q1 = T(0)
    q2 = T(1)
    a1 = T(0.25)
    q = a1
    c = a1
    a = -a1
    s = T(1) + q * delta_h
    for i in range(2, 1000):
        a -= T(2 * (i - 1))
        c = -a * c / T(i)
        q_next = (q1 - b * q2) / a
        q1 = q2
        q2 = q_next
        q += c * q_next
        if abs(c) > T(_RESCALE_ABOVE):  # c grows as q1, q2 shrink: rescale them together (c q is unchanged)
            c /= T(_RESCALE_ABOVE)
            q1 *= T(_RESCALE_ABOVE)
            q2 *= T(_RESCALE_ABOVE)
        b += T(2)
        d = T(1) / (b + a * d)
        delta_h = (b * d - T(1)) * delta_h
        h += delta_h
        delta_s = q * delta_h
        s += delta_s
        if abs(delta_s) < abs(s) * T(_EPSILON):
            break
    k0 = T(_SQRT_HALF_PI) / math.sqrt(x) / s
    if order == 0:
        return k0
    return k0 * (x + T(0.5) - a1 * h) / x


def bessel_k(x, order, scaled, T):
    """K_order(x) (e^x K_order(x) where ``scaled``), the modified Bessel function of the second
    kind of order 0 or 1: its series up to 2, Steed's continued fraction above; inf at 0, NaN
    below, 0 at inf."""
    if x != x:
        return x
    if x < T(0):
        return T(math.nan)
    if x == T(0):
        return T(math.inf)
    if x == T(math.inf):
        return T(0)
    if x <= T(_K_SERIES_UP_TO):
        value = _bessel_k_series(x, order, T)
        return value * math.exp(x) if scaled else value
    value = _bessel_k_scaled_fraction(x, order, T)
    return value if scaled else value * math.exp(-x)

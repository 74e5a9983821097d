"""Scalar exp, exp2, expm1, log, log1p (and log1p_unit, on [0, 1]), sinh, tanh, sigmoid, erf, erfc, gelu (and its
derivative), tan, atan, atan2, asin, acos, relu and maximum that LLVM can vectorise inside Numba loops.

Without Intel SVML, Numba lowers ``math.exp`` and friends to one libm call per element, which
no loop vectoriser can widen; numpy's own SIMD ufuncs are then several times faster than a
Numba loop.
These versions are plain arithmetic (Cephes/fdlibm range reduction + polynomial, with the
exponent handled through bit casts, or AVX-512's vscalef where the CPU has it), so a loop that
calls them becomes AVX-512/AVX2 code.
exp, exp2, log and tanh are within 2 ulp of the correctly rounded result, sigmoid, erf, tan and atan2
within 3, atan, asin and acos within 4, erfc within 6, float32 gelu within 2e-7 of max(1, |x|) (checked by
tests/kernels/test_kernels.py); NaN,
+-inf, +-0 and subnormal results are handled like numpy.

``maximum`` is LLVM's NaN-propagating ``llvm.maximum`` (numpy's ``np.maximum`` semantics): unlike
an ``if x > m`` loop it lets LLVM vectorise a max reduction without assuming the data has no NaN.

Each function works on float32 and float64 scalars, computing in the argument's precision.
They are usable only inside Numba-compiled code.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload, register_jitable

from zgrad.kernels._jit import MATH_OPTIONS, target_has_feature

__all__ = [
    "acos", "asin", "atan", "atan2", "erf", "erfc", "exp", "exp2", "expm1", "gelu", "gelu_derivative", "log", "log1p",
    "log1p_unit", "maximum", "relu",
    "sigmoid", "sinh", "tan", "tan_in_range", "tanh",
]


@intrinsic
def _float_bits(typingctx, x):
    """The IEEE bits of a float as a signed integer of the same width."""
    if isinstance(x, types.Float):
        int_type = types.int32 if x.bitwidth == 32 else types.int64

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(int_type))

        return int_type(x), codegen
    return None


@intrinsic
def _bits_float(typingctx, bits, like):
    """The float (of ``like``'s type) whose IEEE bits are the low bits of integer ``bits``."""
    if isinstance(bits, types.Integer) and isinstance(like, types.Float):

        def codegen(context, builder, signature, args):
            value = args[0]
            int_ir = context.get_value_type(types.int32 if like.bitwidth == 32 else types.int64)
            if bits.bitwidth > int_ir.width:
                value = builder.trunc(value, int_ir)
            elif bits.bitwidth < int_ir.width:
                value = builder.sext(value, int_ir)
            return builder.bitcast(value, context.get_value_type(like))

        return like(bits, like), codegen
    return None


# With AVX-512, LLVM lowers ``llvm.ldexp`` to one vscalef per vector; elsewhere to a libm call
# per element, which no loop vectoriser widens: there exp's scaling multiplies by 2**n built from
# its bits, in two factors so that subnormal results and overflow come out right.
SCALE_BY_VSCALEF = target_has_feature("avx512f")


@intrinsic
def _ldexp(typingctx, p, n):
    """p * 2**n for a float ``p`` and an integral float ``n`` of p's type in int32's range
    (``llvm.ldexp``: one rounding, so subnormal results and overflow to inf are exact)."""
    if isinstance(p, types.Float) and p == n:

        def codegen(context, builder, signature, args):
            float_ir, int_ir = context.get_value_type(p), ir.IntType(32)
            fn_type = ir.FunctionType(float_ir, [float_ir, int_ir])
            llvm_ldexp = cgutils.get_or_insert_function(builder.module, fn_type, f"llvm.ldexp.f{p.bitwidth}.i32")
            return builder.call(llvm_ldexp, [args[0], builder.fptosi(args[1], int_ir)])

        return p(p, n), codegen
    return None


def _scale(p, n):
    """p * 2**n for an integral float ``n`` of p's type within exp's range ([-153, 130] for
    float32, [-1078, 1026] for float64): one vscalef where :data:`SCALE_BY_VSCALEF`, else
    :func:`_scale_by_factors`; the two agree bit for bit."""
    raise _jitted_only("_scale")


def _scale_by_factors(p, n):
    """:func:`_scale` as two exact powers of two built from their bits (each factor normal)."""
    raise _jitted_only("_scale_by_factors")


@overload(_scale_by_factors, inline="always", jit_options=MATH_OPTIONS)
def _scale_by_factors_impl(p, n):
    if not (isinstance(p, types.Float) and p == n):
        return None
    int_type, bias, shift = (np.int32, 127, 23) if p == types.float32 else (np.int64, 1023, 52)

    def impl(p, n):
        k = int_type(n)
        k_half = k >> 1
        return p * _bits_float((k_half + bias) << shift, p) * _bits_float((k - k_half + bias) << shift, p)

    return impl


@overload(_scale, inline="always", jit_options=MATH_OPTIONS)
def _scale_impl(p, n):
    if not (isinstance(p, types.Float) and p == n):
        return None
    if SCALE_BY_VSCALEF:
        return lambda p, n: _ldexp(p, n)
    return lambda p, n: _scale_by_factors(p, n)


@intrinsic
def maximum(typingctx, a, b):
    """max(a, b) for two floats of one type; NaN if either is NaN, and -0.0 < +0.0."""
    if isinstance(a, types.Float) and a == b:

        def codegen(context, builder, signature, args):
            float_ir = context.get_value_type(a)
            fn_type = ir.FunctionType(float_ir, [float_ir, float_ir])
            llvm_maximum = cgutils.get_or_insert_function(builder.module, fn_type, f"llvm.maximum.f{a.bitwidth}")
            return builder.call(llvm_maximum, args)

        return a(a, b), codegen
    return None


def _float_type(x):
    """numpy's scalar type of Numba float type ``x``."""
    return np.float32 if x == types.float32 else np.float64


def _jitted_only(name: str) -> TypeError:
    return TypeError(f"zgrad.kernels.cpu.kernels.vector_math.{name} can only be called from Numba-compiled code")


def exp(x):
    """exp(x)."""
    raise _jitted_only("exp")


def exp2(x):
    """2**x."""
    raise _jitted_only("exp2")


def log(x):
    """log(x); -inf at 0, NaN below 0."""
    raise _jitted_only("log")


def log1p(x):
    """log(1 + x), accurate for tiny x; -inf at -1, NaN below -1."""
    raise _jitted_only("log1p")


def expm1(x):
    """exp(x) - 1, accurate for tiny x."""
    raise _jitted_only("expm1")


def sinh(x):
    """sinh(x), finite up to its own overflow."""
    raise _jitted_only("sinh")


def tanh(x):
    """tanh(x)."""
    raise _jitted_only("tanh")


def sigmoid(x):
    """1 / (1 + exp(-x)), without overflow for large |x|."""
    raise _jitted_only("sigmoid")


def relu(x):
    """max(x, 0); NaN stays NaN (like torch.relu)."""
    raise _jitted_only("relu")


@overload(exp, inline="always", jit_options=MATH_OPTIONS)
def _exp_impl(x):
    if x == types.float32:
        return lambda x: _exp_f32(x, None)
    if x == types.float64:
        return lambda x: _exp_f64(x, None)
    return None


# _exp_f32(x, lo) and _exp_f64(x, lo) are exp(x + lo) without rounding x + lo first: ``lo``
# (|lo| < 2, never NaN) joins the reduced argument, where its bits survive. erfc needs this for
# exp(-z*z), z*z split into two exact parts; exp itself passes None, and Numba prunes the adds.
# A NaN x goes through the reduction as it is (its 2**n is meaningless, LLVM's poison) and the
# result selects x instead: a select that discards the lane is cheaper than clearing x first.

@register_jitable(**MATH_OPTIONS)
def _exp_f32(x, lo):
    # Cephes expf: n = round(x / ln2), r = x - n*ln2 (two-part ln2), exp(r) by a polynomial,
    # times 2**n (_scale: subnormal results and overflow to inf come out right).
    F = np.float32
    v = x
    if v > F(89.0):
        v = F(89.0)
    if v < F(-104.0):
        v = F(-104.0)
    if lo is None:
        n = np.floor(v * F(1.44269504088896341) + F(0.5))
        r = v - n * F(0.693359375) - n * F(-2.12194440e-4)
    else:
        n = np.floor((v + lo) * F(1.44269504088896341) + F(0.5))
        r = v - n * F(0.693359375) - n * F(-2.12194440e-4) + lo
    return _exp_reduced_f32(x, r, n)


@register_jitable(**MATH_OPTIONS)
def _exp_reduced_f32(x, r, n):
    """exp(r) * 2**n for |r| <= ln2 / 2 (and a little more), n integral in [-153, 130]; NaN if x is."""
    F = np.float32
    p = (((((F(1.9875691500e-4) * r + F(1.3981999507e-3)) * r + F(8.3334519073e-3)) * r
           + F(4.1665795894e-2)) * r + F(1.6666665459e-1)) * r + F(5.0000001201e-1)) * (r * r) + r + F(1.0)
    p = _scale(p, n)
    return p if x == x else x


@register_jitable(**MATH_OPTIONS)
def _exp_f64(x, lo):
    # Cephes exp: the same reduction, exp(r) = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)).
    v = x
    if v > 710.0:
        v = 710.0
    if v < -746.0:
        v = -746.0
    if lo is None:
        n = np.floor(v * 1.4426950408889634073599 + 0.5)
        r = v - n * 6.93145751953125e-1 - n * 1.42860682030941723212e-6
    else:
        n = np.floor((v + lo) * 1.4426950408889634073599 + 0.5)
        r = v - n * 6.93145751953125e-1 - n * 1.42860682030941723212e-6 + lo
    return _exp_reduced_f64(x, r, n)


@register_jitable(**MATH_OPTIONS)
def _exp_reduced_f64(x, r, n):
    """exp(r) * 2**n for |r| <= ln2 / 2 (and a little more), n integral in [-1078, 1026]; NaN if x is."""
    rr = r * r
    px = r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr + 9.99999999999999999910e-1)
    qx = ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr
          + 2.27265548208155028766e-1) * rr + 2.00000000000000000009e0
    p = 1.0 + 2.0 * (px / (qx - px))
    p = _scale(p, n)
    return p if x == x else x


@overload(exp2, inline="always", jit_options=MATH_OPTIONS)
def _exp2_impl(x):
    # 2**x = 2**n * exp((x - n) ln2), n = round(x): x - n is exact, so only ln2's rounding enters.
    if not isinstance(x, types.Float):
        return None
    F = _float_type(x)
    low, high = (F(-151.0), F(129.0)) if x == types.float32 else (F(-1076.0), F(1025.0))  # beyond: 0 and inf
    reduced = _exp_reduced_f32 if x == types.float32 else _exp_reduced_f64

    def impl(x):
        v = x
        if v > high:
            v = high
        if v < low:
            v = low
        n = np.floor(v + F(0.5))
        return reduced(x, (v - n) * F(0.6931471805599453), n)

    return impl


# fdlibm log: x = 2**k * m with m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f / (2 + f),
# log(1 + f) = f - f*f/2 + s*(f*f/2 + R(s*s)), k*ln2 added in two parts. Per width: R's
# coefficients lg1..lg7, then ln2's high and low parts.
_LOG_FDLIBM = {
    32: ((6.6666668653e-01, 4.0000000596e-01, 2.8571429849e-01, 2.2222198546e-01, 1.8183572590e-01,
          1.5313838422e-01, 1.4798198640e-01), 6.9313812256e-01, 9.0580006145e-06),
    64: ((6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01, 2.222219843214978396e-01,
          1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01),
         6.93147180369123816490e-01, 1.90821492927058770002e-10),
}


def _log_of_one_plus(x):
    """A jitted ``(f, k) -> log(1 + f) + k ln2`` for x's float type: fdlibm's log after its
    reduction, for ``f`` in [sqrt(2)/2 - 1, sqrt(2) - 1] and ``k`` an integral float."""
    F = _float_type(x)
    (lg1, lg2, lg3, lg4, lg5, lg6, lg7), ln2_hi, ln2_lo = _LOG_FDLIBM[x.bitwidth]

    @register_jitable(inline="always", **MATH_OPTIONS)
    def log_of_one_plus(f, dk):
        s = f / (F(2.0) + f)
        z = s * s
        w = z * z
        r = w * (F(lg2) + w * (F(lg4) + w * F(lg6))) + z * (F(lg1) + w * (F(lg3) + w * (F(lg5) + w * F(lg7))))
        hfsq = F(0.5) * f * f
        return dk * F(ln2_hi) - ((hfsq - (s * (hfsq + r) + dk * F(ln2_lo))) - f)

    return log_of_one_plus


@overload(log, jit_options=MATH_OPTIONS)
def _log_impl(x):
    if not isinstance(x, types.Float):
        return None
    F = x
    if x == types.float32:
        mantissa_bits, exponent_bias, subnormal_shift = 23, 127, 25
    else:
        mantissa_bits, exponent_bias, subnormal_shift = 52, 1023, 54
    log_of_one_plus = _log_of_one_plus(x)
    min_normal = float(np.finfo(np.float32 if x == types.float32 else np.float64).tiny)
    mantissa_mask = (1 << mantissa_bits) - 1
    one_bits = exponent_bias << mantissa_bits

    def impl(x):
        v = x
        k = 0
        if v < F(min_normal):  # subnormal (or <= 0, handled below): scale into the normal range
            v = v * F(2.0**subnormal_shift)
            k = -subnormal_shift
        bits = _float_bits(v)
        k += ((bits >> mantissa_bits) & (2 * exponent_bias + 1)) - exponent_bias
        m = _bits_float((bits & mantissa_mask) | one_bits, v)
        if m > F(1.4142135623730951):
            m = m * F(0.5)
            k += 1
        result = log_of_one_plus(m - F(1.0), F(k))
        if x == F(np.inf):
            result = x
        if x == F(0.0):
            result = F(-np.inf)
        if not x >= F(0.0):
            result = F(np.nan)
        return result

    return impl


# expm1 below |x| = 1/2 and sinh below |x| = 1 are Taylor's series, to where the next term is
# below half an ulp (in Horner's form: expm1 = x + x^2 (1/2! + x (1/3! + ...)),
# sinh = x + x^3 (1/3! + x^2 (1/5! + ...))). Above, exp has no cancellation to fear: expm1 =
# exp(x) - 1, sinh = (e^|x| - e^-|x|) / 2, and where e^|x| overflows (h / 2) h with h = e^(|x|/2).
# Both branches are computed and one selected, so a loop over them vectorises.
_EXPM1_TAYLOR = {32: tuple(1 / math.factorial(n) for n in range(2, 11)),
                 64: tuple(1 / math.factorial(n) for n in range(2, 18))}
_SINH_TAYLOR = {32: tuple(1 / math.factorial(n) for n in range(3, 14, 2)),
                64: tuple(1 / math.factorial(n) for n in range(3, 22, 2))}


@overload(expm1, inline="always", jit_options=MATH_OPTIONS)
def _expm1_impl(x):
    if not isinstance(x, types.Float):
        return None
    F = _float_type(x)
    taylor = tuple(F(c) for c in _EXPM1_TAYLOR[x.bitwidth])
    half, one = F(0.5), F(1.0)

    def impl(x):
        near_zero = x + x * x * _polynomial(x, taylor) if x != F(0.0) else x  # keeps -0.0
        return near_zero if abs(x) < half else exp(x) - one

    return impl


@overload(sinh, inline="always", jit_options=MATH_OPTIONS)
def _sinh_impl(x):
    if not isinstance(x, types.Float):
        return None
    F = _float_type(x)
    taylor = tuple(F(c) for c in _SINH_TAYLOR[x.bitwidth])
    half, one = F(0.5), F(1.0)

    def impl(x):
        s = x * x
        near_zero = x + x * s * _polynomial(s, taylor)
        a = abs(x)
        u = exp(a)
        h = exp(a * half)  # beyond exp's overflow (below sinh's): exp(a / 2) squared
        far = half * u - half / u if u < F(math.inf) else (half * h) * h
        return near_zero if a < one else math.copysign(far, x)

    return impl


@overload(tanh, jit_options=MATH_OPTIONS)
def _tanh_impl(x):
    # Cephes tanh/tanhf: a rational (f64) or polynomial (f32) in x*x below |x| = 0.625,
    # 1 - 2 / (exp(2|x|) + 1) above (exp overflowing to inf gives exactly +-1).
    F = x
    if x == types.float32:
        @register_jitable
        def small(x, xx):
            return ((((F(-5.70498872745e-3) * xx + F(2.06390887954e-2)) * xx - F(5.37397155531e-2)) * xx
                     + F(1.33314422036e-1)) * xx - F(3.33332819422e-1)) * xx * x + x
    elif x == types.float64:
        @register_jitable
        def small(x, xx):
            p = (-9.64399179425052238628e-1 * xx - 9.92877231001918586564e1) * xx - 1.61468768441708447952e3
            q = ((xx + 1.12811678491632931402e2) * xx + 2.23548839060100448583e3) * xx + 4.84406305325125486048e3
            return x + x * xx * (p / q)
    else:
        return None

    def impl(x):
        z = abs(x)
        large = F(1.0) - F(2.0) / (exp(z + z) + F(1.0))
        if x < F(0.0):
            large = -large
        return large if z >= F(0.625) else small(x, x * x)

    return impl


@overload(sigmoid, inline="always", jit_options=MATH_OPTIONS)
def _sigmoid_impl(x):
    if not isinstance(x, types.Float):
        return None
    F = x

    def impl(x):
        e = exp(-abs(x))  # in (0, 1]: never overflows
        s = F(1.0) / (F(1.0) + e)
        return s if x >= F(0.0) else e * s

    return impl


def log1p_unit(x):
    """log(1 + x) for x in [0, 1] (exp(-|a - b|) in logaddexp)."""
    raise _jitted_only("log1p_unit")


@overload(log1p_unit, inline="always", jit_options=MATH_OPTIONS)
def _log1p_unit_impl(x):
    # 1 + x lies in [1, 2]: no exponent to extract and no rounding of 1 + x to undo, unlike log1p.
    # Above sqrt(2) - 1, log(1 + x) = ln2 + log(1 + f) with f = (x - 1) / 2.
    if not isinstance(x, types.Float):
        return None
    F = _float_type(x)
    log_of_one_plus = _log_of_one_plus(x)
    split = F(math.sqrt(2.0) - 1.0)

    def impl(x):
        above = x > split
        return log_of_one_plus((x - F(1.0)) * F(0.5) if above else x, F(1.0) if above else F(0.0))

    return impl


@overload(log1p, jit_options=MATH_OPTIONS)
def _log1p_impl(x):
    if not isinstance(x, types.Float):
        return None
    F = x

    def impl(x):
        # Goldberg's correction: u = 1 + x rounded, and log(u) * x / (u - 1) recovers the bits of x
        # the rounding lost (within a few ulp of log's own error), where u - 1 is not 0.
        u = x + F(1.0)
        d = u - F(1.0)
        corrected = log(u) * (x / d)
        return x if d == F(0.0) else (u if u == np.inf else corrected)

    return impl


@overload(relu, jit_options=MATH_OPTIONS)
def _relu_impl(x):
    if not isinstance(x, types.Float):
        return None
    F = x

    def impl(x):
        return F(0.0) if x < F(0.0) else x

    return impl


def erf(x):
    """erf(x)."""
    raise _jitted_only("erf")


def erfc(x):
    """erfc(x) = 1 - erf(x), without the cancellation for large x."""
    raise _jitted_only("erfc")


def _horner(builder, s, coefficients):
    """c0 + s (c1 + s (c2 + ...)), as LLVM instructions (Numba adds the function's fast-math flags
    to them, as to its own)."""
    value = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        value = builder.fadd(c, builder.fmul(s, value))
    return value


def _estrin(builder, s, s_squared, coefficients):
    """The same polynomial by Estrin's scheme: pairs c_i + s c_{i+1}, then pairs of those with s^2,
    s^4, s^8, as LLVM instructions."""
    count = len(coefficients)
    if count > 16:
        raise ValueError(f"Estrin's scheme is written for up to 16 coefficients, not {count}")
    if count == 1:
        return coefficients[0]
    if count == 2:
        return builder.fadd(coefficients[0], builder.fmul(s, coefficients[1]))
    power, half = s_squared, 2  # the power of s that multiplies the upper half, the lower half's length
    while half * 2 < count:
        power, half = builder.fmul(power, power), half * 2
    lower = _estrin(builder, s, s_squared, coefficients[:half])
    return builder.fadd(lower, builder.fmul(power, _estrin(builder, s, s_squared, coefficients[half:])))


def _polynomial_typer(evaluate):
    """An intrinsic's typer for (s, [s_squared,] coefficients): floats of one type and a tuple of
    constants of it; ``evaluate(builder, *values, coefficient_values)`` emits the value."""

    def typer(typingctx, *args):
        *floats, coefficients = args
        if not (isinstance(coefficients, types.UniTuple) and isinstance(coefficients.dtype, types.Float)
                and all(f == coefficients.dtype for f in floats)):
            return None

        def codegen(context, builder, signature, values):
            *scalars, packed = values
            constants = [builder.extract_value(packed, k) for k in range(coefficients.count)]
            return evaluate(builder, *scalars, constants)

        return coefficients.dtype(*args), codegen

    return typer


@intrinsic
def _polynomial(typingctx, s, coefficients):
    """c0 + s (c1 + s (c2 + ...)) for a tuple of constants of s's type: Horner's scheme, emitted
    directly (a recursive overload typed one function per tuple length, and compiled slowly)."""
    return _polynomial_typer(_horner)(typingctx, s, coefficients)


# erf and erfc, fitted for this module (interpolation at Chebyshev nodes, 50-digit references):
# below |x| = 0.75, erf(x) = x P(x^2); above, erfc(z) = t exp(-z^2 + G(t)) with t = 2 / (2 + z)
# (the map of Numerical Recipes' erfc: G is smooth down to t = 0), z*z split into an exact
# square of z's high bits and a small remainder so that exp's argument loses nothing. G is fitted
# up to erfc's underflow (z = 10.06 in float32, 27.3 in float64; larger z is clamped there).
_ERF_SPLIT = 0.75
_ERF_SMALL = {
    32: (1.1283791655787516, -0.37612619469437675, 0.11283386538414544, -0.026835114568609705,
         0.005115332112532226, -0.0006756479568680047),
    64: (1.1283791670955126, -0.37612638903183754, 0.11283791670955087, -0.026866170645118446,
         0.005223977625222192, -0.0008548327001135946, 0.00012055331545294116, -1.4925589383821143e-05,
         1.646038320985815e-06, -1.63332293434337e-07, 1.4413879289095029e-08, -9.502840894774706e-10),
}
# (z clamp, centre and half-width of G's t interval, G's coefficients in (t - centre) / half-width)
_ERFC_TAIL = {
    32: (10.1, 0.4462809917355372, 0.2809917355371901,
         (-0.7434583386329103, 0.3714153499495931, 0.019476757771952034, -0.007397889465045574,
          -0.0014171309532512305, 0.0003955047013261637, 0.00010646787530543625, -2.7281343071924397e-05,
          -6.981208946992656e-06)),
    64: (27.3, 0.39776605646912816, 0.32950667080359913,
         (-0.8069681089434873, 0.4269160287634046, 0.031678360347019, -0.010180052262953678,
          -0.0032326038936814267, 0.0006000961477693455, 0.00036531115518404264, -6.00183391176875e-05,
          -4.537859453868836e-05, 9.14258828603015e-06, 5.722355477335516e-06, -1.6988938030623704e-06,
          -6.530120822454533e-07, 3.179215948022618e-07, 5.1694201152759216e-08, -5.330854970723031e-08,
          1.2479322296678794e-09, 7.219103909963811e-09, -1.282454559141496e-09, -6.685551500580379e-10,
          1.7058692305178718e-10, 2.8311723780660996e-11)),
}


# float32 erf needs erfc only to absolute precision (1 - erfc): there erfc(z) = exp(-z^2 + H(z)),
# H(z) = ln(erfc(z) e^{z^2}) fitted in (z - centre) / half-width up to z = 3.92 (erf rounds to 1
# beyond), with neither t's division nor z*z's split, and exp's reduction without its clamps (the
# argument stays in [-17, -0.7]).
_ERF_TAIL_32 = (3.92, 2.335, 1.585,
                (-1.497045021759743, -0.5898153006048265, 0.15539279846371343, -0.04941107101958354,
                 0.01606686361723491, -0.005051956378666081, 0.0014894250288001011, -0.0003861874023394089,
                 6.42218278927762e-05))


def _erf_parts(x):
    """(erf(x) for |x| < 0.75, erfc(|x|) for |x| >= 0.75) as a jitted function of x, for x's type."""
    if not isinstance(x, types.Float):
        return None
    F = np.float32 if x == types.float32 else np.float64
    small = tuple(F(c) for c in _ERF_SMALL[x.bitwidth])
    clamp, centre, half_width, tail = _ERFC_TAIL[x.bitwidth]
    clamp, centre, inverse_width, tail = F(clamp), F(centre), F(1 / half_width), tuple(F(c) for c in tail)
    high_mask = -(1 << 12) if x == types.float32 else -(1 << 27)  # keeps half the significand: exact squares
    exp_sum = _exp_f32 if x == types.float32 else _exp_f64

    @register_jitable(inline="always", **MATH_OPTIONS)
    def parts(x):
        z = abs(x)
        if not z < clamp:  # inf (and NaN, whose result comes from the first part)
            z = clamp
        t = F(2.0) / (F(2.0) + z)
        g = _polynomial((t - centre) * inverse_width, tail)
        z_high = _bits_float(_float_bits(z) & high_mask, z)
        return x * _polynomial(x * x, small), t * exp_sum(-(z_high * z_high), g - (z - z_high) * (z + z_high))

    return parts


@overload(erf, inline="always", jit_options=MATH_OPTIONS)
def _erf_impl(x):
    if x == types.float32:
        F = np.float32
        small = tuple(F(c) for c in _ERF_SMALL[32])
        clamp, centre, half_width, tail = _ERF_TAIL_32
        clamp, centre, inverse_width, tail = F(clamp), F(centre), F(1 / half_width), tuple(F(c) for c in tail)

        def impl32(x):
            z = abs(x)
            if not z < clamp:
                z = clamp
            v = _polynomial((z - centre) * inverse_width, tail) - z * z  # in [-17, -0.7]: no clamps
            n = np.floor(v * F(1.44269504088896341) + F(0.5))
            erfc_z = _exp_reduced_f32(z, v - n * F(0.693359375) - n * F(-2.12194440e-4), n)
            near_zero = x * _polynomial(x * x, small)
            return near_zero if not abs(x) >= F(_ERF_SPLIT) else math.copysign(F(1.0) - erfc_z, x)

        return impl32
    parts = _erf_parts(x)
    if parts is None:
        return None
    F = np.float64

    def impl(x):
        near_zero, tail = parts(x)
        return near_zero if not abs(x) >= F(_ERF_SPLIT) else math.copysign(F(1.0) - tail, x)

    return impl


@overload(erfc, inline="always", jit_options=MATH_OPTIONS)
def _erfc_impl(x):
    parts = _erf_parts(x)
    if parts is None:
        return None
    F = np.float32 if x == types.float32 else np.float64

    def impl(x):
        near_zero, tail = parts(x)
        if not abs(x) >= F(_ERF_SPLIT):
            return F(1.0) - near_zero
        return tail if x > F(0.0) else F(2.0) - tail

    return impl


@intrinsic
def _polynomial_estrin(typingctx, s, s_squared, coefficients):
    """:func:`_polynomial`'s value by Estrin's scheme, up to 16 coefficients: its dependency chain
    is about log2 of the degree instead of the degree, which is what limits a loop of long
    polynomials (each FMA waits for the one before)."""
    return _polynomial_typer(_estrin)(typingctx, s, s_squared, coefficients)


def gelu(x):
    """GELU, x Phi(x) with Phi the standard normal CDF: within 2e-7 of the exact value relative to
    max(1, |x|) (PyTorch's float32 kernel: 1.1e-6)."""
    raise _jitted_only("gelu")


def gelu_derivative(x):
    """d gelu(x) / dx = Phi(x) + x phi(x), within 3e-7 of the exact value."""
    raise _jitted_only("gelu_derivative")


# float32 GELU from one fit over the whole range, no branch: with a = |x| (clamped to 3.92 sqrt 2,
# where Phi rounds to 1) and s = a / c - 1 in [-1, 1],
#   Phi(-a) = 2^(P(s) - a^2 / (2 ln 2))  and  phi(a) = Phi(-a) K(s),
# P and K fitted by weighted least squares (weights Phi(-a) and Phi(-a) max(1, a): the absolute
# error of Phi and of x phi) against 40-digit values; the power of two as 2^n 2^f with
# 2^f = 1 + f Q(f) on [-1/2, 1/2] (relative error 2e-9). P's constant term is moved one ulp so that P(-1)
# evaluates to exactly -1: Phi(0) is then exactly 1/2.
# Beyond the clamp a^2 keeps falling, so Phi(-a) and phi(a) decay to exact zeros.
_GELU_32_CLAMP = 3.92 * math.sqrt(2.0)
_SQRT_HALF = math.sqrt(0.5)
_GELU_32_LOG2_TAIL = (-2.94488787651062, -1.1998836994171143, 0.4341315031051636, -0.18364617228507996,
                      0.0795893743634224, -0.04196792095899582, -0.013395717367529869, -0.02872447483241558,
                      -0.009659628383815289)
_GELU_32_DENSITY_RATIO = (3.0719127655029297, 2.554934501647949, 0.13895247876644135, -0.07917262613773346,
                          0.03977833688259125, -0.018355533480644226, 0.004790031351149082,
                          0.00024904494057409465, 0.003955014515668154, 0.0038484674878418446)
_EXP2_HALF_32 = (1.0, 0.6931471824645996, 0.24022647738456726, 0.055503323674201965, 0.009618437848985195,
                 0.0013398858718574047, 0.00015353267372120172)


def _gelu_parts_32():
    """A jitted v -> (Phi(v), Phi(-|v|), s, s^2) for float32 v (s and s^2 for the density ratio)."""
    F = np.float32
    clamp, scale = F(_GELU_32_CLAMP), F(2.0 / _GELU_32_CLAMP)
    log2_tail = tuple(F(c) for c in _GELU_32_LOG2_TAIL)
    exp2_half = tuple(F(c) for c in _EXP2_HALF_32)
    half_log2e = F(0.5 / math.log(2.0))

    @register_jitable(inline="always", **MATH_OPTIONS)
    def parts(v):
        a = abs(v)
        if not a < clamp:  # inf and NaN too: NaN comes back through v * v below
            a = clamp
        s = a * scale - F(1.0)
        s_squared = s * s
        power = _polynomial_estrin(s, s_squared, log2_tail) - (v * v) * half_log2e
        if power < F(-153.0):  # not max(): NaN must pass. 2^-153 rounds to 0; -inf would make f NaN
            power = F(-153.0)
        n = np.rint(power)
        f = power - n
        lower = _scale(_polynomial_estrin(f, f * f, exp2_half), n)
        return (lower if v < F(0.0) else F(1.0) - lower), lower, s, s_squared

    return parts


@overload(gelu, inline="always", jit_options=MATH_OPTIONS)
def _gelu_impl(x):
    if x == types.float32:
        parts = _gelu_parts_32()
        return lambda x: x * parts(x)[0]
    if x == types.float64:
        return lambda x: x * 0.5 * (1.0 + erf(x * _SQRT_HALF))
    return None


@overload(gelu_derivative, inline="always", jit_options=MATH_OPTIONS)
def _gelu_derivative_impl(x):
    if x == types.float32:
        parts = _gelu_parts_32()
        density_ratio = tuple(np.float32(c) for c in _GELU_32_DENSITY_RATIO)

        def impl32(x):
            cdf, lower, s, s_squared = parts(x)
            return cdf + x * lower * _polynomial_estrin(s, s_squared, density_ratio)

        return impl32
    if x == types.float64:
        inv_sqrt_2pi = 1.0 / math.sqrt(2.0 * math.pi)
        return lambda x: 0.5 * (1.0 + erf(x * _SQRT_HALF)) + x * (exp(-0.5 * x * x) * inv_sqrt_2pi)
    return None


def atan(x):
    """atan(x), x's sign (-0.0 stays -0.0); +-pi/2 at +-inf."""
    raise _jitted_only("atan")


def atan2(y, x):
    """The angle of the point (x, y), in [-pi, pi], with numpy's values at signed zeros and infinities."""
    raise _jitted_only("atan2")


def asin(x):
    """asin(x); NaN outside [-1, 1]."""
    raise _jitted_only("asin")


def acos(x):
    """acos(x); NaN outside [-1, 1]."""
    raise _jitted_only("acos")


# atan(x) = x + x^3 P(x^2) on [0, tan(pi/8)] (fitted for this module as erf's), Cephes' reduction of
# larger arguments to that interval: pi/4 + atan((x - 1) / (x + 1)) up to tan(3 pi/8), pi/2 +
# atan(-1 / x) above, the multiples of pi/4 in two parts.
_ATAN_SMALL = {
    32: (-0.3333333176116852, 0.19999540483648964, -0.1426395559798464, 0.10743731490791084,
         -0.06451928208121749),
    64: (-0.3333333333333333, 0.1999999999999552, -0.14285714284666542, 0.11111111015256361,
         -0.09090904578123903, 0.07692183190826087, -0.06664511447381948, 0.0585814891280221,
         -0.0508544973794026, 0.03923165829558719, -0.01917688711906226),
}
# (pi/4, pi/2, pi) as (high, low) pairs whose sum carries twice the type's precision
_PI_PARTS = {
    32: ((0.7853981852531433, -2.1855694143368964e-08), (1.5707963705062866, -4.371138828673793e-08),
         (3.1415927410125732, -8.742277657347586e-08)),
    64: ((0.7853981633974483, 3.061616997868383e-17), (1.5707963267948966, 6.123233995736766e-17),
         (3.141592653589793, 1.2246467991473532e-16)),
}


def _atan_of_magnitude(x):
    """atan(a) for a >= 0 (or NaN) as a jitted function of a, for x's type, returning a multiple of
    pi/4 and the rest (their sum rounded is atan(a); atan2 subtracts the two from pi apart)."""
    F = _float_type(x)
    small = tuple(F(c) for c in _ATAN_SMALL[x.bitwidth])
    (quarter_hi, quarter_lo), (half_hi, half_lo), _ = ((F(h), F(lo)) for h, lo in _PI_PARTS[x.bitwidth])

    @register_jitable(inline="always", **MATH_OPTIONS)
    def atan_of_magnitude(a):
        big = a > F(2.414213562373095)
        middle = a > F(0.41421356237309503)
        r = -F(1.0) / a if big else ((a - F(1.0)) / (a + F(1.0)) if middle else a)
        hi = half_hi if big else (quarter_hi if middle else F(0.0))
        lo = half_lo if big else (quarter_lo if middle else F(0.0))
        rr = r * r
        return hi, lo + (r + r * rr * _polynomial(rr, small))

    return atan_of_magnitude


@overload(atan, inline="always", jit_options=MATH_OPTIONS)
def _atan_impl(x):
    if not isinstance(x, types.Float):
        return None
    atan_of_magnitude = _atan_of_magnitude(x)
    def impl(x):
        multiple, rest = atan_of_magnitude(abs(x))
        return math.copysign(multiple + rest, x)

    return impl


@overload(atan2, inline="always", jit_options=MATH_OPTIONS)
def _atan2_impl(y, x):
    if not (isinstance(x, types.Float) and x == y):
        return None
    F = _float_type(x)
    atan_of_magnitude = _atan_of_magnitude(x)
    pi_hi, pi_lo = (F(v) for v in _PI_PARTS[x.bitwidth][2])

    def impl(y, x):
        a, b = abs(y), abs(x)
        q = a / b
        if a == b:  # 0 / 0 and inf / inf: the angles of the axes and diagonals
            q = F(0.0) if a == F(0.0) else F(1.0)
        multiple, rest = atan_of_magnitude(q)
        angle = multiple + rest
        if _float_bits(x) < 0:  # x < 0 or x = -0.0: the left half-plane
            angle = (pi_hi - multiple) + (pi_lo - rest)
        return math.copysign(angle, y)

    return impl


@overload(asin, inline="always", jit_options=MATH_OPTIONS)
def _asin_impl(x):
    if not isinstance(x, types.Float):
        return None
    F = _float_type(x)
    atan_of_magnitude = _atan_of_magnitude(x)

    def impl(x):
        a = abs(x)
        # asin(a) = atan(a / sqrt(1 - a^2)), 1 - a^2 as (1 - a)(1 + a) (1 - a exact near 1)
        multiple, rest = atan_of_magnitude(a / math.sqrt((F(1.0) - a) * (F(1.0) + a)))
        return math.copysign(multiple + rest, x)

    return impl


@overload(acos, inline="always", jit_options=MATH_OPTIONS)
def _acos_impl(x):
    if not isinstance(x, types.Float):
        return None
    F = _float_type(x)
    atan_of_magnitude = _atan_of_magnitude(x)

    def impl(x):
        multiple, rest = atan_of_magnitude(math.sqrt((F(1.0) - x) / (F(1.0) + x)))  # acos = 2 atan(tan(acos / 2))
        return F(2.0) * (multiple + rest)

    return impl


def tan(x):
    """tan(x) where :func:`tan_in_range` (|x| <= 4096 in float32, 2**20 in float64); NaN at +-inf.
    Beyond, the reduction by pi/2 loses bits and the result is wrong: callers compute those
    elements with ``math.tan`` (in a second loop, which keeps the first one vectorised)."""
    raise _jitted_only("tan")


def tan_in_range(x):
    """Whether :func:`tan` is accurate at x (False at +-inf and NaN too)."""
    raise _jitted_only("tan_in_range")


# tan(z) = z + z^3 P(z^2) on [-pi/4, pi/4] (fitted for this module as erf's), after x - n pi/2 with
# pi/2 in three parts (Cody and Waite), the first two short enough that n times them is exact up
# to the limit; odd n gives -1 / tan(z).
_TAN_REDUCTION_LIMIT = {32: 4096.0, 64: 2.0**20}
_TAN_SMALL = {
    32: (0.33333333979455765, 0.13333230944682223, 0.053994464722099254, 0.021621127411513202,
         0.00996214699884352, 0.0011853216520677635, 0.003843139779255223),
    64: (0.3333333333333333, 0.13333333333333, 0.05396825396865546, 0.02186948851707438, 0.008863236003485818,
         0.0035921209805615966, 0.0014559027390503058, 0.0005895756061544555, 0.000241226353512688,
         8.998520298342289e-05, 5.558784710570148e-05, -1.1013613221811344e-05, 3.651618193613342e-05,
         -1.83153428020867e-05, 8.48334725267473e-06),
}
_HALF_PI_PARTS = {
    32: (1.5703125, 0.0004837512969970703, 7.549790126404332e-08),
    64: (1.5707963267341256, 6.077100506303966e-11, 2.0222662487959506e-21),
}


@overload(tan, inline="always", jit_options=MATH_OPTIONS)
def _tan_impl(x):
    if not isinstance(x, types.Float):
        return None
    F = _float_type(x)
    small = tuple(F(c) for c in _TAN_SMALL[x.bitwidth])
    p1, p2, p3 = (F(c) for c in _HALF_PI_PARTS[x.bitwidth])

    def impl(x):
        n = np.rint(x * F(0.6366197723675814))
        z = ((x - n * p1) - n * p2) - n * p3 if n != F(0.0) else x  # x itself keeps -0.0's sign
        zz = z * z
        t = z + z * zz * _polynomial(zz, small)
        half = n * F(0.5)
        return -F(1.0) / t if half != np.floor(half) else t

    return impl


@overload(tan_in_range, inline="always", jit_options=MATH_OPTIONS)
def _tan_in_range_impl(x):
    if not isinstance(x, types.Float):
        return None
    limit = _float_type(x)(_TAN_REDUCTION_LIMIT[x.bitwidth])
    return lambda x: abs(x) <= limit

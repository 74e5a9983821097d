"""Element-wise CUDA kernels: one device function per op, and per arity a grid-stride kernel over
flat contiguous arrays and one over 4-D strided views (broadcast operands have zero strides).

Every op function takes its operands, two parameters ``p`` and ``q`` (typed by the host as the
output's dtype) and ``T``, the output's scalar type, for typed constants. Kernels only: the host
side is :mod:`zgrad.kernels.cuda.elementwise`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from zgrad.kernels.cuda.kernels.common import device, kernel, math
from zgrad.kernels.cuda.kernels.vectors import VECTOR, fits4, load4, store4
from zgrad.kernels.cuda.kernels.elementwise_math import (
    BINARY_MATH_OPS, BOOL_OUT_MATH, INTEGER_MATH, TERNARY_MATH_OPS, UNARY_MATH_OPS,
)

__all__ = ["UNARY", "BINARY", "TERNARY"]

_TANH_BETA = 0.7978845608028654  # sqrt(2 / pi)
_TANH_KAPPA = 0.044715
_SQRT_HALF = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


# --- unary: f(x, p, q, T) ------------------------------------------------------------------------

@device
def _copy(x, p, q, T):
    return x


@device
def _bfloat16_widen(x, p, q, T):
    # x: the 16 bits of a bfloat16; T: uint32, the bits of the float32 it is exactly
    return T(x) << T(16)


@device
def _bfloat16_narrow(x, p, q, T):
    # x: the bits of a float32 (uint32); T: uint16, a bfloat16 rounded to nearest even; NaN stays NaN
    if (x & 0x7FFFFFFF) > 0x7F800000:
        return T((x >> 16) | 0x40)
    return T((x + 0x7FFF + ((x >> 16) & 1)) >> 16)


@device
def _neg(x, p, q, T):
    return -x


@device
def _exp(x, p, q, T):
    return math.exp(x)


@device
def _log(x, p, q, T):
    return math.log(x)


@device
def _tanh(x, p, q, T):
    return math.tanh(x)


@device
def _sigmoid(x, p, q, T):
    if x >= T(0):
        return T(1) / (T(1) + math.exp(-x))
    e = math.exp(x)
    return e / (T(1) + e)


@device
def _relu(x, p, q, T):
    return T(0) if x < T(0) else x


@device
def _abs(x, p, q, T):
    return abs(x)


@device
def _sign(x, p, q, T):
    if x > T(0):
        return T(1)
    if x < T(0):
        return -T(1)
    return T(0)  # also for NaN and -0.0, as PyTorch


@device
def _sqrt(x, p, q, T):
    return math.sqrt(x)


@device
def _logical_not(x, p, q, T):
    return not x


@device
def _gelu_exact(x, p, q, T):
    return x * T(0.5) * (T(1) + math.erf(x * T(_SQRT_HALF)))


@device
def _gelu_tanh(x, p, q, T):
    return T(0.5) * x * (T(1) + math.tanh(T(_TANH_BETA) * (x + T(_TANH_KAPPA) * x * x * x)))


@device
def _silu(x, p, q, T):
    return x / (T(1) + math.exp(-x))


@device
def _mish(x, p, q, T):
    return x * math.tanh(math.log1p(math.exp(x)))


@device
def _softplus(x, p, q, T):
    """p = beta, q = threshold."""
    scaled = x * p
    return x if scaled > q else math.log1p(math.exp(scaled)) / p


@device
def _leaky_relu(x, p, q, T):
    return x if x > T(0) else x * p


@device
def _clamp(x, p, q, T):
    v = x
    if v < p:
        v = p
    if v > q:
        v = q
    return v


@device
def _scale_div(x, p, q, T):
    return x / p


@device
def _trunc_div(x, p, q, T):
    r = abs(x) // abs(p)
    return r if (x < T(0)) == (p < T(0)) else -r


@device
def _fill_scale_shift(x, p, q, T):
    return x * p + q


@device
def _rsqrt_shift(x, p, q, T):
    return T(1) / math.sqrt(x + p)


# --- binary: f(a, b, p, q, T) --------------------------------------------------------------------

@device
def _add(a, b, p, q, T):
    return a + b


@device
def _sub(a, b, p, q, T):
    return a - b


@device
def _mul(a, b, p, q, T):
    return a * b


@device
def _div(a, b, p, q, T):
    return a / b


@device
def _pow(a, b, p, q, T):
    if b < 0 and T(0.5) == T(0):  # an integer result: PyTorch's integer power (1, +-1 or 0)
        if a == 1:
            return T(1)
        if a == -1:
            return T(1) if b % 2 == 0 else T(-1)
        return T(0)
    return a ** b


@device
def _remainder(a, b, p, q, T):
    return a % b


@device
def _floor_divide(a, b, p, q, T):
    return a // b


@device
def _maximum(a, b, p, q, T):
    return a if (a > b or a != a) else b


@device
def _minimum(a, b, p, q, T):
    return a if (a < b or a != a) else b


@device
def _eq(a, b, p, q, T):
    return a == b


@device
def _ne(a, b, p, q, T):
    return a != b


@device
def _lt(a, b, p, q, T):
    return a < b


@device
def _le(a, b, p, q, T):
    return a <= b


@device
def _gt(a, b, p, q, T):
    return a > b


@device
def _ge(a, b, p, q, T):
    return a >= b


@device
def _logical_and(a, b, p, q, T):
    return bool(a) and bool(b)


@device
def _logical_or(a, b, p, q, T):
    return bool(a) or bool(b)


@device
def _logical_xor(a, b, p, q, T):
    return bool(a) != bool(b)


@device
def _add_scaled(a, b, p, q, T):
    return a + p * b


@device
def _relu_backward(g, x, p, q, T):
    return T(0) if x <= T(0) else g


@device
def _tanh_backward(g, y, p, q, T):
    return g * (T(1) - y * y)


@device
def _sigmoid_backward(g, y, p, q, T):
    return g * y * (T(1) - y)


@device
def _leaky_relu_backward(g, x, p, q, T):
    return g if x > T(0) else g * p


@device
def _gelu_exact_backward(g, x, p, q, T):
    cdf = T(0.5) * (T(1) + math.erf(x * T(_SQRT_HALF)))
    pdf = T(_INV_SQRT_2PI) * math.exp(-T(0.5) * x * x)
    return g * (cdf + x * pdf)


@device
def _gelu_tanh_backward(g, x, p, q, T):
    x_sq = x * x
    t = math.tanh(T(_TANH_BETA) * (x + T(_TANH_KAPPA) * x_sq * x))
    left = T(0.5) * (T(1) + t)
    right = T(0.5) * x * (T(1) - t * t) * T(_TANH_BETA) * (T(1) + T(3) * T(_TANH_KAPPA) * x_sq)
    return g * (left + right)


@device
def _silu_backward(g, x, p, q, T):
    s = T(1) / (T(1) + math.exp(-x))
    return g * s * (T(1) + x * (T(1) - s))


@device
def _mish_backward(g, x, p, q, T):
    s = T(1) / (T(1) + math.exp(-x))
    t = math.tanh(math.log1p(math.exp(x)))
    return g * (t + x * s * (T(1) - t * t))


@device
def _softplus_backward(g, x, p, q, T):
    scaled = x * p
    if scaled > q:
        return g
    z = math.exp(scaled)
    return g * z / (z + T(1))


@device
def _clamp_backward(g, x, p, q, T):
    return g if (p <= x and x <= q) else T(0)


@device
def _squared_error(a, b, p, q, T):
    d = a - b
    return d * d


@device
def _absolute_error(a, b, p, q, T):
    return abs(a - b)


@device
def _bias_identity(x, b, p, q, T):
    return x + b


@device
def _bias_relu(x, b, p, q, T):
    v = x + b
    return T(0) if v < T(0) else v


@device
def _bias_tanh(x, b, p, q, T):
    return math.tanh(x + b)


@device
def _bias_sigmoid(x, b, p, q, T):
    return _sigmoid(x + b, p, q, T)


@device
def _masked_scale(x, keep, p, q, T):
    return x * p if keep else T(0)


@device
def _running_update(r, stat, p, q, T):
    return (T(1) - p) * r + p * q * stat


# --- ternary: f(a, b, c, p, q, T) ----------------------------------------------------------------

@device
def _where(c, a, b, p, q, T):
    return a if c else b


@device
def _addcmul(o, a, b, p, q, T):
    return o + p * a * b


@device
def _addcdiv(o, a, b, p, q, T):
    return o + p * a / b


@device
def _extremum_a(g, a, b, p, q, T):
    """The gradient of a in maximum(a, b) (p != 0) or minimum(a, b); ties split, NaN passes."""
    if a == b:
        return T(0.5) * g
    loses = a < b if p != T(0) else a > b
    return T(0) if loses else g


@device
def _extremum_b(g, a, b, p, q, T):
    if a == b:
        return T(0.5) * g
    loses = a > b if p != T(0) else a < b
    return T(0) if loses else g


@device
def _pointwise_loss_backward(a, b, g, p, q, T):
    d = a - b
    g = g / T(q)  # q: the reduced loss's divisor (1 for none)
    if p != T(0):
        return T(2) * g * d
    return g * _sign(d, p, q, T)


@device
def _muladd(a, b, c, p, q, T):
    return a * b + c


@device
def _centered_scale(x, mean, coef, p, q, T):
    return coef * (x - mean)


@device
def _exp_shifted_scale(x, shift, g, p, q, T):
    return g * math.exp(x - shift)


UNARY_OPS = {
    "copy": _copy, "bfloat16_widen": _bfloat16_widen, "bfloat16_narrow": _bfloat16_narrow,
    "neg": _neg, "exp": _exp, "log": _log, "tanh": _tanh, "sigmoid": _sigmoid, "relu": _relu,
    "abs": _abs, "sign": _sign, "sqrt": _sqrt, "logical_not": _logical_not, "gelu_exact": _gelu_exact,
    "gelu_tanh": _gelu_tanh, "leaky_relu": _leaky_relu, "clamp": _clamp, "scale_div": _scale_div,
    "silu": _silu, "mish": _mish, "softplus": _softplus,
    "trunc_div": _trunc_div, "scale_shift": _fill_scale_shift,
    "rsqrt_shift": _rsqrt_shift, **UNARY_MATH_OPS,
}
BINARY_OPS = {
    "add": _add, "sub": _sub, "mul": _mul, "div": _div, "pow": _pow, "remainder": _remainder,
    "floor_divide": _floor_divide, "maximum": _maximum, "minimum": _minimum, "eq": _eq, "ne": _ne, "lt": _lt,
    "le": _le, "gt": _gt, "ge": _ge, "logical_and": _logical_and, "logical_or": _logical_or,
    "logical_xor": _logical_xor, "add_scaled": _add_scaled, "relu_backward": _relu_backward,
    "tanh_backward": _tanh_backward, "sigmoid_backward": _sigmoid_backward,
    "leaky_relu_backward": _leaky_relu_backward, "gelu_exact_backward": _gelu_exact_backward,
    "gelu_tanh_backward": _gelu_tanh_backward, "clamp_backward": _clamp_backward,
    "silu_backward": _silu_backward, "mish_backward": _mish_backward, "softplus_backward": _softplus_backward,
    "squared_error": _squared_error, "absolute_error": _absolute_error, "bias_identity": _bias_identity,
    "bias_relu": _bias_relu, "bias_tanh": _bias_tanh, "bias_sigmoid": _bias_sigmoid, "masked_scale": _masked_scale,
    "running_update": _running_update, **BINARY_MATH_OPS,
}
TERNARY_OPS = {
    "where": _where, "addcmul": _addcmul, "addcdiv": _addcdiv, "extremum_a": _extremum_a,
    "extremum_b": _extremum_b, "pointwise_loss_backward": _pointwise_loss_backward,
    "centered_scale": _centered_scale, "muladd": _muladd, "exp_shifted_scale": _exp_shifted_scale,
    **TERNARY_MATH_OPS,
}


# --- kernel factories ----------------------------------------------------------------------------
# The n-d kernels unravel a flat index over out's shape, collapsed and padded to 4-D by the host.
# Each operand arrives as the 1-D array of its whole allocation and a ``place``: (element offset,
# the four element strides), so a launch passes arrays that already exist instead of a strided
# device-array wrapper made per operand (the host cost of an n-d launch).
#
# The flat kernels load several elements before they store any: with one load per trip a grid of
# 8 blocks of 256 threads per multiprocessor keeps too few bytes in flight to cover the memory's
# latency (a copy of 64M floats moved 61% of an H200's peak). Each thread takes groups of 4
# adjacent elements (vectors.load4: one 16-byte load for a contiguous float32 operand; an operand
# repeating a scalar reads its one element), two groups in flight for one or two operands, one for
# three, where every contiguous array starts on a 4-element boundary (zgrad's allocations do);
# else (a view starting mid-vector) four single elements a grid apart (two for three operands).
# The last elements past a multiple of 4 go one per thread. Stores after loads keep in-place ops
# (out is an operand, at the same index) right.

# Below this many elements, the n-d kernels unravel indices in 32-bit arithmetic: a GPU divides
# 64-bit integers in a long software routine, 32-bit ones in a few instructions.
_INDEX32 = 1 << 31


@device
def _unravel4(i, n1, n2, n3, small):
    """The index of flat element ``i`` of a C-ordered 4-D array of shape (any, n1, n2, n3);
    ``small``: the array has fewer than _INDEX32 elements."""
    if small:
        j, m1, m2, m3 = np.uint32(i), np.uint32(n1), np.uint32(n2), np.uint32(n3)
        k3, t = j % m3, j // m3
        k2, t = t % m2, t // m2
        return np.int64(t // m1), np.int64(t % m1), np.int64(k2), np.int64(k3)
    i3, r = i % n3, i // n3
    i2, r = r % n2, r // n2
    return r // n1, r % n1, i2, i3


@device
def _element(place, i0, i1, i2, i3):
    """Where element (i0, i1, i2, i3) of an operand placed at ``place`` lies in its allocation."""
    return place[0] + i0 * place[1] + i1 * place[2] + i2 * place[3] + i3 * place[4]


def _unary_kernels(fn):
    def flat(x, p, q, out):
        T = out.dtype.type
        n, i, step = out.size, cuda.grid(1), cuda.gridsize(1)
        if fits4(x) and fits4(out):  # groups of 4 (see the note above)
            groups = n // VECTOR
            while i < groups:
                j, k = VECTOR * i, VECTOR * (i + step)
                x0, x1, x2, x3 = load4(x, j)
                if i + step < groups:
                    y0, y1, y2, y3 = load4(x, k)
                    store4(out, k, fn(y0, p, q, T), fn(y1, p, q, T), fn(y2, p, q, T), fn(y3, p, q, T))
                store4(out, j, fn(x0, p, q, T), fn(x1, p, q, T), fn(x2, p, q, T), fn(x3, p, q, T))
                i += 2 * step
            i = VECTOR * groups + cuda.grid(1)
        while i + 3 * step < n:  # four loads in flight before the first store (see the note above)
            x0, x1, x2, x3 = x[i], x[i + step], x[i + 2 * step], x[i + 3 * step]
            out[i], out[i + step] = fn(x0, p, q, T), fn(x1, p, q, T)
            out[i + 2 * step], out[i + 3 * step] = fn(x2, p, q, T), fn(x3, p, q, T)
            i += 4 * step
        while i < n:
            out[i] = fn(x[i], p, q, T)
            i += step

    def nd(x, x_at, p, q, out, out_at, shape):
        T = out.dtype.type
        n1, n2, n3 = shape[1], shape[2], shape[3]
        size = shape[0] * n1 * n2 * n3
        small = size < _INDEX32
        for i in range(cuda.grid(1), size, cuda.gridsize(1)):
            i0, i1, i2, i3 = _unravel4(i, n1, n2, n3, small)
            out[_element(out_at, i0, i1, i2, i3)] = fn(x[_element(x_at, i0, i1, i2, i3)], p, q, T)

    return kernel(flat), kernel(nd)


def _binary_kernels(fn):
    def flat(a, b, p, q, out):
        T = out.dtype.type
        n, i, step = out.size, cuda.grid(1), cuda.gridsize(1)
        if fits4(a) and fits4(b) and fits4(out):
            groups = n // VECTOR
            while i < groups:
                j, k = VECTOR * i, VECTOR * (i + step)
                a0, a1, a2, a3 = load4(a, j)
                b0, b1, b2, b3 = load4(b, j)
                if i + step < groups:
                    c0, c1, c2, c3 = load4(a, k)
                    d0, d1, d2, d3 = load4(b, k)
                    store4(out, k, fn(c0, d0, p, q, T), fn(c1, d1, p, q, T), fn(c2, d2, p, q, T), fn(c3, d3, p, q, T))
                store4(out, j, fn(a0, b0, p, q, T), fn(a1, b1, p, q, T), fn(a2, b2, p, q, T), fn(a3, b3, p, q, T))
                i += 2 * step
            i = VECTOR * groups + cuda.grid(1)
        while i + 3 * step < n:
            a0, a1, a2, a3 = a[i], a[i + step], a[i + 2 * step], a[i + 3 * step]
            b0, b1, b2, b3 = b[i], b[i + step], b[i + 2 * step], b[i + 3 * step]
            out[i], out[i + step] = fn(a0, b0, p, q, T), fn(a1, b1, p, q, T)
            out[i + 2 * step], out[i + 3 * step] = fn(a2, b2, p, q, T), fn(a3, b3, p, q, T)
            i += 4 * step
        while i < n:
            out[i] = fn(a[i], b[i], p, q, T)
            i += step

    def nd(a, a_at, b, b_at, p, q, out, out_at, shape):
        T = out.dtype.type
        n1, n2, n3 = shape[1], shape[2], shape[3]
        size = shape[0] * n1 * n2 * n3
        small = size < _INDEX32
        for i in range(cuda.grid(1), size, cuda.gridsize(1)):
            i0, i1, i2, i3 = _unravel4(i, n1, n2, n3, small)
            out[_element(out_at, i0, i1, i2, i3)] = fn(a[_element(a_at, i0, i1, i2, i3)],
                                                       b[_element(b_at, i0, i1, i2, i3)], p, q, T)

    return kernel(flat), kernel(nd)


def _ternary_kernels(fn):
    def flat(a, b, c, p, q, out):
        T = out.dtype.type
        n, i, step = out.size, cuda.grid(1), cuda.gridsize(1)
        if fits4(a) and fits4(b) and fits4(c) and fits4(out):
            groups = n // VECTOR
            while i < groups:
                j = VECTOR * i
                a0, a1, a2, a3 = load4(a, j)
                b0, b1, b2, b3 = load4(b, j)
                c0, c1, c2, c3 = load4(c, j)
                store4(out, j, fn(a0, b0, c0, p, q, T), fn(a1, b1, c1, p, q, T), fn(a2, b2, c2, p, q, T),
                       fn(a3, b3, c3, p, q, T))
                i += step
            i = VECTOR * groups + cuda.grid(1)
        while i + step < n:
            a0, a1, b0, b1, c0, c1 = a[i], a[i + step], b[i], b[i + step], c[i], c[i + step]
            out[i], out[i + step] = fn(a0, b0, c0, p, q, T), fn(a1, b1, c1, p, q, T)
            i += 2 * step
        if i < n:
            out[i] = fn(a[i], b[i], c[i], p, q, T)

    def nd(a, a_at, b, b_at, c, c_at, p, q, out, out_at, shape):
        T = out.dtype.type
        n1, n2, n3 = shape[1], shape[2], shape[3]
        size = shape[0] * n1 * n2 * n3
        small = size < _INDEX32
        for i in range(cuda.grid(1), size, cuda.gridsize(1)):
            i0, i1, i2, i3 = _unravel4(i, n1, n2, n3, small)
            out[_element(out_at, i0, i1, i2, i3)] = fn(a[_element(a_at, i0, i1, i2, i3)],
                                                       b[_element(b_at, i0, i1, i2, i3)],
                                                       c[_element(c_at, i0, i1, i2, i3)], p, q, T)

    return kernel(flat), kernel(nd)


UNARY = {name: _unary_kernels(fn) for name, fn in UNARY_OPS.items()}
BINARY = {name: _binary_kernels(fn) for name, fn in BINARY_OPS.items()}
TERNARY = {name: _ternary_kernels(fn) for name, fn in TERNARY_OPS.items()}

_BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not", *BOOL_OUT_MATH}
_BOOL_FIRST = {"where"}
_BOOL_SECOND = {"masked_scale"}
_BIT_OPS = {"bfloat16_widen", "bfloat16_narrow"}  # on integer bit patterns only


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64 (the
    integer-only ones for int32 and int64)."""
    from numba import types

    cases = []
    for dt in (types.float32, types.float64, types.int32, types.int64):
        for kinds, table in ((1, UNARY), (2, BINARY), (3, TERNARY)):
            for name, (flat, nd) in table.items():
                if (name in INTEGER_MATH or name in _BIT_OPS) != isinstance(dt, types.Integer):
                    continue
                operands = [dt[::1]] * kinds
                if name in _BOOL_FIRST:
                    operands[0] = types.boolean[::1]
                if name in _BOOL_SECOND:
                    operands[1] = types.boolean[::1]
                out = types.boolean[::1] if name in _BOOL_OUT else dt[::1]
                cases.append((f"{name}_flat", flat.py_func, (*operands, dt, dt, out)))
                place, shape = types.UniTuple(types.int64, 5), types.UniTuple(types.int64, 4)
                placed = [t for operand in operands for t in (operand, place)]
                cases.append((f"{name}_nd", nd.py_func, (*placed, dt, dt, out, place, shape)))
    return cases

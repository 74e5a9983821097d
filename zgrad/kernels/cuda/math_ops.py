"""The CUDA backend of the element-wise math functions (``unary_math``, ``binary_math`` and
``nan_to_num``): one launch of a device function of
:mod:`zgrad.kernels.cuda.kernels.elementwise_math`, with the parameters it takes.

Part of :mod:`zgrad.kernels.cuda.backend` (which re-exports these); each writes into ``out`` and
returns it.
"""

from __future__ import annotations

from zgrad.kernels.cuda.elementwise import binary_op, ternary_op, unary_op

__all__ = ["unary_math", "binary_math", "nan_to_num", "lerp", "orthogonal_polynomial"]

_SHIFTS = {"bitwise_left_shift", "bitwise_right_shift"}


def unary_math(name: str, x, out):
    """out = ``name``(x), ``name`` one of :data:`~zgrad.kernels.vocabulary.UNARY_MATH`."""
    if name == "erfinv":
        return unary_op(name, x, out, 8 if out.dtype.itemsize == 8 else 0)  # Halley steps at most
    if out.dtype.kind == "b":
        return unary_op(name, x, out, 1, 0)  # the predicates' constants, in x's dtype
    return unary_op(name, x, out)


def binary_math(name: str, a, b, out):
    """out = ``name``(a, b), broadcast, ``name`` one of :data:`~zgrad.kernels.vocabulary.BINARY_MATH`."""
    if name in _SHIFTS:
        return binary_op(name, a, b, out, 8 * out.dtype.itemsize)
    if name == "fmod" and out.dtype.kind in "iu":
        return binary_op("fmod_int", a, b, out)
    return binary_op(name, a, b, out)


def nan_to_num(x, nan: float, posinf: float, neginf: float, out):
    """out = x with NaN, +inf and -inf replaced by the given numbers."""
    return binary_op("nan_to_num", x, neginf, out, nan, posinf)


def lerp(start, end, weight, out):
    """out = start + weight * (end - start) (from the nearer end, as PyTorch), broadcast; ``weight``
    a number or an array."""
    return ternary_op("lerp", start, end, weight, out)


def orthogonal_polynomial(x, n, kind: int, shifted: bool, out):
    """out = the orthogonal polynomial ``kind`` of degree n at x (at 2x - 1 where ``shifted``),
    broadcast."""
    return binary_op("orthogonal_polynomial", x, n, out, kind, 1 if shifted else 0)

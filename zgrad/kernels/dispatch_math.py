"""Dispatch of the element-wise math functions (trigonometric, error functions, logarithms and
exponentials, rounding, predicates, bitwise): PyTorch's dtype rule of each function, decided here
once, then the backend's ``unary_math`` / ``binary_math`` / ``nan_to_num`` into a fresh ``out``.

The companion of :mod:`zgrad.kernels.dispatch` (whose rules hold here: the backend comes from the
arrays' device, ``out`` is allocated here with PyTorch's broadcasting and promotion). The rules:

- floating functions (``sin`` ... ``reciprocal``, ``atan2``, ``copysign``): bool and integer
  inputs compute in the default dtype, as PyTorch;
- rounding (``floor``, ``ceil``, ``round``, ``trunc``): an integer tensor is its own result
  (copied); bool is refused; ``frac``, ``hypot``, ``logaddexp``, ``logaddexp2``, ``nextafter``,
  ``igamma``, ``igammac`` take floating tensors only;
- ``fmax``, ``fmin``: the promoted dtype, whatever it is;
- predicates (``isnan`` ... ``signbit``): bool results, answered without a kernel for integers;
- bitwise functions: bool and integer tensors only (shifts, ``gcd`` and ``lcm``: integers only).

A refused dtype raises :class:`~zgrad.errors.DTypeError` worded as PyTorch's
(``"hypot_cpu" not implemented for 'Long'``).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from zgrad.errors import DTypeError
from zgrad.kernels.dispatch import (
    backend_of, binary, broadcast_shape, broadcast_to, cast, check_integer_divisor, device_type_of, float_dtype, full,
    scalar_type_name,
)
from zgrad.kernels.dispatch_index import where
from zgrad.kernels.dispatch_pointwise import compare, logical_not
from zgrad.kernels.promotion import HALF_DTYPES, is_floating, opmath_dtype, result_type
from zgrad.kernels.vocabulary import ORTHOGONAL_POLYNOMIALS

__all__ = [
    "unary_math", "binary_math", "sign", "nan_to_num", "round_decimals", "lerp", "check_floating",
    "orthogonal_polynomial",
]

_BOOL = np.dtype(np.bool_)
_ROUNDING = frozenset({"floor", "ceil", "round", "trunc"})
_FLOAT_ONLY = frozenset({"frac", "hypot", "logaddexp", "logaddexp2", "nextafter", "igamma", "igammac"})
_SAME_DTYPE = frozenset({"fmod"})
_ANY_DTYPE = frozenset({"fmax", "fmin"})
_INTEGRAL = frozenset({"bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"})
_INTEGER_ONLY = frozenset({"bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm"})
# The predicates' answers for bool and integer tensors, which hold no NaN, inf or -0.0.
_INTEGER_PREDICATES = {"isnan": False, "isinf": False, "isposinf": False, "isneginf": False, "isfinite": True}
_LOGICAL = {"bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor"}


def _refuse(name: str, dtype: np.dtype) -> DTypeError:
    return DTypeError(f'"{name}_cpu" not implemented for \'{scalar_type_name(dtype)}\'')


def check_floating(name: str, dtype: np.dtype) -> None:
    """Refuse a dtype that is not floating for function ``name``, as PyTorch does.

    Raises:
        DTypeError: ``dtype`` is bool or integer.
    """
    if not is_floating(dtype):
        raise _refuse(name, dtype)


def _result_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The dtype of function ``name`` on ``dtype`` (the promoted dtype of a binary function).

    Raises:
        DTypeError: PyTorch refuses ``dtype`` for ``name``.
    """
    if name in _FLOAT_ONLY:
        check_floating(name, dtype)
        return dtype
    if name in _ROUNDING or name in _SAME_DTYPE:
        if dtype == _BOOL:
            raise _refuse(name, dtype)
        return dtype
    if name in _ANY_DTYPE:
        return dtype
    if name in _INTEGRAL or name in _INTEGER_ONLY:
        if is_floating(dtype) or (name in _INTEGER_ONLY and dtype == _BOOL):
            raise _refuse(name, dtype)
        return dtype
    return float_dtype(dtype)


def unary_math(name: str, x: Any):
    """``name``(x) for ``name`` in :data:`~zgrad.kernels.vocabulary.UNARY_MATH`, in the dtype of
    its rule (see the module docstring).

    Raises:
        DTypeError: PyTorch refuses x's dtype for ``name``.
    """
    be = backend_of(x)
    if name in _INTEGER_PREDICATES or name == "signbit":
        if is_floating(x.dtype):
            return be.unary_math(name, x, be.empty(x.shape, _BOOL))
        if name == "signbit" and x.dtype.kind == "i":
            return compare("lt", x, 0)
        return full(x.shape, _INTEGER_PREDICATES.get(name, False), _BOOL, device_type_of(x))
    dtype = _result_dtype(name, x.dtype)
    if x.dtype.kind in "biu" and name in _ROUNDING:
        return cast(x, dtype)  # an integer is already rounded
    if x.dtype == _BOOL and name == "bitwise_not":
        return logical_not(x)
    if x.dtype != dtype:
        x = cast(x, dtype)
    return be.unary_math(name, x, be.empty(x.shape, dtype))


def binary_math(name: str, a: Any, b: Any):
    """``name``(a, b), broadcast, for ``name`` in :data:`~zgrad.kernels.vocabulary.BINARY_MATH`;
    either operand may be a Python number. The operands are promoted (PyTorch's rule), and the
    result takes the dtype of the function's rule.

    Raises:
        DTypeError: PyTorch refuses the promoted dtype for ``name``. IntegerDivisionByZeroError:
            an integer fmod by zero.
    """
    be = backend_of(a, b)
    promoted = result_type(a, b)
    dtype = _result_dtype(name, promoted)
    if dtype == _BOOL and name in _LOGICAL:
        return compare(_LOGICAL[name], a, b)
    shape = broadcast_shape(getattr(a, "shape", ()), getattr(b, "shape", ()))
    check_integer_divisor(name, b, dtype, shape)
    a, b = (cast(v, dtype) if getattr(v, "dtype", dtype) != dtype else v for v in (a, b))
    if name == "nextafter" and dtype in HALF_DTYPES:
        return _half_nextafter(a, b, dtype, shape)
    out = be.empty(shape, dtype)
    return be.binary_math(name, a, b, out)


_HALF_BITS = np.dtype(np.int16)


def _half_nextafter(a: Any, b: Any, dtype: np.dtype, shape: tuple[int, ...]):
    """nextafter(a, b) of float16 or bfloat16 values on their own bits (sign and magnitude: one up
    is one step away from zero). Kernels compute half types in float32
    (:mod:`zgrad.kernels.half_precision`), whose step of a float32 ulp rounds back to ``a``."""
    device = device_type_of(next((v for v in (a, b) if hasattr(v, "shape")), a))
    a, b = (cast(broadcast_to(v, shape), dtype) if hasattr(v, "shape") else full(shape, v, dtype, device)
            for v in (a, b))
    away_from_zero = compare("eq", compare("lt", a, b), compare("gt", a, 0))
    stepped = binary("add", a.view(_HALF_BITS), cast(where(away_from_zero, 1, -1), _HALF_BITS))
    smallest = cast(where(unary_math("signbit", b), -32767, 1), _HALF_BITS)  # 0x8001, 0x0001
    result = where(compare("eq", a, 0), smallest, stepped).view(dtype)
    result = where(compare("eq", a, b), b, result)
    return where(compare("logical_or", compare("ne", a, a), compare("ne", b, b)), float("nan"), result)


def sign(x: Any):
    """-1, 0 or 1 by x's sign (0 for NaN), in x's dtype; a bool array is its own sign (copied)."""
    if x.dtype == _BOOL:
        return cast(x, _BOOL)
    be = backend_of(x)
    return be.sign(x, be.empty(x.shape, x.dtype))


def nan_to_num(x: Any, nan: float, posinf: float | None, neginf: float | None):
    """x with NaN, +inf and -inf replaced (by default by 0 and the dtype's largest and lowest
    finite values); a bool or integer array comes back as a copy."""
    if not is_floating(x.dtype):
        return cast(x, x.dtype)
    info = ml_dtypes.finfo(x.dtype)  # numpy's finfo does not know bfloat16
    be = backend_of(x)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    return be.nan_to_num(x, nan, posinf, neginf, be.empty(x.shape, x.dtype))


def lerp(start: Any, end: Any, weight: Any):
    """start + weight * (end - start), broadcast, in start's (floating) dtype; ``weight`` a number
    or an array (the caller checks dtypes, as PyTorch's lerp does)."""
    be = backend_of(start, end, weight)
    shape = broadcast_shape(broadcast_shape(start.shape, end.shape), getattr(weight, "shape", ()))
    return be.lerp(start, end, weight, be.empty(shape, start.dtype))


def round_decimals(x: Any, decimals: int):
    """x rounded half to even at ``decimals`` decimal places (negative: to tens, hundreds, ...),
    computed as PyTorch does: round(x * 10**decimals) / 10**decimals, or with ``x / 10**-decimals``
    and a product for negative ``decimals``, in x's dtype.

    Raises:
        DTypeError: x is not floating (PyTorch has no decimals for integers).
    """
    check_floating("round", x.dtype)
    if decimals == 0:
        return unary_math("round", x)
    if opmath_dtype(x.dtype) != x.dtype:  # PyTorch scales half tensors in float32
        return cast(round_decimals(cast(x, opmath_dtype(x.dtype)), decimals), x.dtype)
    be = backend_of(x)
    scale = x.dtype.type(10.0 ** abs(decimals))
    scaled = be.mul(x, scale, be.empty(x.shape, x.dtype)) if decimals > 0 else be.div(x, scale, be.empty(x.shape, x.dtype))
    rounded = be.unary_math("round", scaled, scaled)
    return be.div(rounded, scale, rounded) if decimals > 0 else be.mul(rounded, scale, rounded)


def orthogonal_polynomial(name: str, x: Any, n: Any, shifted: bool = False):
    """The orthogonal polynomial ``name`` (one of
    :data:`~zgrad.kernels.vocabulary.ORTHOGONAL_POLYNOMIALS`) of degree n (truncated to an integer)
    at x, or at 2x - 1 where ``shifted``; broadcast, either may be a Python number, in the floating
    dtype the two promote to (bool and integers: the default one).

    Raises:
        DTypeError: float16 or bfloat16 (PyTorch has no kernel for them).
    """
    be = backend_of(x, n)
    dtype = float_dtype(result_type(x, n))
    if opmath_dtype(dtype) != dtype:
        raise _refuse(f"{'shifted_' if shifted else ''}{name}", dtype)
    shape = broadcast_shape(getattr(x, "shape", ()), getattr(n, "shape", ()))
    x, n = (cast(v, dtype) if getattr(v, "dtype", dtype) != dtype else v for v in (x, n))
    return be.orthogonal_polynomial(x, n, ORTHOGONAL_POLYNOMIALS.index(name), shifted, be.empty(shape, dtype))

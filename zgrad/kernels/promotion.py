"""PyTorch's type promotion on arrays and Python numbers (``torch.result_type``,
``promote_types``, ``can_cast``), and the default floating dtype.

Dtypes fall in three categories, bool < integer < floating. Two dtypes promote
(:func:`promote_types`) to the wider of their category when they share one (int8 and uint8 to
int16; float16 and bfloat16 to float32), else to the one of the higher category: an integer with
float16 is float16, not numpy's float64.

An op's operands weigh in three kinds, strongest first: arrays with dimensions, 0-dim arrays
(a tensor's ``item``-sized value), and Python numbers (a Python float counts as the default
dtype, an int as int64). Each kind's dtypes promote among themselves; a weaker kind changes the
result only when its category is higher than the stronger kinds' (:func:`_combine`). So a
float32 array plus a float64 0-dim array stays float32, an int64 array plus 2.5 is float32 (the
default dtype), a uint8 array plus 1000 stays uint8, and a bool array plus 1 is int64.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ml_dtypes
import numpy as np

__all__ = [
    "BFLOAT16", "FLOAT16", "FULL_FLOAT_DTYPES", "HALF_DTYPES", "can_cast", "dtype_str", "get_default_dtype", "is_floating", "kind",
    "opmath_dtype", "promote_types",
    "result_type", "set_default_dtype",
]

FLOAT16 = np.dtype(np.float16)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)  # numpy has no bfloat16: ml_dtypes' (JAX's) is the one numpy knows
# The 16-bit floating dtypes: stored as themselves, computed on in float32 (see dispatch's backend).
HALF_DTYPES = frozenset({FLOAT16, BFLOAT16})
FULL_FLOAT_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})  # what the CUDA kernels compute in
_FLOATING = HALF_DTYPES | FULL_FLOAT_DTYPES

_BOOL = np.dtype(np.bool_)
_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype(np.float32)
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}
_default_dtype = [_FLOAT32]


def get_default_dtype() -> np.dtype:
    """The dtype of floating tensors made without one (``zgrad.tensor([1.0])``) and of Python
    floats in promotion; float32 unless :func:`set_default_dtype` changed it."""
    return _default_dtype[0]


def set_default_dtype(dtype: Any) -> None:
    """Make ``dtype`` (a floating dtype) the default, process-wide.

    Raises:
        TypeError: ``dtype`` is not floating (PyTorch's message).
    """
    dtype = np.dtype(dtype)
    if _category(dtype) != 2:
        raise TypeError("only floating-point types are supported as the default type")
    _default_dtype[0] = dtype


def is_floating(dtype: Any) -> bool:
    """Whether ``dtype`` is a floating dtype (float16, bfloat16, float32, float64): the one test
    every op asks instead of looking at numpy's ``kind`` (bfloat16's is "V", numpy's void)."""
    return dtype in _FLOATING or kind(dtype) == "f"


def opmath_dtype(dtype: Any) -> np.dtype:
    """The dtype arithmetic on ``dtype`` runs in (PyTorch's ``opmath_type``): float32 for float16
    and bfloat16, ``dtype`` itself otherwise. An op composed of several kernels where PyTorch has
    one computes in it and rounds to ``dtype`` once, at its end."""
    dtype = np.dtype(dtype)
    return _FLOAT32 if dtype in HALF_DTYPES else dtype


def dtype_str(dtype: Any) -> str:
    """The string that names ``dtype`` on a wire: numpy's dtype string ("<f4"), except for
    bfloat16, whose dtype string ("<V2") numpy reads back as raw bytes: it goes by its name
    ("bfloat16", which ``np.dtype`` reads once ml_dtypes is imported)."""
    dtype = np.dtype(dtype)
    return "bfloat16" if dtype == BFLOAT16 else dtype.str


def kind(dtype: Any) -> str:
    """numpy's kind letter of ``dtype`` ("b" bool, "u"/"i" integers, "f" floating), with bfloat16
    counted as "f"."""
    dtype = np.dtype(dtype)
    return "f" if dtype == BFLOAT16 else dtype.kind


def _category(dtype: np.dtype) -> int:
    if dtype == BFLOAT16:
        return 2
    try:
        return _CATEGORY[dtype.kind]
    except KeyError:
        raise TypeError(f"zgrad has no type promotion for dtype {dtype}") from None


def promote_types(a: Any, b: Any) -> np.dtype:
    """The smallest dtype both ``a`` and ``b`` convert to without leaving their category (PyTorch's
    table: an integer with a floating dtype gives that floating dtype)."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2 and (BFLOAT16 in (a, b) or a.itemsize == b.itemsize):
        return _FLOAT32 if max(a.itemsize, b.itemsize) <= 4 else np.dtype(np.float64)  # float16 with bfloat16
    return np.promote_types(a, b)


def can_cast(from_: Any, to: Any) -> bool:
    """Whether an op may write a ``from_`` result into a ``to`` tensor (PyTorch's ``can_cast``:
    never to a lower category; any width within one)."""
    return _category(np.dtype(from_)) <= _category(np.dtype(to))


_NUMBERS = (int, float)


def _scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, (bool, np.bool_)):
        return _BOOL
    if isinstance(value, (int, np.integer)):
        return _INT64
    if isinstance(value, (float, np.floating)):
        return get_default_dtype()
    raise TypeError(f"type promotion: unsupported operand of type {type(value).__name__}")


def _promote_all(dtypes: Iterable[np.dtype]) -> np.dtype | None:
    result = None
    for dtype in dtypes:
        if result is None:
            result = dtype
        elif dtype is not result:  # numpy's built-in dtypes are singletons: a run of one dtype skips the table
            result = promote_types(result, dtype)
    return result


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """A stronger kind's dtype ``higher`` with a weaker kind's ``lower``: ``lower`` counts only if
    it is of a higher category."""
    if higher is None:
        return lower
    if lower is None or _category(higher) >= _category(lower):
        return higher
    return promote_types(higher, lower)


def result_type(*operands: Any) -> np.dtype:
    """The dtype of an op on ``operands`` (arrays — anything with ``dtype`` and ``ndim`` —,
    Python numbers and numpy scalars), as PyTorch's ``result_type``.

    Raises:
        TypeError: no operand, or one that is neither an array nor a number.
    """
    if len(operands) == 2:
        a, b = operands
        if type(b) in _NUMBERS and type(a) is np.ndarray and a.ndim:
            # an array and a Python number, the commonest mix: the array's dtype unless the number
            # is of a higher category (a float with integers), worked out below
            kind = a.dtype.kind
            if kind == "f" or (kind in "iu" and type(b) is int):
                return a.dtype
    dimensioned, zero_dim, numbers = [], [], []
    for operand in operands:
        ndim = getattr(operand, "ndim", None)
        if ndim is None or isinstance(operand, np.generic):
            numbers.append(_scalar_dtype(operand))
        elif ndim:
            dimensioned.append(operand.dtype)
        else:
            zero_dim.append(operand.dtype)
    result = _combine(_promote_all(dimensioned), _combine(_promote_all(zero_dim), _promote_all(numbers)))
    if result is None:
        raise TypeError("result_type() needs at least one operand")
    return result

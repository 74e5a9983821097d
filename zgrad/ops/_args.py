"""Argument normalization shared by the public op functions of :mod:`zgrad.ops`."""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.errors import DTypeError
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.kernels.promotion import kind
from zgrad.tensor import Tensor

__all__ = ["operand", "tensor_arg", "index_arg", "index_key", "scalar_arg", "require_kinds", "refuse_dtype", "int_tuple"]


def operand(x: Any) -> Any:
    """A tensor, a Python scalar, or an array constant; numpy scalars become Python scalars.

    Raises:
        TypeError: anything else.
    """
    if isinstance(x, np.generic):  # checked first: np.float64 is also a Python float
        return x.item()
    if isinstance(x, (Tensor, bool, int, float)):
        return x
    if isinstance(x, np.ndarray):
        return Tensor(x)
    if isinstance(x, (list, tuple)):
        return Tensor(np.asarray(x))
    raise TypeError(f"unsupported operand of type {type(x).__name__}; expected a Tensor, a number or an array")


def tensor_arg(x: Any, what: object, argument: str | None = None) -> Any:
    """``x`` if it is a Tensor.

    Raises:
        TypeError: anything else, naming the function or layer ``what`` (any object whose str()
            names it, formatted only then) and, if given, the ``argument``.
    """
    if not isinstance(x, Tensor):
        where = what if argument is None else f"{what}: argument '{argument}'"
        raise TypeError(f"{where} expects a Tensor, got {type(x).__name__}")
    return x


def require_kinds(x: Any, what: str, kinds: str) -> Any:
    """``x`` if its dtype's kind is one of ``kinds`` (numpy's letters: "b" bool, "iu" integers,
    "f" floating, bfloat16 included).

    Raises:
        DTypeError: another dtype, in PyTorch's words (``"softmax" not implemented for 'Long'``).
    """
    if kind(x.dtype) not in kinds:
        raise refuse_dtype(what, x.dtype)
    return x


def index_arg(index: Any, what: str) -> np.ndarray:
    """The array of an integer index given as a Tensor, an array or a list.

    Raises:
        TypeError: a non-integer index.
    """
    array = index._data if isinstance(index, Tensor) else np.asarray(index)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{what}(): Expected dtype int64 for index, got {array.dtype}")
    return array


def index_key(index: Any) -> Any:
    """An indexing key (``x[key]``) with tensors in it replaced by their arrays."""
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(index_key(i) for i in index)
    return index


def scalar_arg(value: Any, what: str) -> Any:
    """A Python number from a number, a numpy scalar or a one-element tensor; None stays None.

    Raises:
        TypeError: anything else.
    """
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Tensor) and value.numel() == 1:
        return value.item()
    raise TypeError(f"{what} expects a number, got {type(value).__name__}")


def int_tuple(value: Any) -> tuple[int, ...]:
    """An int or a sequence of ints (dims, shifts, sizes) as a tuple of ints."""
    return (int(value),) if isinstance(value, (int, np.integer)) else tuple(int(v) for v in value)
def refuse_dtype(kernel: str, dtype: np.dtype) -> DTypeError:
    """PyTorch's error for a dtype its kernel ``kernel`` has no version for, to raise: ``"kthvalue_cpu"
    not implemented for 'Bool'`` (PyTorch raises a NotImplementedError, a RuntimeError)."""
    return DTypeError(f"\"{kernel}\" not implemented for '{scalar_type_name(dtype)}'")

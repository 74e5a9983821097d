"""Truth reductions and closeness tests: all, any, count_nonzero, isclose, allclose, equal.

None is differentiable (their results are bool or integer). An element is true where it is
non-zero (NaN included), as in PyTorch.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from zgrad.errors import DTypeError
from zgrad.kernels import dispatch, dispatch_pointwise, dispatch_reduce
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.ops._args import tensor_arg
from zgrad.ops.reduce import _all_if_empty
from zgrad.tensor import Tensor
from zgrad.ops.out_argument import accepts_out

__all__ = ["all", "any", "count_nonzero", "isclose", "allclose", "equal"]

_UINT8 = np.dtype(np.uint8)


def _truth(name: str, input: Any, dim: Any, keepdim: bool, every: bool) -> Tensor:  # noqa: A002
    x = tensor_arg(input, name)
    count = dispatch_reduce.count_nonzero(x._data, dim, keepdim)
    reduced = x.numel() // builtins.max(count.size, 1) if x.numel() else 0  # elements per count
    result = dispatch_pointwise.compare("eq" if every else "gt", count, reduced if every else 0)
    return Tensor(dispatch.cast(result, _UINT8) if x.dtype == _UINT8 else result)


@accepts_out("exact")
def all(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002 - torch's name
    """Whether every element is non-zero, over ``dim`` (an int, a tuple, or None for all); True
    for no elements. Bool, except uint8 for a uint8 input (as PyTorch).

    Raises:
        IndexError: a dimension is out of range.
    """
    return _truth("all", input, dim, keepdim, True)


@accepts_out("exact")
def any(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002 - torch's name
    """Whether some element is non-zero, over ``dim`` (an int, a tuple, or None for all); False for
    no elements. Bool, except uint8 for a uint8 input.

    Raises:
        IndexError: a dimension is out of range.
    """
    return _truth("any", input, dim, keepdim, False)


def count_nonzero(input: Any, dim: Any = None) -> Tensor:  # noqa: A002
    """How many elements are non-zero, over ``dim`` (an int, a tuple, or None or an empty tuple for
    all), as int64.

    Raises:
        IndexError: a dimension is out of range.
    """
    return Tensor(dispatch_reduce.count_nonzero(tensor_arg(input, "count_nonzero")._data, _all_if_empty(dim)))


def _isclose(name: str, input: Any, other: Any, rtol: float, atol: float, equal_nan: bool) -> Any:  # noqa: A002
    a, b = tensor_arg(input, name)._data, tensor_arg(other, name, "other")._data
    if a.dtype != b.dtype:
        raise DTypeError(f"{scalar_type_name(a.dtype)} did not match {scalar_type_name(b.dtype)}")
    for what, tolerance in (("rtol", rtol), ("atol", atol)):
        if tolerance < 0:
            raise RuntimeError(f"{what} must be greater than or equal to zero, but got {tolerance}")
    compare = dispatch_pointwise.compare
    close = compare("eq", a, b)
    if equal_nan:
        close = compare("logical_or", close, compare("logical_and", compare("ne", a, a), compare("ne", b, b)))
    if a.dtype == np.bool_:
        return close
    error = dispatch.unary("abs", dispatch.binary("sub", a, b))
    allowed = dispatch.binary("add", dispatch.unary("abs", dispatch.binary("mul", b, float(rtol))), float(atol))
    within = compare("logical_and", compare("lt", error, math.inf), compare("le", error, allowed))
    return compare("logical_or", close, within)


def isclose(input: Any, other: Any, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    """Element-wise (broadcast) whether |input - other| <= atol + rtol |other|, or the two are
    equal (infinities of one sign included); NaNs are close to each other only with
    ``equal_nan``.

    Raises:
        DTypeError: the tensors' dtypes differ (PyTorch's "Long did not match Float").
        RuntimeError: a negative tolerance.
    """
    return Tensor(_isclose("isclose", input, other, rtol, atol, equal_nan))


def allclose(input: Any, other: Any, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """Whether every element pair is :func:`isclose` (a Python bool; blocks on a CUDA tensor).

    Raises:
        DTypeError: the tensors' dtypes differ.
    """
    close = _isclose("allclose", input, other, rtol, atol, equal_nan)
    return builtins.bool(dispatch.to_device(dispatch.reduce_sum(dispatch_pointwise.logical_not(close)), "cpu") == 0)


def equal(input: Any, other: Any) -> bool:  # noqa: A002
    """Whether the tensors have the same shape and equal elements (a Python bool; NaN is not equal
    to itself; dtypes are promoted). Blocks on a CUDA tensor."""
    a, b = tensor_arg(input, "equal")._data, tensor_arg(other, "equal", "other")._data
    if a.shape != b.shape:
        return False
    unequal = dispatch.reduce_sum(dispatch_pointwise.compare("ne", a, b))
    return builtins.bool(dispatch.to_device(unequal, "cpu") == 0)

"""Comparisons and logical ops: ``eq ne lt le gt ge``, ``logical_and/or/xor/not``.

They return bool tensors and are not differentiable (their results never require grad), as in
PyTorch. Operands broadcast; a Python number compares with every element.
"""

from __future__ import annotations

from typing import Any

from zgrad.kernels import dispatch_pointwise
from zgrad.ops._args import operand, tensor_arg
from zgrad.tensor import Tensor
from zgrad.ops.out_argument import accepts_out

__all__ = [
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not", "greater",
    "greater_equal", "less", "less_equal", "not_equal",
]


def _compare(op: str, a: Any, b: Any) -> Any:
    a, b = operand(a), operand(b)
    return Tensor(dispatch_pointwise.compare(op, a._data if isinstance(a, Tensor) else a,
                                             b._data if isinstance(b, Tensor) else b))


@accepts_out()
def eq(input: Any, other: Any) -> Any:  # noqa: A002 - torch's argument name
    """input == other, element-wise (bool)."""
    return _compare("eq", input, other)


@accepts_out()
def ne(input: Any, other: Any) -> Any:  # noqa: A002
    """input != other, element-wise (bool)."""
    return _compare("ne", input, other)


@accepts_out()
def lt(input: Any, other: Any) -> Any:  # noqa: A002
    """input < other, element-wise (bool)."""
    return _compare("lt", input, other)


@accepts_out()
def le(input: Any, other: Any) -> Any:  # noqa: A002
    """input <= other, element-wise (bool)."""
    return _compare("le", input, other)


@accepts_out()
def gt(input: Any, other: Any) -> Any:  # noqa: A002
    """input > other, element-wise (bool)."""
    return _compare("gt", input, other)


@accepts_out()
def ge(input: Any, other: Any) -> Any:  # noqa: A002
    """input >= other, element-wise (bool)."""
    return _compare("ge", input, other)


greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


@accepts_out()
def logical_and(input: Any, other: Any) -> Any:  # noqa: A002
    """Element-wise AND of the truth values (nonzero is True); ``a & b`` on bool tensors."""
    return _compare("logical_and", input, other)


@accepts_out()
def logical_or(input: Any, other: Any) -> Any:  # noqa: A002
    """Element-wise OR of the truth values; ``a | b`` on bool tensors."""
    return _compare("logical_or", input, other)


@accepts_out()
def logical_xor(input: Any, other: Any) -> Any:  # noqa: A002
    """Element-wise XOR of the truth values; ``a ^ b`` on bool tensors."""
    return _compare("logical_xor", input, other)


@accepts_out()
def logical_not(input: Any) -> Any:  # noqa: A002
    """Element-wise NOT of the truth values; ``~a`` on a bool tensor."""
    return Tensor(dispatch_pointwise.logical_not(tensor_arg(input, "logical_not")._data))

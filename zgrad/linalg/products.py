"""The products of ``zgrad.linalg``: ``matmul`` (``zgrad.matmul``), ``cross`` (over ``dim``,
default the last) and ``vecdot``."""

from __future__ import annotations

from typing import Any

from zgrad.errors import DTypeError
from zgrad.kernels import dispatch
from zgrad.linalg._checks import same_dtype
from zgrad.ops._args import tensor_arg
from zgrad.ops.functions import matmul, mul
from zgrad.ops.products import cross as _cross
from zgrad.ops.reduce import sum as _sum
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op

__all__ = ["matmul", "cross", "vecdot"]


def cross(input: Any, other: Any, *, dim: int = -1) -> Any:  # noqa: A002 - torch's argument name
    """The cross product of 3-vectors along ``dim`` (default the last), inputs broadcast.

    Raises:
        ShapeError: ``dim`` does not have size 3 in both. DTypeError: the dtypes differ.
    """
    return _cross(input, other, dim)


@autocast_op("linalg_vecdot")
def vecdot(x: Any, y: Any, *, dim: int = -1) -> Any:
    """The dot product of ``x`` and ``y`` along ``dim`` (broadcast): ``(x * y).sum(dim)``.

    Raises:
        DTypeError: a tensor is not floating, or the dtypes differ, with PyTorch's messages.
    """
    x, y = tensor_arg(x, "linalg.vecdot", "x"), tensor_arg(y, "linalg.vecdot", "y")
    for t in (x, y):
        if not is_floating(t.dtype):
            raise DTypeError("linalg.vecdot: Expected a floating point or complex tensor as input. Got "
                             f"{dispatch.scalar_type_name(t.dtype)}")
    same_dtype("linalg.vecdot", x, y, ("x", "y"))
    return _sum(mul(x, y), dim)

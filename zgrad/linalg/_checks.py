"""The argument checks the ``zgrad.linalg`` functions share, with PyTorch's messages."""

from __future__ import annotations

from typing import Any

from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch
from zgrad.ops._args import tensor_arg
from zgrad.kernels.promotion import HALF_DTYPES, is_floating

__all__ = ["matrices", "square_matrices", "same_dtype"]


def matrices(x: Any, op: str, name: str = "A") -> Any:
    """``x`` if it is a float32 or float64 tensor of at least 2 dimensions (batches of matrices).

    Raises:
        TypeError: not a tensor. DTypeError: an integer, bool, float16 or bfloat16 tensor.
        ShapeError: fewer than 2 dimensions.
    """
    x = tensor_arg(x, op, name)
    if not is_floating(x.dtype):
        raise DTypeError(f"{op}: Expected a floating point or complex tensor as input. Got "
                         f"{dispatch.scalar_type_name(x.dtype)}")
    if x.dtype in HALF_DTYPES:
        raise DTypeError(f"{op}: Low precision dtypes not supported. Got {dispatch.scalar_type_name(x.dtype)}")
    if x.ndim < 2:
        raise ShapeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    return x


def square_matrices(x: Any, op: str, name: str = "A") -> Any:
    """:func:`matrices`, square ones.

    Raises:
        ShapeError: the last two sizes differ (and what :func:`matrices` raises).
    """
    x = matrices(x, op, name)
    if x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{op}: {name} must be batches of square matrices, but they are {x.shape[-2]} by "
                         f"{x.shape[-1]} matrices")
    return x


def same_dtype(op: str, first: Any, second: Any, names: tuple[str, str] = ("A", "B")) -> None:
    """Raises DTypeError (PyTorch's message) when the two tensors' dtypes differ."""
    if first.dtype != second.dtype:
        a, b = names
        raise DTypeError(f"{op}: Expected {a} and {b} to have the same dtype, but found {a} of type "
                         f"{dispatch.scalar_type_name(first.dtype)} and {b} of type "
                         f"{dispatch.scalar_type_name(second.dtype)} instead")

"""Sorting and searching: sort, argsort, msort, topk, kthvalue, searchsorted, bucketize.

A sort computes the order (int64 positions, no gradient) and gathers the values with it, so the
gradient of the values goes back to the positions they came from, as PyTorch's. Sorts are
stable whatever ``stable`` says (a stable order is also a valid unstable one); ``kthvalue`` and
``topk`` pick the first of equal elements, where PyTorch's selection may pick another.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_sort
from zgrad.ops._args import operand, refuse_dtype, tensor_arg
from zgrad.ops.indexing import gather
from zgrad.ops.reduce import ValuesIndices
from zgrad.tensor import Tensor
from zgrad.ops.out_argument import accepts_out

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "searchsorted", "bucketize"]


def _gather_along(x: Any, dim: int, positions: Any) -> Any:
    """x's elements at ``positions`` (an int64 array) along ``dim``, differentiable in ``x``."""
    if x.ndim == 0:
        return gather(x.reshape(1), 0, positions.reshape(1)).reshape(())
    return gather(x, dim, Tensor(positions))


def _size_along(x: Any, dim: int) -> tuple[int, int]:
    """(``dim`` normalized, the size of x along it: 1 for a 0-d tensor)."""
    dim = dispatch_index.normalize_dim(dim, x.ndim)
    return dim, x.shape[dim] if x.ndim else 1


@accepts_out("exact")
def sort(input: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:  # noqa: A002
    """The elements of ``input`` sorted along ``dim`` and their int64 positions, as
    ``(values, indices)`` (``.values``, ``.indices``). NaN sorts as the largest value; equal
    elements keep their order. The gradient of ``values`` goes back to where each value came from.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    x = tensor_arg(input, "sort")
    positions = dispatch_sort.argsort(x._data, dim, descending)
    return ValuesIndices(_gather_along(x, dim, positions), Tensor(positions))


def argsort(input: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:  # noqa: A002
    """The int64 positions that sort ``input`` along ``dim`` (the ``indices`` of :func:`sort`)."""
    return Tensor(dispatch_sort.argsort(tensor_arg(input, "argsort")._data, dim, descending))


def msort(input: Any) -> Any:  # noqa: A002
    """``input`` sorted along its first dimension (the ``values`` of ``sort(input, dim=0)``)."""
    return sort(input, 0).values


@accepts_out("exact")
def topk(input: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:  # noqa: A002
    """The ``k`` largest (``largest=False``: smallest) elements along ``dim`` and their int64
    positions, as ``(values, indices)``, in sorted order; the gradient goes to those positions.

    Raises:
        RuntimeError: ``k`` is negative or larger than the dimension.
    """
    x = tensor_arg(input, "topk")
    if x.dtype == np.bool_:
        raise DTypeError("topk does not support bool dtypes on CPU")
    dim, size = _size_along(x, dim)
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    if x.ndim == 0:
        positions = dispatch_sort.argsort(x._data, dim, largest)
    else:
        positions = dispatch_sort.argtopk(x._data, dim, k, largest)
    return ValuesIndices(_gather_along(x, dim, positions), Tensor(positions))


@accepts_out("exact")
def kthvalue(input: Any, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:  # noqa: A002
    """The ``k``-th smallest element along ``dim`` (k counts from 1) and its int64 position, as
    ``(values, indices)``; the gradient goes to that position.

    Raises:
        RuntimeError: ``k`` outside [1, size of ``dim``].
    """
    x = tensor_arg(input, "kthvalue")
    if x.dtype == np.bool_:
        raise refuse_dtype("kthvalue_cpu", x.dtype)
    dim, size = _size_along(x, dim)
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    positions = dispatch_sort.kth_positions(x._data, dim, k)
    values = _gather_along(x, dim, positions)
    if keepdim or x.ndim == 0:
        return ValuesIndices(values, Tensor(positions))
    return ValuesIndices(values.squeeze(dim), Tensor(dispatch.contiguous(positions.squeeze(dim))))


@accepts_out("exact")
def searchsorted(sorted_sequence: Any, input: Any, *, out_int32: bool = False, right: bool = False,  # noqa: A002
                 side: str | None = None, sorter: Any = None) -> Any:
    """Where each element of ``input`` (a tensor or a number) would go in the ascending last
    dimension of ``sorted_sequence`` (1-D, or with input's leading dimensions) to keep it sorted:
    before equal elements, or after them with ``right=True`` / ``side="right"``. ``sorter``
    gives the int64 order that sorts an unsorted sequence. int64 (``out_int32``: int32) positions
    of input's shape.

    Raises:
        ValueError: an unknown ``side``, or one that contradicts ``right``.
        ShapeError: a sequence whose leading dimensions differ from input's.
    """
    sequence = tensor_arg(sorted_sequence, "searchsorted", "sorted_sequence")._data
    if side not in (None, "left", "right"):
        raise ValueError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
    if side == "left" and right:
        raise ValueError("torch.searchsorted(): side and right can't be set to opposites, got side of left while "
                         "right was True")
    right = builtins.bool(right or side == "right")
    if sorter is not None:
        sequence = dispatch_index.gather(sequence, -1, tensor_arg(sorter, "searchsorted", "sorter")._data)
    values = operand(input)
    if not isinstance(values, Tensor):
        values = Tensor(dispatch.full((), values, np.asarray(values).dtype, dispatch.device_type_of(sequence)))
    if np.bool_ in (sequence.dtype, values.dtype):
        raise refuse_dtype("searchsorted_out_cpu", np.dtype(np.bool_))
    return Tensor(dispatch_sort.searchsorted(sequence, values._data, right, out_int32))


@accepts_out("exact")
def bucketize(input: Any, boundaries: Any, *, out_int32: bool = False, right: bool = False) -> Any:  # noqa: A002
    """The index of the bucket of the 1-D ascending ``boundaries`` each element of ``input`` falls
    in: ``searchsorted(boundaries, input, right=right)``.

    Raises:
        ShapeError: ``boundaries`` is not 1-D.
    """
    edges = tensor_arg(boundaries, "bucketize", "boundaries")
    if edges.ndim != 1:
        raise ShapeError(f"boundaries tensor must be 1 dimension, but got dim({edges.ndim})")
    return searchsorted(edges, input, out_int32=out_int32, right=right)

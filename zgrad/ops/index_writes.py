"""``index_reduce`` and ``put``: writes by index that are other writes seen another way.
``index_reduce`` is :func:`~zgrad.ops.scattering.scatter_reduce` with its 1-d index spread over
the source's slices; ``put`` is :func:`~zgrad.ops.indexing.index_put` on the flattened tensor.
Both are differentiable (through those ops) and run on every backend those run on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels import dispatch
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.ops._args import tensor_arg
from zgrad.ops.indexing import index_put
from zgrad.ops.scattering import scatter_reduce
from zgrad.ops.shape import expand
from zgrad.tensor import Tensor

__all__ = ["index_reduce", "put"]

INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(input: Any, dim: int, index: Any, source: Any, reduce: str, *,  # noqa: A002
                 include_self: bool = True) -> Tensor:
    """A copy of ``input`` whose slices along ``dim`` at the positions of the 1-d ``index`` hold
    the ``reduce`` ("prod", "mean", "amax", "amin") of the ``source`` slices sent there (slice i
    of ``source`` goes to ``index[i]``), the original slice included unless
    ``include_self=False``. An integer mean rounds down.

    Raises:
        RuntimeError: an unknown ``reduce``, or a ``source`` whose slices do not match ``input``'s
            or whose count is not ``len(index)`` (PyTorch's messages). IndexError: an index that
            is not a vector, or out of range. DTypeError: ``source``'s dtype differs from ``input``'s.
        NotImplementedError: a bool ``input`` with ``include_self=False`` (PyTorch's message).
    """
    if reduce not in INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    x = tensor_arg(input, "index_reduce")
    src = tensor_arg(source, "index_reduce", "source")
    index = tensor_arg(index, "index_reduce", "index")
    dim = normalize_dim(dim, x.ndim)
    if index.ndim > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{dispatch.scalar_type_name(index.dtype)} and size: {list(index.shape)}")
    if x.ndim != src.ndim or any(a != b for d, (a, b) in enumerate(zip(x.shape, src.shape)) if d != dim):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(x.shape)} source.shape = {list(src.shape)}")
    if x.dtype == np.bool_ and not include_self:
        raise NotImplementedError('"index_reduce_func_exclude_input_init" not implemented for \'Bool\'')
    count = src.shape[dim] if src.ndim else 1
    if index.numel() != count:
        raise RuntimeError(f"index_reduce_(): Number of indices ({index.numel()}) should be equal to "
                           f"source.size(dim): ({count}), for dim: {dim}")
    if not x.ndim:
        return scatter_reduce(x.reshape((1,)), 0, index.reshape((1,)), src.reshape((1,)), reduce,
                              include_self=include_self).reshape(())
    spread = index.reshape(tuple(count if d == dim else 1 for d in range(x.ndim)))
    return scatter_reduce(x, dim, expand(spread, src.shape), src, reduce, include_self=include_self)


def put(input: Any, index: Any, source: Any, accumulate: bool = False) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``source``'s elements written at the flat (row-major) positions
    ``index`` names (negative ones count from the end), or added there with ``accumulate``
    (repeated positions add up). Differentiable in ``input`` and ``source``.

    Raises:
        RuntimeError: a non-int64 ``index``, or a ``source`` of another dtype (PyTorch's messages).
        IndexError: ``source`` and ``index`` differ in element count, or an index out of range
            (PyTorch's messages).
    """
    x = tensor_arg(input, "put")
    index = tensor_arg(index, "put", "index")
    src = tensor_arg(source, "put", "source")
    if index.dtype != np.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {dispatch.scalar_type_name(index.dtype)}")
    if src.dtype != x.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{dispatch.scalar_type_name(x.dtype)} and source.dtype = "
                           f"{dispatch.scalar_type_name(src.dtype)}")
    if src.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {src.numel()}, index.numel() = {index.numel()}")
    flat_index = index.reshape((-1,))
    if flat_index.numel():
        low, high = int(flat_index.min().item()), int(flat_index.max().item())
        for bad in (low, high):
            if not -x.numel() <= bad < x.numel():
                raise IndexError(f"out of range: tried to access index {bad} on a tensor of {x.numel()} elements.")
    return index_put(x.reshape((-1,)), (flat_index,), src.reshape((-1,)), accumulate).reshape(x.shape)

"""The CUDA backend's selection by index: take / gather / scatter along a dimension, indexing by
integer arrays or masks (element positions worked out on the host from the index, then one
gather or scatter-add launch), stack / concatenate, and the embedding lookups.

Part of :mod:`zgrad.kernels.cuda.backend`; each function writes into ``out`` and returns it.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.elementwise import binary_op, unary_op, upload
from zgrad.kernels.cuda.reduce import contiguous
from zgrad.kernels.index_keys import is_basic_index

__all__ = [
    "take", "gather", "scatter", "scatter_add", "index_add", "take_positions", "put_positions", "scatter_slice",
    "stack", "concatenate", "check_index_range", "embedding", "embedding_backward", "embedding_renorm", "embedding_bag",
    "embedding_bag_backward", "embedding_bag_per_sample_weights_backward",
]


def _launch(kernel: Any, count: int, *arrays: Any) -> None:
    if count:
        rt.launch(kernel, rt.grid_1d(count), *(_arg(a) for a in arrays))


def _arg(a: Any) -> Any:
    """A kernel's argument for ``a``: a 1-D C-contiguous device array as its allocation's own
    array where it spans it (no new wrapper per launch), another one as its view."""
    if not isinstance(a, DeviceArray):
        return a
    return a.flat_arg() if a.ndim == 1 and a.flags.c_contiguous else a.arg()


def _index(index: Any) -> DeviceArray:
    return index if isinstance(index, DeviceArray) else upload(index, np.int64)


def take(x, index, axis, out):
    """out = x's slices at ``index`` (1-D) along ``axis``."""
    inner = int(np.prod(x.shape[axis + 1:]))
    _launch(kernels.index.take, out.size, contiguous(x).reshape(-1), contiguous(_index(index)).reshape(-1),
            x.shape[axis], inner, _flat_target(out))
    return out


def gather(x, index, out):
    _launch(kernels.index.gather, out.size, x, _index(index), out)
    return out


def scatter(index, src, out):
    _launch(kernels.index.scatter, index.size, _index(index), src, out)
    return out


def scatter_add(index, src, out):
    _launch(kernels.index.scatter_add, index.size, _index(index), src, out)
    return out


def index_add(index, src, out):
    _launch(kernels.index.index_add, src.size, contiguous(_index(index)).reshape(-1), src, out)
    return out


def _positions(shape: tuple[int, ...], index: Any) -> np.ndarray:
    """The flat C-order positions an advanced ``index`` selects from an array of ``shape``."""
    parts = index if isinstance(index, tuple) else (index,)
    host = tuple(p.to_host() if isinstance(p, DeviceArray) else p for p in parts)
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[host if isinstance(index, tuple) else host[0]]


def take_positions(x: DeviceArray, index: Any) -> DeviceArray:
    """x[index] for an advanced (integer-array or mask) index: a gather into a fresh array."""
    positions = _positions(x.shape, index)
    out = DeviceArray.empty(positions.shape, x.dtype)
    _launch(kernels.index.take_flat, out.size, contiguous(x).reshape(-1), upload(positions.reshape(-1)), out.reshape(-1))
    return out


def _flat_target(out: DeviceArray) -> DeviceArray:
    if not out.flags.c_contiguous:
        raise ValueError("indexed assignment into a strided CUDA view is not supported; make it contiguous first")
    return out.reshape(-1)


def put_positions(out: DeviceArray, index: Any, value: Any) -> None:
    """out[index] = value for an advanced index (a repeated position keeps one of its values)."""
    positions = _positions(out.shape, index)
    values = unary_op("copy", value, DeviceArray.empty(positions.shape, out.dtype))
    _launch(kernels.index.put_flat, positions.size, upload(positions.reshape(-1)), values.reshape(-1), _flat_target(out))


def scatter_slice(index, values, out):
    """out[index] += values (the backward of indexing; ``out`` starts zeroed); repeated
    positions of an integer-array index add up."""
    if is_basic_index(index):
        view = out[index]
        binary_op("add", view, values, view)
        return out
    positions = _positions(out.shape, index)
    expanded = unary_op("copy", values, DeviceArray.empty(positions.shape, out.dtype))
    _launch(kernels.index.add_at_flat, positions.size, upload(positions.reshape(-1)), expanded.reshape(-1), _flat_target(out))
    return out


def stack(arrays, axis, out):
    for i, a in enumerate(arrays):
        index = (slice(None),) * axis + (i,)
        unary_op("copy", a, out[index])
    return out


def concatenate(arrays, axis, out):
    start = 0
    for a in arrays:
        index = (slice(None),) * axis + (slice(start, start + a.shape[axis]),)
        unary_op("copy", a, out[index])
        start += a.shape[axis]
    return out


# --- embeddings ----------------------------------------------------------------------------------

def _counts(indices: DeviceArray, rows: int, enabled: bool) -> DeviceArray:
    counts = unary_op("copy", 0, DeviceArray.empty((rows if enabled else 0,), np.dtype(np.int64)))
    if enabled:
        _launch(kernels.index.count_indices, indices.size, indices.reshape(-1), counts)
    return counts


def check_index_range(values, low: int, high: int, skip: int | None, error: Callable[[int], Exception]) -> None:
    """Check that every integer in ``values`` lies in [low, high) (or equals ``skip``) without
    waiting for the device: the first bad value's position is found on the device now, and
    ``error(value)`` is raised at this thread's next wait for the device (``.item()``, ``.cpu()``,
    ``zgrad.cuda.synchronize()``), as CUDA reports its device-side asserts. The kernels that
    index with such values read nothing outside their tables meanwhile."""
    flat = contiguous(values).reshape(-1)
    if flat.size == 0:
        return
    first = upload(np.array([flat.size], np.int64))
    _launch(kernels.index.first_outside, flat.size, flat, int(low), int(high), 0 if skip is None else int(skip),
            skip is not None, first)

    def check() -> None:
        position = int(first.to_host()[0])
        if position < flat.size:
            raise error(int(flat[position].to_host()))

    rt.defer_check(check)


def embedding(weight, indices, out):
    """out = weight[indices]: indices.shape + (D,)."""
    _launch(kernels.index.take, out.size, contiguous(weight).reshape(-1), contiguous(indices).reshape(-1),
            weight.shape[0], weight.shape[1], _flat_target(out))
    return out


def embedding_backward(grad, indices, padding_idx: int, scale_grad_by_freq: bool, out):
    flat = contiguous(indices).reshape(-1)
    counts = _counts(flat, out.shape[0], scale_grad_by_freq)
    _launch(kernels.index.embedding_backward, flat.size * out.shape[1], contiguous(grad).reshape(-1), flat,
            out.shape[1], int(padding_idx), counts, bool(scale_grad_by_freq), _flat_target(out))
    return out


def embedding_renorm(weight, indices, max_norm: float, norm_type: float) -> None:
    """Rescale the rows of ``weight`` at ``indices`` in place down to ``max_norm``."""
    rows = np.unique(indices.to_host() if isinstance(indices, DeviceArray) else np.asarray(indices))
    t = weight.dtype.type
    _launch(kernels.index.embedding_renorm, rows.size, weight, upload(rows, np.int64), t(max_norm), t(norm_type),
            bool(np.isinf(norm_type)))


def embedding_bag(weight, indices, bounds, per_sample_weights, mode: int, padding_idx: int, out, bag_size,
                  max_indices):
    max_arg = max_indices if max_indices.size else DeviceArray.empty((0, 0), np.dtype(np.int64))
    _launch(kernels.index.embedding_bag, out.size, contiguous(weight), indices, bounds, per_sample_weights, int(mode),
            int(padding_idx), out, bag_size, max_arg)
    if out.size == 0 and bag_size.size:
        unary_op("copy", 0, bag_size)
    return out


def embedding_bag_backward(grad, indices, bounds, per_sample_weights, mode: int, padding_idx: int,
                           scale_grad_by_freq: bool, bag_size, max_indices, out):
    counts = _counts(indices, out.shape[0], scale_grad_by_freq)
    max_arg = max_indices if max_indices.size else DeviceArray.empty((0, 0), np.dtype(np.int64))
    _launch(kernels.index.embedding_bag_backward, grad.size, contiguous(grad), indices, bounds, per_sample_weights,
            int(mode), int(padding_idx), counts, bool(scale_grad_by_freq), bag_size, max_arg, out)
    return out


def embedding_bag_per_sample_weights_backward(grad, weight, indices, bounds, padding_idx: int, out):
    host_bounds = bounds.to_host()
    bag_of = np.repeat(np.arange(host_bounds.size - 1, dtype=np.int64), np.diff(host_bounds))
    _launch(kernels.index.embedding_bag_psw_backward, indices.size, contiguous(grad), contiguous(weight), indices, bounds,
            int(padding_idx), upload(bag_of, np.int64), out)
    return out

"""Power-average pooling (``lp_pool1d``, ``lp_pool2d``, ``lp_pool3d``) and the partial inverse of
max pooling (``max_unpool1d``, ``max_unpool2d``, ``max_unpool3d``) of ``zgrad.nn.functional``, as
PyTorch's.

LP pooling is PyTorch's composition: (kernel elements * avg_pool(x ** p)) ** (1 / p), with the
average's sign kept as PyTorch keeps it. Unpooling writes each value at its index of a zero
output (a scatter along the flattened spatial dims), so its gradient is a gather; the 1-D form
runs as the 2-D one over a width of 1, as PyTorch's does (its errors name max_unpooling2d).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from zgrad import ops
from zgrad.kernels import dispatch
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.ops._args import tensor_arg
from zgrad.ops.activation import relu
from zgrad.ops.indexing import Scatter
from zgrad.ops.one_dimensional import avg_pool1d, max_pool1d
from zgrad.ops.pool import avg_pool2d, max_pool2d
from zgrad.ops.three_dimensional import avg_pool3d, max_pool3d
from zgrad.tensor import Tensor

__all__ = ["lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _ints(value: Any, n: int) -> tuple[int, ...]:
    """PyTorch's ``_single``/``_pair``: an int repeated ``n`` times, a sequence as a tuple."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def _lp_root(out: Any, elements: int, norm_type: float) -> Any:
    return ((ops.sign(out) * relu(ops.abs(out))) * elements) ** (1.0 / norm_type)


def lp_pool1d(input: Any, norm_type: float, kernel_size: int, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """(sum over each window of x ** norm_type) ** (1 / norm_type) over (N, C, L) or (C, L)
    input, as ``torch.nn.functional.lp_pool1d`` (no padding).

    Raises:
        TypeError: a non-tensor input. RuntimeError: as :func:`avg_pool1d`.
    """
    x = tensor_arg(input, "lp_pool1d", "input")
    if math.isinf(norm_type):  # the largest (or, for -inf, smallest) magnitude per window, as PyTorch's
        sign = 1 if norm_type > 0 else -1
        return sign * max_pool1d(sign * ops.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool1d(x ** norm_type, kernel_size, stride, 0, ceil_mode)
    return _lp_root(out, math.prod(_ints(kernel_size, 1)), norm_type)


def lp_pool2d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """(sum over each window of x ** norm_type) ** (1 / norm_type) over (N, C, H, W) or
    (C, H, W) input, as ``torch.nn.functional.lp_pool2d`` (no padding).

    Raises:
        TypeError: a non-tensor input. RuntimeError: as :func:`avg_pool2d`.
    """
    x = tensor_arg(input, "lp_pool2d", "input")
    if math.isinf(norm_type):  # the largest (or, for -inf, smallest) magnitude per window, as PyTorch's
        sign = 1 if norm_type > 0 else -1
        return sign * max_pool2d(sign * ops.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool2d(x ** norm_type, kernel_size, stride, 0, ceil_mode)
    return _lp_root(out, math.prod(_ints(kernel_size, 2)), norm_type)


def lp_pool3d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """(sum over each window of x ** norm_type) ** (1 / norm_type) over (N, C, D, H, W) or
    (C, D, H, W) input, as ``torch.nn.functional.lp_pool3d`` (no padding).

    Raises:
        TypeError: a non-tensor input. RuntimeError: as :func:`avg_pool3d`.
    """
    x = tensor_arg(input, "lp_pool3d", "input")
    if math.isinf(norm_type):
        sign = 1 if norm_type > 0 else -1
        return sign * max_pool3d(sign * ops.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool3d(x ** norm_type, kernel_size, stride, 0, ceil_mode)
    return _lp_root(out, math.prod(_ints(kernel_size, 3)), norm_type)


def _output_size(x: Any, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                 output_size: Any) -> list[int]:
    """The spatial size of the unpooled output: the one max pooling came from by default, else
    ``output_size`` (spatial sizes, optionally after batch and channel), checked as PyTorch's.

    Raises:
        ValueError: an ``output_size`` of the wrong length or out of reach (PyTorch's messages).
    """
    n = len(kernel)
    spatial = x.shape[-n:]
    default = [(spatial[d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(n)]
    if output_size is None:
        return default
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a length "
                         f"of '{len(output_size)}'")
    for d in range(n):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {low} and {high})')
    return [int(s) for s in output_size]


def _unpool(x: Any, indices: Any, size: Sequence[int]) -> Any:
    """Each value of ``x`` (with one or no batch dim before the channels) written at its flat
    spatial index of a zero output whose last ``len(size)`` dims are ``size``.

    Raises:
        RuntimeError: PyTorch's messages for non-int64 indices, a wrong rank, indices of another
            shape, empty non-batch dims, an index outside the output.
    """
    n = len(size)
    name = f"max_unpooling{n}d"
    if indices.dtype != np.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {scalar_type_name(indices.dtype)}")
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Input to {name} should be a {n + 1}d or {n + 2}d Tensor, but got a tensor with {x.ndim} "
                           f"dimensions.")
    if tuple(x.shape) != tuple(indices.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(x.shape)}) but "
                           f"got indices tensor with shape: {list(indices.shape)}")
    for d in range(1, x.ndim):
        if x.shape[d] == 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, "
                               f"but got {list(x.shape)} with dimension {d} being empty.")
    volume = math.prod(size)
    lead = tuple(x.shape[:-n])
    rows = math.prod(lead)
    flat_index = indices._data.reshape(rows, -1)
    if flat_index.size:
        low, high = int(flat_index.min()), int(flat_index.max())
        if low < 0 or high >= volume:
            bad = low if low < 0 else high
            raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                               f"{'x'.join(str(s) for s in size)})")
    zeros = Tensor(dispatch.full((rows, volume), 0, x.dtype, dispatch.device_type_of(x._data)))
    out = Scatter.apply(zeros, 1, flat_index, x.reshape(rows, -1))
    return out.reshape(*lead, *size)


def max_unpool1d(input: Any, indices: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                 output_size: Any = None) -> Any:
    """The partial inverse of :func:`max_pool1d`: each value at the position its index (from
    ``max_pool1d(..., return_indices=True)``) names, zeros elsewhere, as
    ``torch.nn.functional.max_unpool1d``; (N, C, L) or (C, L) input.

    Raises:
        TypeError: a non-tensor input or indices.
        ValueError: a bad ``output_size``. RuntimeError: as :func:`max_unpool2d`.
    """
    x, idx = tensor_arg(input, "max_unpool1d", "input"), tensor_arg(indices, "max_unpool1d", "indices")
    kernel = _ints(kernel_size, 1)
    step = _ints(stride, 1) if stride is not None else kernel
    size = _output_size(x, kernel, step, _ints(padding, 1), output_size)
    return _unpool(x.unsqueeze(-1), idx.unsqueeze(-1), (size[0], 1)).squeeze(-1)


def max_unpool2d(input: Any, indices: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                 output_size: Any = None) -> Any:
    """The partial inverse of :func:`max_pool2d`: each value at the flat (h * W + w) position
    its index (from ``max_pool2d(..., return_indices=True)``) names, zeros elsewhere, as
    ``torch.nn.functional.max_unpool2d``; (N, C, H, W) or (C, H, W) input. ``output_size``
    (H, W), optionally after (N, C), picks among the sizes that pool to the input's.

    Raises:
        TypeError: a non-tensor input or indices.
        ValueError: an ``output_size`` of the wrong length or out of reach.
        RuntimeError: non-int64 indices, indices of another shape, an input that is not 3-D or
            4-D, an index outside the output (PyTorch's messages).
    """
    x, idx = tensor_arg(input, "max_unpool2d", "input"), tensor_arg(indices, "max_unpool2d", "indices")
    kernel = _ints(kernel_size, 2)
    step = _ints(stride, 2) if stride is not None else kernel
    size = _output_size(x, kernel, step, _ints(padding, 2), output_size)
    return _unpool(x, idx, size)


def max_unpool3d(input: Any, indices: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                 output_size: Any = None) -> Any:
    """The partial inverse of :func:`max_pool3d`: each value at the flat (d * H * W + h * W + w)
    position its index names, zeros elsewhere, as ``torch.nn.functional.max_unpool3d``;
    (N, C, D, H, W) or (C, D, H, W) input.

    Raises:
        TypeError: a non-tensor input or indices.
        ValueError: an ``output_size`` of the wrong length or out of reach.
        RuntimeError: as :func:`max_unpool2d`, for 4-D or 5-D input (PyTorch's messages).
    """
    x, idx = tensor_arg(input, "max_unpool3d", "input"), tensor_arg(indices, "max_unpool3d", "indices")
    kernel = _ints(kernel_size, 3)
    step = _ints(stride, 3) if stride is not None else kernel
    size = _output_size(x, kernel, step, _ints(padding, 3), output_size)
    return _unpool(x, idx, size)

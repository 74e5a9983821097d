"""Fractional max pooling (``fractional_max_pool2d``, ``fractional_max_pool3d``) as PyTorch's.

Each (sample, channel) pools a dimension of size I to O windows of K positions that start at
pseudo-random places, drawn from one number u of ``_random_samples`` (N, C, dims) for that
dimension: with alpha = (I - K) / (O - 1), window i < O - 1 starts at
int((i + u) * alpha) - int(u * alpha) (``int`` truncating, every step in the input's dtype, as
PyTorch computes it), and the last at I - K. The samples' last axis holds, for 2-D pooling,
(width, height), and for 3-D pooling (time, height, width), as PyTorch reads them.

Every window is gathered at once as flat in-plane indices (h * W + w, or t * H * W + h * W + w),
its maximum found outside the graph in PyTorch's scan order (the first maximum, or the last NaN
where there is one), and the output gathers the input at that index, so its gradient is
PyTorch's: scattered to the argmax, summed where windows share it. Everything stays on the
input's device.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad.creation import arange, full, tensor, zeros
from zgrad.creation_random import rand
from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.kernels.promotion import is_floating
from zgrad.ops._args import refuse_dtype, tensor_arg
from zgrad.ops.functions import cat
from zgrad.ops.indexing import where
from zgrad.tensor import Tensor

__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
           "fractional_max_pool3d_with_indices", "fractional_max_pool_layer"]

# The spatial dimension each entry of a sample's last axis drives (0: the first spatial one).
_SAMPLE_DIMS = {2: (1, 0), 3: (0, 1, 2)}


def _int_tuple(kind: str, value: Any, what: str, position: int, dims: int) -> tuple[int, ...]:
    """``kernel_size`` or ``output_size``: an int, or ``dims`` ints.

    Raises:
        TypeError: a float or another non-int (PyTorch's argument-parser message).
        RuntimeError: a sequence of another length.
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * dims
    if not isinstance(value, (tuple, list, Tensor)):
        raise TypeError(f"{kind}(): argument '{what}' (position {position}) must be tuple of ints, not "
                        f"{type(value).__name__}")
    items = tuple(value)
    for pos, item in enumerate(items):
        if not isinstance(item, (int, np.integer)) or isinstance(item, bool):
            raise TypeError(f"{kind}(): argument '{what}' (position {position}) must be tuple of ints, but found "
                            f"element of type {type(item).__name__} at pos {pos}")
    if len(items) != dims:
        count = "Ints" if dims == 2 else "three Ints"
        raise RuntimeError(f"{kind}: {what} must either be a single Int or tuple of {count}")
    return tuple(int(i) for i in items)


def _output_from_ratio(x: Tensor, output_ratio: Any, dims: int) -> tuple[int, ...]:
    """PyTorch's output size for ``output_ratio`` (a number, or one per dimension): the input's
    size times the ratio, truncated."""
    ratios = (output_ratio,) * dims if isinstance(output_ratio, (int, float)) else tuple(output_ratio)
    if len(ratios) < dims:
        raise IndexError("tuple index out of range")
    return tuple(int(x.size(d - dims) * float(ratios[d])) for d in range(dims))


def _check_samples(kind: str, x: Tensor, samples: Any, dims: int) -> Tensor:
    """The given ``_random_samples``, checked as PyTorch checks them (in its order).

    Raises:
        TypeError: not a tensor. RuntimeError: another dtype or shape, or one that requires grad.
    """
    if not isinstance(samples, Tensor):
        raise TypeError(f"{kind}(): argument 'random_samples' (position 4) must be Tensor, not "
                        f"{type(samples).__name__}")
    if samples.dtype != x.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if samples.ndim != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.ndim}")
    batch = 1 if x.ndim == dims + 1 else x.shape[0]
    if samples.shape[0] < batch:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != x.shape[-dims - 1]:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != dims:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {dims}; got {samples.shape[2]}.")
    if samples.requires_grad and is_grad_enabled():
        raise RuntimeError(f"The function '{kind.removesuffix('_out')}' is not differentiable with respect to "
                           f"argument 'random_samples'. This input cannot have requires_grad True.")
    return samples.detach()


def _check_sizes(kind: str, x: Tensor, kernel: tuple[int, ...], out: tuple[int, ...], dims: int) -> None:
    """PyTorch's checks of the input's rank and sizes against the windows, in its order.

    Raises:
        RuntimeError: another rank, an empty non-batch dimension, windows that do not fit.
    """
    if x.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"{kind}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: {list(x.shape)}")
    for dim in range(1, x.ndim):
        if x.shape[dim] == 0:
            raise RuntimeError(f"{kind}(): Expected input to have non-zero size for non-batch dimensions, but "
                               f"got{list(x.shape)} with dimension {dim} being empty.")
    spatial = x.shape[-dims:]
    if dims == 2:  # height, then width; the windows may reach the last position
        order, names, reach = (0, 1), ("height", "width"), 0
    else:  # time, width, height; PyTorch's 3-D check keeps them off the last position
        order, names, reach = (0, 2, 1), ("time", "width", "height"), 1
    for d in order:
        if out[d] + kernel[d] - 1 + reach > spatial[d]:
            name = names[order.index(d)]
            raise RuntimeError(f"{kind}(): pool {name} {kernel[d]} too large relative to input {name} {spatial[d]}")


def _starts(u: Tensor, size: int, kernel: int, out: int) -> Tensor:
    """The (N, C, out) int64 window starts over ``size`` positions from the samples ``u`` (N, C)."""
    n, channels = u.shape
    last = full((n, channels, min(out, 1)), size - kernel, dtype=np.int64, device=u.device)
    if out <= 1:
        return last
    alpha = tensor(float(size - kernel), dtype=u.dtype, device=u.device) / \
        tensor(float(out - 1), dtype=u.dtype, device=u.device)
    steps = arange(out - 1, dtype=u.dtype, device=u.device)
    u = u.unsqueeze(2)
    starts = ((steps + u) * alpha).to(np.int64) - (u * alpha).to(np.int64)
    return cat([starts, last], 2)


def _pool(x: Tensor, starts: list[Tensor], kernel: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Max of each window of (N, C, *spatial) ``x`` at ``starts`` (one (N, C, O_d) per dimension):
    the output and the flat in-plane argmax."""
    n, channels, *spatial = x.shape
    dims, outs = len(kernel), tuple(s.shape[2] for s in starts)
    plane, window = math.prod(spatial), math.prod(kernel)
    flat, base, stride = None, None, 1
    for d in reversed(range(dims)):
        shape = [n, channels] + [1] * (2 * dims)
        shape[2 + d] = outs[d]
        start = starts[d].reshape(*shape)
        base = start * stride if base is None else base + start * stride
        if window > 0:
            shape = [1] * (2 + 2 * dims)
            shape[2 + dims + d] = kernel[d]
            position = start + arange(kernel[d], dtype=np.int64, device=x.device).reshape(*shape)
            flat = position * stride if flat is None else flat + position * stride
        stride *= spatial[d]
    base = base.reshape(n, channels, *outs)
    if window <= 0 or min(kernel) <= 0:  # empty windows: PyTorch's -inf at the window's start
        return full((n, channels, *outs), -math.inf, dtype=x.dtype, device=x.device), base
    count = n * channels * math.prod(outs)
    flat = flat.expand(n, channels, *outs, *kernel).reshape(n, channels, math.prod(outs) * window)
    rows = x.reshape(n, channels, plane)
    if count == 0:
        index = zeros((n, channels, *outs), dtype=np.int64, device=x.device)
        return rows.gather(2, flat[:, :, :0]).reshape(n, channels, *outs), index
    values = rows.detach().gather(2, flat).reshape(n, channels, *outs, window)
    _, winner = values.max(dim=-1)
    ranks = arange(1, window + 1, dtype=np.int64, device=x.device)
    nan_rank, nan_at = (values.isnan() * ranks).max(dim=-1)  # PyTorch's scan keeps the last NaN
    winner = where(nan_rank > 0, nan_at, winner)
    index = flat.reshape(n, channels, *outs, window).gather(-1, winner.unsqueeze(-1)).squeeze(-1)
    out = rows.gather(2, index.reshape(n, channels, math.prod(outs))).reshape(n, channels, *outs)
    return out, index


def fractional_max_pool_layer(kind: str, input: Any, kernel_size: Any, output_size: Any = None,  # noqa: A002
                              output_ratio: Any = None, return_indices: bool = False, _random_samples: Any = None,
                              dims: int = 2) -> Any:
    """Fractional max pooling over the last ``dims`` dimensions of an unbatched (C, *spatial) or
    batched (N, C, *spatial) ``input``, with PyTorch's arguments and errors; ``kind`` is the
    function's name. See the module docstring for the windows.

    Raises:
        ValueError: neither ``output_size`` nor ``output_ratio``.
        IndexError: an input of fewer than ``dims + 1`` dimensions and no samples (PyTorch's).
        RuntimeError: bad sizes, rank, samples (PyTorch's messages). TypeError: non-int sizes.
        DTypeError: an integer input.
    """
    x = tensor_arg(input, kind, "input")
    if output_size is None and output_ratio is None:
        raise ValueError(f"{kind} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        output_size = _output_from_ratio(x, output_ratio, dims)
    samples = _random_samples
    if samples is None:
        batch, channels = 1 if x.ndim == dims + 1 else x.size(0), x.size(-dims - 1)
        if not is_floating(x.dtype):
            raise refuse_dtype("check_uniform_bounds", x.dtype)
        samples = rand(batch, channels, dims, dtype=x.dtype, device=x.device)
    name = f"{kind}_out" if dims == 3 else kind
    kernel = _int_tuple(kind, kernel_size, "kernel_size", 2, dims)
    out_size = _int_tuple(kind, output_size, "output_size", 3, dims)
    _check_sizes(name, x, kernel, out_size, dims)
    samples = _check_samples(kind, x, samples, dims)
    if not is_floating(x.dtype):
        raise refuse_dtype(f"{kind}_out_frame", x.dtype)
    unbatched = x.ndim == dims + 1
    out_shape = [*x.shape[:-dims], *out_size]
    if min(out_size) < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(out_size)}: {out_shape}")
    batch = x.unsqueeze(0) if unbatched else x
    samples = samples[:batch.shape[0]]
    starts = [None] * dims
    for entry, d in enumerate(_SAMPLE_DIMS[dims]):
        starts[d] = _starts(samples[:, :, entry], batch.shape[2 + d], kernel[d], out_size[d])
    out, index = _pool(batch, starts, kernel)
    if unbatched:
        out, index = out[0], index[0]
    return (out, index) if return_indices else out


def fractional_max_pool2d(input: Any, kernel_size: Any, output_size: Any = None,  # noqa: A002
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Any = None) -> Any:
    """Fractional max pooling of (N, C, H, W) or (C, H, W) input, as
    ``torch.nn.functional.fractional_max_pool2d``: windows of ``kernel_size`` at pseudo-random
    starts (Graham's fractional max pooling), one window per output position.

    Args:
        kernel_size: an int or a (kh, kw) pair.
        output_size: an int or an (oh, ow) pair; or else
        output_ratio: the output's size as a fraction of the input's (a number or a pair).
        return_indices: also return the int64 flat position (h * W + w) of each maximum.
        _random_samples: (N, C, 2) samples in [0, 1) of the input's dtype that place the windows
            (width, height); drawn from zgrad's generator when None.

    Raises:
        ValueError: neither ``output_size`` nor ``output_ratio``.
        RuntimeError: wrong rank, an empty non-batch dimension, windows that do not fit the
            input, bad samples (PyTorch's messages).
    """
    return fractional_max_pool_layer("fractional_max_pool2d", input, kernel_size, output_size, output_ratio,
                                     return_indices, _random_samples, dims=2)


def fractional_max_pool3d(input: Any, kernel_size: Any, output_size: Any = None,  # noqa: A002
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Any = None) -> Any:
    """Fractional max pooling of (N, C, T, H, W) or (C, T, H, W) input, as
    ``torch.nn.functional.fractional_max_pool3d``.

    Args:
        kernel_size: an int or a (kt, kh, kw) triple.
        output_size: an int or an (ot, oh, ow) triple; or else
        output_ratio: the output's size as a fraction of the input's (a number or a triple).
        return_indices: also return the int64 flat position (t * H * W + h * W + w) of each maximum.
        _random_samples: (N, C, 3) samples in [0, 1) of the input's dtype that place the windows
            (time, height, width); drawn from zgrad's generator when None.

    Raises:
        ValueError: neither ``output_size`` nor ``output_ratio``.
        RuntimeError: wrong rank, an empty non-batch dimension, windows that do not fit the
            input (PyTorch's 3-D rule: they must end before the last position), bad samples.
    """
    return fractional_max_pool_layer("fractional_max_pool3d", input, kernel_size, output_size, output_ratio,
                                     return_indices, _random_samples, dims=3)


def fractional_max_pool2d_with_indices(input: Any, kernel_size: Any, output_size: Any = None,  # noqa: A002
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Any = None) -> tuple[Tensor, Tensor]:
    """:func:`fractional_max_pool2d` returning (output, indices) whatever ``return_indices`` says,
    as ``torch.nn.functional.fractional_max_pool2d_with_indices``."""
    return fractional_max_pool_layer("fractional_max_pool2d", input, kernel_size, output_size, output_ratio, True,
                                     _random_samples, dims=2)


def fractional_max_pool3d_with_indices(input: Any, kernel_size: Any, output_size: Any = None,  # noqa: A002
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Any = None) -> tuple[Tensor, Tensor]:
    """:func:`fractional_max_pool3d` returning (output, indices) whatever ``return_indices`` says,
    as ``torch.nn.functional.fractional_max_pool3d_with_indices``."""
    return fractional_max_pool_layer("fractional_max_pool3d", input, kernel_size, output_size, output_ratio, True,
                                     _random_samples, dims=3)

"""Resampling of images: ``pixel_shuffle`` / ``pixel_unshuffle`` and ``channel_shuffle`` (each a
reshape, a permutation and a reshape) and ``interpolate`` (nearest and (bi)linear), as PyTorch's.

Interpolation is separable: each resized dimension is one index selection (nearest) or two
selections blended by per-position weights (linear), the indices and weights computed on the host
from the sizes alone, with PyTorch's source-index rules.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad import ops
from zgrad.kernels import dispatch
from zgrad.ops._args import tensor_arg
from zgrad.ops.indexing import IndexSelect
from zgrad.ops.pool import adaptive_avg_pool2d
from zgrad.tensor import Tensor
from zgrad.kernels.promotion import is_floating, opmath_dtype
from zgrad.ops.autocast import autocast_op

__all__ = ["INTERPOLATE_MODES", "channel_shuffle", "interpolate", "native_channel_shuffle", "pixel_shuffle",
           "pixel_unshuffle"]

INTERPOLATE_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")
_LINEAR_RANK = {"linear": 3, "bilinear": 4, "trilinear": 5}


def pixel_shuffle(input: Any, upscale_factor: int) -> Any:  # noqa: A002
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r), as ``torch.nn.functional.pixel_shuffle``.

    Raises:
        RuntimeError: fewer than 3 dimensions, or channels not divisible by r^2.
    """
    x, r = tensor_arg(input, "pixel_shuffle"), int(upscale_factor)
    if x.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with {x.ndim} "
                           f"dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *batch, channels, height, width = x.shape
    if channels % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={channels} is not divisible by {r * r}")
    lead = len(batch)
    y = ops.reshape(x, (*batch, channels // (r * r), r, r, height, width))
    y = ops.permute(y, (*range(lead), lead, lead + 3, lead + 1, lead + 4, lead + 2))
    return ops.reshape(y, (*batch, channels // (r * r), height * r, width * r))


def channel_shuffle(input: Any, groups: int) -> Any:  # noqa: A002
    """(N, g * k, *) -> (N, k * g, *): the channels split into ``groups`` of k, interleaved (channel
    i * k + j goes to j * g + i), as ``torch.nn.functional.channel_shuffle`` (ShuffleNet's).

    Raises:
        RuntimeError: 2 dimensions or fewer, ``groups`` <= 0, or channels not divisible by it
            (PyTorch's messages).
    """
    x, g = tensor_arg(input, "channel_shuffle"), int(groups)
    if x.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(x.shape)}")
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{g}")
    batch, channels, *rest = x.shape
    if channels % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {channels} channels and {g} groups.")
    y = ops.transpose(ops.reshape(x, (batch, g, channels // g, *rest)), 1, 2)
    return ops.reshape(y, tuple(x.shape))


native_channel_shuffle = channel_shuffle


def pixel_unshuffle(input: Any, downscale_factor: int) -> Any:  # noqa: A002
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W), the inverse of :func:`pixel_shuffle`.

    Raises:
        RuntimeError: fewer than 3 dimensions, or a height or width not divisible by r.
    """
    x, r = tensor_arg(input, "pixel_unshuffle"), int(downscale_factor)
    if x.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{x.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *batch, channels, height, width = x.shape
    for name, size, dim in (("height", height, -2), ("width", width, -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {name} to be divisible by downscale_factor, but "
                               f"input.size({dim})={size} is not divisible by {r}")
    lead = len(batch)
    y = ops.reshape(x, (*batch, channels, height // r, r, width // r, r))
    y = ops.permute(y, (*range(lead), lead, lead + 2, lead + 4, lead + 1, lead + 3))
    return ops.reshape(y, (*batch, channels * r * r, height // r, width // r))


def _output_sizes(x: Any, size: Any, scale_factor: Any, recompute_scale_factor: bool | None
                  ) -> tuple[list[int], list[float | None]]:
    """(each spatial dimension's output size, the scale factor its source indices use, None where
    they use input size / output size), by PyTorch's rules."""
    spatial = x.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ValueError("either size or scale_factor should be defined" if size is None
                         else "only one of size or scale_factor should be defined")
    if size is not None:
        sizes = [int(s) for s in size] if isinstance(size, (tuple, list)) else [int(size)] * spatial
        if len(sizes) != spatial:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(x.shape[2:])} and output size of {sizes}. Please provide "
                             f"input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                             f"format.")
        return sizes, [None] * spatial
    several = isinstance(scale_factor, (tuple, list))
    scales = [float(s) for s in scale_factor] if several else [float(scale_factor)] * spatial
    if len(scales) != spatial:
        raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input with "
                         f"spatial dimensions of {list(x.shape[2:])} and scale_factor of shape {scales}. Please "
                         f"provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) "
                         f"format.")
    sizes = [math.floor(n * s) for n, s in zip(x.shape[2:], scales)]
    return sizes, ([None] * spatial if recompute_scale_factor else scales)


def _nearest_indices(size: int, out: int, scale_factor: float | None, exact: bool) -> np.ndarray:
    scale = np.float32(1.0 / scale_factor if scale_factor else size / out)
    position = np.arange(out, dtype=np.float32) + np.float32(0.5 if exact else 0.0)
    return np.minimum(np.floor(position * scale).astype(np.int64), size - 1)


def _linear_weights(size: int, out: int, scale_factor: float | None, align_corners: bool, dtype: np.dtype
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower source index, upper source index, weight of the upper one) of each output position."""
    position = np.arange(out, dtype=dtype)
    if align_corners:
        source = position * dtype.type((size - 1) / (out - 1) if out > 1 else 0.0)
    else:
        scale = dtype.type(1.0 / scale_factor if scale_factor else size / out)
        source = np.maximum(scale * (position + dtype.type(0.5)) - dtype.type(0.5), dtype.type(0.0))
    lower = np.minimum(np.floor(source).astype(np.int64), size - 1)
    upper = np.minimum(lower + 1, size - 1)
    return lower, upper, (source - lower).astype(dtype)


@autocast_op()
def interpolate(input: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest",  # noqa: A002
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Any:
    """Resizes the spatial dimensions of (N, C, d1, ...) ``input``, as
    ``torch.nn.functional.interpolate``, to ``size`` or ``floor(d * scale_factor)``.

    Args:
        mode: ``'nearest'`` (PyTorch's floor rule), ``'nearest-exact'``, or ``'linear'`` (3-D input),
            ``'bilinear'`` (4-D), ``'trilinear'`` (5-D), or ``'area'`` (4-D: adaptive average pooling).
        align_corners: linear modes only: True maps the corner pixels' centers onto each other,
            False (the default) their edges.
        recompute_scale_factor: True computes source indices from the sizes rather than from
            ``scale_factor``.

    Raises:
        ValueError: neither or both of ``size`` and ``scale_factor``, sizes of the wrong length,
            ``align_corners`` with a nearest mode.
        NotImplementedError: an unknown mode, a linear mode on an input of the wrong rank or an
            integer input, ``'area'`` on an input that is not 4-D, ``antialias``.
    """
    x = tensor_arg(input, "interpolate")
    if mode not in INTERPOLATE_MODES:
        raise NotImplementedError(f"Input Error: interpolate mode {mode!r} is not supported by zgrad; expected one of "
                                  f"{', '.join(INTERPOLATE_MODES)}")
    linear = mode in _LINEAR_RANK
    if align_corners is not None and not linear:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by zgrad")
    if x.ndim < 3:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {x.ndim}D) for the "
                                  f"modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
                                  f"(got {mode})")
    if linear and x.ndim != _LINEAR_RANK[mode]:
        raise NotImplementedError(f"Got {x.ndim}D input, but {mode} mode needs {_LINEAR_RANK[mode]}D input")
    if linear and not is_floating(x.dtype):
        raise NotImplementedError(f"interpolate: {mode} mode is not implemented for '{x.dtype}' input; expected a "
                                  f"floating point input")
    sizes, scales = _output_sizes(x, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        if x.ndim != 4:
            raise NotImplementedError(f"interpolate: zgrad supports mode 'area' on 4D input only, got {x.ndim}D input")
        return adaptive_avg_pool2d(x, sizes)
    device = dispatch.device_type_of(x._data)
    dtype = x.dtype
    if linear:
        x = x.to(opmath_dtype(dtype))  # one rounding of a half result at the end, as PyTorch's kernel
    for dim, (n, out, scale) in enumerate(zip(x.shape[2:], sizes, scales), start=2):
        if not linear:
            index = _nearest_indices(n, out, scale, mode == "nearest-exact")
            x = IndexSelect.apply(x, dim, dispatch.asarray(index, np.int64, device))
            continue
        lower, upper, weight = _linear_weights(n, out, scale, bool(align_corners), np.dtype(x.dtype))
        shape = (out,) + (1,) * (x.ndim - 1 - dim)
        upper_weight = Tensor(dispatch.asarray(weight.reshape(shape), x.dtype, device))
        low = IndexSelect.apply(x, dim, dispatch.asarray(lower, np.int64, device))
        high = IndexSelect.apply(x, dim, dispatch.asarray(upper, np.int64, device))
        x = low + (high - low) * upper_weight
    return x.to(dtype)

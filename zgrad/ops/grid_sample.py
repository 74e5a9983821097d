"""``grid_sample`` and ``affine_grid`` of ``zgrad.nn.functional`` (spatial transformer networks), as
PyTorch's.

``grid_sample`` reads (N, C, *spatial) ``input`` at the points of (N, *out, k) ``grid``, whose
components run over [-1, 1] across the input's extent, x (the last dimension) first. In each
spatial dimension a point's coordinate is unnormalized to pixels, padded (border: clipped;
reflection: mirrored, then clipped) and split into taps, integer positions with weights: 1
(nearest), 2 (bilinear) or 4 (bicubic, whose taps are padded one by one, as PyTorch's). A tap
outside the input weighs zero (zeros padding). Every combination of the dimensions' taps is read
with one index selection from the input flattened to (N * pixels, C), so autograd gives the
input's gradient (an index add) and the grid's (through the weights) as PyTorch's kernels do.
"""

from __future__ import annotations

import math
import operator
import warnings
from typing import Any, Sequence

import numpy as np

from zgrad import ops
from zgrad.creation import arange, linspace, ones, zeros
from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.kernels.promotion import is_floating, opmath_dtype
from zgrad.ops._args import refuse_dtype
from zgrad.ops.autocast import autocast_op
from zgrad.tensor import Tensor
from zgrad.warning_location import user_stacklevel

__all__ = ["affine_grid", "grid_sample"]

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING_MODES = ("zeros", "border", "reflection")
_CUBIC_A = -0.75  # the bicubic convolution's parameter, as PyTorch's
_ALIGN_CORNERS_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since "
                          "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
                          "documentation of grid_sample for details.")
_UNIT_SIZE_WARNING = ("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.")


def _align_corners_or_default(align_corners: Any) -> Any:
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_WARNING, UserWarning, stacklevel=user_stacklevel())
        return False
    return align_corners


def _type_name(value: Any) -> str:
    """A type as PyTorch's argument errors name it: ``list``, ``numpy.bool``."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _check_grid_sample_arguments(x: Any, grid: Any, mode: str, align_corners: Any) -> None:
    """PyTorch's checks of ``torch.grid_sampler``, in its order and words."""
    for position, name, value in ((1, "input", x), (2, "grid", grid)):
        if not isinstance(value, Tensor):
            raise TypeError(f"grid_sampler(): argument '{name}' (position {position}) must be Tensor, not "
                            f"{_type_name(value)}")
    if not isinstance(align_corners, bool):
        raise TypeError(f"grid_sampler(): argument 'align_corners' (position 5) must be bool, not "
                        f"{_type_name(align_corners)}")
    if x.device != grid.device:
        raise RuntimeError(f"grid_sampler(): expected input and grid to be on same device, but input is on "
                           f"{x.device} and grid is on {grid.device}")
    if x.ndim == 0 or grid.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    sizes = f"input with sizes {list(x.shape)} and grid with sizes {list(grid.shape)}"
    if x.shape[0] != grid.shape[0]:
        raise ShapeError(f"grid_sampler(): expected grid and input to have same batch size, but got {sizes}")
    if grid.shape[-1] != x.ndim - 2:
        raise ShapeError(f"grid_sampler(): expected grid to have size {x.ndim - 2} in last dimension, but got grid "
                         f"with sizes {list(grid.shape)}")
    for dim in range(2, x.ndim):
        if x.shape[dim] <= 0:
            raise ShapeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                             f"sizes {list(x.shape)} with dimension {dim} being empty")
    rank = 4 if x.ndim == 4 else 5  # PyTorch sends every input that is not 4-D to its 3-D sampler
    if x.ndim != rank or grid.ndim != rank:
        raise ShapeError(f"grid_sampler(): expected {rank}D input and grid with same number of dimensions, but got "
                         f"{sizes}")
    if rank == 5 and mode == "bicubic":
        raise ShapeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not is_floating(x.dtype):
        raise refuse_dtype("grid_sampler_2d_cpu_kernel_impl" if rank == 4 else "grid_sampler3d_cpu", x.dtype)
    if grid.dtype != x.dtype:
        raise DTypeError(f"expected scalar type {scalar_type_name(x.dtype)} but found {scalar_type_name(grid.dtype)}")


def _unnormalize(coordinate: Any, size: int, align_corners: bool) -> Any:
    """[-1, 1] to pixels: the corner pixels' centers (align_corners) or their outer edges."""
    if align_corners:
        return (coordinate + 1) / 2 * (size - 1)
    return ((coordinate + 1) * size - 1) / 2


def _clip(source: Any, size: int) -> Any:
    # where rather than clamp: PyTorch counts a coordinate on the border as outside, with a zero gradient
    return ops.where(source <= 0, 0.0, ops.where(source >= size - 1, float(size - 1), source))


def _reflect(source: Any, size: int, align_corners: bool) -> Any:
    """``source`` mirrored at the borders (the corner pixels' centers or their outer edges) until it
    lies between them."""
    twice_low, twice_high = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
    if twice_low == twice_high:
        return source * 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = ops.abs(source - low)
    extra = ops.fmod(distance, span)
    flips = ops.floor(distance.detach() / span)
    return ops.where(ops.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _pad(source: Any, size: int, padding_mode: str, align_corners: bool) -> Any:
    if padding_mode == "zeros":
        return source
    if padding_mode == "reflection":
        source = _reflect(source, size, align_corners)
    return _clip(source, size)


def _cubic_coefficients(t: Any) -> list[Any]:
    """The weights of the taps at -1, 0, 1 and 2 of a point a fraction ``t`` past tap 0."""
    def near(x: Any) -> Any:  # |x| <= 1
        return ((_CUBIC_A + 2) * x - (_CUBIC_A + 3)) * x * x + 1

    def far(x: Any) -> Any:  # 1 < |x| < 2
        return ((_CUBIC_A * x - 5 * _CUBIC_A) * x + 8 * _CUBIC_A) * x - 4 * _CUBIC_A

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(coordinate: Any, size: int, mode: str, padding_mode: str, align_corners: bool) -> tuple[Any, Any]:
    """(positions, weights), each (N, points, taps): where one spatial dimension of size ``size`` is
    read for each grid coordinate, and how much each reading counts."""
    source = _unnormalize(coordinate, size, align_corners)
    if mode == "bicubic":
        low = ops.floor(source.detach())
        positions = [_pad(low + offset, size, padding_mode, align_corners) for offset in (-1, 0, 1, 2)]
        return ops.stack(positions, -1), ops.stack(_cubic_coefficients(source - low), -1)
    source = _pad(source, size, padding_mode, align_corners)
    if mode == "nearest":
        nearest = ops.round(source)
        # a weight of 1 that reaches the grid through round's zero gradient: PyTorch's grid gets zeros, not None
        return ops.unsqueeze(nearest.detach(), -1), ops.unsqueeze(nearest - nearest.detach() + 1, -1)
    low = ops.floor(source.detach())
    fraction = source - low
    return ops.stack([low, low + 1], -1), ops.stack([1 - fraction, fraction], -1)


def _read(x: Any, grid: Any, mode: str, padding_mode: str, align_corners: bool) -> Any:
    """Every output point's weighted sum of its taps, (N, C, *out)."""
    batch, channels, *spatial = x.shape
    out_shape, rank = tuple(grid.shape[1:-1]), len(spatial)
    points, pixels = math.prod(out_shape), math.prod(spatial)
    coordinates = ops.reshape(grid, (batch, points, rank))
    index = ops.reshape(arange(batch, device=x.device) * pixels, (batch, 1) + (1,) * rank)
    weight = outside = None
    for dim, size in enumerate(spatial):  # the grid's last component is the first spatial dimension's
        positions, weights = _taps(ops.select(coordinates, -1, rank - 1 - dim), size, mode, padding_mode,
                                   align_corners)
        inside = (positions >= 0) & (positions <= size - 1)
        along = (batch, points) + (1,) * dim + (positions.shape[-1],) + (1,) * (rank - 1 - dim)
        stride = math.prod(spatial[dim + 1:])
        index = index + ops.reshape(ops.where(inside, positions, 0.0).to(np.int64) * stride, along)
        weights = ops.reshape(ops.where(inside, weights, 0.0), along)
        weight = weights if weight is None else weight * weights
        away = ops.reshape(ops.logical_not(inside), along)
        outside = away if outside is None else ops.logical_or(outside, away)
    taps = math.prod(index.shape[2:])
    # A tap outside the input reads a row of zeros after the input's pixels: 0 * an inf or NaN
    # pixel would be NaN, and PyTorch's kernels skip such taps.
    index = ops.where(outside, batch * pixels, index)
    table = ops.reshape(ops.movedim(x, 1, -1), (batch * pixels, channels))
    table = ops.cat([table, zeros(1, channels, dtype=table.dtype, device=table.device)], 0)
    values = ops.reshape(ops.index_select(table, 0, ops.reshape(index, (-1,))), (batch, points, taps, channels))
    out = ops.sum(values * ops.reshape(weight, (batch, points, taps, 1)), 2)
    return ops.reshape(ops.movedim(out, -1, 1), (batch, channels) + out_shape)


@autocast_op("grid_sampler")
def grid_sample(input: Any, grid: Any, mode: str = "bilinear", padding_mode: str = "zeros",  # noqa: A002
                align_corners: bool | None = None) -> Any:
    """``input`` (N, C, H, W) or (N, C, D, H, W) read at the points of ``grid`` (N, H', W', 2) or
    (N, D', H', W', 3), as ``torch.nn.functional.grid_sample``: an (N, C, H', W') or
    (N, C, D', H', W') result, differentiable in ``input`` and ``grid`` (zero for the grid in
    nearest mode).

    Args:
        grid: each point's (x, y) or (x, y, z) position, -1 and 1 at the input's edges; points
            outside are read by ``padding_mode``.
        mode: ``'bilinear'`` (trilinear on 5-D input), ``'nearest'`` (ties to even) or
            ``'bicubic'`` (4-D input only).
        padding_mode: ``'zeros'``, ``'border'`` (the nearest edge pixel) or ``'reflection'``
            (mirrored at the edges).
        align_corners: True puts -1 and 1 on the corner pixels' centers, False (the default, with
            PyTorch's warning when None) on their outer edges.

    Raises:
        ValueError: an unknown ``mode`` or ``padding_mode``.
        TypeError: a non-tensor ``input`` or ``grid``, a non-bool ``align_corners``.
        RuntimeError: inputs on different devices, mismatched or empty shapes, bicubic on 5-D
            input, a non-floating input or a grid of another dtype (PyTorch's messages).
    """
    if mode not in _MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    align_corners = _align_corners_or_default(align_corners)
    _check_grid_sample_arguments(input, grid, mode, align_corners)
    dtype = input.dtype
    work = opmath_dtype(dtype)  # one rounding of a half result, at the end
    return _read(input.to(work), grid.to(work), mode, padding_mode, align_corners).to(dtype)


def _int_sizes(size: Sequence[Any]) -> list[int]:
    """``size`` as ints, or PyTorch's TypeError for ``affine_grid_generator``'s argument."""
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"affine_grid_generator(): argument 'size' (position 2) must be tuple of ints, not "
                        f"{_type_name(size)}")
    sizes = []
    for position, value in enumerate(size, start=1):
        try:
            sizes.append(operator.index(value))
        except TypeError:
            raise TypeError(f"affine_grid_generator(): argument 'size' failed to unpack the object at pos {position} "
                            f"with error \"type must be tuple of ints,but got {_type_name(value)}\"") from None
    return sizes


def _linspace_from_neg_one(theta: Any, steps: int, align_corners: bool) -> Any:
    """PyTorch's base grid coordinates along one dimension: -1 to 1 (the corner pixels' centers),
    or the pixel centers of [-1, 1] without align_corners."""
    if steps <= 1:
        return zeros(1, dtype=theta.dtype, device=theta.device)
    axis = linspace(-1, 1, steps, dtype=theta.dtype, device=theta.device)
    return axis if align_corners else axis * (steps - 1) / steps


def affine_grid(theta: Any, size: Sequence[int], align_corners: bool | None = None) -> Any:
    """The sampling grid of a batch of affine maps, as ``torch.nn.functional.affine_grid``: each
    output pixel's position in the normalized coordinates of :func:`grid_sample`, mapped by
    ``theta``. Differentiable in ``theta``.

    Args:
        theta: (N, 2, 3) matrices for a 4-D ``size``, (N, 3, 4) for a 5-D one.
        size: the output's (N, C, H, W) or (N, C, D, H, W); the grid is (N, H, W, 2) or
            (N, D, H, W, 3).
        align_corners: as :func:`grid_sample`'s (pass both the same); None warns and means False.

    Raises:
        TypeError: a non-tensor ``theta``, sizes that are not ints, a non-bool ``align_corners``.
        ValueError: a non-floating ``theta``, one of the wrong shape for ``size``, or a size <= 0.
        NotImplementedError: ``size`` is neither 4-D nor 5-D.
        RuntimeError: ``theta``'s batch is not ``size[0]``.
    """
    align_corners = _align_corners_or_default(align_corners)
    if not isinstance(theta, Tensor):
        raise TypeError(f"affine_grid_generator(): argument 'theta' (position 1) must be Tensor, not "
                        f"{_type_name(theta)}")
    if not is_floating(theta.dtype):
        raise ValueError(f"Expected theta to have floating point type, but got zgrad.{np.dtype(theta.dtype).name}")
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    rank = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (rank, rank + 1):
        raise ValueError(f"Expected a batch of {rank}D affine matrices of shape Nx{rank}x{rank + 1} for size {size}. "
                         f"Got {theta.shape}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn(_UNIT_SIZE_WARNING, UserWarning, stacklevel=user_stacklevel())
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    batch, _, *spatial = _int_sizes(size)
    if not isinstance(align_corners, bool):
        raise TypeError(f"affine_grid_generator(): argument 'align_corners' (position 3) must be bool, not "
                        f"{_type_name(align_corners)}")
    if theta.shape[0] != batch:
        raise ShapeError(f"Expected size for first two dimensions of batch2 tensor to be: [{batch}, {rank + 1}] but "
                         f"got: [{theta.shape[0]}, {rank + 1}].")
    axes = ops.meshgrid(*[_linspace_from_neg_one(theta, steps, align_corners) for steps in spatial], indexing="ij")
    base = list(reversed(axes))  # x (the last dimension) first
    base.append(ones(tuple(spatial), dtype=theta.dtype, device=theta.device))
    base_grid = ops.reshape(ops.stack(base, -1), (math.prod(spatial), rank + 1))
    return ops.reshape(ops.matmul(base_grid, ops.transpose(theta, 1, 2)), (batch, *spatial, rank))

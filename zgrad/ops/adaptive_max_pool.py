"""Adaptive max pooling (``adaptive_max_pool1d``, ``adaptive_max_pool2d``, ``adaptive_max_pool3d``) as
PyTorch's: output position i of a dimension of size I pooled to O covers [floor(i*I/O), ceil((i+1)*I/O)).

The argmax is found on values outside the graph, one dimension at a time from the last: each
window is read as K = the longest window's length positions (index_select of start + j, the
shorter windows repeating their last element, which never wins a tie), reduced with ``max(dim)``
(the first maximum; the last NaN where there is one), and the positions already chosen in later
dimensions follow the winner. That is PyTorch's pick in its scan order (the last dimension fastest):
the first maximum, or the last NaN. The output then gathers
the input at the flat index (d * H * W + h * W + w within each channel), so its gradient is
PyTorch's: scattered to the argmax, summed where windows share it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.creation import tensor
from zgrad.ops._args import tensor_arg
from zgrad.ops.conv import check_floating
from zgrad.ops.elementwise import minimum
from zgrad.ops.indexing import where
from zgrad.ops.three_dimensional import adaptive_sizes

__all__ = ["adaptive_max_pool_layer", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"]


def _windows(size: int, out: int) -> tuple[list[int], list[int], list[list[int]]]:
    """The starts and (exclusive) ends of the ``out`` windows over ``size`` positions, and each
    window's positions padded to the longest with its last one."""
    starts = [i * size // out for i in range(out)]
    ends = [-(-(i + 1) * size // out) for i in range(out)]
    longest = max(e - s for s, e in zip(starts, ends))
    return starts, ends, [[min(s + j, e - 1) for j in range(longest)] for s, e in zip(starts, ends)]


def _argmax(x: Any, out_size: tuple) -> Any:
    """The flat int64 argmax (within each (n, c) block) of each window of (N, C, *spatial) ``x``."""
    dims = len(out_size)
    n, channels, *spatial = x.shape
    if 0 in out_size:
        return tensor(np.zeros((n, channels, *out_size), dtype=np.int64), device=x.device)
    values, chosen = x.detach(), []  # chosen: positions in the later dimensions, shaped as values
    for axis in range(dims + 1, 1, -1):
        starts, ends, table = _windows(spatial[axis - 2], out_size[axis - 2])
        longest = len(table[0])
        flat = tensor(np.array(table, dtype=np.int64).reshape(-1), device=x.device)

        def windows(t: Any, axis: int = axis, out: int = len(starts), longest: int = longest, flat: Any = flat) -> Any:
            return t.index_select(axis, flat).reshape(*t.shape[:axis], out, longest, *t.shape[axis + 1:])

        grouped = windows(values)
        values, winner = grouped.max(dim=axis + 1)
        trailing = (1,) * (dims + 1 - axis)
        # PyTorch's scan keeps the last NaN: the one at the largest offset of the window
        ranks = tensor(np.arange(1, longest + 1), device=x.device).reshape(longest, *trailing)
        nan_rank, nan_at = (grouped.isnan() * ranks).max(dim=axis + 1)
        winner = where(nan_rank > 0, nan_at, winner)
        pick = winner.unsqueeze(axis + 1)
        chosen = [windows(p).gather(axis + 1, pick).squeeze(axis + 1) for p in chosen]
        start = tensor(starts, dtype=np.int64, device=x.device).reshape(-1, *trailing)
        last = tensor(ends, dtype=np.int64, device=x.device).reshape(-1, *trailing) - 1
        chosen.insert(0, minimum(winner + start, last))  # a repeated last element is the last one
    index, stride = None, 1
    for position, size in zip(reversed(chosen), reversed(spatial)):
        index = position * stride if index is None else index + position * stride
        stride *= size
    return index


def adaptive_max_pool_layer(name: object, kind: str, input: Any, output_size: Any,  # noqa: A002
                            return_indices: bool = False, dims: int = 2) -> Any:
    """Adaptive max pooling over the last ``dims`` dimensions of an unbatched (C, *spatial) or
    batched (N, C, *spatial) ``input``; errors start with ``name``, then PyTorch's text for ``kind``
    (its function name).

    Raises:
        RuntimeError: a wrong rank, an empty non-batch dimension, a bad output size, an integer input.
        TypeError: output size entries that are not ints (or None).
    """
    x = tensor_arg(input, name, "input")
    if x.ndim not in (dims + 1, dims + 2):
        if dims == 1:
            raise RuntimeError(f"{name}: Expected 2 to 3 dimensions, but got {x.ndim}-dimensional tensor for argument "
                               f"#1 'self' (while checking arguments for adaptive_max_pool1d)")
        raise RuntimeError(f"{name}: {kind}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: {list(x.shape)}")
    for dim in range(1, x.ndim):
        if x.shape[dim] == 0:
            raise RuntimeError(f"{name}: {kind}(): Expected input to have non-zero size for non-batch dimensions, but "
                               f"input has sizes {list(x.shape)} with dimension {dim} being empty")
    check_floating(name, x)
    if dims == 1:
        sizes = output_size if isinstance(output_size, int) else tuple(output_size)
        if not isinstance(sizes, int) and len(sizes) != 1:
            raise RuntimeError(f"{name}: adaptive_max_pool1d() argument 'output_size' should contain one int (got "
                               f"{len(sizes)})")
        if not isinstance(sizes, int) and sizes[0] is None:
            raise TypeError(f"{name}: adaptive_max_pool1d(): argument 'output_size' must be tuple of ints, not "
                            f"NoneType")
    elif output_size is not None and not isinstance(output_size, int) and len(tuple(output_size)) != dims:
        raise RuntimeError(f"{name}: {kind}(): internal error: output_size.size() must be {dims}")
    out_size = adaptive_sizes(name, kind, x, output_size, dims)
    unbatched = x.ndim == dims + 1
    batch = x.unsqueeze(0) if unbatched else x
    index = _argmax(batch, out_size)
    n, channels = batch.shape[:2]
    out = batch.reshape(n, channels, -1).gather(2, index.reshape(n, channels, -1)).reshape(n, channels, *out_size)
    if unbatched:
        out, index = out[0], index[0]
    return (out, index) if return_indices else out


def adaptive_max_pool1d(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """Max pooling of (N, C, L) or (C, L) input to ``output_size`` positions, as
    ``torch.nn.functional.adaptive_max_pool1d``; with ``return_indices`` also the int64 position
    of each maximum.

    Raises:
        RuntimeError: wrong rank, an empty non-batch dimension, an output size of another length.
    """
    return adaptive_max_pool_layer("adaptive_max_pool1d", "adaptive_max_pool1d", input, output_size, return_indices,
                                   dims=1)


def adaptive_max_pool2d(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """Max pooling of (N, C, H, W) or (C, H, W) input to a fixed size, as
    ``torch.nn.functional.adaptive_max_pool2d``.

    Args:
        output_size: an int (square), or an (oh, ow) pair where None keeps the input's size.
        return_indices: also return the int64 flat position (h * W + w) of each maximum.

    Raises:
        RuntimeError: wrong rank, an empty non-batch dimension, a bad output size.
    """
    return adaptive_max_pool_layer("adaptive_max_pool2d", "adaptive_max_pool2d", input, output_size, return_indices,
                                   dims=2)


def adaptive_max_pool3d(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) input to a fixed size, as
    ``torch.nn.functional.adaptive_max_pool3d``.

    Args:
        output_size: an int (a cube), or an (od, oh, ow) triple where None keeps the input's size.
        return_indices: also return the int64 flat position (d * H * W + h * W + w) of each maximum.

    Raises:
        RuntimeError: wrong rank, an empty non-batch dimension, a bad output size.
    """
    return adaptive_max_pool_layer("adaptive_max_pool3d", "adaptive_max_pool3d", input, output_size, return_indices,
                                   dims=3)

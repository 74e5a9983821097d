"""``unfold`` (im2col) and ``fold`` (col2im) of ``zgrad.nn.functional``, as PyTorch's: sliding
blocks of a (N, C, H, W) or (C, H, W) input laid out as columns, and columns summed back into an
image, with PyTorch's arguments, checks and error texts.

Both are composed of differentiable ops: ``unfold`` pads the input, flattens its spatial dims and
selects the block elements with one integer index (built with numpy once per geometry), so its
gradient is index_select's; ``fold`` adds the columns at the same index into a zero image
(index_add) and crops the padding off, so each is the other's adjoint. The CUDA backend runs them
through the same index kernels.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from zgrad.kernels import dispatch
from zgrad.ops._args import refuse_dtype, tensor_arg
from zgrad.ops.indexing import IndexSelect
from zgrad.ops.padding import pad as _pad
from zgrad.ops.scattering import IndexAdd
from zgrad.kernels.promotion import kind
from zgrad.tensor import Tensor

__all__ = ["fold", "unfold"]

Pair = tuple[int, int]


def _pair_args(function: str, named: Sequence[tuple[str, int, Any]]) -> list[tuple[int, ...]]:
    """Each ``(name, position, value)`` as a tuple of ints (an int is used twice), then each
    checked to have 2 entries, in PyTorch's order (types first, then lengths).

    Raises:
        TypeError: an entry that is not an int (PyTorch's argument-parsing message).
        RuntimeError: a sequence of another length than 2 (PyTorch's message).
    """
    values = []
    for name, position, value in named:
        items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
        for i, item in enumerate(items):
            if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
                raise TypeError(f"{function}(): argument '{name}' (position {position}) must be tuple of ints, but "
                                f"found element of type {type(item).__name__} at pos {i}")
        values.append(tuple(int(item) for item in items))
    for (name, _, _), items in zip(named, values):
        if len(items) != 2:
            raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(items)}")
    return values


def _check_positive(what: str, label: str, value: Pair, *, allow_zero: bool = False) -> None:
    bad = min(value) < 0 if allow_zero else min(value) <= 0
    if bad:
        condition = "be non-negative" if allow_zero else "be greater than zero"
        raise RuntimeError(f"{what} should {condition}, but got {label}_height: {value[0]} {label}_width: {value[1]}")


def _blocks(size: Pair, kernel: Pair, dilation: Pair, padding: Pair, stride: Pair) -> Pair:
    """The number of sliding blocks along the height and the width (PyTorch's rounding down)."""
    return tuple((size[d] + 2 * padding[d] - (dilation[d] * (kernel[d] - 1) + 1)) // stride[d] + 1
                 for d in range(2))  # type: ignore[return-value]


@functools.lru_cache(maxsize=256)
def _block_index(width: int, kernel: Pair, dilation: Pair, stride: Pair, blocks: Pair) -> np.ndarray:
    """The flat position, in a padded image ``width`` wide, of each element of each block: kernel
    row, kernel column, block row, block column (the order of PyTorch's columns), flattened."""
    rows = (np.arange(kernel[0]) * dilation[0])[:, None, None, None] + (np.arange(blocks[0]) * stride[0])[:, None]
    cols = (np.arange(kernel[1]) * dilation[1])[:, None, None] + np.arange(blocks[1]) * stride[1]
    index = (rows * width + cols).reshape(-1).astype(np.int64)
    index.flags.writeable = False
    return index


def _device_index(x: Any, *key: Any) -> Any:
    return dispatch.asarray(_block_index(*key), np.int64, dispatch.device_type_of(x._data))


def _format(values: Pair) -> str:
    return f"({values[0]}, {values[1]})"


def unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Any:  # noqa: A002
    """The sliding blocks of a (N, C, H, W) or (C, H, W) input as columns, as
    ``torch.nn.functional.unfold`` (im2col): (N, C * kh * kw, L), L the number of blocks (without
    the batch dim for unbatched input). Each of ``kernel_size``, ``dilation``, ``padding``
    (zeros on both sides) and ``stride`` is an int or a pair.

    Raises:
        TypeError: a non-tensor input, a window argument that is not ints (PyTorch's message).
        RuntimeError: a window argument of another length than 2, a non-positive kernel size,
            dilation or stride, a negative padding, an input that is not 3-D or 4-D with non-zero
            dims after the batch, a window larger than the padded input (PyTorch's messages).
        IndexError: a 0-, 1- or 2-D input (as PyTorch).
        DTypeError: an integer input (PyTorch's "not implemented" message).
    """
    x = tensor_arg(input, "im2col", "input")
    kernel, dil, pad, step = _pair_args("im2col", [("kernel_size", 2, kernel_size), ("dilation", 3, dilation),
                                                   ("padding", 4, padding), ("stride", 5, stride)])
    _check_positive("kernel size", "kernel", kernel)
    _check_positive("dilation", "dilation", dil)
    _check_positive("padding", "pad", pad, allow_zero=True)
    _check_positive("stride", "stride", step)
    if x.ndim == 0:
        raise IndexError("Dimension specified as 1 but tensor has no dimensions")
    if x.ndim < 3:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-x.ndim}, {x.ndim - 1}], but got "
                         f"{x.ndim})")
    if x.ndim not in (3, 4) or 0 in x.shape[x.ndim - 3:]:
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {list(x.shape)}")
    size = (x.shape[-2], x.shape[-1])
    blocks = _blocks(size, kernel, dil, pad, step)
    if min(blocks) < 1:
        raise RuntimeError(f"Given input with spatial size {_format(size)}, kernel_size={_format(kernel)}, "
                           f"dilation={_format(dil)}, padding={_format(pad)}, calculated shape of the array of "
                           f"sliding blocks as {_format(blocks)}, but its components must be at least one.")
    if kind(x.dtype) in "iu":
        raise refuse_dtype(f"im2col_out_{x.device.type}", x.dtype)
    batched = x if x.ndim == 4 else x.unsqueeze(0)
    if pad != (0, 0):
        batched = _pad(batched, (pad[1], pad[1], pad[0], pad[0]))
    n, c, height, width = batched.shape
    flat = batched.reshape(n, c, height * width)
    columns = IndexSelect.apply(flat, 2, _device_index(x, width, kernel, dil, step, blocks))
    columns = columns.reshape(n, c * kernel[0] * kernel[1], blocks[0] * blocks[1])
    return columns if x.ndim == 4 else columns.squeeze(0)


def fold(input: Any, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,  # noqa: A002
         stride: Any = 1) -> Any:
    """Columns of sliding blocks summed into an image, as ``torch.nn.functional.fold`` (col2im,
    the adjoint of :func:`unfold`): (N, C * kh * kw, L) to (N, C, *output_size), or (C * kh * kw,
    L) to (C, *output_size); overlapping block elements add up, those in the padding are dropped.

    Raises:
        TypeError: a non-tensor input, a size argument that is not ints (PyTorch's message).
        RuntimeError: a size argument of another length than 2, a non-positive kernel size,
            stride or dilation, a negative padding, an input that is not 2-D or 3-D with non-zero
            dims after the batch, a channel count not divisible by kh * kw, a number of columns
            that is not the number of blocks (PyTorch's messages).
        DTypeError: an integer input (PyTorch's "not implemented" message).
    """
    x = tensor_arg(input, "col2im", "input")
    out, kernel, dil, pad, step = _pair_args("col2im", [
        ("output_size", 2, output_size), ("kernel_size", 3, kernel_size), ("dilation", 4, dilation),
        ("padding", 5, padding), ("stride", 6, stride)])
    _check_positive("kernel size", "kernel", kernel)
    _check_positive("stride", "stride", step)
    _check_positive("dilation", "dilation", dil)
    _check_positive("padding", "pad", pad, allow_zero=True)
    if x.ndim not in (2, 3) or 0 in x.shape[x.ndim - 2:] or (x.ndim == 2 and 0 in x.shape):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(x.shape)}")
    channels, length = x.shape[-2], x.shape[-1]
    per_block = kernel[0] * kernel[1]
    if channels % per_block:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={channels} and kernel_size={_format(kernel)}.")
    blocks = _blocks(out, kernel, dil, pad, step)
    given = (f"Given output_size={_format(out)}, kernel_size={_format(kernel)}, dilation={_format(dil)}, "
             f"padding={_format(pad)}, stride={_format(step)}, ")
    if blocks[0] * blocks[1] != length:
        raise RuntimeError(f"{given}expected size of input's dimension 2 to match the calculated number of sliding "
                           f"blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size(2)={length}.")
    if min(blocks) < 1:
        raise RuntimeError(f"{given}calculated shape of the array of sliding blocks as {_format(blocks)}, which is too "
                           f"small (non-positive)")
    if kind(x.dtype) in "iu":
        raise refuse_dtype(f"col2im_out_{x.device.type}", x.dtype)
    batched = x if x.ndim == 3 else x.unsqueeze(0)
    n, c = batched.shape[0], channels // per_block
    height, width = out[0] + 2 * pad[0], out[1] + 2 * pad[1]
    image = Tensor(dispatch.full((n, c, height * width), 0, x.dtype, dispatch.device_type_of(x._data)))
    image = IndexAdd.apply(image, 2, _device_index(x, width, kernel, dil, step, blocks),
                           batched.reshape(n, c, per_block * length), 1)
    image = image.reshape(n, c, height, width)
    if pad != (0, 0):
        image = image[:, :, pad[0]:pad[0] + out[0], pad[1]:pad[1] + out[1]]
    return image if x.ndim == 3 else image.squeeze(0)

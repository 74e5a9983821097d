"""Padding (``torch.nn.functional.pad``): constant padding as one op that writes the input into
a filled result (negative amounts crop), and the reflect, replicate and circular modes as an
index selection along each padded dimension, whose indices follow
:func:`zgrad.kernels.vocabulary.padding_source` (computed on the host from the shape alone).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch
from zgrad.ops._args import tensor_arg
from zgrad.ops.backward_ops import detached, linear_in_grad
from zgrad.ops.indexing import IndexSelect, index_select_backward

__all__ = ["ConstantPad", "PAD_MODES", "mode_pad_backward", "pad"]

PAD_MODES = ("constant", "reflect", "replicate", "circular")


class ConstantPad(Op):
    """``x`` inside a result filled with ``value``: ``source`` selects the kept part of ``x`` (all of it
    unless a padding amount is negative) and ``target`` where it goes in the result. The gradient
    is the kept part of the result's, back in place: a map linear in it, whose adjoint pads again
    with zeros."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, shape, source, target, value):
        ctx.shape, ctx.source, ctx.target = x.shape, source, target
        out = dispatch.full(shape, value, x.dtype, dispatch.device_type_of(x))
        out[target] = x[source]
        return out

    @staticmethod
    def backward(ctx, grad):
        padded = grad.shape

        def unpad(g):
            return dispatch.slice_backward(g[ctx.target], ctx.source, ctx.shape, g.dtype)

        def pad(g):
            out = dispatch.full(padded, 0, g.dtype, dispatch.device_type_of(g))
            out[ctx.target] = g[ctx.source]
            return out

        return linear_in_grad(grad, unpad, pad), None, None, None, None


def _pairs(x: Any, pad: Sequence[int]) -> list[tuple[int, int, int]]:
    """(dim, before, after) for each padded dimension, the last dimension first, as ``pad`` lists them."""
    if not isinstance(pad, (tuple, list)) or not all(isinstance(p, (int, np.integer)) for p in pad):
        raise TypeError(f"pad(): argument 'pad' must be a tuple of ints, got {pad!r}")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > x.ndim:
        raise RuntimeError("Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {x.ndim}")
    return _checked_pairs(x.ndim, pad)


def _checked_pairs(ndim: int, pad: Sequence[int]) -> list[tuple[int, int, int]]:
    """:func:`_pairs` of an already checked ``pad``."""
    return [(ndim - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(len(pad) // 2)]


def _constant(x: Any, pairs: list[tuple[int, int, int]], value: float) -> Any:
    shape, source, target = list(x.shape), [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for dim, before, after in pairs:
        size = x.shape[dim] + before + after
        if size < 0:
            raise RuntimeError(f"The input size {x.shape[dim]}, plus negative padding {before} and {after} resulted "
                               f"in a negative output size, which is invalid. Check dimension {dim} of your input.")
        shape[dim] = size
        source[dim] = slice(max(-before, 0), x.shape[dim] - max(-after, 0))
        target[dim] = slice(max(before, 0), size - max(after, 0))
    return ConstantPad.apply(x, tuple(shape), tuple(source), tuple(target), value)


def _source_indices(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """The input index each output position along a dimension reads (``padding_source``, vectorized)."""
    i = np.arange(-before, size + after)
    if mode == "reflect":
        return np.where(i < 0, -i, np.where(i >= size, 2 * (size - 1) - i, i))
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    return np.mod(i, size)  # circular


def _check_mode_sizes(x: Any, pairs: list[tuple[int, int, int]], mode: str) -> None:
    """PyTorch's rules: 1 to 3 padded dimensions plus one or two leading ones; reflection
    needs padding < size, circular padding <= size."""
    if len(pairs) > 3 or x.ndim not in (len(pairs) + 1, len(pairs) + 2):
        raise NotImplementedError(
            f"Padding size {2 * len(pairs)} is not supported for {x.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    for dim, before, after in pairs:
        size = x.shape[dim]
        if mode == "reflect" and max(before, after) >= size:
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                               f"got: padding ({before}, {after}) at dimension {dim} of input {list(x.shape)}")
        if mode == "circular" and max(before, after) > size:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if mode == "replicate" and size == 0 and before + after > 0:
            raise RuntimeError(f"padding size is expected to be greater than 0 for dimension {dim} of input "
                               f"{list(x.shape)}")


def pad(input: Any, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Any:  # noqa: A002
    """Pads ``input``, as ``torch.nn.functional.pad``.

    Args:
        input: any tensor.
        pad: (before, after) amounts per dimension, the last dimension first:
            ``(left, right, top, bottom, ...)``; negative amounts crop (constant mode).
        mode: ``'constant'`` (filled with ``value``, 0 by default), ``'reflect'`` (mirrored without
            the edge), ``'replicate'`` (the edge repeated) or ``'circular'`` (wrapped around).
        value: the fill of constant padding.

    Returns:
        A new tensor; gradients flow back to ``input`` (summed where an element is read twice).

    Raises:
        RuntimeError: an odd-length ``pad``, more pairs than dimensions, reflection padding not
            smaller than the dimension, circular padding larger than it, a ``value`` with a
            non-constant mode.
        NotImplementedError: a non-constant mode on an input that is not 2-5-D, matching ``pad``.
            An unknown mode.
    """
    x = tensor_arg(input, "pad", "input")
    pairs = _pairs(x, pad)
    if mode == "constant":
        return _constant(x, pairs, 0.0 if value is None else value)
    if mode not in PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    _check_mode_sizes(x, pairs, mode)
    for dim, index, _ in _selections(tuple(x.shape), pairs, mode, dispatch.device_type_of(x._data)):
        x = IndexSelect.apply(x, dim, index)
    return x


def _selections(shape: tuple[int, ...], pairs: list[tuple[int, int, int]], mode: str, device_type: str) -> list:
    """(dim, indices, shape selected from) of each index selection that pads ``shape`` in ``mode``."""
    steps = []
    for dim, before, after in pairs:
        index = dispatch.asarray(_source_indices(shape[dim], before, after, mode), np.int64, device_type)
        steps.append((dim, index, shape))
        shape = (*shape[:dim], index.shape[0], *shape[dim + 1:])
    return steps


def mode_pad_backward(grad: Any, shape: tuple[int, ...], pad: Sequence[int], mode: str) -> Any:
    """The gradient reaching the input (of ``shape``) of ``pad(input, pad, mode)`` for a mode other
    than 'constant', from the padded result's ``grad`` (recorded when it is a tensor). ``pad`` as
    :func:`pad` takes it, already checked; a negative amount crops."""
    steps = _selections(shape, _checked_pairs(len(shape), pad), mode, dispatch.device_type_of(detached(grad)))
    for dim, index, selected_from in reversed(steps):
        grad = index_select_backward(grad, selected_from, dim, index)
    return grad


"""The 3-D convolutions and poolings (``conv3d``, ``conv_transpose3d``, ``max_pool3d``, ``avg_pool3d``,
``adaptive_avg_pool3d``) as PyTorch's, composed of the 2-D ops so that gradients and the CUDA backend
come with them.

- ``conv3d``: the kernel-depth slices of the (padded) input are stacked into the channels, depth
  folded into the batch, and one grouped ``conv2d`` with the weight laid out to match sums over
  the kernel depth: (N, C, D, H, W) -> (N * OD, G * kD * C / G, H, W).
- ``conv_transpose3d``: one grouped ``conv_transpose2d`` per depth slice (depth in the batch, the
  kernel depth in the output channels), each kernel-depth result spread to its strided output rows
  (a zero interleave) and shifted into place by a padding (a negative one crops), then summed.
- ``max_pool3d``: ``max_pool2d`` over each depth slice, then the first maximum over each depth
  window (a loop over the kernel depth); the flat argmax (d * H * W + h * W + w) gathers the output
  from the input, whose gradient is then PyTorch's (scattered to the argmax).
- ``avg_pool3d``: ``avg_pool2d`` over each depth slice, then a sum over each depth window divided by
  its depth count: PyTorch's divisor is a product over the three dimensions.
- ``adaptive_avg_pool3d``: ``adaptive_avg_pool2d`` over the height and width, then over the depth.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.creation import tensor
from zgrad.kernels.dispatch_layers import PADDING_MODES
from zgrad.ops._args import tensor_arg
from zgrad.ops.autocast import autocast_op
from zgrad.ops.conv import check_floating, conv2d_layer
from zgrad.ops.conv_transpose import conv_transpose2d_layer, transposed_output_size
from zgrad.ops.functions import stack
from zgrad.ops.indexing import where
from zgrad.ops.padding import pad
from zgrad.ops.pool import _output_size, adaptive_avg_pool2d_layer, avg_pool2d_layer, max_pool2d_layer

__all__ = ["triple", "conv3d_layer", "conv3d", "conv_transpose3d_layer", "conv_transpose3d", "max_pool3d_layer",
           "max_pool3d", "avg_pool3d_layer", "avg_pool3d", "adaptive_avg_pool3d_layer", "adaptive_avg_pool3d"]


def _ints(value: Any) -> tuple | None:
    """An int or a sequence of ints as a tuple (an int or a 1-sequence thrice), None if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,) * 3
    try:
        items = tuple(value)
    except TypeError:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        return None
    return items * 3 if len(items) == 1 else items


def triple(value: Any, what: str) -> tuple[int, int, int]:
    """An int or a (d, h, w) sequence as PyTorch's ``_triple``: a 3-tuple of ints.

    Raises:
        ValueError: not an int or a sequence of one or three ints.
    """
    items = _ints(value)
    if items is None or len(items) != 3:
        raise ValueError(f"{what} must be an int or a 3-element tuple, got {value!r}")
    return items  # type: ignore[return-value]


def _conv_arg(name: object, value: Any, what: str) -> tuple[int, int, int]:
    items = _ints(value)
    if items is None or len(items) != 3:
        raise RuntimeError(f"{name}: expected {what} to be a single integer value or a list of 3 values to match "
                           f"the convolution dimensions, but got {what}={list(items or [value])}")
    return items  # type: ignore[return-value]


def _pool_arg(name: object, value: Any, what: str, average: bool = False) -> tuple[int, int, int]:
    items = _ints(value)
    if items is None or len(items) != 3:
        raise RuntimeError(f"{name}: {what} must {'' if average else 'either '}be a single int, or a tuple of three "
                           f"ints")
    return items  # type: ignore[return-value]


def _batched(x: Any) -> Any:
    return x.unsqueeze(0) if x.ndim == 4 else x


def _conv_input(name: object, kind: str, input: Any, weight: Any, bias: Any) -> tuple:  # noqa: A002
    x = tensor_arg(input, name, "input")
    w = tensor_arg(weight, name, "weight")
    b = None if bias is None else tensor_arg(bias, name, "bias")
    if x.ndim not in (4, 5):
        raise RuntimeError(f"{name}: Expected 4D (unbatched) or 5D (batched) input to {kind}, but got input of "
                           f"size: {list(x.shape)}")
    if w.ndim != 5:
        channels = "in_channels, out_channels/groups" if kind == "conv_transpose3d" else \
            "out_channels, in_channels/groups"
        raise RuntimeError(f"{name}: weight should have 5 dimensions ({channels}, kD, kH, kW), got weight of size "
                           f"{list(w.shape)}")
    return x, w, b


def _conv_padding(name: object, padding: Any, kernel: tuple, stride: tuple, dilation: tuple) -> list:
    """[(front, back), (top, bottom), (left, right)] from an int, a triple, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * 3
        if padding != "same":
            raise RuntimeError(f"{name}: Invalid padding string: {padding!r}")
        if any(s != 1 for s in stride):
            raise RuntimeError(f"{name}: padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]  # an odd total: the extra one after
        return [(t // 2, t - t // 2) for t in totals]
    return [(p, p) for p in _conv_arg(name, padding, "padding")]


def _check_mode_padding(name: object, x: Any, padding_mode: str, pads: list) -> None:
    """Reflection needs padding < size, circular padding <= size (the last dimension checked first)."""
    if padding_mode in ("zeros", "replicate"):
        return
    reflect = padding_mode == "reflect"
    for dim in (4, 3, 2):
        size, amounts = x.shape[dim], pads[dim - 2]
        if max(amounts) > size or (reflect and max(amounts) == size):
            raise RuntimeError(f"{name}: Padding size should be less than{'' if reflect else ' or equal to'} the "
                               f"corresponding input dimension, but got: padding {amounts} at dimension {dim} of "
                               f"input {list(x.shape)}")


@autocast_op("conv3d")
def conv3d_layer(name: object, input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, padding_mode: str = "zeros") -> Any:
    """:func:`conv3d` with ``padding_mode`` and error messages that start with ``name``."""
    x, w, b = _conv_input(name, "conv3d", input, weight, bias)
    unbatched = x.ndim == 4
    x = _batched(x)
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError(f"{name}: non-positive groups is not supported, got groups={groups}")
    if w.shape[0] % groups:
        raise RuntimeError(f"{name}: Given groups={groups}, expected weight to be divisible by {groups} at dimension "
                           f"0, but got weight of size [{list(w.shape)}] instead")
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(f"{name}: Given groups={groups}, weight of size {list(w.shape)}, expected input"
                           f"{list(x.shape)} to have {w.shape[1] * groups} channels, but got {x.shape[1]} channels "
                           f"instead")
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise RuntimeError(f"{name}: Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with "
                           f"{w.shape[0]} elements, but got bias of size {list(b.shape)} instead")
    check_floating(name, x, ("weight", w), ("bias", b))
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"padding_mode must be one of {set(PADDING_MODES)}, but got padding_mode={padding_mode!r}")
    stride, dilation = _conv_arg(name, stride, "stride"), _conv_arg(name, dilation, "dilation")
    if min(stride) <= 0:
        raise RuntimeError(f"{name}: non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError(f"{name}: non-positive dilation is not supported")
    kernel = tuple(w.shape[2:])
    pads = _conv_padding(name, padding, kernel, stride, dilation)
    if min(min(p) for p in pads) < 0:
        raise RuntimeError(f"{name}: negative padding is not supported")
    padded = [n + sum(p) for n, p in zip(x.shape[2:], pads)]
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    if any(p < e for p, e in zip(padded, effective)):
        raise RuntimeError(f"{name}: Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
                           f"Kernel size: ({' x '.join(map(str, effective))}). Kernel size can't be greater than "
                           f"actual input size")
    _check_mode_padding(name, x, padding_mode, pads)
    flat = (pads[2][0], pads[2][1], pads[1][0], pads[1][1], pads[0][0], pads[0][1])
    plane_pad = (0, 0)
    if padding_mode != "zeros":
        x = pad(x, flat, padding_mode)
    elif pads[1][0] != pads[1][1] or pads[2][0] != pads[2][1]:
        x = pad(x, flat)
    else:  # the height and width padding is conv2d's
        if max(pads[0]):
            x = pad(x, (0, 0, 0, 0, *pads[0]))
        plane_pad = (pads[1][0], pads[2][0])
    n, channels, depth, height, width = x.shape
    out_channels, group_channels, k_depth, k_height, k_width = w.shape
    out_depth = (depth - effective[0]) // stride[0] + 1
    reach = (out_depth - 1) * stride[0] + 1
    slices = [x[:, :, k * dilation[0]:k * dilation[0] + reach:stride[0]] for k in range(k_depth)]
    # (N, C, kD, OD, H, W) -> (N * OD, G * kD * C/G, H, W): each group's channels kernel-depth major
    cols = (slices[0].unsqueeze(2) if k_depth == 1 else stack(slices, 2))
    cols = cols.reshape(n, groups, group_channels, k_depth, out_depth, height, width)
    cols = cols.permute(0, 4, 1, 3, 2, 5, 6).reshape(n * out_depth, channels * k_depth, height, width)
    planes = w.permute(0, 2, 1, 3, 4).reshape(out_channels, k_depth * group_channels, k_height, k_width)
    out = conv2d_layer(name, cols, planes, None, stride[1:], plane_pad, dilation[1:], groups)
    out = out.reshape(n, out_depth, out_channels, *out.shape[-2:]).permute(0, 2, 1, 3, 4)
    out = out.contiguous() if b is None else out + b.reshape(1, out_channels, 1, 1, 1)
    return out[0] if unbatched else out


def conv3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,  # noqa: A002
           groups: int = 1) -> Any:
    """3-D cross-correlation over (N, C, D, H, W) or (C, D, H, W) input, as ``torch.nn.functional.conv3d``.

    Args:
        weight: (out_channels, C / groups, kD, kH, kW).
        bias: optional (out_channels,).
        stride, dilation: an int or a (d, h, w) triple, > 0.
        padding: an int, a triple, ``'valid'`` or ``'same'`` (stride 1 only).
        groups: input and output channels are split into this many groups.

    Raises:
        RuntimeError: wrong ranks, channel counts, a kernel larger than the padded input, mixed
            dtypes, bad window arguments (PyTorch's messages).
    """
    return conv3d_layer("conv3d", input, weight, bias, stride, padding, dilation, groups)


@autocast_op("conv_transpose3d")
def conv_transpose3d_layer(name: object, input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                           padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """:func:`conv_transpose3d` with error messages that start with ``name``."""
    x, w, b = _conv_input(name, "conv_transpose3d", input, weight, bias)
    unbatched = x.ndim == 4
    x = _batched(x)
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError(f"{name}: non-positive groups is not supported, got groups={groups}")
    if x.shape[1] != w.shape[0] or w.shape[0] % groups:
        raise RuntimeError(f"{name}: Given transposed=1, weight of size {list(w.shape)}, expected input"
                           f"{list(x.shape)} to have {w.shape[0]} channels, but got {x.shape[1]} channels instead")
    if b is not None and tuple(b.shape) != (w.shape[1] * groups,):
        raise RuntimeError(f"{name}: Given transposed=1, weight of size {list(w.shape)}, expected bias to be "
                           f"1-dimensional with {w.shape[1] * groups} elements, but got bias of size "
                           f"{list(b.shape)} instead")
    check_floating(name, x, ("weight", w), ("bias", b))
    stride, dilation = _conv_arg(name, stride, "stride"), _conv_arg(name, dilation, "dilation")
    padding, output_padding = _conv_arg(name, padding, "padding"), _conv_arg(name, output_padding, "output_padding")
    if min(stride) <= 0:
        raise RuntimeError(f"{name}: non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError(f"{name}: non-positive dilation is not supported")
    if min(padding) < 0 or min(output_padding) < 0:
        raise RuntimeError(f"{name}: negative padding is not supported")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        dims = ("depth", "height", "width")
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got " + " ".join(
            f"{what}_{dim}: {v}" for what, values in (("output_padding", output_padding), ("stride", stride),
                                                       ("dilation", dilation)) for dim, v in zip(dims, values)))
    n, channels, depth, height, width = x.shape
    _, group_out, k_depth, k_height, k_width = w.shape
    out_size = transposed_output_size(tuple(x.shape[2:]), tuple(w.shape[2:]), stride, padding, dilation,
                                      output_padding)
    if min(out_size) <= 0:
        raise RuntimeError(f"{name}: Given input size per channel: ({depth} x {height} x {width}). Calculated output "
                           f"size per channel: ({' x '.join(map(str, out_size))}). Output size is too small")
    out_channels = group_out * groups
    # each depth slice through conv_transpose2d, the kernel depth in its (group-major) output channels
    planes = w.permute(0, 2, 1, 3, 4).reshape(channels, k_depth * group_out, k_height, k_width)
    rows = x.permute(0, 2, 1, 3, 4).reshape(n * depth, channels, height, width)
    y = conv_transpose2d_layer(name, rows, planes, None, stride[1:], padding[1:], output_padding[1:], groups,
                               dilation[1:])
    out_h, out_w = y.shape[-2:]
    y = y.reshape(n, depth, groups, k_depth, group_out, out_h, out_w)
    if stride[0] > 1:  # input slice i lands on row i * stride: zeros between
        y = stack([y] + [y.new_zeros(y.shape)] * (stride[0] - 1), 2)
        y = y.reshape(n, depth * stride[0], *y.shape[3:])[:, :(depth - 1) * stride[0] + 1]
    spread = y.shape[1]
    y = y.permute(0, 3, 2, 4, 1, 5, 6).reshape(n, k_depth, out_channels, spread, out_h, out_w)
    out = None
    for k in range(k_depth):  # kernel row k adds to output rows k * dilation - padding + ...
        front = k * dilation[0] - padding[0]
        back = out_size[0] - front - spread
        part = pad(y[:, k], (0, 0, 0, 0, front, back))
        out = part if out is None else out + part
    if b is not None:
        out = out + b.reshape(1, out_channels, 1, 1, 1)
    return out[0] if unbatched else out


def conv_transpose3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,  # noqa: A002
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """3-D transposed convolution over (N, C, D, H, W) or (C, D, H, W) input, as
    ``torch.nn.functional.conv_transpose3d``.

    Args:
        weight: (C, out_channels / groups, kD, kH, kW).
        bias: optional (out_channels,).
        stride, padding, dilation: an int or a (d, h, w) triple, as the conv3d this is the transpose of.
        output_padding: extra rows added after the input, smaller than stride or dilation.
        groups: channels split into this many groups.

    Raises:
        RuntimeError: wrong ranks, channel counts, mixed dtypes, bad window arguments, an empty
            output (PyTorch's messages).
    """
    return conv_transpose3d_layer("conv_transpose3d", input, weight, bias, stride, padding, output_padding, groups,
                                  dilation)


def _pool_input(name: object, input: Any) -> Any:  # noqa: A002
    x = tensor_arg(input, name, "input")
    if x.ndim not in (4, 5):
        raise RuntimeError(f"{name}: non-empty 4D or 5D (batch mode) tensor expected for input")
    first = x.ndim - 4
    for dim, size in enumerate(x.shape[first:]):
        if size == 0:
            raise RuntimeError(f"{name}: Expected input's non-batch dimensions to have positive length, but input "
                               f"has a shape of {list(x.shape)} and non-batch dimension {dim} has length zero!")
    check_floating(name, x)
    return x


def _pool_window(name: object, x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                 ceil_mode: bool, average: bool) -> tuple:
    """Checked (kernel, stride, padding, dilation, out_size) triples of a 3-D pooling window."""
    kernel = _pool_arg(name, kernel_size, "kernel_size", average)
    stride = kernel if stride is None or stride == () or stride == [] else _pool_arg(name, stride, "stride", average)
    padding, dilation = _pool_arg(name, padding, "padding", average), _pool_arg(name, dilation, "dilation")
    if min(kernel) <= 0:
        raise RuntimeError(f"{name}: kernel size should be greater than zero, but got kT: {kernel[0]} kH: "
                           f"{kernel[1]} kW: {kernel[2]}")
    if min(stride) <= 0:
        raise RuntimeError(f"{name}: stride should be greater than zero, but got dT: {stride[0]} dH: {stride[1]} "
                           f"dW: {stride[2]}")
    if min(dilation) <= 0:
        raise RuntimeError(f"{name}: dilation should be greater than zero, but got dilationT: {dilation[0]} "
                           f"dilationH: {dilation[1]} dilationW: {dilation[2]}")
    for k, p, d in zip(kernel, padding, dilation):
        if p < 0:
            raise RuntimeError(f"{name}: pad must be non-negative, but got pad: {p}")
        if p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    spatial = tuple(x.shape[-3:])
    if average and any(n + 2 * p < k for n, p, k in zip(spatial, padding, kernel)):
        raise RuntimeError(f"{name}: input image (T: {spatial[0]} H: {spatial[1]} W: {spatial[2]}) smaller than "
                           f"kernel size (kT: {kernel[0]} kH: {kernel[1]} kW: {kernel[2]})")
    out_size = tuple(_output_size(n, k, s, p, d, ceil_mode)
                     for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation))
    if min(out_size) < 1:
        channels = x.shape[-4]
        raise RuntimeError(f"{name}: Given input size: ({channels}x{'x'.join(map(str, spatial))}). Calculated output "
                           f"size: ({channels}x{'x'.join(map(str, out_size))}). Output size is too small")
    return kernel, stride, padding, dilation, out_size


def _positions(x: Any, values: list) -> Any:
    """An int64 tensor of ``values`` on ``x``'s device."""
    return tensor(values, dtype=np.int64, device=x.device)


def max_pool3d_layer(name: object, input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                     dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """:func:`max_pool3d` with error messages that start with ``name``."""
    x = _pool_input(name, input)
    kernel, stride, padding, dilation, out_size = _pool_window(name, x, kernel_size, stride, padding, dilation,
                                                               ceil_mode, average=False)
    unbatched = x.ndim == 4
    x = _batched(x)
    n, channels, depth, height, width = x.shape
    out_depth = out_size[0]
    # the argmax, found on values outside the graph: each depth slice's 2-D maximum, then over depth
    planes = x.detach().reshape(n, channels * depth, height, width)
    values, argmax = max_pool2d_layer(name, planes, kernel[1:], stride[1:], padding[1:], dilation[1:], ceil_mode, True)
    values = values.reshape(n, channels, depth, *out_size[1:])
    argmax = argmax.reshape(n, channels, depth, *out_size[1:])
    best = index = seen = None
    for k in range(kernel[0]):
        rows = [o * stride[0] - padding[0] + k * dilation[0] for o in range(out_depth)]
        valid = [0 <= r < depth for r in rows]
        if not any(valid):
            continue
        picked = _positions(x, [min(max(r, 0), depth - 1) for r in rows])
        candidate = values.index_select(2, picked)
        flat = argmax.index_select(2, picked) + picked.reshape(out_depth, 1, 1) * (height * width)
        inside = _positions(x, valid).bool().reshape(out_depth, 1, 1)
        if best is None:
            best, index, seen = candidate, flat, inside
            continue
        # PyTorch's scan: a later element wins if greater or NaN
        better = inside & (~seen | (candidate > best) | candidate.isnan())
        best, index = where(better, candidate, best), where(better, flat, index)
        seen = seen | inside
    out = x.reshape(n, channels, depth * height * width).gather(2, index.reshape(n, channels, -1))
    out = out.reshape(n, channels, *out_size)
    if unbatched:
        out, index = out[0], index[0]
    return (out, index) if return_indices else out


def max_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (N, C, D, H, W) or (C, D, H, W) input, as ``torch.nn.functional.max_pool3d``.

    Args:
        kernel_size, stride (default: kernel_size), padding, dilation: ints or (d, h, w) triples;
            padding is at most half the effective kernel size.
        ceil_mode: round the output size up (a last, partial window).
        return_indices: also return the int64 flat position (d * H * W + h * W + w) of each maximum.

    Raises:
        RuntimeError: wrong rank, a window larger than the padded input, bad window arguments.
    """
    return max_pool3d_layer("max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool3d_layer(name: object, input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                     ceil_mode: bool = False, count_include_pad: bool = True,
                     divisor_override: int | None = None) -> Any:
    """:func:`avg_pool3d` with error messages that start with ``name``."""
    x = _pool_input(name, input)
    kernel, stride, padding, _, out_size = _pool_window(name, x, kernel_size, stride, padding, 1, ceil_mode,
                                                        average=True)
    if divisor_override is not None and (not isinstance(divisor_override, int) or divisor_override == 0):
        raise RuntimeError(f"{name}: divisor must be not zero")
    unbatched = x.ndim == 4
    x = _batched(x)
    n, channels, depth, height, width = x.shape
    # each depth slice's 2-D window sums or means (PyTorch's divisor is a product over the dimensions)
    planes = avg_pool2d_layer(name, x.reshape(n, channels * depth, height, width), kernel[1:], stride[1:],
                              padding[1:], ceil_mode, count_include_pad, 1 if divisor_override else None)
    planes = planes.reshape(n, channels, depth, *out_size[1:])
    out_depth, reach = out_size[0], (out_size[0] - 1) * stride[0] + 1
    back = max(0, reach - 1 + kernel[0] - depth - padding[0])
    planes = pad(planes, (0, 0, 0, 0, padding[0], back))
    out = None
    for k in range(kernel[0]):
        part = planes[:, :, k:k + reach:stride[0]]
        out = part if out is None else out + part
    if divisor_override:
        return (out / divisor_override)[0] if unbatched else out / divisor_override
    counts = []
    for o in range(out_depth):
        start = o * stride[0] - padding[0]
        end = min(start + kernel[0], depth + padding[0])
        counts.append(end - start if count_include_pad else min(end, depth) - max(start, 0))
    out = out / tensor(counts, dtype=out.dtype, device=out.device).reshape(out_depth, 1, 1)
    return out[0] if unbatched else out


def avg_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True, divisor_override: int | None = None) -> Any:
    """Average pooling over (N, C, D, H, W) or (C, D, H, W) input, as ``torch.nn.functional.avg_pool3d``.

    Args:
        kernel_size, stride (default: kernel_size), padding: ints or (d, h, w) triples; padding is
            at most half the kernel size.
        ceil_mode: round the output size up (a last, partial window).
        count_include_pad: divide by the window size including zero padding (else only the
            input elements it covers).
        divisor_override: divide by this instead.

    Raises:
        RuntimeError: wrong rank, a window larger than the padded input, bad window arguments.
    """
    return avg_pool3d_layer("avg_pool3d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                            divisor_override)


def adaptive_sizes(name: object, kind: str, x: Any, output_size: Any, dims: int) -> tuple:
    """The output size of an adaptive pooling over the last ``dims`` dimensions of ``x``: an int
    for all of them, or one entry each (None keeps the input's size).

    Raises:
        RuntimeError: a sequence of another length, a negative size.
        TypeError: entries that are not ints.
    """
    sizes = (output_size,) * dims if output_size is None or isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != dims:
        raise RuntimeError(f"{name}: {kind}: output_size must be {dims}")
    out = tuple(x.shape[-dims + i] if s is None else s for i, s in enumerate(sizes))
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in out):
        raise TypeError(f"{name}: output_size must be ints or None, got {output_size!r}")
    if min(out) < 0:
        shape = list(x.shape[:-dims]) + list(out)
        raise RuntimeError(f"{name}: Trying to create tensor with negative dimension {min(out)}: {shape}")
    return out


def adaptive_avg_pool3d_layer(name: object, input: Any, output_size: Any) -> Any:  # noqa: A002
    """:func:`adaptive_avg_pool3d` with error messages that start with ``name``."""
    x = tensor_arg(input, name, "input")
    if x.ndim not in (4, 5):
        raise RuntimeError(f"{name}: adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(x.shape)}")
    for dim in range(1, x.ndim):
        if x.shape[dim] == 0:
            raise RuntimeError(f"{name}: adaptive_avg_pool3d(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(x.shape)} with dimension {dim} being empty")
    check_floating(name, x)
    out_depth, out_height, out_width = adaptive_sizes(name, "adaptive_avg_pool3d", x, output_size, 3)
    unbatched = x.ndim == 4
    x = _batched(x)
    n, channels, depth, height, width = x.shape
    planes = adaptive_avg_pool2d_layer(name, x.reshape(n, channels * depth, height, width), (out_height, out_width))
    rows = planes.reshape(n, channels, depth, out_height * out_width).permute(0, 1, 3, 2)
    rows = rows.reshape(n, channels * out_height * out_width, 1, depth)
    out = adaptive_avg_pool2d_layer(name, rows, (1, out_depth))
    out = out.reshape(n, channels, out_height, out_width, out_depth).permute(0, 1, 4, 2, 3).contiguous()
    return out[0] if unbatched else out


def adaptive_avg_pool3d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """Average pooling to a fixed output size, as ``torch.nn.functional.adaptive_avg_pool3d``.

    Args:
        output_size: an int (a cube), or an (od, oh, ow) triple where None keeps the input's size.

    Raises:
        RuntimeError: input not 4-D or 5-D, or empty in a non-batch dimension; a bad output size.
    """
    return adaptive_avg_pool3d_layer("adaptive_avg_pool3d", input, output_size)

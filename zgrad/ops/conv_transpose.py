"""2-D transposed convolution (``conv_transpose2d``): the adjoint of :func:`zgrad.ops.conv.conv2d`
with the same weight, so its forward is conv2d's input gradient and its input gradient is conv2d
(the op, :class:`~zgrad.ops.conv.ConvTranspose2d`, lives beside :class:`~zgrad.ops.conv.Conv2d`).
"""

from __future__ import annotations

from typing import Any

from zgrad.ops._args import tensor_arg
from zgrad.ops.conv import ConvTranspose2d, check_floating, pair
from zgrad.ops.padding import pad
from zgrad.ops.autocast import autocast_op

__all__ = ["ConvTranspose2d", "conv_transpose2d", "conv_transpose2d_layer", "transposed_output_size"]


def transposed_output_size(in_size: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int],
                           padding: tuple[int, int], dilation: tuple[int, int],
                           output_padding: tuple[int, int]) -> tuple[int, int]:
    """(H - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1, per dimension."""
    return tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1  # type: ignore[return-value]
                 for n, k, s, p, d, op in zip(in_size, kernel, stride, padding, dilation, output_padding))


@autocast_op("conv_transpose2d")
def conv_transpose2d_layer(name: object, input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                           padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """:func:`conv_transpose2d` with error messages that start with ``name``."""
    x = tensor_arg(input, name, "input")
    w = tensor_arg(weight, name, "weight")
    b = None if bias is None else tensor_arg(bias, name, "bias")
    if x.ndim not in (3, 4):
        raise RuntimeError(f"{name}: Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got "
                           f"input of size: {list(x.shape)}")
    if w.ndim != 4:
        raise RuntimeError(f"{name}: weight should have 4 dimensions (in_channels, out_channels/groups, kH, kW), "
                           f"got weight of size {list(w.shape)}")
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError(f"{name}: non-positive groups is not supported, got groups={groups}")
    if x.shape[-3] != w.shape[0] or w.shape[0] % groups:
        raise RuntimeError(f"{name}: Given transposed=1, weight of size {list(w.shape)}, expected input "
                           f"{list(x.shape)} to have {w.shape[0]} channels, but got {x.shape[-3]} channels instead")
    if b is not None and b.shape != (w.shape[1] * groups,):
        raise RuntimeError(f"{name}: Given transposed=1, weight of size {list(w.shape)}, expected bias to be "
                           f"1-dimensional with {w.shape[1] * groups} elements, but got bias of size "
                           f"{list(b.shape)} instead")
    check_floating(name, x, ("weight", w), ("bias", b))
    stride, dilation = pair(stride, "stride"), pair(dilation, "dilation")
    padding, output_padding = pair(padding, "padding"), pair(output_padding, "output_padding")
    if min(stride) <= 0:
        raise RuntimeError(f"{name}: non-positive stride is not supported, got stride={stride}")
    if min(dilation) <= 0:
        raise RuntimeError(f"{name}: dilation should be greater than zero, got dilation={dilation}")
    if min(padding) < 0 or min(output_padding) < 0:
        raise RuntimeError(f"{name}: negative padding is not supported, got padding={padding}, "
                           f"output_padding={output_padding}")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_height: {output_padding[0]} output_padding_width: {output_padding[1]} "
                           f"stride_height: {stride[0]} stride_width: {stride[1]} dilation_height: {dilation[0]} "
                           f"dilation_width: {dilation[1]}")
    kernel = (w.shape[2], w.shape[3])
    out_size = transposed_output_size(tuple(x.shape[-2:]), kernel, stride, padding, dilation, output_padding)
    if min(out_size) <= 0:
        raise RuntimeError(f"{name}: Given input size per channel: ({x.shape[-2]} x {x.shape[-1]}). Calculated "
                           f"output size per channel: ({out_size[0]} x {out_size[1]}). Output size is too small")
    # An output padding at stride 1 (allowed below the dilation) makes the output larger than the
    # convolution whose input gradient this is reaches back from x: x's missing rows are zeros
    reached = [(o + 2 * p - d * (k - 1) - 1) // s + 1
               for o, p, d, k, s in zip(out_size, padding, dilation, kernel, stride)]
    missing = [r - n for r, n in zip(reached, x.shape[-2:])]
    if max(missing) > 0:
        x = pad(x, (0, missing[1], 0, missing[0]))
    args = (x, w) if b is None else (x, w, b)
    return ConvTranspose2d.apply((stride, padding, dilation, groups), out_size, *args)


def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,  # noqa: A002
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """2-D transposed convolution ("deconvolution"), as ``torch.nn.functional.conv_transpose2d``.

    Args:
        input: (N, C, H, W) or unbatched (C, H, W).
        weight: (C, out_channels / groups, kH, kW).
        bias: optional (out_channels,).
        stride, padding, dilation: an int or an (h, w) pair, as the conv2d this is the transpose of.
        output_padding: extra rows/columns added on the bottom/right, smaller than stride or dilation.
        groups: channels split into this many groups, each transposed-convolved separately.

    Returns:
        (N, out_channels, OH, OW), OH = (H - 1) * stride - 2 * padding + dilation * (kH - 1) +
        output_padding + 1.

    Raises:
        RuntimeError: shapes that do not fit, mixed dtypes, non-positive stride, output padding
            not smaller than stride or dilation, an empty output.
    """
    return conv_transpose2d_layer("conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups,
                                  dilation)

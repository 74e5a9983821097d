"""2-D pooling: ``max_pool2d`` (saving the argmax), ``avg_pool2d`` and ``adaptive_avg_pool2d``.

Output sizes, windows and argument checks follow PyTorch (``pooling_output_shape`` and the CPU
kernels); errors start with the name of the layer or function that was called.
"""

from __future__ import annotations

from typing import Any

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch_index, dispatch_layers
from zgrad.ops.backward_ops import detached, linear_in_grad
from zgrad.ops._args import tensor_arg
from zgrad.ops.conv import check_floating, pair

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d", "adaptive_avg_pool2d", "adaptive_avg_pool2d_layer", "avg_pool2d",
    "avg_pool2d_layer", "max_pool2d", "max_pool2d_layer",
]


def _output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """PyTorch's ``pooling_output_shape``: with ``ceil_mode`` the last window must start inside
    the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _input(name: object, input: Any) -> Any:
    x = tensor_arg(input, name, "input")
    if x.ndim not in (3, 4) or any(n == 0 for n in x.shape[1:]):
        raise RuntimeError(f"{name}: non-empty 3D or 4D (batch mode) tensor expected for input, "
                           f"got input of size {list(x.shape)}")
    check_floating(name, x)
    return x


def _window(name: object, x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
            max_pad_rule: bool) -> tuple:
    """Checked (kernel, stride, padding, dilation, out_size) pairs of a pooling window."""
    kernel = pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or stride == () or stride == [] else pair(stride, "stride")
    padding, dilation = pair(padding, "padding"), pair(dilation, "dilation")
    if min(kernel) <= 0:
        raise RuntimeError(f"{name}: kernel size should be greater than zero, but got kH: {kernel[0]} kW: {kernel[1]}")
    if min(stride) <= 0:
        raise RuntimeError(f"{name}: stride should be greater than zero, but got dH: {stride[0]} dW: {stride[1]}")
    if min(dilation) <= 0:
        raise RuntimeError(f"{name}: dilation should be greater than zero, but got dilationH: {dilation[0]} "
                           f"dilationW: {dilation[1]}")
    for k, p, d in zip(kernel, padding, dilation):
        if p < 0:
            raise RuntimeError(f"{name}: pad must be non-negative, but got pad: {p}")
        if max_pad_rule and p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
        if not max_pad_rule and p > k // 2:
            raise RuntimeError(f"{name}: pad should be at most half of kernel size, but got pad={p} and "
                               f"kernel_size={k}")
    height, width = x.shape[-2:]
    out_size = tuple(_output_size(n, k, s, p, d, ceil_mode)
                     for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation))
    if min(out_size) < 1:
        raise RuntimeError(f"{name}: Given input size: ({x.shape[-3]}x{height}x{width}). Calculated output size: "
                           f"({x.shape[-3]}x{out_size[0]}x{out_size[1]}). Output size is too small")
    return kernel, stride, padding, dilation, out_size


class _Pool2d(Op):
    """Shared handling of unbatched (C, H, W) input: run it as a batch of one. A pooling's
    backward is linear in the gradient: with create_graph=True it is recorded with its adjoint (the
    pooling itself, or a gather at the kept positions) as its own backward."""

    differentiable_backward = True

    @staticmethod
    def batched(ctx, x):
        ctx.unbatched = x.ndim == 3
        ctx.input_shape = x.shape if x.ndim == 4 else (1, *x.shape)
        return x[None] if ctx.unbatched else x

    @staticmethod
    def unbatched(ctx, *arrays):
        return tuple(a[0] for a in arrays) if ctx.unbatched else arrays

    @staticmethod
    def on_batch(ctx, kernel):
        """``kernel`` (batched array -> batched array) applied to an array as this op's input or
        output is (batched or not)."""
        def run(array):
            out = kernel(array[None] if ctx.unbatched else array)
            return out[0] if ctx.unbatched else out
        return run


class MaxPool2d(_Pool2d):
    """Each window's maximum; the flat argmax (ih * W + iw) is kept for backward."""

    @staticmethod
    def forward(ctx, x, kernel, stride, padding, dilation, out_size, return_indices):
        out, indices = dispatch_layers.max_pool2d(MaxPool2d.batched(ctx, x), kernel, stride, padding, dilation, out_size)
        ctx.save_for_backward(indices)
        out, indices = MaxPool2d.unbatched(ctx, out, indices)
        return (out, indices) if return_indices else out

    @staticmethod
    def backward(ctx, grad, *unused):
        indices = detached(ctx.saved_tensors[0])
        n, c = ctx.input_shape[:2]

        def scatter(g):  # each window's gradient to its maximum
            return dispatch_layers.max_pool2d_backward(g, indices, ctx.input_shape)

        def gather(g):  # the adjoint: each window reads the element at its maximum
            return dispatch_index.gather(g.reshape(n, c, -1), 2, indices.reshape(n, c, -1)).reshape(indices.shape)

        grad_x = linear_in_grad(grad, MaxPool2d.on_batch(ctx, scatter), MaxPool2d.on_batch(ctx, gather))
        return (grad_x,) + (None,) * 6


def max_pool2d_layer(name: object, input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
                     dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """:func:`max_pool2d` with error messages that start with ``name``."""
    x = _input(name, input)
    window = _window(name, x, kernel_size, stride, padding, dilation, ceil_mode, max_pad_rule=True)
    return MaxPool2d.apply(x, *window, bool(return_indices))


def max_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (N, C, H, W) or (C, H, W) input, as ``torch.nn.functional.max_pool2d``.

    Args:
        kernel_size, stride (default: kernel_size), padding, dilation: ints or (h, w) pairs;
            padding is at most half the effective kernel size (padded positions never win).
        ceil_mode: round the output size up (a last, partial window).
        return_indices: also return the int64 flat position (ih * W + iw) of each maximum.

    Raises:
        RuntimeError: wrong rank, a window larger than the padded input, bad window arguments.
    """
    return max_pool2d_layer("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


class AvgPool2d(_Pool2d):
    """Each window's mean; the window arguments are kept for backward."""

    @staticmethod
    def forward(ctx, x, kernel, stride, padding, out_size, count_include_pad, divisor_override):
        ctx.args = (kernel, stride, padding, count_include_pad, divisor_override)
        out = dispatch_layers.avg_pool2d(AvgPool2d.batched(ctx, x), kernel, stride, padding, count_include_pad,
                                         divisor_override, out_size)
        return AvgPool2d.unbatched(ctx, out)[0]

    @staticmethod
    def backward(ctx, grad):
        kernel, stride, padding, count_include_pad, divisor_override = ctx.args
        out_size = tuple(grad.shape[-2:])

        def spread(g):
            return dispatch_layers.avg_pool2d_backward(g, ctx.input_shape, *ctx.args)

        def pool(g):
            return dispatch_layers.avg_pool2d(g, kernel, stride, padding, count_include_pad, divisor_override, out_size)

        return (linear_in_grad(grad, AvgPool2d.on_batch(ctx, spread), AvgPool2d.on_batch(ctx, pool)),) + (None,) * 6


def avg_pool2d_layer(name: object, input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
                     ceil_mode: bool = False, count_include_pad: bool = True,
                     divisor_override: int | None = None) -> Any:
    """:func:`avg_pool2d` with error messages that start with ``name``."""
    x = _input(name, input)
    kernel, stride, padding, _, out_size = _window(name, x, kernel_size, stride, padding, 1, ceil_mode,
                                                   max_pad_rule=False)
    if divisor_override is not None and (not isinstance(divisor_override, int) or divisor_override == 0):
        raise RuntimeError(f"{name}: divisor must be not zero, got divisor_override={divisor_override!r}")
    return AvgPool2d.apply(x, kernel, stride, padding, out_size, bool(count_include_pad), divisor_override)


def avg_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Any:
    """Average pooling over (N, C, H, W) or (C, H, W) input, as ``torch.nn.functional.avg_pool2d``.

    Args:
        kernel_size, stride (default: kernel_size), padding: ints or (h, w) pairs; padding is at
            most half the kernel size.
        ceil_mode: round the output size up (a last, partial window).
        count_include_pad: divide by the window size including zero padding (else only the
            input elements it covers).
        divisor_override: divide by this instead.

    Raises:
        RuntimeError: wrong rank, a window larger than the padded input, bad window arguments.
    """
    return avg_pool2d_layer("avg_pool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                            divisor_override)


class AdaptiveAvgPool2d(_Pool2d):
    """Means over the windows [floor(o*I/O), ceil((o+1)*I/O)) of each output position."""

    @staticmethod
    def forward(ctx, x, out_size):
        out = dispatch_layers.adaptive_avg_pool2d(AdaptiveAvgPool2d.batched(ctx, x), out_size)
        return AdaptiveAvgPool2d.unbatched(ctx, out)[0]

    @staticmethod
    def backward(ctx, grad):
        out_size = tuple(grad.shape[-2:])

        def spread(g):
            return dispatch_layers.adaptive_avg_pool2d_backward(g, ctx.input_shape)

        def pool(g):
            return dispatch_layers.adaptive_avg_pool2d(g, out_size)

        on_batch = AdaptiveAvgPool2d.on_batch
        return linear_in_grad(grad, on_batch(ctx, spread), on_batch(ctx, pool)), None


def adaptive_avg_pool2d_layer(name: object, input: Any, output_size: Any) -> Any:
    """:func:`adaptive_avg_pool2d` with error messages that start with ``name``."""
    x = tensor_arg(input, name, "input")
    if x.ndim not in (3, 4):
        raise RuntimeError(f"{name}: adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(x.shape)}")
    if any(n == 0 for n in x.shape[1:]):
        raise RuntimeError(f"{name}: adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but input has sizes {list(x.shape)}")
    check_floating(name, x)
    sizes = (output_size, output_size) if output_size is None or isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != 2:
        raise TypeError(f"{name}: output_size must be an int or a tuple of two ints or None, got {output_size!r}")
    out_size = tuple(x.shape[-2 + i] if s is None else s for i, s in enumerate(sizes))
    if not all(isinstance(s, int) and s >= 0 for s in out_size):
        raise RuntimeError(f"{name}: output_size must be non-negative ints, got {output_size!r}")
    return AdaptiveAvgPool2d.apply(x, out_size)


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:
    """Average pooling to a fixed output size, as ``torch.nn.functional.adaptive_avg_pool2d``.

    Args:
        output_size: an int (square), or an (oh, ow) pair where None keeps the input's size.

    Raises:
        RuntimeError: input not 3-D or 4-D, or empty in a non-batch dimension.
    """
    return adaptive_avg_pool2d_layer("adaptive_avg_pool2d", input, output_size)

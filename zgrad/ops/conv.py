"""2-D convolution (``conv2d``), with PyTorch's argument checks and error texts.

Errors start with the name of the layer or function that was called, then say what PyTorch
says: the shape received and the shape expected. The ``*_layer`` functions here and in
:mod:`zgrad.ops.norm` and :mod:`zgrad.ops.pool` take that name as any object whose str() is it:
a function's name, or the calling module itself, whose repr is then built only if an error is
raised (a forward that succeeds does not pay for formatting it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.kernels import dispatch
from zgrad.kernels import dispatch_layers
from zgrad.kernels.dispatch_layers import PADDING_MODES
from zgrad.ops._args import tensor_arg
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op
from zgrad.ops.backward_ops import detached
from zgrad.ops.padding import mode_pad_backward
from zgrad.ops.padding import pad as mode_pad
from zgrad.ops.reduce import formula_sum

__all__ = ["Conv2d", "Conv2dWeightGrad", "ConvTranspose2d", "PADDING_MODES", "check_floating", "conv2d", "conv2d_layer", "pair"]

def pair(value: Any, what: str) -> tuple[int, int]:
    """``value`` as an (h, w) pair of ints: an int is used for both.

    Raises:
        TypeError: not an int or a pair of ints.
    """
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(items) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
        raise TypeError(f"{what} must be an int or a tuple of two ints, got {value!r}")
    return int(items[0]), int(items[1])


def check_floating(name: object, x: Any, *others: tuple[str, Any]) -> None:
    """PyTorch's dtype rule for layers: a floating input, and parameters of the same dtype.

    Raises:
        RuntimeError: an integer input, or a parameter of another dtype.
    """
    if not is_floating(x.dtype):
        raise RuntimeError(f"{name}: expected a floating point input, got {x.dtype}")
    for what, other in others:
        if other is not None and other.dtype != x.dtype:
            raise RuntimeError(f"{name}: Input type ({x.dtype}) and {what} type ({other.dtype}) should be the same")


def _padding(name: object, padding: Any, kernel: tuple[int, int], stride: tuple[int, int],
              dilation: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """((top, bottom), (left, right)) from an int, a pair, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), (0, 0)
        if padding != "same":
            raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}")
        if stride != (1, 1):
            raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        # PyTorch's rule: an odd total puts the extra row/column after the input.
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in totals)  # type: ignore[return-value]
    ph, pw = pair(padding, "padding")
    return (ph, ph), (pw, pw)


def _check_shapes(name: object, x: Any, w: Any, b: Any, groups: int) -> None:
    if x.ndim not in (3, 4):
        raise RuntimeError(
            f"{name}: Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: {list(x.shape)}")
    if w.ndim != 4:
        raise RuntimeError(f"{name}: weight should have 4 dimensions (out_channels, in_channels/groups, kH, kW), "
                           f"got weight of size {list(w.shape)}")
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError(f"{name}: non-positive groups is not supported, got groups={groups}")
    if w.shape[0] % groups:
        raise RuntimeError(f"{name}: Given groups={groups}, expected weight to be divisible by {groups} at dimension "
                           f"0, but got weight of size {list(w.shape)} instead")
    channels = x.shape[-3]
    if channels != w.shape[1] * groups:
        raise RuntimeError(f"{name}: Given groups={groups}, weight of size {list(w.shape)}, expected input"
                           f"{list(x.shape)} to have {w.shape[1] * groups} channels, but got {channels} channels "
                           f"instead")
    if b is not None and b.shape != (w.shape[0],):
        raise RuntimeError(f"{name}: Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with "
                           f"{w.shape[0]} elements, but got bias of size {list(b.shape)} instead")


def _check_padding_mode(name: object, x: Any, padding_mode: str, pad_h: tuple[int, int], pad_w: tuple[int, int]) -> None:
    """Reflection needs padding < size, circular padding <= size (PyTorch checks the last dim first)."""
    if padding_mode in ("zeros", "replicate"):
        return
    reflect = padding_mode == "reflect"
    for dim, pads in ((x.ndim - 1, pad_w), (x.ndim - 2, pad_h)):
        size = x.shape[dim]
        if max(pads) > size or (reflect and max(pads) == size):
            raise RuntimeError(f"{name}: Padding size should be less than{'' if reflect else ' or equal to'} the "
                               f"corresponding input dimension, but got: padding {pads} at dimension {dim} of input "
                               f"{list(x.shape)}")


@autocast_op("conv2d")
def conv2d_layer(name: object, input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, padding_mode: str = "zeros") -> Any:
    """:func:`conv2d` with ``padding_mode`` and error messages that start with ``name``."""
    x = tensor_arg(input, name, "input")
    w = tensor_arg(weight, name, "weight")
    b = None if bias is None else tensor_arg(bias, name, "bias")
    _check_shapes(name, x, w, b, groups)
    check_floating(name, x, ("weight", w), ("bias", b))
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"padding_mode must be one of {set(PADDING_MODES)}, but got padding_mode={padding_mode!r}")
    stride, dilation = pair(stride, "stride"), pair(dilation, "dilation")
    if min(stride) <= 0:
        raise RuntimeError(f"{name}: non-positive stride is not supported, got stride={stride}")
    if min(dilation) <= 0:
        raise RuntimeError(f"{name}: dilation should be greater than zero, got dilation={dilation}")
    kernel = (w.shape[2], w.shape[3])
    pad_h, pad_w = _padding(name, padding, kernel, stride, dilation)
    if min(pad_h + pad_w) < 0:
        raise RuntimeError(f"{name}: negative padding is not supported, got padding={padding}")
    padded = (x.shape[-2] + sum(pad_h), x.shape[-1] + sum(pad_w))
    effective = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    if padded[0] < effective[0] or padded[1] < effective[1]:
        raise RuntimeError(f"{name}: Calculated padded input size per channel: ({padded[0]} x {padded[1]}). Kernel "
                           f"size: ({effective[0]} x {effective[1]}). Kernel size can't be greater than actual input "
                           f"size")
    _check_padding_mode(name, x, padding_mode, pad_h, pad_w)
    out_size = tuple((p - e) // s + 1 for p, e, s in zip(padded, effective, stride))
    window = (stride, (pad_h[0], pad_w[0]), dilation, groups, padding_mode)
    args = (x, w) if b is None else (x, w, b)
    return Conv2d.apply(window, out_size, *args)


def conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Any:
    """2-D cross-correlation, as ``torch.nn.functional.conv2d``.

    Args:
        input: (N, C, H, W) or unbatched (C, H, W).
        weight: (out_channels, C / groups, kH, kW).
        bias: optional (out_channels,).
        stride, dilation: an int or an (h, w) pair, > 0.
        padding: an int, an (h, w) pair, ``'valid'`` (none) or ``'same'`` (output size = input size;
            stride 1 only).
        groups: input and output channels are split into this many groups, each convolved separately.

    Returns:
        (N, out_channels, OH, OW), OH = (H + 2*pad_h - dilation_h*(kH - 1) - 1) // stride_h + 1.

    Raises:
        RuntimeError: shapes that do not fit (wrong rank, channel count, kernel larger than the
            padded input, groups not dividing the weight), mixed dtypes, non-positive stride.
    """
    return conv2d_layer("conv2d", input, weight, bias, stride, padding, dilation, groups)


class Conv2d(Op):
    """y = conv(x, weight) + bias; the window is (stride, (top, left) padding, dilation, groups, mode).
    An unbatched (C, H, W) input runs as a batch of one.

    Its gradients are the transposed convolution of grad with the weight (the input's) and
    :class:`Conv2dWeightGrad` (the weight's); each of the three maps is linear in each operand,
    and its backward is made of the other two, so they differentiate any number of times."""

    kernel = "conv2d"  # of dispatch_layers; ConvTranspose2d runs its own through this forward
    differentiable_backward = True

    @classmethod
    def forward(cls, ctx, window, out_size, x, weight, bias=None):
        ctx.unbatched = x.ndim == 3
        x = x[None] if ctx.unbatched else x
        ctx.window = window
        ctx.save_for_backward(x, weight)
        out = getattr(dispatch_layers, cls.kernel)(x, weight, bias, *window, out_size)
        return out[0] if ctx.unbatched else out

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        if on_graph(grad):
            return Conv2d.formula(ctx, grad, x, weight)
        needs = ctx.needs_input_grad
        grad = grad[None] if ctx.unbatched else grad
        grad_x, grad_weight = dispatch_layers.conv2d_backward(grad, x, weight, *ctx.window, needs[2], needs[3])
        if grad_x is not None and ctx.unbatched:
            grad_x = grad_x[0]
        grad_bias = dispatch.reduce_sum(grad, (0, 2, 3)) if len(needs) > 4 and needs[4] else None
        return (None, None, grad_x, grad_weight) + ((grad_bias,) if len(needs) > 4 else ())

    @staticmethod
    def formula(ctx, grad, x, weight):
        """The gradients recorded (create_graph), each a differentiable op: the input's is the
        transposed convolution of grad, the weight's :class:`Conv2dWeightGrad` of grad and x."""
        x = _saved_input(ctx, x, grad)
        stride, (top, left), dilation, groups, mode = ctx.window
        if mode == "zeros":
            return _conv_grads(ctx, grad, lambda g: formula_conv_transpose2d(ctx.window, x.shape[2:], g, weight),
                               lambda g: formula_conv2d_weight_grad(ctx.window, g, x, detached(weight)))
        # the convolution without padding of x padded in its mode (to the rows and columns read)
        read = [(n - 1) * s + (k - 1) * d + 1 for n, s, k, d in zip(grad.shape[-2:], stride, weight.shape[2:], dilation)]
        pad = (left, read[1] - x.shape[3] - left, top, read[0] - x.shape[2] - top)
        padded, window = mode_pad(x, pad, mode), (stride, (0, 0), dilation, groups, "zeros")
        return _conv_grads(ctx, grad, lambda g: mode_pad_backward(
            formula_conv_transpose2d(window, padded.shape[2:], g, weight), tuple(x.shape), pad, mode),
            lambda g: formula_conv2d_weight_grad(window, g, padded, detached(weight)))


class ConvTranspose2d(Conv2d):
    """y = conv_transpose(x, weight) + bias; the window is (stride, (top, left) padding, dilation,
    groups). The forward is :class:`Conv2d`'s with this kernel; the input's gradient is the
    convolution of grad with the weight, the weight's :class:`Conv2dWeightGrad` with the roles
    of grad and x exchanged."""

    kernel = "conv_transpose2d"

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        window = (*ctx.window, "zeros")
        x = _saved_input(ctx, x, grad)
        return _conv_grads(ctx, grad, lambda g: formula_conv2d(window, x.shape[2:], g, weight),
                           lambda g: formula_conv2d_weight_grad(window, x, g, detached(weight)))


class Conv2dWeightGrad(Op):
    """The gradient of conv2d's weight, from (N, OC, OH, OW) ``grad`` and (N, C, H, W) ``x``, for a
    weight of the shape of ``weight`` (whose values are not read for it). It is bilinear: its
    backward is conv2d of ``x`` with the incoming gradient (for ``grad``) and the transposed
    convolution of ``grad`` with it (for ``x``)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, window, grad, x, weight):
        ctx.window = window
        ctx.save_for_backward(grad, x)
        return dispatch_layers.conv2d_backward(grad, x, weight, *window, False, True)[1]

    @staticmethod
    def backward(ctx, grad_weight):
        grad, x = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_grad = formula_conv2d(ctx.window, grad.shape[2:], x, grad_weight) if needs[1] else None
        grad_x = formula_conv_transpose2d(ctx.window, x.shape[2:], grad, grad_weight) if needs[2] else None
        return None, grad_grad, grad_x, None


def _saved_input(ctx, x, grad):
    """The saved input ``x`` (batched); in a recorded pass (``grad`` a tensor) the forward input
    on the graph, with a batch of one added if the op ran unbatched."""
    if not on_graph(grad):
        return x
    if not ctx.unbatched:
        return ctx.as_input(2, detached(x))
    return ctx.as_input(2, detached(x)[0])[None]


def _conv_grads(ctx, grad, input_grad, weight_grad):
    """The gradients of :class:`Conv2d` or :class:`ConvTranspose2d` for (window, out_size, x,
    weight[, bias]) from ``input_grad`` and ``weight_grad`` of the batched ``grad``."""
    needs = ctx.needs_input_grad
    grad = grad[None] if ctx.unbatched else grad
    grad_x = grad_weight = None
    if needs[2]:
        grad_x = input_grad(grad)
        grad_x = grad_x[0] if ctx.unbatched else grad_x
    if needs[3]:
        grad_weight = weight_grad(grad)
    grad_bias = formula_sum(grad, (0, 2, 3)) if len(needs) > 4 and needs[4] else None
    return (None, None, grad_x, grad_weight) + ((grad_bias,) if len(needs) > 4 else ())


def formula_conv2d(window, out_size, x, weight):
    """conv2d of (N, C, H, W) ``x`` without bias in a backward formula (recorded when a tensor
    takes part); ``window`` as :class:`Conv2d`'s."""
    if on_graph(x, weight):
        return Conv2d.apply(window, out_size, x, weight)
    return dispatch_layers.conv2d(x, weight, None, *window, out_size)


def formula_conv_transpose2d(window, out_size, x, weight):
    """The transposed convolution (conv2d's input gradient) of (N, OC, OH, OW) ``x`` without bias
    in a backward formula; ``window`` as :class:`Conv2d`'s, in zeros mode."""
    window = window[:4]
    if on_graph(x, weight):
        return ConvTranspose2d.apply(window, out_size, x, weight)
    return dispatch_layers.conv_transpose2d(x, weight, None, *window, out_size)


def formula_conv2d_weight_grad(window, grad, x, weight):
    """:class:`Conv2dWeightGrad` in a backward formula (recorded when a tensor takes part)."""
    if on_graph(grad, x):
        return Conv2dWeightGrad.apply(window, grad, x, weight)
    return dispatch_layers.conv2d_backward(grad, x, weight, *window, False, True)[1]

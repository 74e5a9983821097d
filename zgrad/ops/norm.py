"""Normalization: ``batch_norm``, ``layer_norm``, ``group_norm`` and ``instance_norm`` on fused kernels.

Layer norm runs as group norm: its input is viewed as (rows, normalized size, 1) with one group,
so one pair of kernels (statistics and output in one task, all three gradients in one backward)
serves both. Errors start with the name of the layer or function that was called and give the
shape received and the shape expected.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.engine.grad_mode import no_grad
from zgrad.kernels import dispatch_layers
from zgrad.ops._args import tensor_arg
from zgrad.ops.backward_ops import detached
from zgrad.kernels.promotion import HALF_DTYPES, is_floating
from zgrad.ops.autocast import autocast_op

__all__ = [
    "BatchNorm", "GroupNorm", "batch_norm", "batch_norm_layer", "check_normalized_shape", "check_parameters",
    "group_norm", "group_norm_layer", "instance_norm", "layer_norm", "layer_norm_layer",
]

_FLOAT32 = np.dtype(np.float32)


def _optional(value: Any, name: object, what: str) -> Any:
    return None if value is None else tensor_arg(value, name, what)


def _check_numel(name: object, what: str, value: Any, expected: int, x: Any) -> None:
    if value is not None and value.numel() != expected:
        raise RuntimeError(f"{name}: {what} should contain {expected} elements not {value.numel()} "
                           f"(input of size {list(x.shape)} has {expected} channels in dimension 1)")


class BatchNorm(Op):
    """Batch norm over (N, C, *) input viewed as (N, C, S); updates running statistics in training.
    Backward is one fused kernel on arrays, and :meth:`formula` in a pass with create_graph=True."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
        x3 = x.reshape(x.shape[0], x.shape[1], -1)
        out, mean, invstd = dispatch_layers.batch_norm(x3, weight, bias, running_mean, running_var, training, momentum,
                                                       eps)
        ctx.save_for_backward(x3, weight, mean, invstd)
        ctx.training, ctx.shape, ctx.eps = training, x.shape, eps
        return out.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        x3, weight, mean, invstd = ctx.saved_tensors
        if on_graph(grad):
            return BatchNorm.formula(ctx, grad, x3, weight, mean, invstd) + (None,) * 5
        needs = ctx.needs_input_grad
        grad_x, grad_weight, grad_bias = dispatch_layers.batch_norm_backward(
            grad.reshape(x3.shape), x3, weight, mean, invstd, ctx.training, needs[:3])
        grad_x = None if grad_x is None else grad_x.reshape(ctx.shape)
        return (grad_x, grad_weight, grad_bias) + (None,) * 5

    @staticmethod
    def formula(ctx, grad, x3, weight, mean, invstd):
        """The gradients of x, weight and bias, recorded. In training the statistics are the
        batch's, recomputed from x on the graph (as group norm's formula, per channel over N and
        S); in evaluation they are the running ones, constants."""
        needs = ctx.needs_input_grad
        n, c, s = x3.shape
        x3 = ctx.as_input(0, detached(x3).reshape(ctx.shape)).reshape(n, c, s)
        weight = None if weight is None else weight.reshape(1, c, 1)
        grad3 = grad.reshape(n, c, s)
        if ctx.training:
            centered = x3 - x3.mean(dim=(0, 2), keepdim=True)
            invstd = ((centered * centered).mean(dim=(0, 2), keepdim=True) + ctx.eps).rsqrt()
        else:
            invstd = detached(invstd).reshape(1, c, 1)
            centered = x3 - detached(mean).reshape(1, c, 1)
        normalized = centered * invstd
        scaled = grad3 if weight is None else grad3 * weight
        grad_x = None
        if needs[0]:
            grad_x = scaled * invstd if not ctx.training else invstd * (
                scaled - scaled.mean(dim=(0, 2), keepdim=True)
                - normalized * (scaled * normalized).mean(dim=(0, 2), keepdim=True))
            grad_x = grad_x.reshape(ctx.shape)
        grad_w = (grad3 * normalized).sum(dim=(0, 2)) if needs[1] else None
        grad_b = grad3.sum(dim=(0, 2)) if needs[2] else None
        return grad_x, grad_w, grad_b


def batch_norm_layer(name: object, input: Any, running_mean: Any, running_var: Any, weight: Any = None,
                     bias: Any = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """:func:`batch_norm` with error messages that start with ``name``."""
    x = tensor_arg(input, name, "input")
    weight, bias = _optional(weight, name, "weight"), _optional(bias, name, "bias")
    running_mean = _optional(running_mean, name, "running_mean")
    running_var = _optional(running_var, name, "running_var")
    if x.ndim < 2:
        raise RuntimeError(f"{name}: expected an input of at least 2 dimensions (N, C, ...), got input of size "
                           f"{list(x.shape)}")
    check_parameters(name, x, ("weight", weight), ("bias", bias))
    channels = x.shape[1]
    for what, value in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                        ("bias", bias)):
        _check_numel(name, what, value, channels, x)
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError(f"{name}: running_mean and running_var must be defined in evaluation mode")
    if training and x.numel() // channels == 1:
        raise ValueError(f"{name}: Expected more than 1 value per channel when training, got input size "
                         f"{list(x.shape)}")
    return BatchNorm.apply(x, weight, bias, running_mean, running_var, bool(training), float(momentum), float(eps))


def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Batch normalization over the channels (dimension 1), as ``torch.nn.functional.batch_norm``.

    Training normalizes with the batch statistics over (N, *) and, where ``running_mean`` /
    ``running_var`` are given, updates them in place: ``r = (1 - momentum) * r + momentum * stat``,
    with the unbiased batch variance. Otherwise it normalizes with the running statistics.

    Raises:
        RuntimeError: statistics or affine parameters whose size is not the channel count, or no
            running statistics in evaluation mode.
        ValueError: training on one value per channel.
    """
    return batch_norm_layer("batch_norm", input, running_mean, running_var, weight, bias, training, momentum, eps)


class GroupNorm(Op):
    """Normalization over each (sample, group) of (N, C, S) input, per-channel affine.

    ``view`` is the (N, C, S) shape the input is read as; layer norm passes (rows, size, 1).
    Backward is one fused kernel on arrays, and :meth:`formula` in a pass with create_graph=True.
    """

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, weight, bias, view, groups, eps):
        x3 = x.reshape(view)
        w = None if weight is None else weight.reshape(-1)
        b = None if bias is None else bias.reshape(-1)
        out, mean, invstd = dispatch_layers.group_norm(x3, w, b, groups, eps)
        ctx.save_for_backward(x3, w, mean, invstd)
        ctx.groups, ctx.eps, ctx.shapes = groups, eps, (x.shape, None if weight is None else weight.shape)
        return out.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        x3, w, mean, invstd = ctx.saved_tensors
        if on_graph(grad):
            return (*GroupNorm.formula(ctx, grad, x3, w), None, None, None)
        x_shape, w_shape = ctx.shapes
        grad_x, grad_w, grad_b = dispatch_layers.group_norm_backward(
            grad.reshape(x3.shape), x3, w, mean, invstd, ctx.groups, ctx.needs_input_grad[:3])
        return (None if grad_x is None else grad_x.reshape(x_shape),
                None if grad_w is None else grad_w.reshape(w_shape),
                None if grad_b is None else grad_b.reshape(w_shape), None, None, None)

    @staticmethod
    def formula(ctx, grad, x3, w):
        """The gradients of x, weight and bias, recorded: with x^ = (x - mean) * invstd per group
        and gy = grad * weight, dx = invstd (gy - mean(gy) - x^ mean(gy x^)), dweight = sum(grad x^),
        dbias = sum(grad), the statistics recomputed from x on the graph."""
        (x_shape, w_shape), needs = ctx.shapes, ctx.needs_input_grad
        n, c, s = x3.shape
        x3 = ctx.as_input(0, detached(x3).reshape(x_shape)).reshape(n, c, s)
        w = None if w is None else ctx.as_input(1, detached(w).reshape(w_shape)).reshape(1, c, 1)
        grouped = x3.reshape(n, ctx.groups, -1)
        centered = grouped - grouped.mean(-1, keepdim=True)
        invstd = ((centered * centered).mean(-1, keepdim=True) + ctx.eps).rsqrt()
        normalized = centered * invstd
        grad3 = grad.reshape(n, c, s)
        scaled = (grad3 if w is None else grad3 * w).reshape(n, ctx.groups, -1)
        grad_x = invstd * (scaled - scaled.mean(-1, keepdim=True)
                           - normalized * (scaled * normalized).mean(-1, keepdim=True)) if needs[0] else None
        normalized = normalized.reshape(n, c, s)
        grad_w = (grad3 * normalized).sum(dim=(0, 2)).reshape(w_shape) if needs[1] else None
        grad_b = grad3.sum(dim=(0, 2)).reshape(w_shape) if len(needs) > 2 and needs[2] else None
        return (None if grad_x is None else grad_x.reshape(x_shape)), grad_w, grad_b


@autocast_op("group_norm")
def group_norm_layer(name: object, input: Any, num_groups: int, weight: Any = None, bias: Any = None,
                     eps: float = 1e-5) -> Any:
    """:func:`group_norm` with error messages that start with ``name``."""
    x = tensor_arg(input, name, "input")
    weight, bias = _optional(weight, name, "weight"), _optional(bias, name, "bias")
    if x.ndim < 2:
        raise RuntimeError(f"{name}: Expected at least 2 dimensions for input tensor but received {x.ndim}")
    check_parameters(name, x, ("weight", weight), ("bias", bias))
    channels = x.shape[1]
    if not isinstance(num_groups, int) or num_groups <= 0 or channels % num_groups:
        raise RuntimeError(f"{name}: Expected number of channels in input to be divisible by num_groups, but got "
                           f"input of shape {list(x.shape)} and num_groups={num_groups}")
    for what, value in (("weight", weight), ("bias", bias)):
        if value is not None and value.shape != (channels,):
            raise RuntimeError(f"{name}: Expected {what} to be a vector of size equal to the number of channels in "
                               f"input, but got {what} of shape {list(value.shape)} and input of shape {list(x.shape)}")
    view = (x.shape[0], channels, math.prod(x.shape[2:]))
    return GroupNorm.apply(x, weight, bias, view, num_groups, float(eps))


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    """Group normalization, as ``torch.nn.functional.group_norm``: the C channels of (N, C, *) input
    are split into ``num_groups`` groups, each (sample, group) normalized to mean 0 and variance 1,
    then scaled by ``weight`` and shifted by ``bias`` per channel.

    Raises:
        RuntimeError: fewer than 2 dimensions, C not divisible by ``num_groups``, or affine
            parameters not of shape (C,).
    """
    return group_norm_layer("group_norm", input, num_groups, weight, bias, eps)


def check_parameters(name: object, x: Any, *params: tuple[str, Any]) -> None:
    """PyTorch's dtype rule for normalization layers: a floating input, and parameters of its
    dtype, or float32 parameters for a float16 or bfloat16 input (the mixed types PyTorch's CPU
    kernels take: the result keeps the input's dtype, each gradient its parameter's).

    Raises:
        RuntimeError: an integer input, or a parameter of another dtype.
    """
    if not is_floating(x.dtype):
        raise RuntimeError(f"{name}: expected a floating point input, got {x.dtype}")
    for what, value in params:
        if value is None or value.dtype == x.dtype or (x.dtype in HALF_DTYPES and value.dtype == _FLOAT32):
            continue
        raise RuntimeError(f"{name}: Input type ({x.dtype}) and {what} type ({value.dtype}) should be the same")


def check_normalized_shape(name: object, x: Any, normalized_shape: int | Sequence[int], star: str,
                           **params: Any) -> tuple[int, ...]:
    """``normalized_shape`` as a tuple, after checking that it ends ``x``'s shape and is the shape
    of each of ``params`` (None where absent), all floating; ``star`` is what PyTorch writes
    before the dimensions in its message ("*, " for layer norm, "*" for RMS norm).

    Raises:
        RuntimeError: an empty ``normalized_shape``, or shapes that do not fit (PyTorch's messages).
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    check_parameters(name, x, *params.items())
    if not shape:
        raise RuntimeError(f"{name}: Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                           f"least one element, but got normalized_shape = []")
    if x.ndim < len(shape) or tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise RuntimeError(f"{name}: Given normalized_shape={list(shape)}, expected input with shape "
                           f"[{star}{', '.join(map(str, shape))}], but got input of size{list(x.shape)}")
    for what, value in params.items():
        if value is not None and value.shape != shape:
            raise RuntimeError(f"{name}: Expected {what} to be of same shape as normalized_shape, but got {what} of "
                               f"shape {list(value.shape)} and normalized_shape = {list(shape)}")
    return shape


@autocast_op("layer_norm")
def layer_norm_layer(name: object, input: Any, normalized_shape: Sequence[int], weight: Any = None, bias: Any = None,
                     eps: float = 1e-5) -> Any:
    """:func:`layer_norm` with error messages that start with ``name``."""
    x = tensor_arg(input, name, "input")
    weight, bias = _optional(weight, name, "weight"), _optional(bias, name, "bias")
    shape = check_normalized_shape(name, x, normalized_shape, "*, ", weight=weight, bias=bias)
    size = math.prod(shape)
    view = (x.numel() // size if size else 0, size, 1)
    return GroupNorm.apply(x, weight, bias, view, 1, float(eps))


def layer_norm(input: Any, normalized_shape: Sequence[int], weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> Any:
    """Layer normalization over the last ``len(normalized_shape)`` dimensions, as
    ``torch.nn.functional.layer_norm``; ``weight`` and ``bias`` have shape ``normalized_shape``.

    Raises:
        RuntimeError: the input's trailing dimensions are not ``normalized_shape``.
    """
    return layer_norm_layer("layer_norm", input, normalized_shape, weight, bias, eps)


def instance_norm(input: Any, running_mean: Any = None, running_var: Any = None, weight: Any = None,  # noqa: A002
                  bias: Any = None, use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Instance normalization, as ``torch.nn.functional.instance_norm``: each (sample, channel) of
    (N, C, *) input normalized over its own spatial positions (group norm with one group per
    channel), then scaled by ``weight`` and shifted by ``bias`` per channel.

    With ``use_input_stats`` given ``running_mean`` / ``running_var`` are updated in place by the
    batch average of the instances' statistics (the variance unbiased); without it the input is
    normalized with them instead, as batch norm in evaluation mode.

    Raises:
        ValueError: one spatial element per instance with ``use_input_stats``.
        RuntimeError: affine parameters or statistics whose size is not the channel count, or no
            statistics without ``use_input_stats``.
    """
    x = tensor_arg(input, "instance_norm", "input")
    if not use_input_stats:
        return batch_norm_layer("instance_norm", x, running_mean, running_var, weight, bias, False, momentum, eps)
    if x.ndim >= 2 and math.prod(x.shape[2:]) <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {list(x.shape)}")
    out = group_norm_layer("instance_norm", x, x.shape[1] if x.ndim >= 2 else 0, weight, bias, eps)
    if running_mean is not None or running_var is not None:
        _update_instance_stats(x, running_mean, running_var, momentum)
    return out


def _update_instance_stats(x: Any, running_mean: Any, running_var: Any, momentum: float) -> None:
    """r = (1 - momentum) * r + momentum * (the batch mean of each instance's statistic)."""
    with no_grad():
        rows = x.detach().reshape(x.shape[0], x.shape[1], -1)
        for running, stat in ((running_mean, rows.mean(2)), (running_var, rows.var(2, unbiased=True))):
            if running is not None:
                running.mul_(1 - momentum).add_(stat.mean(0) * momentum)

"""The CUDA backend's convolution, pooling and normalization ops (host side of
:mod:`kernels.layers`).

Convolution is im2col then the matrix product (cuBLAS on a GPU), one product per group over the
whole batch (the weight broadcast across samples by a zero stride); its backward builds the
columns again, multiplies, and adds the column gradient back with col2im. float32 products run in
TF32 while ``zgrad.backends.cudnn.allow_tf32`` is set (PyTorch's switch for its convolutions, on
by default). Batch and group normalization are
composed from the row variance kernel and element-wise launches; layer normalization (group norm
of (rows, C, 1) in one group) has its own row kernels (:mod:`kernels.layer_norm`). Part of
:mod:`zgrad.kernels.cuda.backend`; each function writes into its output arrays and returns them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels import matmul_precision
from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.elementwise import binary_op, unary_op, upload
from zgrad.kernels.cuda.reduce import contiguous, launch_column_reduce, launch_short_rows, matmul, rows_of
from zgrad.kernels.cuda.reduce import sum as reduce_sum
from zgrad.kernels.promotion import FULL_FLOAT_DTYPES
from zgrad.kernels.vocabulary import PADDING_MODES

__all__ = [
    "conv2d", "conv2d_backward", "max_pool2d", "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward",
    "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", "batch_norm", "batch_norm_backward", "group_norm",
    "group_norm_backward",
]


def _launch(kernel: Any, count: int, *args: Any) -> None:
    if count:
        rt.launch(kernel, rt.grid_1d(count), *(a.arg() if isinstance(a, DeviceArray) else a for a in args))


def _window(kernel_size, stride, padding, dilation=(1, 1)) -> DeviceArray:
    return upload([*kernel_size, *stride, *padding, *dilation], np.int64)


def _new(shape: tuple[int, ...], dtype: np.dtype) -> DeviceArray:
    return DeviceArray.empty(tuple(shape), dtype)


def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> DeviceArray:
    return unary_op("copy", 0, _new(shape, dtype))


# --- convolution ---------------------------------------------------------------------------------

def _columns(x, weight_shape, stride, padding, dilation, padding_mode, out_h, out_w) -> DeviceArray:
    """cols (N, C*KH*KW, OH*OW) of x."""
    cols = _new((x.shape[0], x.shape[1] * weight_shape[2] * weight_shape[3], out_h * out_w), x.dtype)
    if cols.size:
        rt.launch(kernels.layers.im2col, rt.plane_launch(cols.shape[0] * cols.shape[1], cols.shape[2]),
                  contiguous(x).arg(), _window(weight_shape[2:], stride, padding, dilation).arg(),
                  PADDING_MODES.index(padding_mode), out_w, cols.arg())
    return cols


def _add_columns_back(grad_cols, weight_shape, stride, padding, dilation, padding_mode, out_h, out_w, grad_x) -> None:
    """grad_x = the sum of the column gradients over the taps that read each input element."""
    window = _window(weight_shape[2:], stride, padding, dilation)
    if padding_mode == "zeros":
        if grad_x.size:
            rt.launch(kernels.layers.col2im, rt.plane_launch(grad_x.shape[0] * grad_x.shape[1], grad_x.shape[2] * grad_x.shape[3]),
                      grad_cols.arg(), window.arg(), out_h, out_w, grad_x.arg())
        return
    unary_op("copy", 0, grad_x)
    if grad_cols.size:
        rt.launch(kernels.layers.col2im_padded, rt.plane_launch(grad_cols.shape[0] * grad_cols.shape[1], grad_cols.shape[2]),
                  grad_cols.arg(), window.arg(), PADDING_MODES.index(padding_mode), out_h, out_w, grad_x.arg())


def conv2d(x, weight, bias, stride, padding, dilation, groups, padding_mode, out):
    """out (N, OC, OH, OW) = cross-correlation of x with weight (OC, C/groups, KH, KW) (+ bias)."""
    batch, out_channels, out_h, out_w = out.shape
    per_group, rows = out_channels // groups, weight.shape[1] * weight.shape[2] * weight.shape[3]
    cols = _columns(x, weight.shape, stride, padding, dilation, padding_mode, out_h, out_w)
    w_matrix = contiguous(weight).reshape(out_channels, rows)
    out3 = out.reshape(batch, out_channels, out_h * out_w)
    tf32 = matmul_precision.convolution_allow_tf32()
    for g in range(groups):
        w_g = w_matrix[g * per_group:(g + 1) * per_group]
        matmul(w_g.broadcast_to((batch, per_group, rows)), cols[:, g * rows:(g + 1) * rows],
               out3[:, g * per_group:(g + 1) * per_group], tf32=tf32)
    if bias is not None:
        binary_op("add", out, bias.reshape(-1, 1, 1), out)
    return out


def conv2d_backward(grad, x, weight, stride, padding, dilation, groups, padding_mode, grad_x, grad_weight):
    """The gradients of :func:`conv2d` for x and weight (either output may be None: skipped)."""
    batch, out_channels, out_h, out_w = grad.shape
    per_group, rows = out_channels // groups, weight.shape[1] * weight.shape[2] * weight.shape[3]
    g3 = contiguous(grad).reshape(batch, out_channels, out_h * out_w)
    w_matrix = contiguous(weight).reshape(out_channels, rows)
    tf32 = matmul_precision.convolution_allow_tf32()
    if grad_weight is not None:
        cols = _columns(x, weight.shape, stride, padding, dilation, padding_mode, out_h, out_w)
        per_sample = _new((batch, out_channels, rows), x.dtype)
        for g in range(groups):
            matmul(g3[:, g * per_group:(g + 1) * per_group], cols[:, g * rows:(g + 1) * rows].transpose(0, 2, 1),
                   per_sample[:, g * per_group:(g + 1) * per_group], tf32=tf32)
        reduce_sum(per_sample, (0,), False, grad_weight.reshape(out_channels, rows))
    if grad_x is not None:
        grad_cols = _new((batch, groups * rows, out_h * out_w), x.dtype)
        for g in range(groups):
            w_t = w_matrix[g * per_group:(g + 1) * per_group].T
            matmul(w_t.broadcast_to((batch, rows, per_group)), g3[:, g * per_group:(g + 1) * per_group],
                   grad_cols[:, g * rows:(g + 1) * rows], tf32=tf32)
        _add_columns_back(grad_cols, weight.shape, stride, padding, dilation, padding_mode, out_h, out_w, grad_x)
    return grad_x, grad_weight


# --- pooling -------------------------------------------------------------------------------------

def max_pool2d(x, kernel_size, stride, padding, dilation, out, indices):
    _launch(kernels.layers.max_pool, out.size, contiguous(x), _window(kernel_size, stride, padding, dilation), out, indices)
    return out, indices


def max_pool2d_backward(grad, indices, grad_x):
    unary_op("copy", 0, grad_x)
    _launch(kernels.layers.max_pool_backward, grad.size, contiguous(grad), contiguous(indices), grad_x)
    return grad_x


def avg_pool2d(x, kernel_size, stride, padding, count_include_pad, divisor_override, out):
    _launch(kernels.layers.avg_pool, out.size, contiguous(x), _window(kernel_size, stride, padding), bool(count_include_pad),
            int(divisor_override or 0), out)
    return out


def avg_pool2d_backward(grad, kernel_size, stride, padding, count_include_pad, divisor_override, grad_x):
    unary_op("copy", 0, grad_x)
    _launch(kernels.layers.avg_pool_backward, grad.size, contiguous(grad), _window(kernel_size, stride, padding),
            bool(count_include_pad), int(divisor_override or 0), grad_x)
    return grad_x


def adaptive_avg_pool2d(x, out):
    _launch(kernels.layers.adaptive_avg_pool, out.size, contiguous(x), out)
    return out


def adaptive_avg_pool2d_backward(grad, grad_x):
    unary_op("copy", 0, grad_x)
    _launch(kernels.layers.adaptive_avg_pool_backward, grad.size, contiguous(grad), grad_x)
    return grad_x


# --- normalization -------------------------------------------------------------------------------

def _stats(rows: DeviceArray, eps: float, mean: DeviceArray, invstd: DeviceArray) -> DeviceArray:
    """mean and 1/sqrt(var + eps) of each row; returns the (biased) variance."""
    var = _new(mean.shape, mean.dtype)
    rt.launch(kernels.rows.variance, rt.row_launch(rows.shape[0]), rows.arg(), rows.dtype.type(0),
              mean.arg(), var.arg())
    unary_op("rsqrt_shift", var, invstd, eps)
    return var


def _normalize(x, mean, invstd, scale_shape, weight, bias, out) -> DeviceArray:
    """out = (x - mean) * invstd * weight + bias, the statistics and affine broadcast by shape."""
    binary_op("sub", x, mean.reshape(scale_shape), out)
    binary_op("mul", out, invstd.reshape(scale_shape), out)
    if weight is not None:
        binary_op("mul", out, weight.reshape(_channel_shape(out.ndim, scale_shape, weight)), out)
    if bias is not None:
        binary_op("add", out, bias.reshape(_channel_shape(out.ndim, scale_shape, bias)), out)
    return out


def _channel_shape(ndim: int, scale_shape: tuple[int, ...], affine: DeviceArray) -> tuple[int, ...]:
    # batch norm: (C, 1) against (N, C, S); group norm: (G, C/G, 1) against (N, G, C/G, S)
    return (-1, 1) if ndim == 3 else (scale_shape[1], -1, 1)


def batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps, out, save_mean, save_invstd):
    """Batch norm of (N, C, S) ``x`` per channel, with batch statistics (updating the running ones
    where given) or the running statistics."""
    if x.size == 0:
        unary_op("copy", np.nan, save_mean)
        unary_op("copy", np.nan, save_invstd)
        return out, save_mean, save_invstd
    count = x.shape[0] * x.shape[2]
    if training:
        var = _stats(rows_of(x, (0, 2)), eps, save_mean, save_invstd)
        if running_mean is not None:
            binary_op("running_update", running_mean, save_mean, running_mean, momentum, 1)
        if running_var is not None:
            binary_op("running_update", running_var, var, running_var, momentum, count / max(count - 1, 1))
    else:
        unary_op("copy", running_mean, save_mean)
        unary_op("rsqrt_shift", running_var, save_invstd, eps)
    _normalize(contiguous(x), save_mean, save_invstd, (-1, 1), weight, bias, out)
    return out, save_mean, save_invstd


def _sum_over(a: DeviceArray, axes: tuple[int, ...], shape: tuple[int, ...]) -> DeviceArray:
    out = _new(shape, a.dtype)
    return reduce_sum(a, axes, False, out)


def batch_norm_backward(grad, x, weight, save_mean, save_invstd, training, grad_x, grad_weight, grad_bias):
    """Gradients of :func:`batch_norm`; a None output is not computed."""
    channels = x.shape[1]
    if x.size == 0:
        for g in (grad_weight, grad_bias):
            if g is not None:
                unary_op("copy", 0, g)
        return grad_x, grad_weight, grad_bias
    grad = contiguous(grad)
    centered = binary_op("sub", x, save_mean.reshape(-1, 1), _new(x.shape, x.dtype))
    total = _sum_over(grad, (0, 2), (channels,))
    dot = _sum_over(binary_op("mul", grad, centered, _new(x.shape, x.dtype)), (0, 2), (channels,))
    if grad_weight is not None:
        binary_op("mul", dot, save_invstd, grad_weight)
    if grad_bias is not None:
        unary_op("copy", total, grad_bias)
    if grad_x is not None:
        scale = save_invstd if weight is None else binary_op("mul", weight, save_invstd, _new((channels,), x.dtype))
        if training:
            count = x.shape[0] * x.shape[2]
            k = binary_op("mul", dot, save_invstd, _new((channels,), x.dtype))
            binary_op("mul", k, save_invstd, k)
            binary_op("div", k, count, k)
            mean_grad = binary_op("div", total, count, _new((channels,), x.dtype))
            binary_op("mul", centered, k.reshape(-1, 1), centered)
            binary_op("sub", grad, centered, grad_x)
            binary_op("sub", grad_x, mean_grad.reshape(-1, 1), grad_x)
            binary_op("mul", grad_x, scale.reshape(-1, 1), grad_x)
        else:
            binary_op("mul", grad, scale.reshape(-1, 1), grad_x)
    return grad_x, grad_weight, grad_bias


# Layer norm is group norm of (rows, C, 1) in one group: its own row kernels, one launch forward
# and three or four backward (the input gradient; the parameters' partial sums over chunks of
# rows, then their column sums), where the composed path takes a dozen and a transposing copy.
PARAMETER_CHUNKS = 256  # row chunks of the weight and bias gradients' first pass


def _is_layer_norm(x: DeviceArray, groups: int) -> bool:
    return groups == 1 and x.shape[2] == 1 and x.dtype in FULL_FLOAT_DTYPES


def _or_none(affine: DeviceArray | None, x: DeviceArray) -> DeviceArray:
    """``affine``, or the empty array the layer-norm kernels take for none."""
    return DeviceArray.empty((0,), x.dtype) if affine is None else affine


def _layer_norm_backward(grad, x, weight, mean, invstd, grad_x, grad_weight, grad_bias):
    """Gradients of layer norm over the rows of C-contiguous (R, C) ``x`` and ``grad``; a None
    output is not computed. The kernels take every array flat."""
    k = kernels.layer_norm
    rows, channels = x.shape
    grad_flat, x_flat, mean_flat, invstd_flat = grad.flat_arg(), x.flat_arg(), mean.flat_arg(), invstd.flat_arg()
    if grad_x is not None:
        args = (grad_flat, x_flat, rows, channels, _or_none(weight, x).flat_arg(), mean_flat, invstd_flat,
                grad_x.flat_arg())
        launch_short_rows(k.layer_norm_backward_warp_rows, k.layer_norm_backward_rows, rows, channels, *args)
    if grad_weight is not None or grad_bias is not None:
        chunks = min(rows, PARAMETER_CHUNKS)
        parts = [_new((chunks, channels), x.dtype) for _ in range(2)]
        rt.launch(k.layer_norm_parameter_partials, rt.plane_launch(chunks, channels), grad_flat, x_flat, rows,
                  channels, mean_flat, invstd_flat, parts[0].flat_arg(), parts[1].flat_arg())
        for part, target in zip(parts, (grad_weight, grad_bias)):
            if target is not None:
                launch_column_reduce(part, chunks, channels, kernels.rows.SUM, target.reshape(1, channels))
    return grad_x, grad_weight, grad_bias


def group_norm(x, weight, bias, groups, eps, out, save_mean, save_invstd):
    """Group norm of (N, C, S) ``x`` over each (sample, group), then the per-channel affine."""
    if x.size == 0:
        unary_op("copy", np.nan, save_mean)
        unary_op("copy", np.nan, save_invstd)
        return out, save_mean, save_invstd
    batch, channels, size = x.shape
    x = contiguous(x)
    if _is_layer_norm(x, groups):
        k = kernels.layer_norm
        args = (x.flat_arg(), batch, channels, _or_none(weight, x).flat_arg(), _or_none(bias, x).flat_arg(),
                x.dtype.type(eps), out.flat_arg(), save_mean.flat_arg(), save_invstd.flat_arg())
        launch_short_rows(k.layer_norm_warp_rows, k.layer_norm_rows, batch, channels, *args)
        return out, save_mean, save_invstd
    _stats(x.reshape(batch * groups, -1), eps, save_mean, save_invstd)
    shape4 = (batch, groups, channels // groups, size)
    _normalize(x.reshape(shape4), save_mean.reshape(batch, groups), save_invstd.reshape(batch, groups),
               (batch, groups, 1, 1), weight, bias, out.reshape(shape4))
    return out, save_mean, save_invstd


def group_norm_backward(grad, x, weight, save_mean, save_invstd, groups, grad_x, grad_weight, grad_bias):
    """Gradients of :func:`group_norm`; a None output is not computed."""
    batch, channels, size = x.shape
    if x.size == 0:
        for g in (grad_weight, grad_bias):
            if g is not None:
                unary_op("copy", 0, g)
        return grad_x, grad_weight, grad_bias
    if _is_layer_norm(x, groups):
        return _layer_norm_backward(contiguous(grad).reshape(batch, channels), contiguous(x).reshape(batch, channels),
                                    weight, save_mean.reshape(-1), save_invstd.reshape(-1), grad_x, grad_weight, grad_bias)
    shape4, stats4 = (batch, groups, channels // groups, size), (batch, groups, 1, 1)
    grad4 = contiguous(grad).reshape(shape4)
    xhat = _normalize(contiguous(x).reshape(shape4), save_mean, save_invstd, stats4, None, None,
                      _new(shape4, x.dtype))
    if grad_weight is not None:
        product = binary_op("mul", grad4, xhat, _new(shape4, x.dtype))
        reduce_sum(product.reshape(batch, channels, size), (0, 2), False, grad_weight)
    if grad_bias is not None:
        reduce_sum(grad4.reshape(batch, channels, size), (0, 2), False, grad_bias)
    if grad_x is not None:
        dxhat = grad4 if weight is None else binary_op(
            "mul", grad4, weight.reshape(groups, -1, 1), _new(shape4, x.dtype))
        per_group = float((channels // groups) * size)
        mean_d = _sum_over(dxhat, (2, 3), (batch, groups))
        binary_op("div", mean_d, per_group, mean_d)
        mean_dx = _sum_over(binary_op("mul", dxhat, xhat, _new(shape4, x.dtype)), (2, 3), (batch, groups))
        binary_op("div", mean_dx, per_group, mean_dx)
        out4 = grad_x.reshape(shape4)
        binary_op("mul", xhat, mean_dx.reshape(stats4), out4)
        binary_op("sub", dxhat, out4, out4)
        binary_op("sub", out4, mean_d.reshape(stats4), out4)
        binary_op("mul", out4, save_invstd.reshape(stats4), out4)
    return grad_x, grad_weight, grad_bias

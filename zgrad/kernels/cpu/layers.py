"""The CPU backend's convolution, pooling and normalization ops (re-exported by
:mod:`zgrad.kernels.cpu.backend`).

Each function writes into the ``out`` arrays the dispatch layer allocated and returns them. The
Numba kernels (:mod:`kernels.conv`, :mod:`kernels.pool`, :mod:`kernels.norm`, :mod:`kernels.batch_norm`) are
imported on first use, so importing the backend still imports no numba.

Convolution runs on BLAS (``np.matmul``) a chunk of samples at a time, one of three ways:

- a 1x1 kernel without stride or padding: one product with the input as it is;
- stride 1 and zero padding (the common 3x3 layer): the input is padded into KW shifted copies
  per channel (3x the input, where im2col writes 9x), one product by the weights of all kernel
  rows stacked reads them in place, and the crop sums the KH rows' products (see
  :mod:`kernels.conv`). The weight gradient is one product per chunk too, of KH row-shifted
  copies of the gradient by the input's copies; the input gradient is the same correlation of the
  gradient with the kernel flipped (figures: bench/README.md, Design figures);
- otherwise im2col: the columns of the chunk, then one product. The backward builds the columns
  again rather than keeping them from the forward (KH*KW times the input's size).

Padded planes, products and columns are scratch arrays borrowed from :mod:`scratch` for the call.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cpu import kernels, winograd
from zgrad.kernels.vocabulary import PADDING_MODES
from zgrad.kernels.scratch import Workspace, workspace

__all__ = [
    "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", "avg_pool2d", "avg_pool2d_backward", "batch_norm",
    "batch_norm_backward", "conv2d", "conv2d_backward", "group_norm", "group_norm_backward", "max_pool2d",
    "max_pool2d_backward",
]

# Columns are built for a few samples at a time, so that a chunk stays in the last-level cache
# between im2col writing it and BLAS reading it, and memory stays bounded for large batches.
_COLUMNS_CHUNK_BYTES = 8 << 20


def _c(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a)


def _or_empty(a: np.ndarray | None, dtype: np.dtype, ndim: int = 1) -> np.ndarray:
    """``a``, or the empty array kernels take for an absent optional array."""
    return np.empty((0,) * ndim, dtype) if a is None else a


def _leading(buffer: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The first elements of a flat scratch ``buffer`` as a C-contiguous array of ``shape``."""
    return buffer[:int(np.prod(shape))].reshape(shape)


def _zero(*arrays: np.ndarray | None) -> None:
    for a in arrays:
        if a is not None:
            a[...] = 0


# --- convolution ------------------------------------------------------------------------------

def _window_args(weight_shape, stride, padding, dilation, padding_mode) -> tuple:
    return (weight_shape[2], weight_shape[3], stride[0], stride[1], padding[0], padding[1],
            dilation[0], dilation[1], PADDING_MODES.index(padding_mode))


def _is_pointwise(weight_shape, stride, padding) -> bool:
    """A 1x1 kernel without stride or padding: the input already is the column matrix."""
    return tuple(weight_shape[2:]) == (1, 1) and tuple(stride) == (1, 1) and tuple(padding) == (0, 0)


def _chunk(batch: int, sample_bytes: int) -> int:
    return max(1, min(batch, _COLUMNS_CHUNK_BYTES // max(sample_bytes, 1)))


class _Shifted:
    """The stride-1, zero-padding path (see :mod:`kernels.conv`): the padded planes of a chunk of
    samples laid end to end, KW shifted copies per channel, one product for all kernel rows, summed
    and cropped in one pass."""

    def __init__(self, x, weight_shape, padding, dilation, out_h: int, out_w: int, scratch: Workspace) -> None:
        self.kernel_h, self.kernel_w = kernel_h, kernel_w = weight_shape[2], weight_shape[3]
        reach_h, reach_w = (kernel_h - 1) * dilation[0], (kernel_w - 1) * dilation[1]
        height, width = x.shape[2], x.shape[3]
        pad_bottom, pad_right = out_h + reach_h - height - padding[0], out_w + reach_w - width - padding[1]
        self.x, self.reach, self.column_step = x, (reach_h, reach_w), dilation[1]
        # Neighbouring rows share their zero columns and neighbouring planes their zero rows (the
        # right padding of a row is the left padding of the next): 33x33 planes instead of 34x34
        # for a 32x32 image padded by 1, 6% less to multiply. Wp, the padded row:
        self.width = max(width + max(padding[1], pad_right), out_w)
        self.plane = max(height + max(padding[0], pad_bottom), out_h) * self.width  # a padded plane
        self.row_step = dilation[0] * self.width  # from one kernel row's inputs to the next's
        channels = max(x.shape[1], weight_shape[0])
        # The chunk is sized by what the backward writes per sample: the input's KW copies, the
        # gradient's KH and KW copies (one buffer, in turn) and the products of every kernel row.
        # (Measured: 2 samples a chunk for the benchmark's 3x3 64->64 layer ran 5-10% faster than 3.)
        copies = max(kernel_w, kernel_h) * channels
        written = kernel_w * (x.shape[1] + weight_shape[0]) + kernel_h * (weight_shape[0] + channels)
        self.chunk = _chunk(x.shape[0], written * self.plane * x.itemsize)
        length = self.chunk * self.plane + reach_h * self.width  # the longest row of copies
        self.copies = copies * length  # elements of a buffer for :meth:`rows`
        self._products = scratch.take("products", kernel_h * channels * length, x.dtype)

    def chunks(self):
        """(start, stop) of each chunk of samples."""
        return ((start, min(start + self.chunk, self.x.shape[0])) for start in range(0, self.x.shape[0], self.chunk))

    def rows(self, source, corner: tuple[int, int], buffer, by_row: bool = False):
        """(C*KW, m*plane + (KH-1)*dh*Wp) in ``buffer``: the padded planes of ``source`` (m, C, H, W),
        plane n's first position at n*plane + corner[0]*Wp + corner[1], copy j of each channel
        shifted back by j*dw; or, ``by_row``, (C*KH, ...) with copy i shifted back by i*dh*Wp."""
        m, channels = source.shape[:2]
        copies, step = (self.kernel_h, self.row_step) if by_row else (self.kernel_w, self.column_step)
        out = _leading(buffer, (channels * copies, m * self.plane + self.reach[0] * self.width))
        kernels.conv.pad_planes(source, *corner, self.width, self.plane, step, out)
        return out

    def correlate(self, row_weights, rows, corner: tuple[int, int], bias, out) -> None:
        """out (m, G*M, OH, OW) = the sum over kernel rows i of row_weights[:, i] (G, KH, M, C*KW/G) @
        the inputs of row i in ``rows``, from ``corner`` of each plane on (+ bias): one product
        for all kernel rows, summed by the crop."""
        groups, kernel_h, per_group = row_weights.shape[:3]
        products = _leading(self._products, (groups, kernel_h * per_group, rows.shape[1]))
        np.matmul(row_weights.reshape(groups, kernel_h * per_group, -1), rows.reshape(groups, -1, rows.shape[1]),
                  out=products)
        kernels.conv.crop_planes(products.reshape(groups, kernel_h, per_group, -1), *corner, self.width, self.plane,
                                 self.row_step, _or_empty(bias, out.dtype), out)


def _row_weights(weight, groups: int):
    """(G, KH, OC/G, C/G*KW): the weights of each kernel row against the KW shifted copies of each
    input channel, contiguous."""
    out_channels, per_group, kernel_h, kernel_w = weight.shape
    grouped = weight.reshape(groups, out_channels // groups, per_group, kernel_h, kernel_w)
    return _c(grouped.transpose(0, 3, 1, 2, 4)).reshape(groups, kernel_h, out_channels // groups, per_group * kernel_w)


def _is_shifted(stride, padding_mode) -> bool:
    return tuple(stride) == (1, 1) and padding_mode == "zeros"


def conv2d(x, weight, bias, stride, padding, dilation, groups, padding_mode, out):
    """out (N, OC, OH, OW) = cross-correlation of x (N, C, H, W) with weight (OC, C/groups, KH, KW)
    (+ bias (OC,) unless None).

    ``padding`` is (top, left); the bottom/right padding shows only in ``out``'s size.
    """
    x, weight = _c(x), _c(weight)
    batch, out_channels, out_h, out_w = out.shape
    per_group = out_channels // groups
    rows = weight.shape[1] * weight.shape[2] * weight.shape[3]  # column rows per group
    if _is_pointwise(weight.shape, stride, padding):
        np.matmul(weight.reshape(groups, per_group, rows), x.reshape(batch, groups, rows, out_h * out_w),
                  out=out.reshape(batch, groups, per_group, out_h * out_w))
    elif winograd.applies(x.shape, weight.shape, stride, padding, dilation, groups, padding_mode):
        with workspace() as scratch:
            winograd.forward(x, weight, _or_empty(bias, out.dtype), padding, out, scratch)
        return out
    elif _is_shifted(stride, padding_mode):
        with workspace() as scratch:
            _forward_shifted(x, weight, bias, padding, dilation, groups, out, scratch)
        return out
    else:
        with workspace() as scratch:
            _forward_columns(x, weight, stride, padding, dilation, groups, padding_mode, out, scratch)
    if bias is not None:
        np.add(out, bias.reshape(-1, 1, 1), out=out)
    return out


def _forward_shifted(x, weight, bias, padding, dilation, groups, out, scratch: Workspace) -> None:
    shifted = _Shifted(x, weight.shape, padding, dilation, *out.shape[2:], scratch)
    row_weights = _row_weights(weight, groups)
    rows = scratch.take("shifted input", shifted.copies, x.dtype)
    for start, stop in shifted.chunks():
        shifted.correlate(row_weights, shifted.rows(x[start:stop], padding, rows), (0, 0), bias, out[start:stop])


def _forward_columns(x, weight, stride, padding, dilation, groups, padding_mode, out, scratch: Workspace) -> None:
    batch, out_channels, out_h, out_w = out.shape
    per_group, rows = out_channels // groups, weight[0].size
    window = _window_args(weight.shape, stride, padding, dilation, padding_mode)
    chunk = _chunk(batch, groups * rows * out_h * out_w * x.itemsize)
    cols = scratch.take("columns", (chunk, groups, rows, out_h * out_w), x.dtype)
    w_matrix = weight.reshape(groups, per_group, rows)
    out_matrix = out.reshape(batch, groups, per_group, out_h * out_w)
    for start in range(0, batch, chunk):
        stop = min(start + chunk, batch)
        part = cols[:stop - start]
        kernels.conv.im2col(x[start:stop], *window, part.reshape(stop - start, groups * rows, out_h, out_w))
        np.matmul(w_matrix, part, out=out_matrix[start:stop])


def _backward_shifted(grad, x, weight, padding, dilation, groups, grad_x, grad_weight, scratch: Workspace) -> None:
    """The input gradient is the same correlation (:meth:`_Shifted.correlate`) of the gradient,
    laid (KH-1)*dh rows and (KW-1)*dw columns further on, with the kernel flipped and each tap's
    weights transposed. The weight gradient of kernel row i is the gradient laid i*dh rows further
    on times the input's KW copies transposed: one product per chunk for every tap, of the KH
    copies of the gradient laid (KH-1-i)*dh rows on (copy i) by the input's copies."""
    out_channels, kernel_h, kernel_w = weight.shape[0], weight.shape[2], weight.shape[3]
    channels, per_group = x.shape[1], out_channels // groups
    shifted = _Shifted(x, weight.shape, padding, dilation, *grad.shape[2:], scratch)
    flipped = weight.reshape(groups, per_group, -1, kernel_h, kernel_w)[..., ::-1, ::-1].swapaxes(1, 2)
    transposed_rows = _row_weights(flipped.reshape(channels, per_group, kernel_h, kernel_w), groups)
    grad_rows = scratch.take("shifted grad", shifted.copies, x.dtype)
    x_rows = scratch.take("shifted input", shifted.copies, x.dtype)
    if grad_weight is not None:
        # (G, OC/G * KH, C/G * KW): rows (oc, KH-1-i), columns (c, j)
        row_grads = np.zeros((groups, per_group * kernel_h, channels // groups * kernel_w), x.dtype)
        product_w = np.empty_like(row_grads)
    for start, stop in shifted.chunks():
        if grad_weight is not None:
            g_rows = shifted.rows(grad[start:stop], (shifted.reach[0], 0), grad_rows, by_row=True)
            inputs = shifted.rows(x[start:stop], padding, x_rows)
            np.matmul(g_rows.reshape(groups, row_grads.shape[1], -1),
                      inputs.reshape(groups, row_grads.shape[2], -1).swapaxes(-1, -2), out=product_w)
            row_grads += product_w
        if grad_x is not None:
            g_rows = shifted.rows(grad[start:stop], shifted.reach, grad_rows)
            shifted.correlate(transposed_rows, g_rows, padding, None, grad_x[start:stop])
    if grad_weight is not None:
        grad_weight[...] = row_grads.reshape(out_channels, kernel_h, -1, kernel_w)[:, ::-1].transpose(0, 2, 1, 3)


def _backward_columns(grad, x, weight, stride, padding, dilation, groups, padding_mode, grad_x, gw_matrix, w_t,
                      scratch: Workspace) -> None:
    batch, out_channels, out_h, out_w = grad.shape
    per_group, rows = out_channels // groups, weight[0].size
    conv = kernels.conv
    g_matrix = grad.reshape(batch, groups, per_group, out_h * out_w)
    window = _window_args(weight.shape, stride, padding, dilation, padding_mode)
    chunk = _chunk(batch, groups * rows * out_h * out_w * x.itemsize)
    cols = scratch.take("columns", (chunk, groups, rows, out_h * out_w), x.dtype)
    if gw_matrix is not None:
        products = scratch.take("products", (chunk, groups, per_group, rows), x.dtype)
    for start in range(0, batch, chunk):
        stop = min(start + chunk, batch)
        m = stop - start
        flat_cols = cols[:m].reshape(m, groups * rows, out_h, out_w)
        if gw_matrix is not None:
            conv.im2col(x[start:stop], *window, flat_cols)
            np.matmul(g_matrix[start:stop], cols[:m].swapaxes(-1, -2), out=products[:m])
            gw_matrix += np.add.reduce(products[:m], axis=0)
        if grad_x is not None:
            np.matmul(w_t, g_matrix[start:stop], out=cols[:m])
            conv.col2im(flat_cols, *window, grad_x[start:stop])


def conv2d_backward(grad, x, weight, stride, padding, dilation, groups, padding_mode, grad_x, grad_weight):
    """The gradients of :func:`conv2d` for x and weight, into ``grad_x`` / ``grad_weight``
    (either may be None: not computed)."""
    grad, x, weight = _c(grad), _c(x), _c(weight)
    batch, out_channels, out_h, out_w = grad.shape
    per_group = out_channels // groups
    rows = weight.shape[1] * weight.shape[2] * weight.shape[3]
    if winograd.applies(x.shape, weight.shape, stride, padding, dilation, groups, padding_mode):
        with workspace() as scratch:
            winograd.backward(grad, x, weight, padding, grad_x, grad_weight, scratch)
        return grad_x, grad_weight
    if _is_shifted(stride, padding_mode) and not _is_pointwise(weight.shape, stride, padding):
        with workspace() as scratch:
            _backward_shifted(grad, x, weight, padding, dilation, groups, grad_x, grad_weight, scratch)
        return grad_x, grad_weight
    # The transposed weight as a contiguous copy: OpenBLAS runs a product with a transposed
    # batched operand slower than with a plain one.
    w_t = _c(weight.reshape(groups, per_group, rows).transpose(0, 2, 1))
    gw_matrix = None if grad_weight is None else grad_weight.reshape(groups, per_group, rows)
    _zero(gw_matrix)
    if _is_pointwise(weight.shape, stride, padding):
        g_matrix = grad.reshape(batch, groups, per_group, out_h * out_w)
        x_matrix = x.reshape(batch, groups, rows, out_h * out_w)
        if grad_x is not None:
            np.matmul(w_t, g_matrix, out=grad_x.reshape(x_matrix.shape))
        if gw_matrix is not None and batch:
            np.add.reduce(np.matmul(g_matrix, x_matrix.swapaxes(-1, -2)), axis=0, out=gw_matrix)
        return grad_x, grad_weight
    with workspace() as scratch:
        _backward_columns(grad, x, weight, stride, padding, dilation, groups, padding_mode, grad_x, gw_matrix, w_t,
                          scratch)
    return grad_x, grad_weight


# --- pooling ----------------------------------------------------------------------------------

def max_pool2d(x, kernel_size, stride, padding, dilation, out, indices):
    """out, indices (N, C, OH, OW) = each window's maximum and its flat position in the plane."""
    kernels.pool.max_pool2d_forward(_c(x), *kernel_size, *stride, *padding, *dilation, out, indices)
    return out, indices


def max_pool2d_backward(grad, indices, grad_x):
    kernels.pool.max_pool2d_backward(_c(grad), _c(indices), grad_x)
    return grad_x


def avg_pool2d(x, kernel_size, stride, padding, count_include_pad, divisor_override, out):
    kernels.pool.avg_pool2d_forward(
        _c(x), *kernel_size, *stride, *padding, count_include_pad, divisor_override or 0, out)
    return out


def avg_pool2d_backward(grad, kernel_size, stride, padding, count_include_pad, divisor_override, grad_x):
    kernels.pool.avg_pool2d_backward(
        _c(grad), *kernel_size, *stride, *padding, count_include_pad, divisor_override or 0, grad_x)
    return grad_x


def adaptive_avg_pool2d(x, out):
    kernels.pool.adaptive_avg_pool2d_forward(_c(x), out)
    return out


def adaptive_avg_pool2d_backward(grad, grad_x):
    kernels.pool.adaptive_avg_pool2d_backward(_c(grad), grad_x)
    return grad_x


# --- normalization ----------------------------------------------------------------------------

def batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps, out, save_mean, save_invstd):
    """Batch norm of (N, C, S) ``x`` (see :func:`zgrad.kernels.cpu.kernels.batch_norm.batch_norm_forward`);
    absent ``weight``/``bias``/running statistics are None."""
    if x.size:
        kernel = kernels.batch_norm.batch_norm_forward
        kernel(_c(x), _or_empty(weight, x.dtype), _or_empty(bias, x.dtype), _or_empty(running_mean, x.dtype),
               _or_empty(running_var, x.dtype), training, momentum, eps, kernel.task_count(x.size), out, save_mean,
               save_invstd)
    else:
        save_mean[...], save_invstd[...] = np.nan, np.nan
    return out, save_mean, save_invstd


def batch_norm_backward(grad, x, weight, save_mean, save_invstd, training, grad_x, grad_weight, grad_bias):
    """Gradients of :func:`batch_norm`; a None output is not computed."""
    if not x.size:
        _zero(grad_weight, grad_bias)
        return grad_x, grad_weight, grad_bias
    kernel = kernels.batch_norm.batch_norm_backward
    kernel(_c(grad), _c(x), _or_empty(weight, x.dtype), save_mean, save_invstd, training, kernel.task_count(grad.size),
           _or_empty(grad_x, x.dtype, 3), _or_empty(grad_weight, x.dtype), _or_empty(grad_bias, x.dtype))
    return grad_x, grad_weight, grad_bias


def group_norm(x, weight, bias, groups, eps, out, save_mean, save_invstd):
    """Group norm of (N, C, S) ``x`` (see :func:`zgrad.kernels.cpu.kernels.norm.group_norm_forward`)."""
    if x.size:
        kernels.norm.group_norm_forward(
            _c(x), _or_empty(weight, x.dtype), _or_empty(bias, x.dtype), groups, eps, out, save_mean, save_invstd)
    else:
        save_mean[...], save_invstd[...] = np.nan, np.nan
    return out, save_mean, save_invstd


def group_norm_backward(grad, x, weight, save_mean, save_invstd, groups, grad_x, grad_weight, grad_bias):
    """Gradients of :func:`group_norm`; a None output is not computed."""
    if not x.size:
        _zero(grad_weight, grad_bias)
        return grad_x, grad_weight, grad_bias
    kernel = kernels.norm.group_norm_backward
    kernel(_c(grad), _c(x), _or_empty(weight, x.dtype), save_mean, save_invstd, groups, kernel.task_count(grad.size),
           _or_empty(grad_x, x.dtype, 3), _or_empty(grad_weight, x.dtype), _or_empty(grad_bias, x.dtype))
    return grad_x, grad_weight, grad_bias

"""CUDA kernels of the (N, C, H, W) layers: im2col / col2im for convolution (the product itself
is :func:`zgrad.kernels.cuda.kernels.linalg.matmul`), and max / average / adaptive average pooling.

Windows, padding modes, ties and NaN follow the CPU kernels (:mod:`zgrad.kernels.cpu.kernels.conv`,
:mod:`zgrad.kernels.cpu.kernels.pool`). im2col and col2im walk planes (grid y) and their elements
(grid x); col2im gathers each input element's taps (with zero padding; the other padding modes
add atomically into a zeroed ``grad_x``). Pooling runs one thread per output element, grid-stride;
gradients that overlapping windows send to one input element are added atomically.
``window`` is the int64 array (kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h,
dilation_w). Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import device, kernel
from zgrad.kernels.vocabulary import padding_source

__all__ = [
    "im2col", "col2im", "col2im_padded", "max_pool", "max_pool_backward", "avg_pool", "avg_pool_backward", "adaptive_avg_pool",
    "adaptive_avg_pool_backward",
]

_source = device(padding_source)


@device
def _plane_threads():
    """(first, step) of this thread's walk over a plane's elements (x and the block's threads)."""
    return cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, cuda.gridDim.x * cuda.blockDim.x


@device
def _columns_row(plane, rows, window):
    """Row ``plane`` of cols (N, C*KH*KW, OH*OW) as (n, row, c, the tap's offsets top and left)."""
    kernel_w, taps = window[1], window[0] * window[1]
    n = plane // rows
    row = plane - n * rows
    c = row // taps
    i = (row - c * taps) // kernel_w
    j = row - c * taps - i * kernel_w
    return n, row, c, i * window[6] - window[4], j * window[7] - window[5]


@device
def _column_source(p, out_w, window, top, left, height, width, mode):
    """The input position (ih, iw) that position ``p`` of a cols row with offsets (top, left)
    reads; -1 for a zero of the padding."""
    oh = p // out_w
    ow = p - oh * out_w
    return _source(oh * window[2] + top, height, mode), _source(ow * window[3] + left, width, mode)


@kernel
def im2col(x, window, mode, out_w, cols):
    """cols[n, (c, i, j), oh * OW + ow] = padded x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw].

    Grid y walks the (n, (c, i, j)) rows of cols, grid x and the threads their positions: the row
    is worked out once per block row, so an element costs one division (its position) and reads
    and writes along a row (coalesced)."""
    T = cols.dtype.type
    rows, positions = cols.shape[1], cols.shape[2]
    first, step = _plane_threads()
    for plane in range(cuda.blockIdx.y, cols.shape[0] * rows, cuda.gridDim.y):
        n, row, c, top, left = _columns_row(plane, rows, window)
        for p in range(first, positions, step):
            ih, iw = _column_source(p, out_w, window, top, left, x.shape[2], x.shape[3], mode)
            cols[n, row, p] = x[n, c, ih, iw] if (ih >= 0 and iw >= 0) else T(0)


@kernel
def col2im(cols, window, out_h, out_w, x):
    """x[n, c, ih, iw] = the sum of the cols entries whose window tap reads it (zero padding).

    Each input element gathers its own taps (no atomics, no zeroed output, a fixed order of
    additions); grid y walks the (n, c) planes, grid x and the threads their elements."""
    T = x.dtype.type
    kernel_h, kernel_w, stride_h, stride_w = window[0], window[1], window[2], window[3]
    pad_h, pad_w, dilation_h, dilation_w = window[4], window[5], window[6], window[7]
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    first, step = _plane_threads()
    for plane in range(cuda.blockIdx.y, x.shape[0] * channels, cuda.gridDim.y):
        n = plane // channels
        c = plane - n * channels
        for q in range(first, height * width, step):
            ih = q // width
            iw = q - ih * width
            acc = T(0)
            for i in range(kernel_h):
                th = ih + pad_h - i * dilation_h
                oh = th // stride_h
                if th < 0 or oh * stride_h != th or oh >= out_h:
                    continue
                for j in range(kernel_w):
                    tw = iw + pad_w - j * dilation_w
                    ow = tw // stride_w
                    if tw >= 0 and ow * stride_w == tw and ow < out_w:
                        acc += cols[n, (c * kernel_h + i) * kernel_w + j, oh * out_w + ow]
            x[n, c, ih, iw] = acc


@kernel
def col2im_padded(cols, window, mode, out_h, out_w, x):
    """x[n, c, source] += cols[n, (c, i, j), p] for the reflect, replicate and circular padding
    modes, where one tap can read an input element twice (atomic; ``x`` starts zeroed)."""
    rows, positions = cols.shape[1], cols.shape[2]
    first, step = _plane_threads()
    for plane in range(cuda.blockIdx.y, cols.shape[0] * rows, cuda.gridDim.y):
        n, row, c, top, left = _columns_row(plane, rows, window)
        for p in range(first, positions, step):
            ih, iw = _column_source(p, out_w, window, top, left, x.shape[2], x.shape[3], mode)
            if ih >= 0 and iw >= 0:
                cuda.atomic.add(x, (n, c, ih, iw), cols[n, row, p])


@device
def _unravel(e, out):
    out_h, out_w = out.shape[2], out.shape[3]
    plane = e // (out_h * out_w)
    rest = e % (out_h * out_w)
    return plane // out.shape[1], plane % out.shape[1], rest // out_w, rest % out_w


@device
def _first_inside(start, dilation):
    return start if start >= 0 else start + (-start + dilation - 1) // dilation * dilation


@kernel
def max_pool(x, window, out, indices):
    """Max of each dilated window (NaN wins, first max on ties) and its flat index in the plane."""
    height, width = x.shape[2], x.shape[3]
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        n, c, oh, ow = _unravel(e, out)
        h_start = oh * window[2] - window[4]
        h_end = min(h_start + (window[0] - 1) * window[6] + 1, height)
        h_start = _first_inside(h_start, window[6])
        w_start = ow * window[3] - window[5]
        w_end = min(w_start + (window[1] - 1) * window[7] + 1, width)
        w_start = _first_inside(w_start, window[7])
        best_index = h_start * width + w_start
        best = x[n, c, h_start, w_start]
        found = False
        for ih in range(h_start, h_end, window[6]):
            for iw in range(w_start, w_end, window[7]):
                value = x[n, c, ih, iw]
                if not found or value > best or value != value:
                    best, best_index, found = value, ih * width + iw, True
        out[n, c, oh, ow] = best
        indices[n, c, oh, ow] = best_index


@kernel
def max_pool_backward(grad, indices, grad_x):
    """grad_x[n, c, plane index] += grad (atomic; ``grad_x`` starts zeroed)."""
    width = grad_x.shape[3]
    for e in range(cuda.grid(1), grad.size, cuda.gridsize(1)):
        n, c, oh, ow = _unravel(e, grad)
        k = indices[n, c, oh, ow]
        cuda.atomic.add(grad_x, (n, c, k // width, k % width), grad[n, c, oh, ow])


@device
def _avg_window(o, stride, pad, kernel_size, size):
    start = o * stride - pad
    end = min(start + kernel_size, size + pad)
    return max(start, 0), min(end, size), end - start


@device
def _avg_divisor(window, oh, ow, height, width, count_include_pad, divisor_override):
    h0, h1, padded_h = _avg_window(oh, window[2], window[4], window[0], height)
    w0, w1, padded_w = _avg_window(ow, window[3], window[5], window[1], width)
    if divisor_override > 0:
        divisor = divisor_override
    elif count_include_pad:
        divisor = padded_h * padded_w
    else:
        divisor = (h1 - h0) * (w1 - w0)
    return h0, h1, w0, w1, divisor


@kernel
def avg_pool(x, window, count_include_pad, divisor_override, out):
    T = out.dtype.type
    height, width = x.shape[2], x.shape[3]
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        n, c, oh, ow = _unravel(e, out)
        h0, h1, w0, w1, divisor = _avg_divisor(window, oh, ow, height, width, count_include_pad, divisor_override)
        total = T(0)
        for ih in range(h0, h1):
            for iw in range(w0, w1):
                total += x[n, c, ih, iw]
        out[n, c, oh, ow] = total / T(divisor) if divisor > 0 else total


@kernel
def avg_pool_backward(grad, window, count_include_pad, divisor_override, grad_x):
    T = grad_x.dtype.type
    height, width = grad_x.shape[2], grad_x.shape[3]
    for e in range(cuda.grid(1), grad.size, cuda.gridsize(1)):
        n, c, oh, ow = _unravel(e, grad)
        h0, h1, w0, w1, divisor = _avg_divisor(window, oh, ow, height, width, count_include_pad, divisor_override)
        share = grad[n, c, oh, ow] / T(divisor) if divisor > 0 else grad[n, c, oh, ow]
        for ih in range(h0, h1):
            for iw in range(w0, w1):
                cuda.atomic.add(grad_x, (n, c, ih, iw), share)


@device
def _adaptive_window(o, in_size, out_size):
    return (o * in_size) // out_size, -((-(o + 1) * in_size) // out_size)


@kernel
def adaptive_avg_pool(x, out):
    T = out.dtype.type
    height, width = x.shape[2], x.shape[3]
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        n, c, oh, ow = _unravel(e, out)
        h0, h1 = _adaptive_window(oh, height, out.shape[2])
        w0, w1 = _adaptive_window(ow, width, out.shape[3])
        total = T(0)
        for ih in range(h0, h1):
            for iw in range(w0, w1):
                total += x[n, c, ih, iw]
        out[n, c, oh, ow] = total / T((h1 - h0) * (w1 - w0))


@kernel
def adaptive_avg_pool_backward(grad, grad_x):
    T = grad_x.dtype.type
    height, width = grad_x.shape[2], grad_x.shape[3]
    for e in range(cuda.grid(1), grad.size, cuda.gridsize(1)):
        n, c, oh, ow = _unravel(e, grad)
        h0, h1 = _adaptive_window(oh, height, grad.shape[2])
        w0, w1 = _adaptive_window(ow, width, grad.shape[3])
        share = grad[n, c, oh, ow] / T((h1 - h0) * (w1 - w0))
        for ih in range(h0, h1):
            for iw in range(w0, w1):
                cuda.atomic.add(grad_x, (n, c, ih, iw), share)


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64."""
    from numba import types

    i64, b = types.int64, types.boolean
    win, idx4 = i64[::1], i64[:, :, :, ::1]
    cases = []
    for dt in (types.float32, types.float64):
        t4, t3 = dt[:, :, :, ::1], dt[:, :, ::1]
        cases += [
            ("im2col", im2col.py_func, (t4, win, i64, i64, t3)),
            ("col2im", col2im.py_func, (t3, win, i64, i64, t4)),
            ("col2im_padded", col2im_padded.py_func, (t3, win, i64, i64, i64, t4)),
            ("max_pool", max_pool.py_func, (t4, win, t4, idx4)),
            ("max_pool_backward", max_pool_backward.py_func, (t4, idx4, t4)),
            ("avg_pool", avg_pool.py_func, (t4, win, b, i64, t4)),
            ("avg_pool_backward", avg_pool_backward.py_func, (t4, win, b, i64, t4)),
            ("adaptive_avg_pool", adaptive_avg_pool.py_func, (t4, t4)),
            ("adaptive_avg_pool_backward", adaptive_avg_pool_backward.py_func, (t4, t4)),
        ]
    return cases

"""Numba kernels of 2-D pooling: max (with saved argmax), average and adaptive average.

Arrays are C-contiguous (N, C, H, W) inputs and (N, C, OH, OW) outputs. Every kernel runs one
(sample, channel) plane per task; a plane's gradient only touches that plane, so the backward
scatter-adds (overlapping windows add to the same input element) stay inside one task.

Windows follow PyTorch's CPU kernels exactly (see aten/src/ATen/native/cpu/MaxPoolKernel.cpp and
AvgPoolKernel.cpp), including ties (the first maximum wins), NaN (a NaN is the maximum) and the
average's divisor under ``ceil_mode`` and ``count_include_pad``.
"""

from __future__ import annotations

import math

from numba import prange

from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel

__all__ = [
    "adaptive_avg_pool2d_backward",
    "adaptive_avg_pool2d_forward",
    "avg_pool2d_backward",
    "avg_pool2d_forward",
    "max_pool2d_backward",
    "max_pool2d_forward",
]


@kernel
def _first_inside(start, dilation):
    """The first of start, start + dilation, ... that is >= 0."""
    return start if start >= 0 else start + (-start + dilation - 1) // dilation * dilation


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def max_pool2d_forward(x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w,
                       out, indices):
    """out = the maximum of each window; indices = its flat position ih * W + iw in the plane."""
    batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    for task in prange(batch * channels):
        n, c = task // channels, task % channels
        plane, dest, where = x[n, c], out[n, c], indices[n, c]
        for oh in range(out_h):
            h_start = oh * stride_h - pad_h
            h_end = min(h_start + (kernel_h - 1) * dilation_h + 1, height)
            h_start = _first_inside(h_start, dilation_h)
            for ow in range(out_w):
                w_start = ow * stride_w - pad_w
                w_end = min(w_start + (kernel_w - 1) * dilation_w + 1, width)
                w_start = _first_inside(w_start, dilation_w)
                best_index = h_start * width + w_start
                best = -math.inf
                for ih in range(h_start, h_end, dilation_h):
                    for iw in range(w_start, w_end, dilation_w):
                        value = plane[ih, iw]
                        if value > best or math.isnan(value):
                            best = value
                            best_index = ih * width + iw
                dest[oh, ow] = best
                where[oh, ow] = best_index


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def max_pool2d_backward(grad, indices, grad_x):
    """grad_x = 0, then grad_x.flat_plane[indices] += grad, per plane."""
    batch, channels = grad_x.shape[0], grad_x.shape[1]
    plane_size = grad_x.shape[2] * grad_x.shape[3]
    flat_x = grad_x.reshape(batch * channels, plane_size)
    flat_g = grad.reshape(batch * channels, grad.shape[2] * grad.shape[3])
    flat_i = indices.reshape(batch * channels, grad.shape[2] * grad.shape[3])
    for task in prange(batch * channels):
        dest, src, where = flat_x[task], flat_g[task], flat_i[task]
        dest[:] = 0
        for k in range(src.size):
            dest[where[k]] += src[k]


@kernel
def _avg_window(o, stride, pad, kernel_size, size):
    """PyTorch's average window: (start, end) clipped to the input, and the size of the window
    clipped to the padded input (the divisor with count_include_pad)."""
    start = o * stride - pad
    end = min(start + kernel_size, size + pad)
    padded = end - start
    return max(start, 0), min(end, size), padded


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def avg_pool2d_forward(x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, count_include_pad,
                       divisor_override, out):
    """out = the mean of each window; ``divisor_override`` > 0 replaces the divisor."""
    batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    for task in prange(batch * channels):
        n, c = task // channels, task % channels
        plane, dest = x[n, c], out[n, c]
        for oh in range(out_h):
            h0, h1, padded_h = _avg_window(oh, stride_h, pad_h, kernel_h, height)
            for ow in range(out_w):
                w0, w1, padded_w = _avg_window(ow, stride_w, pad_w, kernel_w, width)
                total = dest.dtype.type(0)
                for ih in range(h0, h1):
                    for iw in range(w0, w1):
                        total += plane[ih, iw]
                if divisor_override > 0:
                    divisor = divisor_override
                elif count_include_pad:
                    divisor = padded_h * padded_w
                else:
                    divisor = (h1 - h0) * (w1 - w0)
                dest[oh, ow] = total / divisor if divisor > 0 else total


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def avg_pool2d_backward(grad, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, count_include_pad,
                        divisor_override, grad_x):
    """grad_x = 0, then each window's elements get grad / divisor."""
    batch, channels, height, width = grad_x.shape
    out_h, out_w = grad.shape[2], grad.shape[3]
    for task in prange(batch * channels):
        n, c = task // channels, task % channels
        src, dest = grad[n, c], grad_x[n, c]
        dest[:, :] = 0
        for oh in range(out_h):
            h0, h1, padded_h = _avg_window(oh, stride_h, pad_h, kernel_h, height)
            for ow in range(out_w):
                w0, w1, padded_w = _avg_window(ow, stride_w, pad_w, kernel_w, width)
                if divisor_override > 0:
                    divisor = divisor_override
                elif count_include_pad:
                    divisor = padded_h * padded_w
                else:
                    divisor = (h1 - h0) * (w1 - w0)
                share = src[oh, ow] / divisor if divisor > 0 else src[oh, ow]
                for ih in range(h0, h1):
                    for iw in range(w0, w1):
                        dest[ih, iw] += share


@kernel
def _adaptive_window(o, in_size, out_size):
    """PyTorch's adaptive window [floor(o*I/O), ceil((o+1)*I/O))."""
    return (o * in_size) // out_size, -((-(o + 1) * in_size) // out_size)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def adaptive_avg_pool2d_forward(x, out):
    """out[oh, ow] = the mean of x over the adaptive window of (oh, ow)."""
    batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    for task in prange(batch * channels):
        n, c = task // channels, task % channels
        plane, dest = x[n, c], out[n, c]
        for oh in range(out_h):
            h0, h1 = _adaptive_window(oh, height, out_h)
            for ow in range(out_w):
                w0, w1 = _adaptive_window(ow, width, out_w)
                total = dest.dtype.type(0)
                for ih in range(h0, h1):
                    for iw in range(w0, w1):
                        total += plane[ih, iw]
                dest[oh, ow] = total / ((h1 - h0) * (w1 - w0))


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def adaptive_avg_pool2d_backward(grad, grad_x):
    """grad_x = 0, then each adaptive window's elements get grad / window size."""
    batch, channels, height, width = grad_x.shape
    out_h, out_w = grad.shape[2], grad.shape[3]
    for task in prange(batch * channels):
        n, c = task // channels, task % channels
        src, dest = grad[n, c], grad_x[n, c]
        dest[:, :] = 0
        for oh in range(out_h):
            h0, h1 = _adaptive_window(oh, height, out_h)
            for ow in range(out_w):
                w0, w1 = _adaptive_window(ow, width, out_w)
                share = src[oh, ow] / ((h1 - h0) * (w1 - w0))
                for ih in range(h0, h1):
                    for iw in range(w0, w1):
                        dest[ih, iw] += share

"""Numba kernels of 2-D convolution: ``im2col`` and its adjoint ``col2im``.

A convolution is a matrix product once every receptive field is laid out as a column:
``cols[n, (c, i, j), oh, ow] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]``. ``im2col`` builds
that matrix, ``col2im`` adds a matrix of the same layout back onto the image positions it came
from (the gradient of ``im2col``). The product itself is BLAS, called by the backend.

Padded positions read zero (``PAD_ZEROS``) or, for the other padding modes, the image position
that PyTorch's ``reflect`` / ``replicate`` / ``circular`` padding copies there
(:func:`zgrad.kernels.vocabulary.padding_source`, shared with the CUDA kernels); ``col2im`` sends
their gradient to that same position. Both kernels run one (sample, channel) plane per task: a
plane's columns only read (and its gradient only touches) that plane, so tasks never share output.

Arguments are C-contiguous: ``x`` (N, C, H, W), ``cols`` (N, C*KH*KW, OH, OW).

Rows are copied by index loops over two views, not by slice assignment: Numba compiles an array
slice assignment into its general broadcasting copy, which took most of a conv's first-call
compile time, and an index loop that starts at zero vectorises (no negative-index wrap check).

Stride-1 zero-padded convolutions need no columns at all (3x3 ones of 16 or more channels each
way take Winograd's algorithm instead: :mod:`zgrad.kernels.cpu.winograd`). The padded planes of
several samples are laid end to end, one flat row per channel, each image row followed by its zero columns and
each image by its zero rows, which serve as the next row's left (the next image's top) padding
too: rows of Wp = W + max(pad_left, pad_right) (or OW, if wider). Output position q of that row
(sample q // plane, padded position q % plane) sees through tap (i, j) of the kernel the input at
q + i*dh*Wp + j*dw. ``pad_planes`` writes KW copies of each channel's row, copy j shifted back by
j*dw: (C*KW, m*plane + (KH-1)*dh*Wp). The inputs of kernel row i over all m samples and all KW
taps of that row are then the (C*KW, m*plane) columns from i*dh*Wp on. The backend multiplies
the whole (C*KW, m*plane + (KH-1)*dh*Wp) matrix by the weights of all kernel rows stacked, one
product of (KH*OC, C*KW) by it (im2col's K = C*KH*KW would need 9x the input written, this 3x),
and ``crop_planes`` adds, for each output position, kernel row i's product i*dh*Wp further on,
which sums the KH rows and crops in one pass. Positions past a row's OW outputs or past a plane's
OH rows are computed and dropped by ``crop_planes`` (their gradient is set to zero by
``pad_planes``); the last (KH-1)*dh*Wp columns are zeros that keep the last sample's reads inside
the array.
"""

from __future__ import annotations

from numba import prange

from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel
from zgrad.kernels.vocabulary import padding_source

__all__ = ["col2im", "crop_planes", "im2col", "pad_planes"]

_source = kernel(padding_source)


@kernel
def _inside(offset, stride, size, count):
    """The range [lo, hi) of ``o`` in [0, count) with 0 <= o*stride + offset < size."""
    lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
    last = size - 1 - offset
    hi = 0 if last < 0 else last // stride + 1
    lo, hi = min(lo, count), min(hi, count)
    return lo, max(lo, hi)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def im2col(x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, mode, cols):
    """cols[n, (c, i, j), oh, ow] = padded x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]."""
    batch, channels, height, width = x.shape
    out_h, out_w = cols.shape[2], cols.shape[3]
    zero = cols.dtype.type(0)
    for task in prange(batch * channels):
        n, c = task // channels, task % channels
        plane = x[n, c]
        for i in range(kernel_h):
            for j in range(kernel_w):
                dest = cols[n, (c * kernel_h + i) * kernel_w + j]
                offset = j * dilation_w - pad_w
                lo, hi = _inside(offset, stride_w, width, out_w)
                for oh in range(out_h):
                    row = dest[oh]
                    ih = _source(oh * stride_h - pad_h + i * dilation_h, height, mode)
                    if ih < 0:
                        row[:] = zero
                        continue
                    src = plane[ih]
                    for ow in range(lo):
                        iw = _source(ow * stride_w + offset, width, mode)
                        row[ow] = src[iw] if iw >= 0 else zero
                    if stride_w == 1:
                        inside, source = row[lo:hi], src[lo + offset:hi + offset]
                        for k in range(hi - lo):
                            inside[k] = source[k]
                    else:
                        for ow in range(lo, hi):
                            row[ow] = src[ow * stride_w + offset]
                    for ow in range(hi, out_w):
                        iw = _source(ow * stride_w + offset, width, mode)
                        row[ow] = src[iw] if iw >= 0 else zero


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def col2im(cols, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, mode, x):
    """x = 0, then x[n, c, source position] += cols[n, (c, i, j), oh, ow]: the adjoint of im2col."""
    batch, channels, height, width = x.shape
    out_h, out_w = cols.shape[2], cols.shape[3]
    for task in prange(batch * channels):
        n, c = task // channels, task % channels
        plane = x[n, c]
        plane[:, :] = 0
        for i in range(kernel_h):
            for j in range(kernel_w):
                src = cols[n, (c * kernel_h + i) * kernel_w + j]
                offset = j * dilation_w - pad_w
                lo, hi = _inside(offset, stride_w, width, out_w)
                for oh in range(out_h):
                    ih = _source(oh * stride_h - pad_h + i * dilation_h, height, mode)
                    if ih < 0:
                        continue
                    row, dest = src[oh], plane[ih]
                    for ow in range(lo):
                        iw = _source(ow * stride_w + offset, width, mode)
                        if iw >= 0:
                            dest[iw] += row[ow]
                    if stride_w == 1:
                        inside, target = row[lo:hi], dest[lo + offset:hi + offset]
                        for k in range(hi - lo):
                            target[k] += inside[k]
                    else:
                        for ow in range(lo, hi):
                            dest[ow * stride_w + offset] += row[ow]
                    for ow in range(hi, out_w):
                        iw = _source(ow * stride_w + offset, width, mode)
                        if iw >= 0:
                            dest[iw] += row[ow]


# pad_planes and crop_planes are serial: as flat loops over rows they copy at close to memcpy's
# speed (a prange of per-plane slices measured slower: bench/README.md, Design figures), and a
# parallel region right after a BLAS product waits on cores OpenBLAS's threads still spin on.
@kernel
def pad_planes(x, top, left, width, plane, step, out):
    """out[c*K + j, q] = padded[c, q + j*step] for the K = out.shape[0] // C copies of each channel c,
    where padded[c] is zeros with plane n of x[:, c] written from n*plane + top*width + left in rows
    of ``width``: channel c's padded planes laid end to end, copy j shifted back by j*step.
    Positions that fall outside a row of ``out`` are dropped."""
    batch, channels, height, in_width = x.shape
    copies, row_length = out.shape[0] // channels, out.shape[1]
    source, dest = x.reshape(x.size), out.reshape(out.size)
    zero = out.dtype.type(0)
    for c in range(channels):
        for j in range(copies):
            base = (c * copies + j) * row_length
            dest[base:base + row_length] = zero  # one pass of zeros beats zeroing the borders
            for n in range(batch):
                planar = source[(n * channels + c) * height * in_width:(n * channels + c + 1) * height * in_width]
                for h in range(height):
                    start = n * plane + (top + h) * width + left - j * step
                    lo, hi = max(0, -start), min(in_width, row_length - start)
                    if hi <= lo:
                        continue
                    row, src = dest[base + start + lo:base + start + hi], planar[h * in_width + lo:h * in_width + hi]
                    for w in range(hi - lo):
                        row[w] = src[w]


@kernel
def crop_planes(x, top, left, width, plane, step, bias, out):
    """out[n, c, h, w] = the sum over i of x[g, i, k, n*plane + (h + top)*width + w + left + i*step]
    for channel c = g*K + k of group g (+ bias[c] unless ``bias`` is empty): x (G, terms, K, L)
    holds, per kernel row i, its products over every position, and each output position adds the
    one kernel row i reads i*step further on (see :func:`pad_planes`)."""
    batch, channels, height, out_width = out.shape
    terms, per_group, row_length = x.shape[1], x.shape[2], x.shape[3]
    source, dest = x.reshape(x.size), out.reshape(out.size)
    for n in range(batch):
        for c in range(channels):
            shift = bias[c] if bias.size else out.dtype.type(0)
            group, k = c // per_group, c % per_group
            corner = (group * terms * per_group + k) * row_length + n * plane + top * width + left
            planar = dest[(n * channels + c) * height * out_width:(n * channels + c + 1) * height * out_width]
            for h in range(height):
                row = planar[h * out_width:(h + 1) * out_width]
                for i in range(terms):
                    start = corner + i * (per_group * row_length + step) + h * width
                    src = source[start:start + out_width]
                    if i == 0:
                        for w in range(out_width):
                            row[w] = src[w]
                    else:
                        for w in range(out_width):
                            row[w] += src[w]
                if bias.size:
                    for w in range(out_width):
                        row[w] += shift

"""Numba kernels of the Winograd F(2x2, 3x3) convolution: the transforms of input, gradient and
output tiles (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).

A 3x3 stride-1 correlation computes each 2x2 block of outputs from the 4x4 block of (padded)
inputs under it: ``Y = A^T [(G g G^T) * (B^T d B)] A`` with an element-wise product of 4x4 tiles.
Summed over input channels, each of the 16 tile positions is one matrix product, (OC, C) weights
by (C, tiles) inputs; that is 16 products of OC*C per 4 outputs instead of 9 of OC*C per output.

    B^T = [1  0 -1  0]     G = [ 1    0    0 ]     A^T = [1  1  1  0]
          [0  1  1  0]         [1/2  1/2  1/2]           [0  1 -1 -1]
          [0 -1  1  0]         [1/2 -1/2  1/2]
          [0  1  0 -1]         [ 0    0    1 ]

The kernels here move data between images and tile matrices; the products and the 3x3 weight
transforms are the host's (:mod:`zgrad.kernels.cpu.winograd`). A tile matrix is (16, channels,
tiles): row ``4p + q`` holds position (p, q) of every tile, tile ``(n*TH + th)*TW + tw`` is the
block of sample n whose outputs start at (2th, 2tw). Positions outside an image read zero, which
is the zero padding, and output positions past the image's end are computed and dropped.

- :func:`input_tiles`: ``B^T d B`` of each input tile, d from (2th - top, 2tw - left).
- :func:`grad_tiles`: ``A g A^T`` of each 2x2 block g of an output gradient; with the input tiles
  it gives the weight gradient, ``G^T [sum over tiles of (A g A^T) * (B^T d B)] G``.
- :func:`output_tiles`: ``A^T M A`` of each product tile, plus the bias.

Every transform is applied one dimension at a time: across each image row with two-dimensional
indexing (a row of tiles is short, 16 for a 32-wide image, and a slice per row cost more than its
arithmetic), then down a whole plane's tiles in one pass over slices of the plane.
"""

from __future__ import annotations

import numpy as np
from zgrad.kernels._jit import kernel

__all__ = ["grad_tiles", "input_tiles", "output_tiles"]


@kernel
def input_tiles(x, top, left, tiles_h, tiles_w, out):
    """out (16, C, m*TH*TW): row 4p + q of the tile of x (m, C, H, W) at (2th - top, 2tw - left)
    transformed as B^T d B."""
    batch, channels, height, width = x.shape
    rows, row_length = 2 * tiles_h + 2, 2 * tiles_w + 2
    first_w, end_w = max(0, -left), min(width, row_length - left)
    padded = np.zeros((rows, row_length), x.dtype)  # one plane, zero padded
    # each of its rows transformed across (d B), even and odd rows apart: [q, r % 2, r // 2, tw]
    across = np.empty((4, 2, tiles_h + 1, tiles_w), x.dtype)
    flat = across.reshape(4, 2, (tiles_h + 1) * tiles_w)
    for c in range(channels):
        for n in range(batch):
            for r in range(rows):
                ih = r - top
                if 0 <= ih < height:
                    source, dest = x[n, c, ih, first_w:end_w], padded[r, left + first_w:left + end_w]
                    for w in range(end_w - first_w):
                        dest[w] = source[w]
                else:
                    for w in range(row_length):
                        padded[r, w] = 0
            for i in range(tiles_h + 1):
                for parity in range(2):
                    r = 2 * i + parity
                    for tw in range(tiles_w):
                        d1, d2 = padded[r, 2 * tw + 1], padded[r, 2 * tw + 2]
                        across[0, parity, i, tw] = padded[r, 2 * tw] - d2
                        across[1, parity, i, tw] = d1 + d2
                        across[2, parity, i, tw] = d2 - d1
                        across[3, parity, i, tw] = d1 - padded[r, 2 * tw + 3]
            # down (B^T): tile row th reads rows 2th .. 2th + 3, the even and odd rows th and
            # th + 1, so each output row is one pass over the tile rows of the plane
            first, count = n * tiles_h * tiles_w, tiles_h * tiles_w
            for q in range(4):
                d0, d1 = flat[q, 0, :count], flat[q, 1, :count]
                d2, d3 = flat[q, 0, tiles_w:tiles_w + count], flat[q, 1, tiles_w:tiles_w + count]
                o0, o1 = out[q, c, first:first + count], out[4 + q, c, first:first + count]
                o2, o3 = out[8 + q, c, first:first + count], out[12 + q, c, first:first + count]
                for t in range(count):
                    o0[t] = d0[t] - d2[t]
                    o1[t] = d1[t] + d2[t]
                    o2[t] = d2[t] - d1[t]
                    o3[t] = d1[t] - d3[t]


@kernel
def grad_tiles(grad, tiles_h, tiles_w, out):
    """out (16, K, m*TH*TW): row 4p + q of the 2x2 block of grad (m, K, OH, OW) at (2th, 2tw)
    transformed as A g A^T (with A = (A^T)^T, 4 x 2)."""
    batch, channels, height, width = grad.shape
    pairs = width // 2
    count = tiles_h * tiles_w
    # each row of a plane transformed across (g A^T), even and odd rows apart:
    # [q, h % 2, h // 2, tw]; an odd height leaves the last odd row zero
    across = np.zeros((4, 2, tiles_h, tiles_w), grad.dtype)
    flat = across.reshape(4, 2, count)
    for k in range(channels):
        for n in range(batch):
            for i in range(tiles_h):
                for parity in range(min(2, height - 2 * i)):
                    h = 2 * i + parity
                    for tw in range(pairs):
                        g0, g1 = grad[n, k, h, 2 * tw], grad[n, k, h, 2 * tw + 1]
                        across[0, parity, i, tw] = g0
                        across[1, parity, i, tw] = g0 + g1
                        across[2, parity, i, tw] = g0 - g1
                        across[3, parity, i, tw] = -g1
                    if width % 2:  # the last block's second column is zeros
                        g0 = grad[n, k, h, width - 1]
                        across[0, parity, i, pairs] = g0
                        across[1, parity, i, pairs] = g0
                        across[2, parity, i, pairs] = g0
                        across[3, parity, i, pairs] = 0
            first = n * count
            for q in range(4):  # down (A g): block row th is the even and odd rows th
                g0, g1 = flat[q, 0], flat[q, 1]
                o0, o1 = out[q, k, first:first + count], out[4 + q, k, first:first + count]
                o2, o3 = out[8 + q, k, first:first + count], out[12 + q, k, first:first + count]
                for t in range(count):
                    o0[t] = g0[t]
                    o1[t] = g0[t] + g1[t]
                    o2[t] = g0[t] - g1[t]
                    o3[t] = -g1[t]


@kernel
def output_tiles(products, bias, tiles_h, tiles_w, out):
    """out (m, K, OH, OW): each 2x2 block (2th, 2tw) from its tile of products (16, K, m*TH*TW)
    transformed as A^T M A, plus bias[k] unless ``bias`` is empty."""
    batch, channels, height, width = out.shape
    count = tiles_h * tiles_w
    down = np.empty((2, 4, count), out.dtype)  # the tiles of a plane transformed down (A^T M)
    for k in range(channels):
        shift = bias[k] if bias.size else out.dtype.type(0)
        for n in range(batch):
            first = n * count
            for q in range(4):
                m0, m1 = products[q, k, first:first + count], products[4 + q, k, first:first + count]
                m2, m3 = products[8 + q, k, first:first + count], products[12 + q, k, first:first + count]
                top, bottom = down[0, q], down[1, q]
                for t in range(count):
                    top[t] = m0[t] + m1[t] + m2[t]
                    bottom[t] = m1[t] - m2[t] - m3[t]
            rows = down.reshape(2, 4, tiles_h, tiles_w)
            for th in range(tiles_h):
                for a in range(min(2, height - 2 * th)):
                    h = 2 * th + a
                    for tw in range(width // 2):
                        m1, m2 = rows[a, 1, th, tw], rows[a, 2, th, tw]
                        out[n, k, h, 2 * tw] = rows[a, 0, th, tw] + m1 + m2 + shift
                        out[n, k, h, 2 * tw + 1] = m1 - m2 - rows[a, 3, th, tw] + shift
                    if width % 2:  # an odd width: the last block's first column only
                        tw = tiles_w - 1
                        out[n, k, h, width - 1] = rows[a, 0, th, tw] + rows[a, 1, th, tw] + rows[a, 2, th, tw] + shift

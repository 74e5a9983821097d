"""3x3 stride-1 convolutions by Winograd's F(2x2, 3x3) algorithm: the host side (weight
transforms, the 16 products per chunk of samples); the tile transforms are
:mod:`zgrad.kernels.cpu.kernels.winograd`, whose docstring gives the algebra.

Against the GEMM of the shifted copies (:mod:`zgrad.kernels.cpu.kernels.conv`) this multiplies
16 / 4 = 4 weights per output and input channel instead of 9, and the extra additions of the
transforms cost less than the multiplications saved once both channel counts are a few dozen
(figures: bench/README.md, Design figures). The transforms' coefficients are 0, +-1 and +-1/2,
so results keep the accuracy of a direct sum (in float32, measured within 2x of torch's error
against float64, and below it on large layers).

The backward pass: the input gradient is the same correlation of the output gradient with the
kernel flipped and each tap's weights transposed, padded by 2 - padding; the weight gradient is
``G^T [sum over tiles of (A g A^T) * (B^T d B)] G``, whose sum over tiles is 16 products of the
gradient's tiles by the input's tiles transposed.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cpu import kernels
from zgrad.kernels.cpu.parts import run_in_parts
from zgrad.kernels.scratch import Workspace

__all__ = ["applies", "backward", "forward"]

_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])

# Both channel counts from this on: with fewer, the products are too thin to pay for the transforms.
MIN_CHANNELS = 16

# Samples per chunk: the tiles of a chunk (input and products, 16 per 4 outputs) stay in cache
# between the transform that writes them and the product that reads them, and each product has at
# least _MIN_PRODUCT_TILES columns (a thinner product runs well below BLAS's speed).
_CHUNK_BYTES = 1 << 20
_MIN_PRODUCT_TILES = 256

# The image size from which the transforms' per-row work pays (4 x 4 images of 256 channels ran
# 2.3x slower than the shifted copies; 8 x 8 of 128, 0.77x).
MIN_PIXELS = 64


def applies(x_shape, weight_shape, stride, padding, dilation, groups: int, padding_mode: str) -> bool:
    """Whether :func:`forward` and :func:`backward` serve this convolution: a 3x3 kernel, stride
    and dilation 1, one group, zero padding of at most 2, and at least ``MIN_CHANNELS`` input and
    output channels, images of at least ``MIN_PIXELS``."""
    return (tuple(weight_shape[2:]) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and padding_mode == "zeros" and max(padding) <= 2
            and min(x_shape[1], weight_shape[0]) >= MIN_CHANNELS and x_shape[-2] * x_shape[-1] >= MIN_PIXELS)


def _transformed(weight: np.ndarray) -> np.ndarray:
    """(16, OC, C): G g G^T of each 3x3 kernel, position 4p + q first (computed in float64)."""
    out_channels, channels = weight.shape[:2]
    across = np.tensordot(weight.astype(np.float64), _G, axes=([3], [1]))  # (OC, C, 3, 4): g G^T
    tiles = np.tensordot(_G, across, axes=([1], [2]))  # (4, OC, C, 4): G g G^T
    return np.ascontiguousarray(tiles.transpose(0, 3, 1, 2), weight.dtype).reshape(16, out_channels, channels)


def _tile_counts(height: int, width: int) -> tuple[int, int]:
    return (height + 1) // 2, (width + 1) // 2


def _chunks(x_shape, channels_out: int, tiles: int, itemsize: int) -> list[tuple[int, int]]:
    """(start, stop) of each chunk of samples (none for an empty batch)."""
    if x_shape[0] == 0:
        return []
    per_sample = 16 * (x_shape[1] + channels_out) * tiles * itemsize
    chunk = max(1, -(-_MIN_PRODUCT_TILES // max(tiles, 1)), _CHUNK_BYTES // max(per_sample, 1))
    chunk = min(chunk, x_shape[0])
    return [(start, min(start + chunk, x_shape[0])) for start in range(0, x_shape[0], chunk)]


def _tile_buffers(scratch: Workspace, chunks, tiles: int, channels_in: int, channels_out: int, dtype):
    """Scratch tile matrices for the largest chunk: (16, channels_in, tiles of a chunk) for the
    input tiles and (16, channels_out, ...) for the products or the gradient's tiles."""
    size = (chunks[0][1] - chunks[0][0]) * tiles
    return (scratch.take("winograd inputs", (16, channels_in, size), dtype),
            scratch.take("winograd products", (16, channels_out, size), dtype))


def _correlate(x, weight_tiles, bias, top: int, left: int, out, scratch: Workspace) -> None:
    """out (N, K, OH, OW) = the 3x3 correlation of x (N, C, H, W) padded by (top, left) whose
    transformed weights are ``weight_tiles`` (16, K, C), plus bias (empty: none)."""
    channels_out = weight_tiles.shape[1]
    tiles_h, tiles_w = _tile_counts(*out.shape[2:])
    chunks = _chunks(x.shape, channels_out, tiles_h * tiles_w, x.itemsize)

    def part(index: int, parts: int, scratch: Workspace) -> None:
        inputs, products = _tile_buffers(scratch, chunks, tiles_h * tiles_w, x.shape[1], channels_out, x.dtype)
        for start, stop in chunks[index::parts]:
            count = (stop - start) * tiles_h * tiles_w
            chunk_inputs, chunk_products = inputs[:, :, :count], products[:, :, :count]
            kernels.winograd.input_tiles(x[start:stop], top, left, tiles_h, tiles_w, chunk_inputs)
            np.matmul(weight_tiles, chunk_inputs, out=chunk_products)
            kernels.winograd.output_tiles(chunk_products, bias, tiles_h, tiles_w, out[start:stop])

    if chunks:
        run_in_parts(part, len(chunks), scratch)


def forward(x, weight, bias, padding, out, scratch: Workspace) -> None:
    """out = conv2d(x, weight, bias, padding=(top, left)), all C-contiguous; bias may be empty."""
    _correlate(x, _transformed(weight), bias, padding[0], padding[1], out, scratch)


def backward(grad, x, weight, padding, grad_x, grad_weight, scratch: Workspace) -> None:
    """The gradients of :func:`forward` into ``grad_x`` and ``grad_weight`` (either may be None)."""
    if grad_x is not None:
        flipped = np.ascontiguousarray(weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
        _correlate(grad, _transformed(flipped), np.empty(0, x.dtype), 2 - padding[0], 2 - padding[1], grad_x,
                   scratch)
    if grad_weight is not None:
        grad_weight[...] = _weight_gradient(grad, x, padding, scratch)


def _weight_gradient(grad, x, padding, scratch: Workspace) -> np.ndarray:
    channels_out, channels = grad.shape[1], x.shape[1]
    tiles_h, tiles_w = _tile_counts(*grad.shape[2:])
    chunks = _chunks(x.shape, channels_out, tiles_h * tiles_w, x.itemsize)
    if not chunks:
        return np.zeros((channels_out, channels, 3, 3), x.dtype)
    totals = []  # one per part (list.append is atomic)

    def part(index: int, parts: int, scratch: Workspace) -> None:
        inputs, grads = _tile_buffers(scratch, chunks, tiles_h * tiles_w, channels, channels_out, x.dtype)
        product = np.empty((16, channels_out, channels), x.dtype)
        total = np.zeros_like(product)
        for start, stop in chunks[index::parts]:
            count = (stop - start) * tiles_h * tiles_w
            chunk_inputs, chunk_grads = inputs[:, :, :count], grads[:, :, :count]
            kernels.winograd.input_tiles(x[start:stop], padding[0], padding[1], tiles_h, tiles_w, chunk_inputs)
            kernels.winograd.grad_tiles(grad[start:stop], tiles_h, tiles_w, chunk_grads)
            np.matmul(chunk_grads, chunk_inputs.swapaxes(1, 2), out=product)
            total += product
        totals.append(total)

    run_in_parts(part, len(chunks), scratch)
    total = np.sum(totals, axis=0, dtype=np.float64)
    down = np.tensordot(_G, total.reshape(4, 4, channels_out, channels), axes=([0], [0]))
    weights = np.tensordot(down, _G, axes=([1], [0]))  # (3, OC, C, 3): G^T T G
    return weights.transpose(1, 2, 0, 3).astype(x.dtype)

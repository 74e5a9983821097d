"""Dispatch of the layer ops: convolution, pooling, batch and group normalization over (N, C, ...)
arrays, and fused scaled-dot-product attention over (B, H, L, E) ones.

The companion of :mod:`zgrad.kernels.dispatch` (its rules hold here: the backend comes from the
arrays' device, outputs are allocated here). Operands share one floating dtype (the ops check
it, as PyTorch does). Window arguments are (h, w) pairs; ``padding`` is (top, left), the
bottom/right padding showing only in ``out_size``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from zgrad.kernels.dispatch import backend_of
from zgrad.kernels.vocabulary import PADDING_MODES, dropout_threshold

__all__ = [
    "PADDING_MODES", "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", "attention", "attention_backward",
    "avg_pool2d", "avg_pool2d_backward", "batch_norm", "batch_norm_backward", "conv2d", "conv2d_backward",
    "conv_transpose2d", "group_norm", "group_norm_backward", "max_pool2d", "max_pool2d_backward",
]


def conv2d(x: Any, weight: Any, bias: Any, stride, padding, dilation, groups: int, padding_mode: str, out_size):
    """Cross-correlation of (N, C, H, W) ``x`` with (OC, C/groups, KH, KW) ``weight``, plus ``bias``
    (OC,) unless None: (N, OC, *out_size)."""
    be = backend_of(x, weight)
    out = be.empty((x.shape[0], weight.shape[0], *out_size), x.dtype)
    return be.conv2d(x, weight, bias, stride, padding, dilation, groups, padding_mode, out)


def conv2d_backward(grad: Any, x: Any, weight: Any, stride, padding, dilation, groups: int, padding_mode: str,
                    needs_x: bool, needs_weight: bool):
    """(grad_x, grad_weight) of :func:`conv2d`, None where not needed."""
    be = backend_of(grad, x, weight)
    grad_x = be.empty(x.shape, x.dtype) if needs_x else None
    grad_weight = be.empty(weight.shape, weight.dtype) if needs_weight else None
    return be.conv2d_backward(grad, x, weight, stride, padding, dilation, groups, padding_mode, grad_x, grad_weight)


def conv_transpose2d(x: Any, weight: Any, bias: Any, stride, padding, dilation, groups: int, out_size):
    """Transposed convolution of (N, C, H, W) ``x`` with (C, OC/groups, KH, KW) ``weight``, plus
    ``bias`` (OC,) unless None: (N, OC, *out_size). It is the input gradient of :func:`conv2d`
    with that weight, whose backend kernel reads only the shape of conv2d's input (``out``)."""
    be = backend_of(x, weight)
    out = be.empty((x.shape[0], weight.shape[1] * groups, *out_size), x.dtype)
    be.conv2d_backward(x, out, weight, stride, padding, dilation, groups, "zeros", out, None)
    return out if bias is None else be.add(out, bias.reshape(-1, 1, 1), out)


def max_pool2d(x: Any, kernel_size, stride, padding, dilation, out_size):
    """(max, int64 flat index into the H*W plane) of each window of (N, C, H, W) ``x``."""
    be = backend_of(x)
    shape = (*x.shape[:2], *out_size)
    return be.max_pool2d(x, kernel_size, stride, padding, dilation, be.empty(shape, x.dtype),
                         be.empty(shape, np.dtype(np.int64)))


def max_pool2d_backward(grad: Any, indices: Any, input_shape: tuple[int, ...]):
    be = backend_of(grad)
    return be.max_pool2d_backward(grad, indices, be.empty(input_shape, grad.dtype))


def avg_pool2d(x: Any, kernel_size, stride, padding, count_include_pad: bool, divisor_override: int | None,
               out_size):
    be = backend_of(x)
    out = be.empty((*x.shape[:2], *out_size), x.dtype)
    return be.avg_pool2d(x, kernel_size, stride, padding, count_include_pad, divisor_override, out)


def avg_pool2d_backward(grad: Any, input_shape: tuple[int, ...], kernel_size, stride, padding,
                        count_include_pad: bool, divisor_override: int | None):
    be = backend_of(grad)
    return be.avg_pool2d_backward(grad, kernel_size, stride, padding, count_include_pad, divisor_override,
                                  be.empty(input_shape, grad.dtype))


def adaptive_avg_pool2d(x: Any, out_size):
    be = backend_of(x)
    return be.adaptive_avg_pool2d(x, be.empty((*x.shape[:2], *out_size), x.dtype))


def adaptive_avg_pool2d_backward(grad: Any, input_shape: tuple[int, ...]):
    be = backend_of(grad)
    return be.adaptive_avg_pool2d_backward(grad, be.empty(input_shape, grad.dtype))


def batch_norm(x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, training: bool,
               momentum: float, eps: float):
    """Batch norm of (N, C, S) ``x``: (out, saved mean, saved 1/sqrt(var + eps)).

    Training updates ``running_mean`` / ``running_var`` in place (when given).
    """
    be = backend_of(x)
    stats = (x.shape[1],)
    return be.batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps,
                         be.empty(x.shape, x.dtype), be.empty(stats, x.dtype), be.empty(stats, x.dtype))


def batch_norm_backward(grad: Any, x: Any, weight: Any, save_mean: Any, save_invstd: Any, training: bool,
                        needs: Sequence[bool]):
    """(grad_x, grad_weight, grad_bias) of :func:`batch_norm`, None where ``needs`` says so."""
    be = backend_of(grad, x)
    shapes = (x.shape, x.shape[1:2], x.shape[1:2])
    grads = [be.empty(shape, x.dtype) if need else None for shape, need in zip(shapes, needs)]
    return be.batch_norm_backward(grad, x, weight, save_mean, save_invstd, training, *grads)


def group_norm(x: Any, weight: Any, bias: Any, groups: int, eps: float):
    """Normalization of (N, C, S) ``x`` over each (sample, group of C/groups channels), with a
    per-channel affine: (out, saved mean, saved 1/sqrt(var + eps)), stats of shape (N*groups,)."""
    be = backend_of(x)
    stats = (x.shape[0] * groups,)
    return be.group_norm(x, weight, bias, groups, eps, be.empty(x.shape, x.dtype), be.empty(stats, x.dtype),
                         be.empty(stats, x.dtype))


def group_norm_backward(grad: Any, x: Any, weight: Any, save_mean: Any, save_invstd: Any, groups: int,
                        needs: Sequence[bool]):
    """(grad_x, grad_weight, grad_bias) of :func:`group_norm`, None where ``needs`` says so."""
    be = backend_of(grad, x)
    shapes = (x.shape, x.shape[1:2], x.shape[1:2])
    grads = [be.empty(shape, x.dtype) if need else None for shape, need in zip(shapes, needs)]
    return be.group_norm_backward(grad, x, weight, save_mean, save_invstd, groups, *grads)


def _dropout_args(dropout_p: float) -> tuple[int, float]:
    """(threshold, scale of the kept weights) of attention dropout with probability ``dropout_p``."""
    return dropout_threshold(dropout_p), (0.0 if dropout_p >= 1.0 else 1.0 / (1.0 - dropout_p))


def attention(q: Any, k: Any, v: Any, mask: Any, scale: float, causal: bool, dropout_p: float, seed: int):
    """Fused softmax(q k^T * scale + mask) v with dropout on the weights: (out (B, Hq, L, Ev),
    lse (B, Hq, L), the row statistic the backward recomputes the weights from).

    q (B, Hq, L, E), k (B, Hk, S, E), v (B, Hk, S, Ev) with Hk dividing Hq (each key/value head
    serves Hq/Hk consecutive query heads); ``mask`` None or an additive float mask of 4 dims, each
    of the full size or 1; ``causal`` masks key j > query i; ``seed`` keys the dropout mask.
    """
    be = backend_of(*(a for a in (q, k, v, mask) if a is not None))
    out = be.empty((*q.shape[:-1], v.shape[-1]), q.dtype)
    lse = be.empty(q.shape[:-1], q.dtype)
    return be.attention(q, k, v, mask, scale, causal, seed, *_dropout_args(dropout_p), out, lse)


def attention_backward(grad: Any, q: Any, k: Any, v: Any, mask: Any, out: Any, lse: Any, scale: float, causal: bool,
                       dropout_p: float, seed: int, needs_mask: bool):
    """(grad_q, grad_k, grad_v, grad_mask) of :func:`attention`; grad_mask, the gradient of the
    additive mask before it is summed down to the mask's shape, is (B, Hq, L, S) where
    ``needs_mask`` and None otherwise."""
    be = backend_of(*(a for a in (grad, q, k, v, mask) if a is not None))
    grads = [be.empty(a.shape, a.dtype) for a in (q, k, v)]
    grad_mask = be.empty((*q.shape[:-1], k.shape[-2]), q.dtype) if needs_mask else None
    return be.attention_backward(grad, q, k, v, mask, out, lse, scale, causal, seed, *_dropout_args(dropout_p), *grads,
                                 grad_mask)

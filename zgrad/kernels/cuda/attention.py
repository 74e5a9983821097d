"""The CUDA backend's fused attention (host side of :mod:`kernels.attention`; part of
:mod:`zgrad.kernels.cuda.backend`). The mask goes to the kernels as a broadcast view; no mask as
an empty (1, 1, 1, 0) array."""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.reduce import contiguous

__all__ = ["attention", "attention_backward"]


def _full_mask(mask: DeviceArray | None, shape: tuple[int, ...], dtype: np.dtype) -> DeviceArray:
    return DeviceArray.empty((1, 1, 1, 0), dtype) if mask is None else mask.broadcast_to(shape)


def _launch(kernel, count: int, *args) -> None:
    if count:
        rt.launch(kernel, rt.grid_1d(count), *(a.arg() if isinstance(a, DeviceArray) else a for a in args))


def attention(q, k, v, mask, scale, causal, seed, threshold, dropout_scale, out, lse):
    """out and lse of softmax(q k^T * scale + mask) v (see :mod:`kernels.attention`)."""
    q, k, v = contiguous(q), contiguous(k), contiguous(v)
    full = _full_mask(mask, (*q.shape[:-1], k.shape[-2]), q.dtype)
    typed = q.dtype.type  # scalars in the data's dtype: a float32 kernel computes in float32
    _launch(kernels.attention.attention_forward, lse.size, q, k, v, full, typed(scale), bool(causal), int(seed),
            int(threshold), typed(dropout_scale), out, lse)
    return out, lse


def attention_backward(grad, q, k, v, mask, out, lse, scale, causal, seed, threshold, dropout_scale, grad_q, grad_k,
                       grad_v, grad_mask):
    """Gradients of :func:`attention` into grad_q, grad_k, grad_v and, unless None, grad_mask."""
    q, k, v, grad = contiguous(q), contiguous(k), contiguous(v), contiguous(grad)
    full = _full_mask(mask, (*q.shape[:-1], k.shape[-2]), q.dtype)
    typed = q.dtype.type
    options = (typed(scale), bool(causal), int(seed), int(threshold), typed(dropout_scale))
    deltas = DeviceArray.empty(lse.shape, q.dtype)
    _launch(kernels.attention.attention_backward_queries, lse.size, q, k, v, full, *options, out, grad, lse, deltas,
            grad_q, DeviceArray.empty((1, 1, 1, 0), q.dtype) if grad_mask is None else grad_mask)
    _launch(kernels.attention.attention_backward_keys, k.shape[0] * k.shape[1] * k.shape[2], q, k, v, full, *options,
            grad, lse, deltas, grad_k, grad_v)
    return grad_q, grad_k, grad_v, grad_mask

"""The CPU backend's fused attention (host side of :mod:`zgrad.kernels.cpu.kernels.attention`;
re-exported by :mod:`zgrad.kernels.cpu.backend`).

The mask is handed to the kernel as a broadcast view (zero strides where the mask has size 1), so
a (L, S) mask is read in place for every batch and head; no mask is an empty (1, 1, 1, 0) array.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cpu import kernels

__all__ = ["attention", "attention_backward"]


def _full_mask(mask: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.empty((1, 1, 1, 0), dtype) if mask is None else np.broadcast_to(mask, shape)


def attention(q, k, v, mask, scale, causal, seed, threshold, dropout_scale, out, lse):
    """out (B, Hq, L, Ev) and lse (B, Hq, L) of softmax(q k^T * scale + mask) v, see
    :func:`zgrad.kernels.cpu.kernels.attention.attention_forward`."""
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    full = _full_mask(mask, (*q.shape[:-1], k.shape[-2]), q.dtype)
    kernels.attention.attention_forward(q, k, v, full, scale, causal, seed, threshold, dropout_scale, out, lse)
    return out, lse


def attention_backward(grad, q, k, v, mask, out, lse, scale, causal, seed, threshold, dropout_scale, grad_q, grad_k,
                       grad_v, grad_mask):
    """Gradients of :func:`attention` into grad_q, grad_k, grad_v and, unless None, grad_mask
    (B, Hq, L, S)."""
    q, k, v, grad = (np.ascontiguousarray(a) for a in (q, k, v, grad))
    full = _full_mask(mask, (*q.shape[:-1], k.shape[-2]), q.dtype)
    kernels.attention.attention_backward(
        q, k, v, full, scale, causal, seed, threshold, dropout_scale, out, grad, lse, grad_q, grad_k, grad_v,
        np.empty((1, 1, 1, 0), q.dtype) if grad_mask is None else grad_mask)
    return grad_q, grad_k, grad_v, grad_mask

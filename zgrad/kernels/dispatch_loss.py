"""Dispatch of the loss ops: cross-entropy (fused with its softmax, and in the general form with
class weights and label smoothing), negative log-likelihood, and the squared / absolute error.

The companion of :mod:`zgrad.kernels.dispatch` (its rules hold here: the backend comes from the
arrays' device, outputs are allocated here). Class losses work on (M, C) rows with (M,) integer
targets; a row whose target equals ``ignore_index`` counts for nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels.dispatch import as_dtype, as_int64, backend_of, contiguous

__all__ = [
    "class_loss", "class_loss_backward", "cross_entropy", "cross_entropy_backward", "nll", "nll_backward",
    "pointwise_loss", "pointwise_loss_backward", "pointwise_loss_sum",
]

def _class_weight(weight: Any, dtype: np.dtype, be: Any) -> Any:
    return be.empty((0,), dtype) if weight is None else contiguous(as_dtype(weight, dtype))


def cross_entropy(logits: Any, targets: Any, ignore_index: int, mean: bool) -> tuple[Any, Any, Any]:
    """The fused softmax + cross-entropy of (M, C) ``logits``, reduced by a sum or (``mean``) over
    the counted rows: (the loss, the divisor (counted rows, or 1), softmax (M, C)). The loss and
    divisor are 0-d arrays on the logits' device: nothing waits for a GPU (NaN for a mean over no
    counted rows, as PyTorch's)."""
    be = backend_of(logits)
    probs = be.empty(logits.shape, logits.dtype)
    loss, divisor = be.empty((), logits.dtype), be.empty((), logits.dtype)
    be.cross_entropy(logits, as_int64(targets), ignore_index, bool(mean), probs, loss, divisor)
    return loss, divisor, probs


def cross_entropy_backward(probs: Any, targets: Any, ignore_index: int, grad: Any, divisor: Any):
    """grad / divisor * (probs - onehot(targets)), zero on ignored rows, into a fresh array
    (``grad`` and ``divisor``: 0-d arrays on the device of ``probs``)."""
    be = backend_of(probs)
    return be.cross_entropy_backward(probs, as_int64(targets), ignore_index, grad, divisor,
                                     be.empty(probs.shape, probs.dtype))


def class_loss(logits: Any, targets: Any, weight: Any, ignore_index: int, smoothing: float):
    """Per-row cross-entropy of (M, C) ``logits``: (loss (M,), w[target] (M,), softmax (M, C))."""
    be = backend_of(logits, targets)
    rows, dtype = logits.shape[0], logits.dtype
    probs, loss, row_weight = be.empty(logits.shape, dtype), be.empty((rows,), dtype), be.empty((rows,), dtype)
    be.class_loss(logits, as_int64(targets), _class_weight(weight, dtype, be), ignore_index, smoothing, probs, loss,
                  row_weight)
    return loss, row_weight, probs


def class_loss_backward(probs: Any, targets: Any, weight: Any, ignore_index: int, smoothing: float, row_grad: Any):
    """d loss / d logits of :func:`class_loss`, ``row_grad`` (M,) or (1,) the gradient per row."""
    be = backend_of(probs)
    dtype = probs.dtype
    return be.class_loss_backward(probs, as_int64(targets), _class_weight(weight, dtype, be), ignore_index, smoothing,
                                  as_dtype(row_grad, dtype), be.empty(probs.shape, dtype))


def nll(log_probs: Any, targets: Any, weight: Any, ignore_index: int):
    """Per-row -w[t] * log_probs[i, t] of (M, C) ``log_probs``: (loss (M,), w[target] (M,))."""
    be = backend_of(log_probs, targets)
    rows, dtype = log_probs.shape[0], log_probs.dtype
    loss, row_weight = be.empty((rows,), dtype), be.empty((rows,), dtype)
    be.nll(log_probs, as_int64(targets), _class_weight(weight, dtype, be), ignore_index, loss, row_weight)
    return loss, row_weight


def nll_backward(targets: Any, weight: Any, ignore_index: int, row_grad: Any, shape: tuple[int, int], dtype: Any):
    be = backend_of(targets)
    dtype = np.dtype(dtype)
    return be.nll_backward(as_int64(targets), _class_weight(weight, dtype, be), ignore_index, as_dtype(row_grad, dtype),
                           be.empty(shape, dtype))


def pointwise_loss(a: Any, b: Any, squared: bool):
    """(a - b)**2 or |a - b| element-wise (same shapes and dtype)."""
    be = backend_of(a, b)
    return be.pointwise_loss(a, b, squared, be.empty(a.shape, a.dtype))


def pointwise_loss_sum(a: Any, b: Any, squared: bool, divisor: float) -> Any:
    """sum((a - b)**2) or sum(|a - b|) over ``divisor`` (NaN for 0) in one pass (same shapes and
    dtype), as a 0-d array on their device (nothing waits for a GPU)."""
    be = backend_of(a, b)
    return be.pointwise_loss_sum(a, b, squared, float(divisor), be.empty((), a.dtype))


def pointwise_loss_backward(a: Any, b: Any, grad: Any, squared: bool, divisor: float = 1.0):
    """(grad / divisor) * d loss / d a; ``grad`` has a's shape or one element (the gradient of a
    loss reduced over ``divisor`` elements, divided on its device)."""
    be = backend_of(a, b)
    return be.pointwise_loss_backward(a, b, as_dtype(grad, a.dtype), squared, float(divisor),
                                      be.empty(a.shape, a.dtype))

"""The multi-class hinge losses of ``zgrad.nn.functional``: ``multi_margin_loss`` and
``multilabel_margin_loss``, composed of gathers, comparisons and pointwise ops with PyTorch's
formulas, arguments, checks and error texts.

Both take (N, C) or (C,) input (a 0-d input is one sample of one class) and reduce one loss per
sample: the sum over the hinge terms divided by C.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad import ops
from zgrad.creation import arange
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.ops._args import tensor_arg
from zgrad.ops.loss_functions import check_legacy, check_reduction
from zgrad.ops.loss_pointwise import reduce_loss

__all__ = ["multi_margin_loss", "multilabel_margin_loss"]


def _rows(x: Any) -> tuple[int, int]:
    """(samples, classes) of a 0-, 1- or 2-D input.

    Raises:
        RuntimeError: another rank or an empty class dim (PyTorch's message).
    """
    if not ((x.ndim <= 1 and x.numel() != 0) or (x.ndim == 2 and x.shape[1] != 0)):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(x.shape)}")
    return (1 if x.ndim <= 1 else x.shape[0]), (1 if x.ndim == 0 else x.shape[-1])


def _long_target(t: Any) -> None:
    if t.dtype != np.int64:
        raise RuntimeError(f"expected scalar type Long but found {scalar_type_name(t.dtype)}")


def _per_sample(unbatched: bool, loss: Any, reduction: str) -> Any:
    """The (samples,) losses reduced; ``unbatched``: a 0-d loss, as PyTorch's."""
    if unbatched:
        loss = loss.reshape(())
    return reduce_loss(loss, reduction)


def multi_margin_loss(input: Any, target: Any, p: int = 1, margin: float = 1.0, weight: Any = None,  # noqa: A002
                      size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Any:
    """sum over i != y of max(0, margin - x[y] + x[i]) ** p (times ``weight[y]``), divided by
    the number of classes, per sample, as ``torch.nn.functional.multi_margin_loss``.

    Args:
        input: (N, C) or (C,). target: (N,) or a 0-d (or 1-element) int64 class index.
        p: 1 or 2. weight: (C,) per-class weights, or None.

    Raises:
        ValueError: an unknown ``reduction``, ``p`` other than 1 or 2, a weight that is not 1-D
            (PyTorch's messages).
        RuntimeError: an empty or wrong-rank input, a target of the wrong size, dtype or values,
            a weight of the wrong size (PyTorch's messages).
        NotImplementedError: ``size_average`` or ``reduce``.
    """
    check_legacy(size_average, reduce)
    check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    x = tensor_arg(input, "multi_margin_loss", "input")
    t = tensor_arg(target, "multi_margin_loss", "target")
    samples, classes = _rows(x)
    if not (t.ndim <= 1 and t.numel() == samples):
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{samples}], but got {list(t.shape)}. Input "
                           f"has shape {list(x.shape)}.")
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(f"inconsistent weight size, expected {classes} but got {list(weight.shape)}")
    _long_target(t)
    labels = t.reshape(samples, 1)
    if samples and (int(ops.min(labels)) < 0 or int(ops.max(labels)) >= classes):
        raise RuntimeError("target out of range")
    rows = x.reshape(samples, classes)
    hinge = margin - ops.gather(rows, 1, labels) + rows
    hinge = ops.where(hinge > 0, hinge, 0.0)  # no gradient at 0, as PyTorch's
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * ops.index_select(weight, 0, labels.reshape(samples)).reshape(samples, 1)
    others = arange(classes, device=x.device).reshape(1, classes) != labels
    # A 1-D input's loss is 0-d for a 0-d target and (1,) for a 1-element one (PyTorch's rule)
    return _per_sample(x.ndim <= 1 and t.ndim == 0, ops.sum(ops.where(others, hinge, 0.0), 1) / classes, reduction)


def multilabel_margin_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
                           reduction: str = "mean") -> Any:
    """sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])), divided
    by the number of classes, per sample, as ``torch.nn.functional.multilabel_margin_loss``: a
    sample's target classes are its target row's values up to the first -1.

    Args:
        input: (N, C) or (C,). target: int64 of the input's shape, values in [-1, C).

    Raises:
        ValueError: an unknown ``reduction``.
        RuntimeError: an empty or wrong-rank input, a target of the wrong size, dtype or values
            (PyTorch's messages).
        NotImplementedError: ``size_average`` or ``reduce``.
    """
    check_legacy(size_average, reduce)
    check_reduction(reduction)
    x = tensor_arg(input, "multilabel_margin_loss", "input")
    t = tensor_arg(target, "multilabel_margin_loss", "target")
    samples, classes = _rows(x)
    if x.ndim <= 1:
        fits = t.ndim <= 1 and t.numel() == classes
    else:
        fits = t.ndim == 2 and tuple(t.shape) == (samples, classes)
    if not fits:
        raise RuntimeError(f"inconsistent target size: {list(t.shape)} for input of size: {list(x.shape)}")
    _long_target(t)
    labels = t.reshape(samples, classes)
    if samples and (int(ops.min(labels)) < -1 or int(ops.max(labels)) >= classes):
        raise RuntimeError("argument #2 'target' is out of range")
    listed = ops.cumprod((labels >= 0).long(), 1) > 0  # the target entries before the first -1
    is_target = ops.any((labels.unsqueeze(2) == arange(classes, device=x.device)) & listed.unsqueeze(2), 1)
    rows = x.reshape(samples, classes)
    picked = ops.gather(rows, 1, ops.where(listed, labels, 0))
    hinge = 1 - picked.unsqueeze(2) + rows.unsqueeze(1)
    hinge = ops.where(hinge > 0, hinge, 0.0)  # no gradient at 0, as PyTorch's
    counted = listed.unsqueeze(2) & ~is_target.unsqueeze(1)
    return _per_sample(x.ndim <= 1, ops.sum(ops.where(counted, hinge, 0.0), (1, 2)) / classes, reduction)

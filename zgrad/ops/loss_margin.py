"""Margin and embedding losses of ``zgrad.nn.functional``: ``cosine_embedding_loss``,
``margin_ranking_loss``, ``hinge_embedding_loss``, ``triplet_margin_loss``, ``soft_margin_loss``
and ``multilabel_soft_margin_loss``, composed of differentiable ops with PyTorch's formulas
(``aten/src/ATen/native/Loss.cpp`` and ``torch/nn/functional.py``), arguments and error texts.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from zgrad import ops
from zgrad.ops._args import tensor_arg
from zgrad.ops.activation_composed import logsigmoid
from zgrad.ops.loss_functions import check_legacy, check_reduction
from zgrad.ops.loss_pointwise import reduce_loss
from zgrad.ops.vector import pairwise_distance

__all__ = [
    "COSINE_EMBEDDING_EPSILON", "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss",
    "multilabel_soft_margin_loss", "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
]

# added to each squared magnitude: PyTorch's EPSILON, a C++ float (1e-12 rounded to float32)
COSINE_EMBEDDING_EPSILON = float(np.float32(1e-12))


def _checked(size_average: Any, reduce: Any, reduction: str) -> None:
    check_legacy(size_average, reduce)
    check_reduction(reduction)


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0,
                          size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Any:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1 (0 for any
    other target), as ``torch.nn.functional.cosine_embedding_loss``; the cosine is taken along
    the last dimension, with PyTorch's 1e-12 (a float32) added to each squared magnitude.

    Args:
        input1, input2: (N, D) with a (N,) target, or (D,) with a 0-d target.
        target: 1 or -1 per pair.

    Raises:
        RuntimeError: a target of 2 or more dimensions, inputs of the wrong dimensions for the
            target, sizes that do not broadcast (PyTorch's messages).
        ValueError: an unknown ``reduction``.
        NotImplementedError: ``size_average`` or ``reduce``.
    """
    _checked(size_average, reduce, reduction)
    x1, x2 = tensor_arg(input1, "cosine_embedding_loss", "input1"), tensor_arg(input2, "cosine_embedding_loss", "input2")
    t = tensor_arg(target, "cosine_embedding_loss", "target")
    dim = t.ndim
    if dim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if (x1.ndim, x2.ndim) != (dim + 1, dim + 1):
        raise RuntimeError(f"{dim}D target tensor expects {dim + 1}D input tensors, but found inputs with sizes "
                           f"{list(x1.shape)} and {list(x2.shape)}.")
    products = ops.sum(x1 * x2, dim)
    magnitudes1 = ops.sum(x1 * x1, dim) + COSINE_EMBEDDING_EPSILON
    magnitudes2 = ops.sum(x2 * x2, dim) + COSINE_EMBEDDING_EPSILON
    cos = products / ops.sqrt(magnitudes1 * magnitudes2)
    similar = ops.where(t == 1, 1 - cos, 0.0)
    dissimilar = ops.where(t == -1, ops.clamp(cos - margin, min=0), 0.0)
    return reduce_loss(similar + dissimilar, reduction)


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0,
                        size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Any:
    """max(0, -target * (input1 - input2) + margin), as ``torch.nn.functional.margin_ranking_loss``.

    Raises:
        RuntimeError: tensors of different numbers of dimensions, or sizes that do not broadcast.
        ValueError: an unknown ``reduction``.
        NotImplementedError: ``size_average`` or ``reduce``.
    """
    _checked(size_average, reduce, reduction)
    x1, x2 = tensor_arg(input1, "margin_ranking_loss", "input1"), tensor_arg(input2, "margin_ranking_loss", "input2")
    t = tensor_arg(target, "margin_ranking_loss", "target")
    if not x1.ndim == x2.ndim == t.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: zgrad.Size({list(x1.shape)}), input2: zgrad.Size({list(x2.shape)}), "
                           f"target: zgrad.Size({list(t.shape)}) ")
    return reduce_loss(ops.clamp(-t * (x1 - x2) + margin, min=0), reduction)


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0, size_average: Any = None,  # noqa: A002
                         reduce: Any = None, reduction: str = "mean") -> Any:
    """x where target is 1, max(0, margin - x) where it is -1 (both where it is neither), as
    ``torch.nn.functional.hinge_embedding_loss``.

    Raises:
        RuntimeError: sizes that do not broadcast. ValueError: an unknown ``reduction``.
        NotImplementedError: ``size_average`` or ``reduce``.
    """
    _checked(size_average, reduce, reduction)
    x, t = tensor_arg(input, "hinge_embedding_loss", "input"), tensor_arg(target, "hinge_embedding_loss", "target")
    below_margin = ops.where(t != 1, ops.clamp(margin - x, min=0), 0.0)
    return reduce_loss(below_margin + ops.where(t != -1, x, 0.0), reduction)


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Any:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the ``pairwise_distance`` of
    norm ``p`` with ``eps``; with ``swap``, d(anchor, negative) is replaced by the smaller of it
    and d(positive, negative). As ``torch.nn.functional.triplet_margin_loss``.

    Raises:
        ValueError: ``margin`` <= 0, an unknown ``reduction``.
        RuntimeError: tensors of different numbers of dimensions (PyTorch's message).
        NotImplementedError: ``size_average`` or ``reduce``; an infinite or non-positive ``p``.
    """
    _checked(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a = tensor_arg(anchor, "triplet_margin_loss", "anchor")
    pos, neg = tensor_arg(positive, "triplet_margin_loss", "positive"), tensor_arg(negative, "triplet_margin_loss",
                                                                                    "negative")
    if not a.ndim == pos.ndim == neg.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a.ndim}D, positive {pos.ndim}D, and negative {neg.ndim}D "
                           f"inputs")
    to_positive = pairwise_distance(a, pos, p, eps)
    to_negative = pairwise_distance(a, neg, p, eps)
    if swap:
        to_negative = ops.minimum(to_negative, pairwise_distance(pos, neg, p, eps))
    return reduce_loss(ops.clamp(margin + to_positive - to_negative, min=0), reduction)


def triplet_margin_with_distance_loss(anchor: Any, positive: Any, negative: Any, *,
                                      distance_function: Callable[[Any, Any], Any] | None = None,
                                      margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Any:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) for any distance ``d`` (default
    :func:`pairwise_distance`); with ``swap``, d(anchor, negative) is replaced by the smaller of it
    and d(positive, negative). As ``torch.nn.functional.triplet_margin_with_distance_loss``.

    Raises:
        ValueError: ``margin`` <= 0, an unknown ``reduction``.
        RuntimeError: tensors of different numbers of dimensions (PyTorch's message).
    """
    _checked(None, None, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    name = "triplet_margin_with_distance_loss"
    a, pos, neg = (tensor_arg(t, name, what) for t, what in ((anchor, "anchor"), (positive, "positive"),
                                                             (negative, "negative")))
    if not a.ndim == pos.ndim == neg.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a.ndim}D, positive {pos.ndim}D, and negative {neg.ndim}D "
                           f"inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    to_positive, to_negative = distance(a, pos), distance(a, neg)
    if swap:
        to_negative = ops.minimum(to_negative, distance(pos, neg))
    return reduce_loss(ops.clamp(margin + to_positive - to_negative, min=0), reduction)


def soft_margin_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
                     reduction: str = "mean") -> Any:
    """log(1 + exp(-target * input)), as ``torch.nn.functional.soft_margin_loss``.

    Raises:
        RuntimeError: sizes that do not broadcast. ValueError: an unknown ``reduction``.
        NotImplementedError: ``size_average`` or ``reduce``.
    """
    _checked(size_average, reduce, reduction)
    x, t = tensor_arg(input, "soft_margin_loss", "input"), tensor_arg(target, "soft_margin_loss", "target")
    return reduce_loss(ops.log1p(ops.exp(-x * t)), reduction)


def multilabel_soft_margin_loss(input: Any, target: Any, weight: Any = None, size_average: Any = None,  # noqa: A002
                                reduce: Any = None, reduction: str = "mean") -> Any:
    """-(target * logsigmoid(x) + (1 - target) * logsigmoid(-x)), times ``weight`` if given,
    averaged over the last (class) dimension, then reduced over the samples; as
    ``torch.nn.functional.multilabel_soft_margin_loss``.

    Raises:
        ValueError: an unknown ``reduction`` (PyTorch's message: "... is not valid").
        RuntimeError: sizes that do not broadcast.
        NotImplementedError: ``size_average`` or ``reduce``.
    """
    check_legacy(size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    x = tensor_arg(input, "multilabel_soft_margin_loss", "input")
    t = tensor_arg(target, "multilabel_soft_margin_loss", "target")
    loss = -(t * logsigmoid(x) + (1 - t) * logsigmoid(-x))
    if weight is not None:
        loss = loss * weight
    class_dim = x.ndim - 1
    return reduce_loss(ops.sum(loss, class_dim) / x.shape[class_dim], reduction)

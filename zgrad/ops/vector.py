"""Vector functions of ``zgrad.nn.functional``: ``normalize``, ``cosine_similarity``,
``pairwise_distance`` and ``one_hot``, on a p-norm along dimensions whose gradient is 0 where the
norm is 0 (as PyTorch's ``linalg.vector_norm``), so a zero vector gives no NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad import ops
from zgrad.autograd.function import Op
from zgrad.errors import DTypeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_pointwise
from zgrad.kernels.dispatch import broadcast_shape
from zgrad.ops._args import tensor_arg
from zgrad.tensor import Tensor
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op

__all__ = ["VectorNorm", "cosine_similarity", "normalize", "one_hot", "pairwise_distance"]


class VectorNorm(Op):
    """(sum |x|^p)^(1/p) over ``axes`` (kept as size-1 dimensions), for a finite p > 0."""

    @staticmethod
    def forward(ctx, x, axes, p):
        size = dispatch.unary("abs", x)
        powered = dispatch.binary("mul", x, x) if p == 2 else dispatch.binary("pow", size, p)
        total = dispatch.reduce_sum(powered, axes, keepdims=True)
        norm = dispatch.unary("sqrt", total) if p == 2 else dispatch.binary("pow", total, 1.0 / p)
        ctx.save_for_backward(x, norm)
        ctx.p = p
        return norm

    @staticmethod
    def backward(ctx, grad):
        x, norm = ctx.saved_tensors
        p = ctx.p
        zero = dispatch_pointwise.compare("eq", norm, 0)
        norm = dispatch_index.where(zero, 1, norm)  # x is 0 there: 0 / 1, no 0 / 0
        if p == 2:
            return dispatch.binary("mul", grad, dispatch.binary("div", x, norm)), None, None
        # sign(x) |x|^(p-1) / norm^(p-1), 0 at a zero norm (0^(p-1) is inf for p < 1)
        scaled = dispatch.binary("div", dispatch.unary("abs", x), norm)
        direction = dispatch.binary("mul", dispatch.unary("sign", x), dispatch.binary("pow", scaled, p - 1))
        direction = dispatch_index.where(zero, 0, direction)
        return dispatch.binary("mul", grad, direction), None, None


def _norm(x: Any, dim: Any, p: float, what: str) -> Any:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p <= 0:
        raise NotImplementedError(f"{what}: only a finite p > 0 is supported by zgrad, got p={p!r}")
    if not is_floating(x.dtype):
        raise DTypeError(f"{what}: expected a floating point input, got {x.dtype}")
    axes = tuple(d % x.ndim for d in ((dim,) if isinstance(dim, int) else dim)) if x.ndim else ()
    return VectorNorm.apply(x, axes, float(p))


def normalize(input: Any, p: float = 2.0, dim: Any = 1, eps: float = 1e-12, out: Any = None) -> Any:  # noqa: A002
    """``input / max(||input||_p, eps)`` along ``dim``, as ``torch.nn.functional.normalize``.

    Raises:
        IndexError: ``dim`` out of range. NotImplementedError: an infinite or non-positive ``p``.
    """
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported by zgrad")
    x = tensor_arg(input, "normalize")
    _check_dim(dim, x.ndim)
    return x / ops.clamp(_norm(x, dim, p, "normalize"), min=eps)


@autocast_op()
def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """The cosine of the angle between ``x1`` and ``x2`` (broadcast) along ``dim``:
    sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))), as PyTorch computes it.

    Raises:
        RuntimeError: shapes that do not broadcast. IndexError: ``dim`` out of range.
    """
    a, b = tensor_arg(x1, "cosine_similarity", "x1"), tensor_arg(x2, "cosine_similarity", "x2")
    try:
        shape = broadcast_shape(tuple(a.shape), tuple(b.shape))
    except ValueError as error:
        raise RuntimeError(f"cosine_similarity: {error}") from None
    _check_dim(dim, len(shape))
    a, b = ops.expand(a, shape), ops.expand(b, shape)
    unit_a = a / ops.clamp(_norm(a, dim, 2, "cosine_similarity"), min=eps)
    unit_b = b / ops.clamp(_norm(b, dim, 2, "cosine_similarity"), min=eps)
    return ops.sum(unit_a * unit_b, dim)


def pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Any:
    """||x1 - x2 + eps||_p over the last dimension, as ``torch.nn.functional.pairwise_distance``."""
    a, b = tensor_arg(x1, "pairwise_distance", "x1"), tensor_arg(x2, "pairwise_distance", "x2")
    difference = a - b + eps
    dim = -1 if difference.ndim else 0
    norm = _norm(difference, dim, p, "pairwise_distance")
    return norm if keepdim or not difference.ndim else ops.squeeze(norm, -1)


def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """An int64 tensor of shape ``(*tensor.shape, num_classes)`` with 1 at each index of ``tensor``.

    ``num_classes=-1`` takes the largest index plus one.

    Raises:
        RuntimeError: a tensor that is not int64, a negative index, an index >= ``num_classes``,
            or an empty tensor with ``num_classes=-1`` (PyTorch's messages).
    """
    t = tensor_arg(tensor, "one_hot")
    if t.dtype != np.int64:
        raise DTypeError("one_hot is only applicable to index tensor of type LongTensor.")
    if t.numel() == 0:
        if num_classes == -1:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return Tensor(dispatch.full((*t.shape, num_classes), 0, np.int64, dispatch.device_type_of(t._data)))
    low, high = int(ops.min(t).item()), int(ops.max(t).item())
    if low < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = high + 1
    elif high >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    classes = dispatch.asarray(np.arange(num_classes), np.int64, dispatch.device_type_of(t._data))
    hits = dispatch_pointwise.compare("eq", t._data.reshape(*t.shape, 1), classes)
    return Tensor(dispatch.cast(hits, np.int64))


def _check_dim(dim: Any, ndim: int) -> None:
    for d in (dim,) if isinstance(dim, int) else dim:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                             f"{max(ndim, 1) - 1}], but got {d})")

"""Element-wise losses of ``zgrad.nn.functional`` composed from differentiable ops:
``binary_cross_entropy``, ``binary_cross_entropy_with_logits``, ``smooth_l1_loss``,
``huber_loss`` and ``kl_div``, with PyTorch's formulas, arguments and reductions.
"""

from __future__ import annotations

import warnings
from typing import Any

from zgrad import ops
from zgrad.ops._args import operand, tensor_arg
from zgrad.ops.loss_functions import check_legacy, check_reduction, same_shape
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op
from zgrad.warning_location import user_stacklevel

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "huber_loss", "kl_div", "reduce_loss",
           "smooth_l1_loss"]


def reduce_loss(loss: Any, reduction: str) -> Any:
    """An element-wise ``loss`` reduced by ``reduction``: 'none', 'sum' or 'mean'."""
    if reduction == "none":
        return loss
    return ops.sum(loss) if reduction == "sum" else ops.mean(loss)


def _check_floating(name: str, x: Any) -> None:
    if not is_floating(x.dtype):
        raise RuntimeError(f"\"{name}\" not implemented for '{x.dtype}': expected a floating point input")


def _same_size(name: str, input: Any, target: Any) -> None:  # noqa: A002
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"{name}: Using a target size ({list(target.shape)}) that is different to the input size "
                         f"({list(input.shape)}) is deprecated. Please ensure they have the same size.")


@autocast_op()
def binary_cross_entropy(input: Any, target: Any, weight: Any = None, size_average: Any = None,  # noqa: A002
                         reduce: Any = None, reduction: str = "mean") -> Any:
    """-weight * (target * log(input) + (1 - target) * log(1 - input)), each log clamped to >= -100
    as PyTorch does, reduced by ``reduction``.

    Args:
        input: probabilities in [0, 1].
        target: of ``input``'s shape (floating).
        weight: rescales each element; broadcast to ``input``.

    Raises:
        ValueError: a target of another shape, an unknown ``reduction``.
        RuntimeError: input values outside [0, 1], an integer input.
    """
    check_legacy(size_average, reduce)
    check_reduction(reduction)
    x, t = tensor_arg(input, "binary_cross_entropy"), operand(target)
    _same_size("binary_cross_entropy", x, t)
    _check_floating("binary_cross_entropy", x)
    if x.numel() and (float(ops.min(x).item()) < 0 or float(ops.max(x).item()) > 1):
        raise RuntimeError("all elements of input should be between 0 and 1")
    log_x = ops.clamp(ops.log(x), min=-100)
    log_1mx = ops.clamp(ops.log(1 - x), min=-100)
    loss = -(t * log_x + (1 - t) * log_1mx)
    return reduce_loss(loss if weight is None else loss * weight, reduction)


@autocast_op()
def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None, size_average: Any = None,  # noqa: A002
                                     reduce: Any = None, reduction: str = "mean", pos_weight: Any = None) -> Any:
    """Binary cross-entropy of ``sigmoid(input)``, computed stably from the logits:
    (1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x).

    Args:
        weight: rescales each element; broadcast to ``input``.
        pos_weight: the weight of positive examples, broadcast along the last (class) dimension.

    Raises:
        ValueError: a target of another shape, an unknown ``reduction``.
    """
    check_legacy(size_average, reduce)
    check_reduction(reduction)
    x, t = tensor_arg(input, "binary_cross_entropy_with_logits"), operand(target)
    _same_size("binary_cross_entropy_with_logits", x, t)
    _check_floating("binary_cross_entropy_with_logits", x)
    # softplus(-x) = m + log(exp(-m) + exp(-x - m)) for any m; m = max(-x, 0) keeps both exps <= 1,
    # and as a constant it adds nothing to the gradient.
    m = ops.clamp(-x, min=0).detach()
    softplus_neg = m + ops.log(ops.exp(-m) + ops.exp(-x - m))
    log_weight = softplus_neg if pos_weight is None else (1 + (pos_weight - 1) * t) * softplus_neg
    loss = (1 - t) * x + log_weight
    return reduce_loss(loss if weight is None else loss * weight, reduction)


def _difference(name: str, input: Any, target: Any) -> Any:  # noqa: A002
    x, t = same_shape(tensor_arg(input, name), target)
    return x - t


@autocast_op()
def smooth_l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
                   reduction: str = "mean", beta: float = 1.0) -> Any:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target; beta = 0 is L1).

    Raises:
        RuntimeError: a negative ``beta``. ValueError: an unknown ``reduction``.
    """
    check_legacy(size_average, reduce)
    check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = _difference("smooth_l1_loss", input, target)
    size = ops.abs(d)
    if beta == 0:
        return reduce_loss(size, reduction)
    return reduce_loss(ops.where(size < beta, 0.5 * d * d / beta, size - 0.5 * beta), reduction)


@autocast_op()
def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0) -> Any:  # noqa: A002
    """0.5 d^2 where |d| < delta, else delta * (|d| - 0.5 delta) (d = input - target).

    Raises:
        RuntimeError: ``delta`` <= 0. ValueError: an unknown ``reduction``.
    """
    check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = _difference("huber_loss", input, target)
    size = ops.abs(d)
    return reduce_loss(ops.where(size < delta, 0.5 * d * d, delta * (size - 0.5 * delta)), reduction)


@autocast_op()
def kl_div(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
           reduction: str = "mean", log_target: bool = False) -> Any:
    """The pointwise KL divergence target * (log(target) - input) of log-probabilities ``input``
    (0 where target is 0); with ``log_target`` the target is given as log-probabilities too.

    ``reduction='batchmean'`` divides the sum by the batch size (the mathematically right KL
    divergence); 'mean' divides by the number of elements and warns, as PyTorch.

    Raises:
        ValueError: an unknown ``reduction``.
    """
    check_legacy(size_average, reduce)
    if reduction != "batchmean":
        check_reduction(reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=user_stacklevel())
    x, t = same_shape(tensor_arg(input, "kl_div"), target, warn=False)
    if log_target:
        loss = ops.exp(t) * (t - x)
    else:
        positive = t > 0  # xlogy(t, t): 0 where t is 0
        loss = ops.where(positive, t * ops.log(ops.where(positive, t, 1.0)), 0.0) - t * x
    if reduction == "batchmean":
        total = ops.sum(loss)
        return total / x.shape[0] if x.ndim else total
    return reduce_loss(loss, reduction)

"""The loss functions of ``zgrad.nn.functional``: ``cross_entropy``, ``nll_loss``, ``mse_loss``,
``l1_loss``, with PyTorch's arguments, reductions and error texts.

Class losses take (N, C) or (N, C, d1, ...) inputs (or an unbatched (C,) one) with class-index
targets; the class axis is moved last and the rest flattened into rows for the kernels (which
kernel runs is the op's choice: see :class:`zgrad.ops.loss.CrossEntropy`).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from zgrad.kernels import dispatch
from zgrad.kernels.dispatch import broadcast_shape
from zgrad.ops._args import operand, tensor_arg
from zgrad.ops.elementwise import Mul
from zgrad.ops.loss import CrossEntropy, LogSoftmax, NllLoss, PointwiseLoss
from zgrad.ops.reduce import Sum
from zgrad.ops.shape import Permute, Reshape, expand
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op
from zgrad.memory_formats import Size
from zgrad.warning_location import user_stacklevel

__all__ = [
    "REDUCTIONS", "check_legacy", "check_reduction", "cross_entropy", "l1_loss", "mse_loss", "nll_loss", "same_shape",
]

REDUCTIONS = ("none", "mean", "sum")


def check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _class_rows(input: Any, what: str) -> tuple[Any, int, tuple[int, ...]]:  # noqa: A002
    """(input as (M, C) rows, C, the shape of one loss per row) of a (C,), (N, C) or (N, C, d...) input."""
    if input.ndim == 0:
        raise ValueError(f"{what}: Expected input to have at least 1 dimension (the classes), got a scalar")
    if not is_floating(input.dtype):
        raise NotImplementedError(f"{what}: not implemented for {input.dtype} input; expected a floating point input")
    if input.ndim == 1:
        return Reshape.apply(input, (1, input.shape[0])), input.shape[0], ()
    classes = input.shape[1]
    per_row = (input.shape[0], *input.shape[2:])
    if input.ndim > 2:
        input = Permute.apply(input, (0, *range(2, input.ndim), 1))
        input = Reshape.apply(input, (-1, classes))
    return input, classes, per_row


def _class_targets(target: Any, per_row: tuple[int, ...], classes: int, ignore_index: int, what: str) -> np.ndarray:
    """The class-index targets as (M,) int64, checked against the input as PyTorch does.

    Raises:
        ValueError: a batch size other than the input's.
        RuntimeError: a wrong dtype or shape (spatial sizes).
        IndexError: a class outside [0, C) that is not ``ignore_index`` ("Target 7 is out of bounds. ...";
            for CUDA targets at this thread's next wait for the device).
    """
    array = tensor_arg(target, what)._data
    if array.dtype.kind not in "iu":
        raise RuntimeError(f"{what}: expected target dtype to be Long or Byte, but got {array.dtype}")
    if per_row and array.ndim >= 1 and array.shape[0] != per_row[0]:
        raise ValueError(f"{what}: Expected input batch_size ({per_row[0]}) to match target batch_size "
                         f"({array.shape[0]}).")
    if array.shape != per_row:
        raise RuntimeError(f"{what}: Expected target size {list(per_row)}, got {list(array.shape)}")
    flat = dispatch.as_int64(array.reshape(-1))
    dispatch.backend_of(flat).check_index_range(
        flat, 0, classes, ignore_index,
        lambda bad: IndexError(f"Target {bad} is out of bounds. Expected class indices in [0, {classes - 1}] "
                               f"or ignore_index ({ignore_index})."))
    return flat


def _class_weight(weight: Any, classes: int, dtype: np.dtype) -> Any:
    if weight is None:
        return None
    array = tensor_arg(weight, "weight")._data
    if array.shape != (classes,):
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but got "
                           f"weight tensor of shape: {list(array.shape)}")
    return array if array.dtype == dtype else array.astype(dtype)


@autocast_op()
def nll_loss(input: Any, target: Any, weight: Any = None, size_average: Any = None,  # noqa: A002
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Any:
    """The negative log-likelihood of class-index ``target`` under log-probabilities ``input``.

    ``input`` is (C,), (N, C) or (N, C, d1, ...); ``target`` is (), (N,) or (N, d1, ...) class
    indices. ``weight`` (C,) rescales each class; targets equal to ``ignore_index`` count for
    nothing; 'mean' divides by the total weight of the counted targets.

    Raises:
        ValueError: an unknown ``reduction``, a target batch size other than the input's.
        RuntimeError: other mismatched shapes or dtypes (PyTorch's messages).
        NotImplementedError: an integer ``input``.
        IndexError: a target class out of range ("Target 7 is out of bounds. ...").
    """
    check_legacy(size_average, reduce)
    check_reduction(reduction)
    rows, classes, per_row = _class_rows(tensor_arg(input, "nll_loss"), "nll_loss")
    targets = _class_targets(target, per_row, classes, ignore_index, "nll_loss")
    return NllLoss.apply(rows, targets, _class_weight(weight, classes, input.dtype), ignore_index, reduction, per_row)


@autocast_op()
def cross_entropy(input: Any, target: Any, weight: Any = None, size_average: Any = None,  # noqa: A002
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Any:
    """Cross-entropy between the softmax of ``input`` (over dim 1) and ``target``.

    ``target`` holds class indices (shaped as for :func:`nll_loss`) or class probabilities
    (input's shape, floating). With ``label_smoothing`` eps the target mixes in the uniform
    distribution: (1 - eps) * target + eps / C.

    Raises:
        ValueError: an unknown ``reduction``, a target batch size other than the input's.
        RuntimeError: other mismatched shapes, ``label_smoothing`` outside [0, 1], ``ignore_index``
            with probability targets.
        NotImplementedError: an integer ``input`` with class-index targets.
        IndexError: a target class out of range.
    """
    check_legacy(size_average, reduce)
    check_reduction(reduction)
    tensor_arg(input, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    target = operand(target)
    if is_floating(target.dtype):
        return _cross_entropy_probabilities(input, target, weight, ignore_index, reduction, label_smoothing)
    rows, classes, per_row = _class_rows(input, "cross_entropy")
    targets = _class_targets(target, per_row, classes, ignore_index, "cross_entropy")
    weight_array = _class_weight(weight, classes, input.dtype)
    return CrossEntropy.apply(rows, targets, weight_array, ignore_index, float(label_smoothing), reduction, per_row)


def _cross_entropy_probabilities(input: Any, target: Any, weight: Any, ignore_index: int, reduction: str,  # noqa: A002
                                 label_smoothing: float) -> Any:
    """-sum_c w_c * target_c * log_softmax(input)_c per sample, from the ops it is made of."""
    if target.shape != input.shape:
        raise RuntimeError(f"cross_entropy: Expected target of the input's shape {list(input.shape)} for class "
                           f"probabilities, got {list(target.shape)}")
    if ignore_index != -100:
        raise RuntimeError("ignore_index is not supported for floating point target")
    class_dim = 0 if input.ndim == 1 else 1
    classes = input.shape[class_dim]
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    if weight is not None:
        shape = [1] * input.ndim
        shape[class_dim] = classes
        target = Mul.apply(target, Reshape.apply(tensor_arg(weight, "weight"), tuple(shape)))
    per_sample = -Sum.apply(Mul.apply(LogSoftmax.apply(input, class_dim), target), (class_dim,), False, None)
    if reduction == "none":
        return per_sample
    total = Sum.apply(per_sample, None, False, None)
    if reduction == "sum":
        return total
    samples = math.prod(input.shape) // classes if classes else 0
    return total / samples if samples else total * float("nan")


def same_shape(input: Any, target: Any, warn: bool = True) -> tuple[Any, Any]:  # noqa: A002
    """Both broadcast to one shape, with PyTorch's warning that this is likely a mistake (unless
    ``warn`` is False: kl_div broadcasts silently, as PyTorch's)."""
    input, target = operand(input), operand(target)
    if input.shape != target.shape:
        if warn:
            warnings.warn(f"Using a target size ({Size(target.shape)!r}) that is different to the input size "
                          f"({Size(input.shape)!r}). This will likely lead to incorrect results due to broadcasting. "
                          f"Please ensure they have the same size.", UserWarning, stacklevel=user_stacklevel())
        shape = broadcast_shape(tuple(input.shape), tuple(target.shape))
        input, target = expand(input, shape), expand(target, shape)
    return input, target


@autocast_op()
def mse_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
             reduction: str = "mean") -> Any:
    """(input - target)**2, reduced by ``reduction``; tensors of different shapes are broadcast.

    Raises:
        ValueError: an unknown ``reduction``, shapes that do not broadcast.
    """
    return _pointwise_loss(input, target, size_average, reduce, reduction, squared=True)


@autocast_op()
def l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
            reduction: str = "mean") -> Any:
    """|input - target|, reduced by ``reduction``; tensors of different shapes are broadcast.

    Raises:
        ValueError: an unknown ``reduction``, shapes that do not broadcast.
    """
    return _pointwise_loss(input, target, size_average, reduce, reduction, squared=False)


def _pointwise_loss(input: Any, target: Any, size_average: Any, reduce: Any, reduction: str,  # noqa: A002
                    squared: bool) -> Any:
    check_legacy(size_average, reduce)
    check_reduction(reduction)
    input, target = same_shape(input, target)
    return PointwiseLoss.apply(input, target, squared, reduction)


def check_legacy(size_average: Any, reduce: Any) -> None:
    if size_average is not None or reduce is not None:
        raise NotImplementedError("size_average and reduce are deprecated in PyTorch and not supported by zgrad; "
                                  "use reduction='none' | 'mean' | 'sum'")

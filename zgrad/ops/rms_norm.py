"""``rms_norm``: x / sqrt(mean(x^2) + eps) over the trailing dimensions, times a weight, as
``torch.nn.functional.rms_norm`` (a composition of existing kernels)."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad import ops
from zgrad.kernels.promotion import opmath_dtype
from zgrad.ops._args import tensor_arg
from zgrad.ops.norm import check_normalized_shape
from zgrad.type_info import finfo

__all__ = ["rms_norm", "rms_norm_layer"]


def rms_norm_layer(name: object, input: Any, normalized_shape: int | Sequence[int], weight: Any = None,  # noqa: A002
                   eps: float | None = None) -> Any:
    """:func:`rms_norm` with error messages that start with ``name``."""
    x = tensor_arg(input, name, "input")
    weight = None if weight is None else tensor_arg(weight, name, "weight")
    shape = check_normalized_shape(name, x, normalized_shape, "*", weight=weight)
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    epsilon = finfo(x.dtype).eps if eps is None else float(eps)
    wide = x.to(opmath_dtype(x.dtype))  # float16 and bfloat16 computed in float32, rounded once (as PyTorch)
    out = wide * ops.rsqrt(ops.mean(wide * wide, dim=dims, keepdim=True) + epsilon)
    return (out if weight is None else out * weight).to(x.dtype)


def rms_norm(input: Any, normalized_shape: int | Sequence[int], weight: Any = None,  # noqa: A002
             eps: float | None = None) -> Any:
    """Root-mean-square normalization over the last ``len(normalized_shape)`` dimensions, as
    ``torch.nn.functional.rms_norm``: x / sqrt(mean(x^2) + eps) * weight.

    Args:
        weight: shape ``normalized_shape``, or None for no scaling.
        eps: added to the mean square; None takes the machine epsilon of the input's dtype.

    Raises:
        RuntimeError: the input's trailing dimensions are not ``normalized_shape``, or a weight of
            another shape or dtype.
    """
    return rms_norm_layer("rms_norm", input, normalized_shape, weight, eps)

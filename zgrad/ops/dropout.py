"""Dropout (``dropout``, ``dropout1d``/``2d``/``3d``): zero elements or whole channels with probability p and
scale the rest by 1/(1-p), in training only.

Masks come from the default generator of the input's device (``zgrad.manual_seed`` makes them
reproducible): one uniform draw per element (``dropout``) or per (sample, channel) (the
channel-wise forms), kept where it is >= p. The kernel applies the mask and the scale in one pass and
keeps the mask (one byte per draw) for backward.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.kernels import dispatch, dispatch_pointwise, dispatch_sequence as DS
from zgrad.ops._args import tensor_arg
from zgrad.ops.elementwise import formula_mul
from zgrad.random import numpy_generator
from zgrad.kernels.promotion import is_floating
from zgrad.warning_location import user_stacklevel

__all__ = ["Dropout", "check_probability", "dropout", "dropout1d", "dropout2d", "dropout3d", "feature_dropout"]


class Dropout(Op):
    """x * keep / (1 - p), with ``noise`` one uniform draw per row of x viewed as (len(noise), -1)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, noise, p):
        out, ctx.keep = DS.dropout(x, noise, p)
        ctx.p = p
        return out

    @staticmethod
    def backward(ctx, grad):
        if on_graph(grad):  # linear in grad: grad times the mask's scale, recorded
            ones = dispatch.full(grad.shape, 1, grad.dtype, dispatch.device_type_of(grad._data))
            return formula_mul(grad, DS.dropout_backward(ones, ctx.keep, ctx.p)), None, None
        return DS.dropout_backward(grad, ctx.keep, ctx.p), None, None


def check_probability(p: Any) -> float:
    """``p`` as a float in [0, 1].

    Raises:
        ValueError: p outside [0, 1], with PyTorch's message.
    """
    if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return float(p)


def _apply(input: Any, p: float, training: bool, inplace: bool, rows: int, what: str) -> Any:  # noqa: A002
    p = check_probability(p)
    if not training or p == 0.0 or input.numel() == 0:  # PyTorch returns the input itself here
        return input
    if not is_floating(input.dtype):
        raise RuntimeError(f"{what}: expected a floating point input, got {input.dtype}")
    noise = numpy_generator(device=input.device).random(rows, dtype=np.float32 if input.dtype == np.float32 else np.float64)
    noise = dispatch.to_device(noise, dispatch.device_type_of(input._data))
    if not inplace:
        return Dropout.apply(input, noise, p)
    return input._inplace(lambda: dispatch_pointwise.write(input._data, DS.dropout(input._data, noise, p)[0]),
                          lambda old: Dropout.apply(old, noise, p))


def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:  # noqa: A002
    """Zero each element with probability ``p`` and scale the others by 1/(1-p); identity unless
    ``training``. ``inplace`` writes the result into ``input`` (recorded in the graph as PyTorch does).

    Raises:
        ValueError: ``p`` outside [0, 1].
    """
    tensor_arg(input, "dropout")
    return _apply(input, p, training, inplace, input.numel(), "dropout")


def _feature_rows(input: Any, batched: bool) -> int:  # noqa: A002
    """The draws of a channel-wise dropout: one per (N, C) of ``input`` (with a batch of 1 in front
    when not ``batched``).

    Raises:
        RuntimeError: fewer than 2 dims that way (PyTorch's message).
    """
    dims = tuple(input.shape) if batched else (1, *input.shape)
    if len(dims) < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return dims[0] * dims[1]


def _deprecated_rank(what: str, ndim: int, spatial: str, expected: str) -> None:
    warnings.warn(f"{what}: Received a {ndim}-D input to {what}, which is deprecated and will result in an error in a "
                  "future release. To retain the behavior and silence this warning, please use dropout instead. Note "
                  f"that {what} exists to provide channel-wise dropout on inputs with {spatial} spatial dimensions, a "
                  f"channel dimension, and an optional batch dimension (i.e. {expected} inputs).", UserWarning, stacklevel=user_stacklevel())


def dropout1d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:  # noqa: A002
    """Zero whole channels with probability ``p``: one draw per (N, C) of an (N, C, L) input, per C
    of a (C, L) one; scale the kept ones by 1/(1-p); identity unless ``training``.

    Raises:
        ValueError: ``p`` outside [0, 1]. RuntimeError: not 2 or 3 dims (PyTorch's message).
    """
    tensor_arg(input, "dropout1d")
    check_probability(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that dropout1d "
                           "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
                           "dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _apply(input, p, training, inplace, _feature_rows(input, input.ndim == 3), "dropout1d")


def dropout2d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:  # noqa: A002
    """Zero whole channels with probability ``p``: one draw per (N, C) of an (N, C, H, W) input;
    scale the kept ones by 1/(1-p); identity unless ``training``.

    Other ranks follow PyTorch 2.13, with its warnings: a 3-D input is read as (N, C, L), and any
    other as (N, C, ...) too (a 2-D input so loses single elements).

    Raises:
        ValueError: ``p`` outside [0, 1]. RuntimeError: fewer than 2 dims.
    """
    tensor_arg(input, "dropout2d")
    check_probability(p)
    if input.ndim not in (3, 4):
        _deprecated_rank("dropout2d", input.ndim, "2", "3D or 4D")
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", UserWarning, stacklevel=user_stacklevel())
    return _apply(input, p, training, inplace, _feature_rows(input, True), "dropout2d")


def dropout3d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:  # noqa: A002
    """Zero whole channels with probability ``p``: one draw per (N, C) of an (N, C, D, H, W) input,
    per C of a (C, D, H, W) one; scale the kept ones by 1/(1-p); identity unless ``training``.
    Other ranks are read as unbatched, with PyTorch's warning.

    Raises:
        ValueError: ``p`` outside [0, 1]. RuntimeError: a 0-d input.
    """
    tensor_arg(input, "dropout3d")
    check_probability(p)
    if input.ndim not in (4, 5):
        _deprecated_rank("dropout3d", input.ndim, "3", "4D or 5D")
    return _apply(input, p, training, inplace, _feature_rows(input, input.ndim == 5), "dropout3d")


def feature_dropout(input: Any, p: float, train: bool, inplace: bool = False) -> Any:  # noqa: A002
    """Zero whole channels with probability ``p``: one draw per (N, C) of an (N, C, ...) input of any
    rank from 2 (PyTorch's ``torch.feature_dropout``, what ``dropout1d/2d/3d`` reduce to); scale the
    kept ones by 1/(1-p); identity unless ``train``.

    Raises:
        ValueError: ``p`` outside [0, 1]. RuntimeError: fewer than 2 dims (PyTorch's message).
    """
    tensor_arg(input, "feature_dropout")
    check_probability(p)
    return _apply(input, p, train, inplace, _feature_rows(input, True), "feature_dropout")

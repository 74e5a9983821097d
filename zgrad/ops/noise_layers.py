"""Layers with training-time noise of ``zgrad.nn.functional``: ``alpha_dropout``,
``feature_alpha_dropout`` (SELU-preserving dropout) and ``rrelu`` (randomized leaky ReLU), as
PyTorch's, composed of pointwise ops on constant noise.

The noise comes from the default generator of the input's device (``zgrad.manual_seed`` makes it
reproducible; the streams are zgrad's, not PyTorch's): one uniform draw per element (per
(sample, channel) for the feature form). Alpha dropout keeps an element where its draw is >= p
and gives a * x + a * alpha' * p there, a * alpha' * (p - 1) where dropped, with alpha' the
negative saturation of SELU (1.7580993408473766) and a = ((alpha'^2 p + 1)(1 - p)) ** -0.5, so
zero-mean unit-variance inputs keep their mean and variance. RReLU's negative slope is drawn
uniformly from [lower, upper) per element in training, (lower + upper) / 2 in evaluation.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad import ops
from zgrad.kernels import dispatch
from zgrad.kernels.promotion import is_floating
from zgrad.ops._args import refuse_dtype, tensor_arg
from zgrad.ops.activation import leaky_relu
from zgrad.ops.activation_piecewise import apply_inplace
from zgrad.ops.dropout import check_probability
from zgrad.random import numpy_generator
from zgrad.tensor import Tensor

__all__ = ["SELU_SATURATION", "alpha_dropout", "feature_alpha_dropout", "rrelu"]

# -scale * alpha of SELU: the value SELU tends to for large negative inputs, negated
SELU_SATURATION = 1.7580993408473766


def _uniform(x: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform [0, 1) draws of ``shape`` from the default generator of ``x``'s device."""
    return numpy_generator(device=x.device).random(shape)


def _constant(x: Any, values: np.ndarray) -> Any:
    """``values`` as a tensor of ``x``'s dtype on ``x``'s device."""
    return Tensor(dispatch.to_device(np.ascontiguousarray(values.astype(x.dtype)), dispatch.device_type_of(x._data)))


def _alpha(input: Any, p: float, training: bool, inplace: bool, feature: bool, what: str) -> Any:  # noqa: A002
    x = tensor_arg(input, what, "input")
    p = check_probability(p)
    if not training or p == 0.0 or x.numel() == 0:  # PyTorch returns the input itself here
        return x
    if not is_floating(x.dtype):
        raise RuntimeError(f"{what}: expected a floating point input, got {x.dtype}")
    if p == 1.0:
        return apply_inplace(x, lambda t: t * 0.0, inplace)
    if feature and x.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = (x.shape[0], x.shape[1]) + (1,) * (x.ndim - 2) if feature else tuple(x.shape)
    keep = (_uniform(x, shape) >= p).astype(np.float64)
    a = 1.0 / math.sqrt((SELU_SATURATION * SELU_SATURATION * p + 1) * (1 - p))
    scale = _constant(x, keep * a)
    shift = _constant(x, (keep - 1) * (SELU_SATURATION * a) + SELU_SATURATION * a * p)
    return apply_inplace(x, lambda t: t * scale + shift, inplace)


def alpha_dropout(input: Any, p: float = 0.5, training: bool = False, inplace: bool = False) -> Any:  # noqa: A002
    """Alpha dropout, as ``torch.nn.functional.alpha_dropout``: each element dropped with
    probability ``p`` to SELU's saturation value, then all rescaled and shifted so that a
    zero-mean unit-variance input keeps its mean and variance; identity unless ``training``
    (PyTorch's default here: False). ``inplace`` writes into ``input``.

    Raises:
        ValueError: ``p`` outside [0, 1] (PyTorch's message).
        RuntimeError: a non-floating input in training.
    """
    return _alpha(input, p, training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input: Any, p: float = 0.5, training: bool = False,  # noqa: A002
                          inplace: bool = False) -> Any:
    """Alpha dropout of whole channels, as ``torch.nn.functional.feature_alpha_dropout``: one
    draw per (N, C) of a (N, C, ...) input; identity unless ``training``.

    Raises:
        ValueError: ``p`` outside [0, 1] (PyTorch's message).
        RuntimeError: fewer than 2 dims in training (PyTorch's message), a non-floating input.
    """
    return _alpha(input, p, training, inplace, True, "feature_alpha_dropout")


def rrelu(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,  # noqa: A002
          inplace: bool = False) -> Any:
    """Randomized leaky ReLU, as ``torch.nn.functional.rrelu``: x where x > 0, else a * x, with a
    drawn uniformly from [lower, upper) per element in training and (lower + upper) / 2 in
    evaluation (PyTorch's default: evaluation). ``inplace`` writes into ``input``.

    Raises:
        RuntimeError: ``lower`` > ``upper`` (PyTorch's message); a non-floating input in training
            (PyTorch's "not implemented" message).
        DTypeError: a non-floating input in evaluation.
    """
    x = tensor_arg(input, "rrelu", "input")
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return leaky_relu(x, (lower + upper) / 2, inplace)
    if not is_floating(x.dtype):
        raise refuse_dtype(f"rrelu_with_noise_out_{x.device.type}", x.dtype)
    slopes = _constant(x, lower + (upper - lower) * _uniform(x, tuple(x.shape)))
    return apply_inplace(x, lambda t: ops.where(t <= 0, t * slopes, t), inplace)

"""Dropout (``dropout``, ``dropout2d``): zero elements or whole channels with probability p and
scale the rest by 1/(1-p), in training only.

Masks come from the default generator of the input's device (``zgrad.manual_seed`` makes them
reproducible): one uniform draw per element (``dropout``) or per (sample, channel)
(``dropout2d``), kept where it is >= p. The kernel applies the mask and the scale in one pass and
keeps the mask (one byte per draw) for backward.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.kernels import dispatch, dispatch_pointwise, dispatch_sequence as DS
from zgrad.ops._args import tensor_arg
from zgrad.ops.elementwise import formula_mul
from zgrad.random import numpy_generator
from zgrad.kernels.promotion import is_floating

__all__ = ["Dropout", "check_probability", "dropout", "dropout2d"]


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


def dropout2d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:  # noqa: A002
    """Zero whole channels with probability ``p``: one draw per (N, C) of an (N, C, H, W) input
    (for other ranks, PyTorch's rule: one draw per entry of the first dimension), scale the kept
    ones by 1/(1-p); identity unless ``training``.

    Raises:
        ValueError: ``p`` outside [0, 1].
    """
    tensor_arg(input, "dropout2d")
    rows = math.prod(input.shape[:2]) if input.ndim == 4 else (input.shape[0] if input.ndim else 1)
    return _apply(input, p, training, inplace, rows, "dropout2d")

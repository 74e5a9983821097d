"""Smooth activations, each one fused kernel forward and one backward: SiLU (x * sigmoid(x)),
Mish (x * tanh(softplus(x))) and Softplus (log(1 + exp(beta x)) / beta, linear above
``threshold``)."""

from __future__ import annotations

from typing import Any

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch_pointwise, dispatch_sequence as DS
from zgrad.ops._args import require_kinds, tensor_arg

__all__ = ["SmoothActivation", "mish", "silu", "softplus"]


class SmoothActivation(Op):
    """``name``(x) for ``name`` in silu, mish, softplus; ``beta`` and ``threshold`` are Softplus's."""

    @staticmethod
    def forward(ctx, x, name, beta, threshold):
        ctx.save_for_backward(x)
        ctx.options = (name, beta, threshold)
        return DS.smooth_activation(x, name, beta, threshold)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return DS.smooth_activation_backward(grad, x, *ctx.options), None, None, None


def _apply(name: str, input: Any, inplace: bool, beta: float = 1.0, threshold: float = 20.0) -> Any:  # noqa: A002
    """The activation of ``input``, or written into it (recorded in the graph where it must be).

    Raises:
        DTypeError: a non-floating input.
    """
    x = require_kinds(tensor_arg(input, name), name, "f")
    beta, threshold = float(beta), float(threshold)
    if not inplace:
        return SmoothActivation.apply(x, name, beta, threshold)
    return x._inplace(lambda: dispatch_pointwise.write(x._data, DS.smooth_activation(x._data, name, beta, threshold)),
                      lambda old: SmoothActivation.apply(old, name, beta, threshold))


def silu(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """x * sigmoid(x), as ``torch.nn.functional.silu``; ``inplace`` writes into ``input``.

    Raises:
        DTypeError: a non-floating input.
    """
    return _apply("silu", input, inplace)


def mish(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """x * tanh(softplus(x)), as ``torch.nn.functional.mish``; ``inplace`` writes into ``input``.

    Raises:
        DTypeError: a non-floating input.
    """
    return _apply("mish", input, inplace)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:  # noqa: A002
    """log(1 + exp(beta x)) / beta, and x itself where beta x > ``threshold``, as
    ``torch.nn.functional.softplus``.

    Raises:
        DTypeError: a non-floating input.
    """
    return _apply("softplus", input, False, beta, threshold)

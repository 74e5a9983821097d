"""Activations with a parameter: GELU (exact or tanh approximation), leaky ReLU, and the
functional ReLU with ``inplace``."""

from __future__ import annotations

from typing import Any

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch_pointwise, dispatch_sequence as DS
from zgrad.ops._args import require_kinds, tensor_arg
from zgrad.ops import functions

__all__ = ["Gelu", "LeakyRelu", "gelu", "leaky_relu", "relu"]

GELU_APPROXIMATIONS = ("none", "tanh")


class Gelu(Op):
    """x * Phi(x) (Phi the standard normal CDF), or 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""

    @staticmethod
    def forward(ctx, x, tanh_approximation):
        ctx.save_for_backward(x)
        ctx.tanh_approximation = tanh_approximation
        return DS.gelu(x, tanh_approximation)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return DS.gelu_backward(grad, x, ctx.tanh_approximation), None


class LeakyRelu(Op):
    """x if x > 0 else negative_slope * x."""

    @staticmethod
    def forward(ctx, x, negative_slope):
        ctx.save_for_backward(x)
        ctx.negative_slope = negative_slope
        return DS.leaky_relu(x, negative_slope)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return DS.leaky_relu_backward(grad, x, ctx.negative_slope), None


def relu(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """max(x, 0), as ``torch.nn.functional.relu``; ``inplace`` writes into ``input`` (``relu_``,
    under PyTorch's in-place rules)."""
    tensor_arg(input, "relu")
    return input.relu_() if inplace else functions.relu(input)


def gelu(input: Any, approximate: str = "none") -> Any:  # noqa: A002 - torch's argument name
    """The Gaussian error linear unit; ``approximate="tanh"`` uses the tanh formula.

    Raises:
        RuntimeError: ``approximate`` is neither "none" nor "tanh" (PyTorch's message).
    """
    if approximate not in GELU_APPROXIMATIONS:
        raise RuntimeError("approximate argument must be either none or tanh.")
    return Gelu.apply(require_kinds(tensor_arg(input, "gelu"), "gelu", "f"), approximate == "tanh")


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:  # noqa: A002
    """max(0, x) + negative_slope * min(0, x); ``inplace`` writes into ``input`` (recorded)."""
    require_kinds(tensor_arg(input, "leaky_relu"), "leaky_relu", "f")
    slope = float(negative_slope)
    if not inplace:
        return LeakyRelu.apply(input, slope)
    return input._inplace(lambda: dispatch_pointwise.write(input._data, DS.leaky_relu(input._data, slope)),
                          lambda old: LeakyRelu.apply(old, slope))

"""Activations with a parameter: GELU (exact or tanh approximation), leaky ReLU, ELU, PReLU, and
the functional ReLU with ``inplace``."""

from __future__ import annotations

from typing import Any

import math

from zgrad.autograd.function import Op, on_graph
from zgrad import ops
from zgrad.kernels import dispatch, dispatch_pointwise, dispatch_sequence as DS
from zgrad.ops._args import require_kinds, tensor_arg
from zgrad.ops import functions
from zgrad.ops.autocast import autocast_op
from zgrad.ops.backward_ops import detached, piecewise_constant
from zgrad.ops.elementwise import Tanh, formula_add, formula_exp, formula_mul, formula_square, formula_sub
from zgrad.ops.unary_math import UNARY_OPS

__all__ = ["Gelu", "LeakyRelu", "elu", "gelu", "leaky_relu", "prelu", "relu"]

GELU_APPROXIMATIONS = ("none", "tanh")


class Gelu(Op):
    """x * Phi(x) (Phi the standard normal CDF), or 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, tanh_approximation):
        ctx.save_for_backward(x)
        ctx.tanh_approximation = tanh_approximation
        return DS.gelu(x, tanh_approximation)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if on_graph(grad, x):
            return formula_mul(grad, _gelu_derivative(x, ctx.tanh_approximation)), None
        return DS.gelu_backward(grad, x, ctx.tanh_approximation), None


_GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)
_GELU_TANH_CUBIC = 0.044715


def _gelu_derivative(x, tanh_approximation):
    """d gelu / dx as a formula: Phi(x) + x phi(x), or the derivative of the tanh form."""
    if not tanh_approximation:
        cdf = formula_mul(formula_add(UNARY_OPS["erf"].apply(formula_mul(x, math.sqrt(0.5))), 1), 0.5)
        pdf = formula_mul(formula_exp(formula_mul(formula_square(x), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
        return formula_add(cdf, formula_mul(x, pdf))
    inner = formula_mul(formula_add(x, formula_mul(formula_mul(formula_square(x), x), _GELU_TANH_CUBIC)),
                        _GELU_TANH_SCALE)
    t = Tanh.apply(inner)
    slope = formula_mul(formula_add(formula_mul(formula_square(x), 3 * _GELU_TANH_CUBIC), 1), _GELU_TANH_SCALE)
    return formula_add(formula_mul(formula_add(t, 1), 0.5),
                       formula_mul(formula_mul(formula_mul(x, 0.5), formula_sub(1, formula_square(t))), slope))


class LeakyRelu(Op):
    """x if x > 0 else negative_slope * x."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, negative_slope):
        ctx.save_for_backward(x)
        ctx.negative_slope = negative_slope
        return DS.leaky_relu(x, negative_slope)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if on_graph(grad):  # the slope is constant: the derivative is grad times 1 or negative_slope
            values = detached(x)
            ones = dispatch.full(values.shape, 1, values.dtype, dispatch.device_type_of(values))
            slopes = DS.leaky_relu_backward(ones, values, ctx.negative_slope)
            return formula_mul(grad, piecewise_constant(x, slopes)), None
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


def _elu(x: Any, alpha: float) -> Any:
    """x where x > 0, else alpha * (exp(x) - 1); exp reads min(x, 0), so a large x gives no inf
    (whose zero gradient would turn into NaN)."""
    return ops.where(x > 0, x, (ops.exp(ops.clamp(x, max=0)) - 1) * alpha)


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:  # noqa: A002
    """The exponential linear unit: x if x > 0 else alpha * (exp(x) - 1); ``inplace`` writes into
    ``input`` (recorded in the graph where it must be).

    Raises:
        DTypeError: a non-floating input.
    """
    x = require_kinds(tensor_arg(input, "elu"), "elu", "f")
    alpha = float(alpha)
    if not inplace:
        return _elu(x, alpha)
    return x._inplace(lambda: dispatch_pointwise.write(x._data, _elu(x.detach(), alpha)._data),
                      lambda old: _elu(old, alpha))


@autocast_op()
def prelu(input: Any, weight: Any) -> Any:  # noqa: A002
    """max(0, x) + weight * min(0, x), ``weight`` one slope or one per channel (dimension 1).

    Raises:
        RuntimeError: a weight that is neither one element nor one per channel (PyTorch's message).
    """
    x, w = tensor_arg(input, "prelu", "input"), tensor_arg(weight, "prelu", "weight")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.numel() != 1 and w.numel() != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{w.numel()} and channel size = {channels}.")
    w = ops.reshape(w, (w.numel(),) + (1,) * (x.ndim - 2) if x.ndim >= 2 else ())
    return ops.where(x > 0, x, w * x)

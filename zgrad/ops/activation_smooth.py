"""Smooth activations, each one fused kernel forward and one backward: SiLU (x * sigmoid(x)),
Mish (x * tanh(softplus(x))) and Softplus (log(1 + exp(beta x)) / beta, linear above
``threshold``). Backward is the fused derivative kernel on arrays, and the same derivative as a
formula of recorded ops in a pass with create_graph=True."""

from __future__ import annotations

from typing import Any

from zgrad.autograd.function import Op, on_graph
from zgrad.kernels import dispatch, dispatch_pointwise, dispatch_sequence as DS
from zgrad.ops.backward_ops import detached
from zgrad.ops.elementwise import Sigmoid, Tanh, formula_add, formula_mul, formula_square, formula_sub
from zgrad.ops._args import require_kinds, tensor_arg

__all__ = ["SmoothActivation", "mish", "silu", "softplus"]


class SmoothActivation(Op):
    """``name``(x) for ``name`` in silu, mish, softplus; ``beta`` and ``threshold`` are Softplus's."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, name, beta, threshold):
        ctx.save_for_backward(x)
        ctx.options = (name, beta, threshold)
        return DS.smooth_activation(x, name, beta, threshold)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if on_graph(grad, x):
            return formula_mul(grad, _derivative(x, *ctx.options)), None, None, None
        return DS.smooth_activation_backward(grad, x, *ctx.options), None, None, None


def _derivative(x: Any, name: str, beta: float, threshold: float) -> Any:
    """d name(x) / dx as a formula of recorded ops."""
    if name == "silu":
        s = Sigmoid.apply(x)
        return formula_mul(s, formula_add(formula_mul(x, formula_sub(1, s)), 1))
    if name == "mish":
        t = Tanh.apply(SmoothActivation.apply(x, "softplus", 1.0, 20.0))
        return formula_add(t, formula_mul(formula_mul(x, formula_sub(1, formula_square(t))), Sigmoid.apply(x)))
    # softplus: sigmoid(beta x), and 1 where beta x > threshold (the linear part)
    linear = dispatch.cast(dispatch_pointwise.compare("gt", dispatch.binary("mul", detached(x), beta), threshold),
                           x.dtype)
    curved = dispatch.binary("sub", 1, linear)
    return formula_add(formula_mul(Sigmoid.apply(formula_mul(x, beta)), curved), linear)


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

"""Element-wise special functions of two tensors: the Hurwitz zeta function ``zeta`` and the
regularized incomplete gamma functions ``gammainc`` / ``gammaincc`` (``igamma`` / ``igammac``),
broadcast with PyTorch's type promotion (the dtype rules live in
:mod:`zgrad.kernels.dispatch_math`).

PyTorch differentiates the incomplete gamma functions in their second argument only, and zeta in
neither: asking for those gradients raises its NotImplementedError, at the backward pass.
"""

from __future__ import annotations

from typing import Any

from zgrad.autograd.function import Op
from zgrad.errors import DTypeError
from zgrad.kernels import dispatch, dispatch_math
from zgrad.kernels.promotion import is_floating, opmath_dtype, result_type
from zgrad.ops._args import operand, tensor_arg
from zgrad.ops.out_argument import accepts_out
from zgrad.tensor import Tensor

__all__ = ["zeta", "gammainc", "gammaincc", "igamma", "igammac"]


def _not_implemented(what: str) -> NotImplementedError:
    return NotImplementedError(f"the derivative for '{what}' is not implemented.")


class Zeta(Op):
    """zeta(x, q) = sum_k (k + q)^-x; no derivative (as PyTorch)."""

    @staticmethod
    def forward(ctx, x, q):
        return dispatch_math.binary_math("zeta", x, q)

    @staticmethod
    def backward(ctx, grad):
        raise _not_implemented("zeta")


class _IncompleteGamma(Op):
    """P(a, x) (``function`` "igamma") or Q(a, x) = 1 - P(a, x) ("igammac"); the derivative in x
    is +-x^(a-1) e^-x / Gamma(a), the one in a is not implemented (as PyTorch)."""

    function = ""

    @classmethod
    def forward(cls, ctx, a, x):
        ctx.save_for_backward(a, x)
        return dispatch_math.binary_math(cls.function, a, x)

    @classmethod
    def backward(cls, ctx, grad):
        if ctx.needs_input_grad[0]:
            raise _not_implemented(f"{cls.function}: input")
        a, x = ctx.saved_tensors
        slope = dispatch_math.binary_math("igamma_derivative", a, x)
        if cls.function == "igammac":
            slope = dispatch.unary("neg", slope)
        return None, dispatch.binary("mul", grad, slope)


class Gammainc(_IncompleteGamma):
    function = "igamma"


class Gammaincc(_IncompleteGamma):
    function = "igammac"


@accepts_out()
def zeta(input: Any, other: Any) -> Any:  # noqa: A002 - torch's argument names
    """The Hurwitz zeta function sum_k (k + other)^-input of each pair of elements (either may be
    a number): inf at input = 1 and where other is a non-positive integer, NaN for input < 1.

    Raises:
        TypeError: neither ``input`` nor ``other`` is a tensor. DTypeError: float16 or bfloat16
            (PyTorch has no kernel for them).
    """
    x, q = operand(input), operand(other)
    if not isinstance(x, Tensor) and not isinstance(q, Tensor):
        raise TypeError(f"special_zeta() expects a Tensor as input or other; got {type(x).__name__} and "
                        f"{type(q).__name__}")
    dtype = result_type(*(v._data if isinstance(v, Tensor) else v for v in (x, q)))
    if is_floating(dtype) and opmath_dtype(dtype) != dtype:
        raise DTypeError(f'"zeta_cpu" not implemented for \'{dispatch.scalar_type_name(dtype)}\'')
    return Zeta.apply(x, q)


@accepts_out()
def gammainc(input: Any, other: Any) -> Any:  # noqa: A002
    """The regularized lower incomplete gamma function P(input, other) of each pair of elements
    (floating tensors), differentiable in ``other``.

    Raises:
        DTypeError: integer or bool tensors (PyTorch has no kernel for them).
    """
    return Gammainc.apply(tensor_arg(input, "gammainc"), tensor_arg(other, "gammainc", "other"))


@accepts_out()
def gammaincc(input: Any, other: Any) -> Any:  # noqa: A002
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P(input, other) of
    each pair of elements (floating tensors), differentiable in ``other``.

    Raises:
        DTypeError: integer or bool tensors (PyTorch has no kernel for them).
    """
    return Gammaincc.apply(tensor_arg(input, "gammaincc"), tensor_arg(other, "gammaincc", "other"))


igamma, igammac = gammainc, gammaincc

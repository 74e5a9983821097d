"""Element-wise floating functions of one tensor: trigonometric and hyperbolic functions and their
inverses, the error functions, logarithms and exponentials of other bases, ``rsqrt`` and
``reciprocal``. Bool and integer tensors compute in the default dtype, as in PyTorch (the rule
lives in :mod:`zgrad.kernels.dispatch_math`).

Each op saves what its derivative reads (the input, or the output where the derivative is
cheaper from it, as PyTorch's formulas do) and writes the derivative right under its forward, in
the ``formula_*`` arithmetic, so that it is differentiable again (create_graph).
"""

from __future__ import annotations

import math
from typing import Any

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch_math
from zgrad.ops.elementwise import formula_add, formula_div, formula_exp, formula_mul, formula_neg, formula_sub
from zgrad.ops._args import tensor_arg
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out
from zgrad.tensor import Tensor

__all__ = [
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsin", "arccos",
    "arctan", "arcsinh", "arccosh", "arctanh", "erf", "erfc", "erfinv", "log1p", "expm1", "log2", "log10", "exp2",
    "rsqrt", "reciprocal", "UNARY_OPS", "UnaryMath",
]


def _fn(name: str, x: Any) -> Any:
    return UNARY_OPS[name].apply(x) if isinstance(x, Tensor) else dispatch_math.unary_math(name, x)


_mul, _div = formula_mul, formula_div


def _square(x: Any) -> Any:
    return formula_mul(x, x)


def _one_minus_square(x: Any) -> Any:
    return formula_sub(1, _square(x))


class UnaryMath(Op):
    """``function``(x) on the math kernel of that name; ``derivative(grad, saved)`` is the
    backward, from the output where ``saves_output``, else from the input."""

    function = ""
    saves_output = False
    differentiable_backward = True

    @classmethod
    def forward(cls, ctx, x):
        out = _fn(cls.function, x)
        ctx.save_for_backward(out if cls.saves_output else x)
        return out

    @classmethod
    def backward(cls, ctx, grad):
        (saved,) = ctx.saved_tensors
        return cls.derivative(grad, saved)

    @staticmethod
    def derivative(grad: Any, saved: Any) -> Any:
        raise NotImplementedError


class Sin(UnaryMath):
    function = "sin"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _fn("cos", x))


class Cos(UnaryMath):
    function = "cos"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, formula_neg(_fn("sin", x)))


class Tan(UnaryMath):
    function = "tan"
    saves_output = True

    @staticmethod
    def derivative(grad, y):
        return _mul(grad, formula_add(_square(y), 1))


class Asin(UnaryMath):
    function = "asin"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _fn("rsqrt", _one_minus_square(x)))


class Acos(UnaryMath):
    function = "acos"

    @staticmethod
    def derivative(grad, x):
        return _mul(formula_neg(grad), _fn("rsqrt", _one_minus_square(x)))


class Atan(UnaryMath):
    function = "atan"

    @staticmethod
    def derivative(grad, x):
        return _div(grad, formula_add(_square(x), 1))


class Sinh(UnaryMath):
    function = "sinh"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _fn("cosh", x))


class Cosh(UnaryMath):
    function = "cosh"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _fn("sinh", x))


class Asinh(UnaryMath):
    function = "asinh"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _fn("rsqrt", formula_add(_square(x), 1)))


class Acosh(UnaryMath):
    function = "acosh"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _fn("rsqrt", formula_sub(_square(x), 1)))


class Atanh(UnaryMath):
    function = "atanh"

    @staticmethod
    def derivative(grad, x):
        return _div(grad, _one_minus_square(x))


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


class Erf(UnaryMath):
    function = "erf"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _mul(formula_exp(formula_neg(_square(x))), _TWO_OVER_SQRT_PI))


class Erfc(UnaryMath):
    function = "erfc"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _mul(formula_exp(formula_neg(_square(x))), -_TWO_OVER_SQRT_PI))


class Erfinv(UnaryMath):
    function = "erfinv"
    saves_output = True

    @staticmethod
    def derivative(grad, y):
        return _mul(grad, _mul(formula_exp(_square(y)), 1.0 / _TWO_OVER_SQRT_PI))


class Log1p(UnaryMath):
    function = "log1p"

    @staticmethod
    def derivative(grad, x):
        return _div(grad, formula_add(x, 1))


class Expm1(UnaryMath):
    function = "expm1"
    saves_output = True

    @staticmethod
    def derivative(grad, y):
        return _mul(grad, formula_add(y, 1))


class Log2(UnaryMath):
    function = "log2"

    @staticmethod
    def derivative(grad, x):
        return _div(grad, _mul(x, math.log(2.0)))


class Log10(UnaryMath):
    function = "log10"

    @staticmethod
    def derivative(grad, x):
        return _div(grad, _mul(x, math.log(10.0)))


class Exp2(UnaryMath):
    function = "exp2"
    saves_output = True

    @staticmethod
    def derivative(grad, y):
        return _mul(grad, _mul(y, math.log(2.0)))


class Rsqrt(UnaryMath):
    function = "rsqrt"
    saves_output = True

    @staticmethod
    def derivative(grad, y):
        return _mul(_mul(grad, -0.5), _mul(y, _square(y)))


class Reciprocal(UnaryMath):
    function = "reciprocal"
    saves_output = True

    @staticmethod
    def derivative(grad, y):
        return _mul(formula_neg(grad), _square(y))


# The public functions, by name: each is ``Op.apply`` on its tensor argument.
UNARY_OPS: dict[str, type[UnaryMath]] = {
    op.function: op for op in (Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Erf, Erfc, Erfinv,
                               Log1p, Expm1, Log2, Log10, Exp2, Rsqrt, Reciprocal)
}


def _apply(name: str, input: Any) -> Any:  # noqa: A002 - torch's argument name
    return UNARY_OPS[name].apply(tensor_arg(input, name))


@accepts_out()
def sin(input: Any) -> Any:  # noqa: A002
    """Sine of each element (radians)."""
    return _apply("sin", input)


@accepts_out()
def cos(input: Any) -> Any:  # noqa: A002
    """Cosine of each element (radians)."""
    return _apply("cos", input)


@accepts_out()
@autocast_op()
def tan(input: Any) -> Any:  # noqa: A002
    """Tangent of each element (radians)."""
    return _apply("tan", input)


@accepts_out()
@autocast_op()
def asin(input: Any) -> Any:  # noqa: A002
    """Arcsine of each element; NaN outside [-1, 1]."""
    return _apply("asin", input)


@accepts_out()
@autocast_op()
def acos(input: Any) -> Any:  # noqa: A002
    """Arccosine of each element; NaN outside [-1, 1]."""
    return _apply("acos", input)


@accepts_out()
def atan(input: Any) -> Any:  # noqa: A002
    """Arctangent of each element, in (-pi/2, pi/2)."""
    return _apply("atan", input)


@accepts_out()
@autocast_op()
def sinh(input: Any) -> Any:  # noqa: A002
    """Hyperbolic sine of each element."""
    return _apply("sinh", input)


@accepts_out()
@autocast_op()
def cosh(input: Any) -> Any:  # noqa: A002
    """Hyperbolic cosine of each element."""
    return _apply("cosh", input)


@accepts_out()
def asinh(input: Any) -> Any:  # noqa: A002
    """Inverse hyperbolic sine of each element."""
    return _apply("asinh", input)


@accepts_out()
def acosh(input: Any) -> Any:  # noqa: A002
    """Inverse hyperbolic cosine of each element; NaN below 1."""
    return _apply("acosh", input)


@accepts_out()
def atanh(input: Any) -> Any:  # noqa: A002
    """Inverse hyperbolic tangent of each element; +-inf at +-1, NaN outside [-1, 1]."""
    return _apply("atanh", input)


@accepts_out()
def erf(input: Any) -> Any:  # noqa: A002
    """The error function of each element."""
    return _apply("erf", input)


@accepts_out()
def erfc(input: Any) -> Any:  # noqa: A002
    """The complementary error function 1 - erf(x) of each element, accurate for large x."""
    return _apply("erfc", input)


@accepts_out()
@autocast_op()
def erfinv(input: Any) -> Any:  # noqa: A002
    """The inverse error function of each element; +-inf at +-1, NaN outside [-1, 1]."""
    return _apply("erfinv", input)


@accepts_out()
@autocast_op()
def log1p(input: Any) -> Any:  # noqa: A002
    """log(1 + x) of each element, accurate for small x."""
    return _apply("log1p", input)


@accepts_out()
@autocast_op()
def expm1(input: Any) -> Any:  # noqa: A002
    """exp(x) - 1 of each element, accurate for small x."""
    return _apply("expm1", input)


@accepts_out()
@autocast_op()
def log2(input: Any) -> Any:  # noqa: A002
    """Base-2 logarithm of each element."""
    return _apply("log2", input)


@accepts_out()
@autocast_op()
def log10(input: Any) -> Any:  # noqa: A002
    """Base-10 logarithm of each element."""
    return _apply("log10", input)


@accepts_out()
def exp2(input: Any) -> Any:  # noqa: A002
    """2 ** x of each element."""
    return _apply("exp2", input)


@accepts_out()
@autocast_op()
def rsqrt(input: Any) -> Any:  # noqa: A002
    """1 / sqrt(x) of each element."""
    return _apply("rsqrt", input)


@accepts_out()
@autocast_op()
def reciprocal(input: Any) -> Any:  # noqa: A002
    """1 / x of each element (integers give the default float dtype, as in PyTorch)."""
    return _apply("reciprocal", input)


arcsin, arccos, arctan = asin, acos, atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh

"""Element-wise special functions of one tensor: ``lgamma``, ``digamma``, ``polygamma``,
``mvlgamma``, the modified Bessel functions ``i0``, ``i0e``, ``i1``, ``i1e``, the scaled
complementary error function ``erfcx`` and ``log_ndtr``; and torch.special's
``modified_bessel_i0``, ``modified_bessel_i1``, ``spherical_bessel_j0`` and the Bessel functions
``bessel_j0``, ``bessel_j1``, ``bessel_y0``, ``bessel_y1``, ``modified_bessel_k0``, ``modified_bessel_k1``
and their scaled forms, which PyTorch does not differentiate. Bool and integer tensors compute in the
default dtype, as in PyTorch (the rule lives in :mod:`zgrad.kernels.dispatch_math`).

Each op writes its derivative right under its forward, as PyTorch's formulas: lgamma' = digamma,
digamma' = polygamma(1), polygamma(n)' = polygamma(n + 1), i0' = i1, and so on.
"""

from __future__ import annotations

import math
from typing import Any

from zgrad.autograd.function import Op
from zgrad.creation import tensor
from zgrad.errors import DTypeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_math, dispatch_pointwise
from zgrad.kernels.promotion import get_default_dtype, is_floating, opmath_dtype
from zgrad.ops import functions, reduce, shape
from zgrad.ops._args import tensor_arg
from zgrad.ops.out_argument import accepts_out
from zgrad.ops.unary_math import UnaryMath
from zgrad.tensor import Tensor

__all__ = [
    "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "i0e", "i1", "i1e", "erfcx", "log_ndtr", "modified_bessel_i0",
    "modified_bessel_i1", "spherical_bessel_j0", "bessel_j0", "bessel_j1",
    "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_ONE_OVER_SQRT_TWO_PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)


def _fn(name: str, x: Any) -> Any:
    return dispatch_math.unary_math(name, x)


def _mul(a: Any, b: Any) -> Any:
    return dispatch.binary("mul", a, b)


def _sub(a: Any, b: Any) -> Any:
    return dispatch.binary("sub", a, b)


def _at_zero(x: Any, value: float, elsewhere: Any) -> Any:
    """``elsewhere``, with ``value`` where x is 0 (a removable singularity of its formula)."""
    return dispatch_index.where(dispatch_pointwise.compare("eq", x, 0), value, elsewhere)


def _polygamma(n: int, x: Any) -> Any:
    """The n-th derivative of digamma at x: digamma and trigamma on their kernels, higher orders
    as (-1)^(n+1) n! zeta(n + 1, x)."""
    if n == 0:
        return _fn("digamma", x)
    if n == 1:
        return _fn("trigamma", x)
    zeta = dispatch_math.binary_math("zeta", float(n + 1), x)
    return _mul(zeta, (1.0 if n % 2 else -1.0) * math.factorial(n))


class Lgamma(UnaryMath):
    function = "lgamma"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _fn("digamma", x))


class Digamma(UnaryMath):
    function = "digamma"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _fn("trigamma", x))


class Polygamma(Op):
    """polygamma(n, x), the n-th derivative of digamma; its derivative is polygamma(n + 1, x)."""

    @staticmethod
    def forward(ctx, x, n):
        ctx.save_for_backward(x)
        ctx.n = n
        return _polygamma(n, x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return _mul(grad, _polygamma(ctx.n + 1, x)), None


class I0(UnaryMath):
    function = "i0"

    @staticmethod
    def derivative(grad, x):
        return _mul(grad, _fn("i1", x))


class I0e(UnaryMath):
    function = "i0e"

    @staticmethod
    def derivative(grad, x):  # i1e(x) - sign(x) i0e(x)
        return _mul(grad, _sub(_fn("i1e", x), _mul(dispatch_math.sign(x), _fn("i0e", x))))


class I1(UnaryMath):
    function = "i1"

    @staticmethod
    def derivative(grad, x):  # i0(x) - i1(x) / x, 1/2 at 0
        slope = _sub(_fn("i0", x), dispatch.binary("div", _fn("i1", x), x))
        return _mul(grad, _at_zero(x, 0.5, slope))


class I1e(UnaryMath):
    function = "i1e"

    @staticmethod
    def derivative(grad, x):  # i0e(x) - i1e(x) (sign(x) + 1/x), 1/2 at 0
        factor = dispatch.binary("add", dispatch_math.sign(x), dispatch.binary("div", 1, x))
        slope = _sub(_fn("i0e", x), _mul(_fn("i1e", x), factor))
        return _mul(grad, _at_zero(x, 0.5, slope))


class Erfcx(UnaryMath):
    function = "erfcx"

    @staticmethod
    def derivative(grad, x):  # 2x erfcx(x) - 2/sqrt(pi)
        return _mul(grad, _sub(_mul(_mul(x, _fn("erfcx", x)), 2.0), _TWO_OVER_SQRT_PI))


class LogNdtr(Op):
    """log of the standard normal CDF: log(erfcx(-x/sqrt 2) / 2) - x^2/2 below -1 (no underflow
    in the lower tail), log1p(-erfc(x/sqrt 2) / 2) above (no cancellation in the upper one). Its
    derivative is the normal density over the CDF, exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi)."""

    @staticmethod
    def forward(ctx, x):
        scaled = _mul(x, _SQRT_HALF)
        half_square = _mul(_mul(x, x), 0.5)
        lower = _sub(dispatch.unary("log", _mul(_fn("erfcx", dispatch.unary("neg", scaled)), 0.5)), half_square)
        upper = _fn("log1p", _mul(_fn("erfc", scaled), -0.5))
        out = dispatch_index.where(dispatch_pointwise.compare("lt", x, -1.0), lower, upper)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        exponent = dispatch.unary("neg", dispatch.binary("add", _mul(_mul(x, x), 0.5), out))
        return _mul(grad, _mul(dispatch.unary("exp", exponent), _ONE_OVER_SQRT_TWO_PI))


def _apply(op: type[UnaryMath], input: Any) -> Any:  # noqa: A002 - torch's argument name
    return op.apply(tensor_arg(input, op.function))


@accepts_out()
def lgamma(input: Any) -> Any:  # noqa: A002
    """log |Gamma(x)| of each element; inf at 0 and the negative integers."""
    return _apply(Lgamma, input)


@accepts_out()
def digamma(input: Any) -> Any:  # noqa: A002
    """The logarithmic derivative of Gamma, psi(x) = Gamma'(x) / Gamma(x), of each element: -inf at
    +0, inf at -0, NaN at the negative integers (as PyTorch and SciPy)."""
    return _apply(Digamma, input)


@accepts_out()
def polygamma(n: int, input: Any) -> Any:  # noqa: A002
    """The ``n``-th derivative of digamma at each element (``polygamma(0, x)`` is digamma).

    Raises:
        RuntimeError: a negative ``n`` (PyTorch's message).
    """
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return Polygamma.apply(tensor_arg(input, "polygamma"), int(n))


@accepts_out()
def mvlgamma(input: Any, p: int) -> Any:  # noqa: A002
    """The multivariate log-gamma function of dimension ``p`` of each element:
    p(p-1)/4 log(pi) + sum_{i<p} lgamma(x - i/2), differentiable through lgamma.

    Raises:
        RuntimeError: ``p`` below 1, or a bool tensor (PyTorch's messages).
    """
    x = tensor_arg(input, "mvlgamma")
    if x.dtype.kind == "b":
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not is_floating(x.dtype):
        x = x.to(get_default_dtype())
    offsets = tensor([-0.5 * i for i in range(p)], x.dtype, device=x.device)
    terms = lgamma(functions.add(shape.unsqueeze(x, -1), offsets))
    return functions.add(reduce.sum(terms, -1), p * (p - 1) / 4 * math.log(math.pi))


@accepts_out()
def i0(input: Any) -> Any:  # noqa: A002
    """The modified Bessel function of the first kind of order 0 of each element."""
    return _apply(I0, input)


@accepts_out()
def i0e(input: Any) -> Any:  # noqa: A002
    """exp(-|x|) i0(x) of each element: i0 without its overflow."""
    return _apply(I0e, input)


@accepts_out()
def i1(input: Any) -> Any:  # noqa: A002
    """The modified Bessel function of the first kind of order 1 of each element."""
    return _apply(I1, input)


@accepts_out()
def i1e(input: Any) -> Any:  # noqa: A002
    """exp(-|x|) i1(x) of each element."""
    return _apply(I1e, input)


def _refuse_half(name: str, x: Any) -> Any:
    """``x``, unless a float16 or bfloat16 tensor, which PyTorch has no kernel of ``name`` for."""
    if is_floating(x.dtype) and opmath_dtype(x.dtype) != x.dtype:
        raise DTypeError(f'"{name}_cpu" not implemented for \'{dispatch.scalar_type_name(x.dtype)}\'')
    return x


@accepts_out()
def erfcx(input: Any) -> Any:  # noqa: A002
    """The scaled complementary error function exp(x^2) erfc(x) of each element, which keeps its
    precision where erfc underflows.

    Raises:
        DTypeError: a float16 or bfloat16 tensor (PyTorch has no kernel for them).
    """
    return Erfcx.apply(_refuse_half("erfcx", tensor_arg(input, "erfcx")))


@accepts_out()
def log_ndtr(input: Any) -> Any:  # noqa: A002
    """log of the standard normal CDF at each element, accurate in both tails.

    Raises:
        DTypeError: a float16 or bfloat16 tensor (PyTorch has no kernel for them).
    """
    x = _refuse_half("log_ndtr", tensor_arg(input, "log_ndtr"))
    return LogNdtr.apply(x if is_floating(x.dtype) else x.to(get_default_dtype()))


def _without_gradient(name: str, compute: Any, input: Any) -> Any:  # noqa: A002
    """compute(x's array) as a tensor that does not require grad (PyTorch defines no derivative),
    bool and integer tensors in the default dtype.

    Raises:
        DTypeError: a float16 or bfloat16 tensor (PyTorch has no kernel for them).
    """
    x = _refuse_half(name, tensor_arg(input, name))
    if not is_floating(x.dtype):
        x = x.to(get_default_dtype())
    return Tensor(compute(x._data))


@accepts_out()
def modified_bessel_i0(input: Any) -> Any:  # noqa: A002
    """I0 of each element (the values of :func:`i0`), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("modified_bessel_i0", lambda x: _fn("i0", x), input)


@accepts_out()
def modified_bessel_i1(input: Any) -> Any:  # noqa: A002
    """I1 of each element (the values of :func:`i1`), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("modified_bessel_i1", lambda x: _fn("i1", x), input)


def _spherical_j0(x: Any) -> Any:
    """sin(x) / x, 1 at 0 and 0 at +-inf (where sin is NaN)."""
    compare, where = dispatch_pointwise.compare, dispatch_index.where
    safe = where(compare("eq", x, 0), 1, x)
    ratio = dispatch.binary("div", _fn("sin", safe), safe)
    return where(compare("eq", x, 0), 1, where(_fn("isinf", x), 0, ratio))


@accepts_out()
def spherical_bessel_j0(input: Any) -> Any:  # noqa: A002
    """The spherical Bessel function of the first kind of order 0, sin(x) / x, of each element
    (1 at 0, 0 at +-inf), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("spherical_bessel_j0", _spherical_j0, input)


@accepts_out()
def bessel_j0(input: Any) -> Any:  # noqa: A002
    """The Bessel function of the first kind of order 0 of each element (0 at +-inf; PyTorch's is
    NaN there), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("bessel_j0", lambda x: _fn("bessel_j0", x), input)


@accepts_out()
def bessel_j1(input: Any) -> Any:  # noqa: A002
    """The Bessel function of the first kind of order 1 of each element (0 at +-inf; PyTorch's is
    NaN there), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("bessel_j1", lambda x: _fn("bessel_j1", x), input)


@accepts_out()
def bessel_y0(input: Any) -> Any:  # noqa: A002
    """The Bessel function of the second kind of order 0 of each element (-inf at 0, NaN below, 0
    at inf; PyTorch's is NaN there), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("bessel_y0", lambda x: _fn("bessel_y0", x), input)


@accepts_out()
def bessel_y1(input: Any) -> Any:  # noqa: A002
    """The Bessel function of the second kind of order 1 of each element (-inf at 0, NaN below, 0
    at inf; PyTorch's is NaN there), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("bessel_y1", lambda x: _fn("bessel_y1", x), input)

@accepts_out()
def modified_bessel_k0(input: Any) -> Any:  # noqa: A002
    """the modified Bessel function of the second kind of order 0 of each element
    (inf at 0, NaN below, 0 at inf; PyTorch's is NaN there), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("modified_bessel_k0", lambda x: _fn("modified_bessel_k0", x), input)

@accepts_out()
def modified_bessel_k1(input: Any) -> Any:  # noqa: A002
    """the modified Bessel function of the second kind of order 1 of each element
    (inf at 0, NaN below, 0 at inf; PyTorch's is NaN there), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("modified_bessel_k1", lambda x: _fn("modified_bessel_k1", x), input)

@accepts_out()
def scaled_modified_bessel_k0(input: Any) -> Any:  # noqa: A002
    """exp(x) times the modified Bessel function of the second kind of order 0 of each element
    (inf at 0, NaN below, 0 at inf; PyTorch's is NaN there), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("scaled_modified_bessel_k0", lambda x: _fn("scaled_modified_bessel_k0", x), input)

@accepts_out()
def scaled_modified_bessel_k1(input: Any) -> Any:  # noqa: A002
    """exp(x) times the modified Bessel function of the second kind of order 1 of each element
    (inf at 0, NaN below, 0 at inf; PyTorch's is NaN there), not differentiable, as torch.special's.

    Raises:
        DTypeError: a float16 or bfloat16 tensor.
    """
    return _without_gradient("scaled_modified_bessel_k1", lambda x: _fn("scaled_modified_bessel_k1", x), input)

"""Element-wise rounding, sign and clean-up functions (``floor``, ``ceil``, ``round``, ``trunc``,
``fix``, ``frac``, ``sign``, ``sgn``, ``nan_to_num``, ``clamp_min``, ``clamp_max``) and the
predicates (``isnan``, ``isinf``, ``isposinf``, ``isneginf``, ``isfinite``, ``signbit``).

Rounding and sign keep an integer tensor's dtype, and their gradient is zero everywhere (PyTorch's
convention at the jumps too); the predicates give bool tensors, which carry no gradient.
"""

from __future__ import annotations

from typing import Any

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch, dispatch_math
from zgrad.ops._args import tensor_arg
from zgrad.ops.elementwise import Clamp, clamp_bounds
from zgrad.tensor import Tensor
from zgrad.ops.out_argument import accepts_out

__all__ = [
    "floor", "ceil", "round", "trunc", "fix", "frac", "sign", "sgn", "nan_to_num", "clamp_min", "clamp_max",
    "isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit", "zeros_like_gradient",
]


def zeros_like_gradient(grad: Any) -> Any:
    """A zero gradient of ``grad``'s shape, dtype and device (the derivative of a step function)."""
    return dispatch.full(grad.shape, 0, grad.dtype, dispatch.device_type_of(grad))


class Step(Op):
    """A piecewise-constant function (``function`` of the math kernels, or ``sign``): zero gradient."""

    @staticmethod
    def forward(ctx, x, function):
        if function == "sign":
            return dispatch_math.sign(x)
        return dispatch_math.unary_math(function, x)

    @staticmethod
    def backward(ctx, grad):
        return zeros_like_gradient(grad), None


class RoundDecimals(Op):
    """round(x * 10**decimals) / 10**decimals; zero gradient."""

    @staticmethod
    def forward(ctx, x, decimals):
        return dispatch_math.round_decimals(x, decimals)

    @staticmethod
    def backward(ctx, grad):
        return zeros_like_gradient(grad), None


class Frac(Op):
    """x - trunc(x); its gradient passes unchanged."""

    @staticmethod
    def forward(ctx, x):
        return dispatch_math.unary_math("frac", x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class NanToNum(Op):
    """x with NaN and infinities replaced; the gradient passes where x is finite."""

    @staticmethod
    def forward(ctx, x, nan, posinf, neginf):
        ctx.save_for_backward(x)
        return dispatch_math.nan_to_num(x, nan, posinf, neginf)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        finite = dispatch_math.unary_math("isfinite", x)
        return dispatch.binary("mul", grad, finite, dtype=grad.dtype), None, None, None


@accepts_out("exact")
def floor(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """The largest integer <= x of each element; integer tensors come back unchanged (copied)."""
    return Step.apply(tensor_arg(input, "floor"), "floor")


@accepts_out("exact")
def ceil(input: Any) -> Any:  # noqa: A002
    """The smallest integer >= x of each element; integer tensors come back unchanged (copied)."""
    return Step.apply(tensor_arg(input, "ceil"), "ceil")


@accepts_out("exact")
def round(input: Any, *, decimals: int = 0) -> Any:  # noqa: A001,A002 - mirrors torch.round
    """Each element rounded half to even, at ``decimals`` decimal places (negative: tens, hundreds).

    Raises:
        DTypeError: ``decimals`` given for an integer tensor, or a bool tensor.
    """
    input = tensor_arg(input, "round")
    if decimals == 0:
        return Step.apply(input, "round")
    return RoundDecimals.apply(input, int(decimals))


@accepts_out("exact")
def trunc(input: Any) -> Any:  # noqa: A002
    """Each element rounded toward zero."""
    return Step.apply(tensor_arg(input, "trunc"), "trunc")


fix = trunc


@accepts_out("exact")
def frac(input: Any) -> Any:  # noqa: A002
    """x - trunc(x) of each element, with x's sign (floating tensors only)."""
    return Frac.apply(tensor_arg(input, "frac"))


@accepts_out("exact")
def sign(input: Any) -> Any:  # noqa: A002
    """-1, 0 or 1 by each element's sign (0 for NaN), in the input's dtype."""
    return Step.apply(tensor_arg(input, "sign"), "sign")


sgn = sign  # PyTorch's sgn differs from sign only on complex tensors, which zgrad has not


@accepts_out("exact")
def nan_to_num(input: Any, nan: float = 0.0, posinf: float | None = None,  # noqa: A002
               neginf: float | None = None) -> Any:
    """Replace NaN by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (by default the dtype's
    largest and lowest finite values); bool and integer tensors come back unchanged (copied)."""
    return NanToNum.apply(tensor_arg(input, "nan_to_num"), float(nan), posinf, neginf)


@accepts_out("exact")
def clamp_min(input: Any, min: Any) -> Any:  # noqa: A002
    """max(x, min) of each element: :func:`zgrad.clamp` with a lower bound only."""
    return Clamp.apply(tensor_arg(input, "clamp_min"), *clamp_bounds(min, None))


@accepts_out("exact")
def clamp_max(input: Any, max: Any) -> Any:  # noqa: A002
    """min(x, max) of each element: :func:`zgrad.clamp` with an upper bound only."""
    return Clamp.apply(tensor_arg(input, "clamp_max"), *clamp_bounds(None, max))


def _predicate(name: str, input: Any) -> Any:  # noqa: A002
    return Tensor(dispatch_math.unary_math(name, tensor_arg(input, name)._data))


def isnan(input: Any) -> Any:  # noqa: A002
    """A bool tensor: True where the element is NaN."""
    return _predicate("isnan", input)


def isinf(input: Any) -> Any:  # noqa: A002
    """A bool tensor: True where the element is +inf or -inf."""
    return _predicate("isinf", input)


def isposinf(input: Any) -> Any:  # noqa: A002
    """A bool tensor: True where the element is +inf."""
    return _predicate("isposinf", input)


def isneginf(input: Any) -> Any:  # noqa: A002
    """A bool tensor: True where the element is -inf."""
    return _predicate("isneginf", input)


def isfinite(input: Any) -> Any:  # noqa: A002
    """A bool tensor: True where the element is neither NaN nor infinite."""
    return _predicate("isfinite", input)


@accepts_out("exact")
def signbit(input: Any) -> Any:  # noqa: A002
    """A bool tensor: True where the element's sign bit is set (negative numbers, -0.0)."""
    return _predicate("signbit", input)

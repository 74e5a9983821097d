"""Element-wise functions of two tensors (or a tensor and a number), broadcast with PyTorch's type
promotion: ``atan2``, ``fmod``, ``hypot``, ``logaddexp``, ``logaddexp2``, ``copysign``, ``lerp``,
``fmax``, ``fmin``, and the functions that carry no gradient: the bitwise functions of bool and
integer tensors (``bitwise_and`` ... ``bitwise_right_shift``, the operators ``& | ^ ~ << >>``),
``floor_divide`` (``//``), ``gcd``, ``lcm``, ``nextafter`` and ``heaviside``.

A backward returns broadcast-shaped gradients (the engine sums them back to each input's shape)
and None for a number operand.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from zgrad.autograd.function import Op
from zgrad.errors import DTypeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_math, dispatch_pointwise
from zgrad.ops._args import operand, tensor_arg
from zgrad.ops.rounding import zeros_like_gradient
from zgrad.tensor import Tensor
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out

__all__ = [
    "atan2", "arctan2", "fmod", "hypot", "logaddexp", "logaddexp2", "copysign", "lerp", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "floor_divide", "fmax", "fmin", "gcd",
    "lcm", "nextafter", "heaviside",
]


def _mul(a: Any, b: Any) -> Any:
    return dispatch.binary("mul", a, b)


def _div(a: Any, b: Any) -> Any:
    return dispatch.binary("div", a, b)


def _neg(x: Any) -> Any:
    return dispatch.unary("neg", x)


class _BinaryMath(Op):
    """``function``(a, b) on the math kernel of that name; ``gradients(ctx, grad, a, b)`` is the
    backward, from the inputs (and the output where ``saves_output``)."""

    function = ""
    saves_output = False

    @classmethod
    def forward(cls, ctx, a, b):
        out = dispatch_math.binary_math(cls.function, a, b)
        ctx.save_for_backward(a, b, out if cls.saves_output else None)
        return out

    @classmethod
    def backward(cls, ctx, grad):
        a, b, out = ctx.saved_tensors
        ga, gb = cls.gradients(grad, a, b, out)
        return (ga if ctx.needs_input_grad[0] else None), (gb if ctx.needs_input_grad[1] else None)

    @staticmethod
    def gradients(grad: Any, a: Any, b: Any, out: Any) -> tuple[Any, Any]:
        raise NotImplementedError


class Atan2(_BinaryMath):
    function = "atan2"

    @staticmethod
    def gradients(grad, a, b, out):
        scale = _div(grad, dispatch.binary("add", _mul(a, a), _mul(b, b)))
        return _mul(scale, b), _neg(_mul(scale, a))


class Fmod(_BinaryMath):
    function = "fmod"

    @staticmethod
    def gradients(grad, a, b, out):
        quotient = dispatch_math.unary_math("trunc", _div(a, b))
        return grad, _neg(_mul(grad, quotient))


class Hypot(_BinaryMath):
    function = "hypot"
    saves_output = True

    @staticmethod
    def gradients(grad, a, b, out):
        scale = _div(grad, out)
        return _mul(scale, a), _mul(scale, b)


class Logaddexp(_BinaryMath):
    function = "logaddexp"

    @staticmethod
    def gradients(grad, a, b, out):
        def share(x, y):  # grad / (1 + exp(y - x))
            return _div(grad, dispatch.binary("add", dispatch.unary("exp", dispatch.binary("sub", y, x)), 1))
        return share(a, b), share(b, a)


class Logaddexp2(_BinaryMath):
    function = "logaddexp2"

    @staticmethod
    def gradients(grad, a, b, out):
        def share(x, y):  # grad / (1 + 2 ** (y - x))
            return _div(grad, dispatch.binary("add", dispatch_math.unary_math("exp2", dispatch.binary("sub", y, x)), 1))
        return share(a, b), share(b, a)


class Copysign(_BinaryMath):
    """|a| with b's sign: the gradient of a is +-grad (0 where a is 0), none flows to b."""

    function = "copysign"

    @staticmethod
    def gradients(grad, a, b, out):
        b_sign = math.copysign(1.0, b) if isinstance(b, (int, float)) else dispatch_math.binary_math("copysign", 1.0, b)
        return _mul(grad, _mul(dispatch_math.sign(a), b_sign)), zeros_like_gradient(grad)


class _NanIgnoringExtremum(_BinaryMath):
    """fmax or fmin: the larger (smaller) of a and b, the number where the other is NaN. The
    gradient goes to a where a wins, ties included, or b is NaN, else to b (as PyTorch's)."""

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b, None)
        return dispatch_math.binary_math(cls.function, a, b)

    @classmethod
    def backward(cls, ctx, grad):
        a, b, _ = ctx.saved_tensors
        compare = dispatch_pointwise.compare
        a_wins = compare("logical_or", compare("ge" if cls.function == "fmax" else "le", a, b), compare("ne", b, b))
        ga = dispatch_index.where(a_wins, grad, 0) if ctx.needs_input_grad[0] else None
        gb = dispatch_index.where(a_wins, 0, grad) if ctx.needs_input_grad[1] else None
        return ga, gb


class Fmax(_NanIgnoringExtremum):
    function = "fmax"


class Fmin(_NanIgnoringExtremum):
    function = "fmin"


class Lerp(Op):
    """start + weight * (end - start), ``weight`` a number or a tensor; its gradients are
    grad * (1 - weight), grad * weight and grad * (end - start)."""

    @staticmethod
    def forward(ctx, start, end, weight):
        difference = dispatch.binary("sub", end, start) if ctx.needs_input_grad[2] else None
        ctx.save_for_backward(weight, difference)
        return dispatch_math.lerp(start, end, weight)

    @staticmethod
    def backward(ctx, grad):
        weight, difference = ctx.saved_tensors
        needs = ctx.needs_input_grad
        one_minus = 1 - weight if isinstance(weight, (int, float)) else dispatch.binary("sub", 1, weight)
        g_start = _mul(grad, one_minus) if needs[0] else None
        g_end = _mul(grad, weight) if needs[1] else None
        g_weight = _mul(grad, difference) if needs[2] else None
        return g_start, g_end, g_weight


def _binary(op: type[_BinaryMath], input: Any, other: Any, other_may_be_number: bool = False) -> Any:  # noqa: A002
    other = operand(other) if other_may_be_number else tensor_arg(other, op.function, "other")
    return op.apply(tensor_arg(input, op.function), other)


@accepts_out()
@autocast_op()
def atan2(input: Any, other: Any) -> Any:  # noqa: A002
    """atan(input / other) of each pair of elements, in the quadrant of (other, input).

    Raises:
        TypeError: ``other`` is not a tensor (as PyTorch; likewise for hypot and logaddexp).
    """
    return _binary(Atan2, input, other)


arctan2 = atan2


@accepts_out()
def fmod(input: Any, other: Any) -> Any:  # noqa: A002
    """C's remainder of input / other: input - trunc(input / other) * other, with input's sign
    (see :func:`zgrad.remainder` for the divisor's)."""
    return _binary(Fmod, input, other, other_may_be_number=True)


@accepts_out()
def hypot(input: Any, other: Any) -> Any:  # noqa: A002
    """sqrt(input**2 + other**2) of each pair of elements, without overflow (floating tensors only)."""
    return _binary(Hypot, input, other)


@accepts_out()
def logaddexp(input: Any, other: Any) -> Any:  # noqa: A002
    """log(exp(input) + exp(other)) of each pair of elements, without overflow (floating only)."""
    return _binary(Logaddexp, input, other)


@accepts_out()
def logaddexp2(input: Any, other: Any) -> Any:  # noqa: A002
    """log2(2**input + 2**other) of each pair of elements, without overflow (floating only)."""
    return _binary(Logaddexp2, input, other)


@accepts_out()
def copysign(input: Any, other: Any) -> Any:  # noqa: A002
    """|input| with the sign of ``other`` (a tensor or a number), element-wise, in a floating dtype."""
    return _binary(Copysign, input, other, other_may_be_number=True)


@accepts_out()
def lerp(input: Any, end: Any, weight: Any) -> Any:  # noqa: A002
    """input + weight * (end - input): linear interpolation, ``weight`` a number or a tensor.

    Raises:
        DTypeError: the tensors are not floating, or not all of one dtype (as PyTorch).
    """
    start, end = tensor_arg(input, "lerp"), tensor_arg(end, "lerp", "end")
    weight = operand(weight)
    dispatch_math.check_floating("lerp", start.dtype)
    for name, other in (("end", end), ("weight", weight)):
        if isinstance(other, Tensor) and other.dtype != start.dtype:
            raise DTypeError(f"expected dtype {start.dtype} for `{name}` but got dtype {other.dtype}")
    return Lerp.apply(start, end, weight)


def _without_gradient(name: str, compute: Callable[[Any, Any], Any], input: Any, other: Any) -> Any:  # noqa: A002
    """compute(a, b) on the arrays (or numbers) of two operands, one at least a tensor; the result
    carries no gradient."""
    a, b = operand(input), operand(other)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{name}(): expected at least one Tensor, got {type(a).__name__} and {type(b).__name__}")
    return Tensor(compute(*(x._data if isinstance(x, Tensor) else x for x in (a, b))))


def _bitwise(name: str, input: Any, other: Any) -> Any:  # noqa: A002
    return _without_gradient(name, lambda a, b: dispatch_math.binary_math(name, a, b), input, other)


@accepts_out()
def floor_divide(input: Any, other: Any) -> Any:  # noqa: A002
    """floor(input / other) element-wise (the ``//`` operator), in the promoted dtype; not
    differentiable (PyTorch defines no gradient for it)."""
    return _without_gradient("floor_divide", lambda a, b: dispatch.binary("floor_divide", a, b), input, other)


@accepts_out()
def bitwise_and(input: Any, other: Any) -> Any:  # noqa: A002
    """input & other for bool and integer tensors (logical and on bool)."""
    return _bitwise("bitwise_and", input, other)


@accepts_out()
def bitwise_or(input: Any, other: Any) -> Any:  # noqa: A002
    """input | other for bool and integer tensors."""
    return _bitwise("bitwise_or", input, other)


@accepts_out()
def bitwise_xor(input: Any, other: Any) -> Any:  # noqa: A002
    """input ^ other for bool and integer tensors."""
    return _bitwise("bitwise_xor", input, other)


@accepts_out()
def bitwise_left_shift(input: Any, other: Any) -> Any:  # noqa: A002
    """input << other for integer tensors: 0 where the shift is negative or the dtype's width or more."""
    return _bitwise("bitwise_left_shift", input, other)


@accepts_out()
def bitwise_right_shift(input: Any, other: Any) -> Any:  # noqa: A002
    """input >> other for integer tensors (arithmetic for signed dtypes): 0, or -1 for a negative
    input, where the shift is negative or the dtype's width or more."""
    return _bitwise("bitwise_right_shift", input, other)


@accepts_out("exact")
def bitwise_not(input: Any) -> Any:  # noqa: A002
    """~input for bool (logical not) and integer tensors."""
    return Tensor(dispatch_math.unary_math("bitwise_not", tensor_arg(input, "bitwise_not")._data))


@accepts_out()
def fmax(input: Any, other: Any) -> Any:  # noqa: A002
    """The element-wise maximum of two tensors, ignoring NaN: the number where the other is NaN
    (NaN only where both are), in the promoted dtype."""
    return _binary(Fmax, input, other)


@accepts_out()
def fmin(input: Any, other: Any) -> Any:  # noqa: A002
    """The element-wise minimum of two tensors, ignoring NaN (see :func:`fmax`)."""
    return _binary(Fmin, input, other)


def _tensor_pair_without_gradient(name: str, input: Any, other: Any) -> Any:  # noqa: A002
    return _without_gradient(name, lambda a, b: dispatch_math.binary_math(name, a, b), tensor_arg(input, name),
                             tensor_arg(other, name, "other"))


@accepts_out()
def gcd(input: Any, other: Any) -> Any:  # noqa: A002
    """The greatest common divisor of each pair of elements (integer tensors), non-negative;
    gcd(0, 0) = 0.

    Raises:
        DTypeError: bool or floating tensors (as PyTorch).
    """
    return _tensor_pair_without_gradient("gcd", input, other)


@accepts_out()
def lcm(input: Any, other: Any) -> Any:  # noqa: A002
    """The least common multiple of each pair of elements (integer tensors), non-negative; 0 where
    either is 0.

    Raises:
        DTypeError: bool or floating tensors (as PyTorch).
    """
    return _tensor_pair_without_gradient("lcm", input, other)


@accepts_out()
def nextafter(input: Any, other: Any) -> Any:  # noqa: A002
    """The next floating-point value after each element of ``input`` towards ``other``'s (floating
    tensors); not differentiable.

    Raises:
        DTypeError: bool or integer tensors (as PyTorch).
    """
    return _tensor_pair_without_gradient("nextafter", input, other)


@accepts_out()
def heaviside(input: Any, values: Any) -> Any:  # noqa: A002
    """The Heaviside step of each element: 0 below 0, 1 above (and at NaN, 0, as PyTorch),
    ``values`` (broadcast) at 0; not differentiable.

    Raises:
        RuntimeError: the tensors' dtypes differ (PyTorch's message).
    """
    x, values = tensor_arg(input, "heaviside"), tensor_arg(values, "heaviside", "values")
    if x.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")

    def step(a: Any, v: Any) -> Any:
        compare = dispatch_pointwise.compare
        return dispatch_index.where(compare("eq", a, 0), v, dispatch.cast(compare("gt", a, 0), a.dtype))
    return _without_gradient("heaviside", step, x, values)

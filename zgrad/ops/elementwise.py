"""Element-wise ops with numpy broadcasting. Gradients are summed back to each input's shape by
the engine's validation, so a backward here returns the broadcast-shaped gradient.

The ``formula_*`` functions are the arithmetic of backward formulas: on arrays they run the
kernel; when a tensor takes part (a pass with ``create_graph=True`` hands backward tensors) they
apply the op, so the formula is recorded and can be differentiated again. A backward written with
them is differentiable (``differentiable_backward = True``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.kernels import dispatch
from zgrad.kernels import dispatch_index, dispatch_pointwise
from zgrad.ops._args import operand, require_kinds, scalar_arg, tensor_arg
from zgrad.ops.backward_ops import detached, piecewise_constant
from zgrad.tensor import Tensor
from zgrad.ops.out_argument import accepts_out


def formula_add(a: Any, b: Any) -> Any:
    return Add.apply(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else dispatch.binary("add", a, b)


def formula_sub(a: Any, b: Any) -> Any:
    return Sub.apply(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else dispatch.binary("sub", a, b)


def formula_mul(a: Any, b: Any) -> Any:
    return Mul.apply(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else dispatch.binary("mul", a, b)


def formula_div(a: Any, b: Any) -> Any:
    return Div.apply(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else dispatch.binary("div", a, b)


def formula_pow(a: Any, b: Any) -> Any:
    return Pow.apply(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else dispatch.binary("pow", a, b)


def formula_neg(x: Any) -> Any:
    return Neg.apply(x) if isinstance(x, Tensor) else dispatch.unary("neg", x)


def formula_exp(x: Any) -> Any:
    return Exp.apply(x) if isinstance(x, Tensor) else dispatch.unary("exp", x)


def formula_log(x: Any) -> Any:
    return Log.apply(x) if isinstance(x, Tensor) else dispatch.unary("log", x)


def formula_square(x: Any) -> Any:
    return formula_mul(x, x)


def formula_cast(x: Any, dtype: Any) -> Any:
    return Cast.apply(x, dtype) if isinstance(x, Tensor) else dispatch.cast(x, dtype)


class Add(Op):
    differentiable_backward = True
    tensor_operands = 2  # x + 2 lists the 2, as PyTorch's wrapped scalar

    @staticmethod
    def forward(ctx, a, b):
        return dispatch.binary("add", a, b)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class Sub(Op):
    differentiable_backward = True
    tensor_operands = 2  # x + 2 lists the 2, as PyTorch's wrapped scalar

    @staticmethod
    def forward(ctx, a, b):
        return dispatch.binary("sub", a, b)

    @staticmethod
    def backward(ctx, grad):
        return grad, (formula_neg(grad) if ctx.needs_input_grad[1] else None)


class Mul(Op):
    differentiable_backward = True
    tensor_operands = 2  # x + 2 lists the 2, as PyTorch's wrapped scalar

    @staticmethod
    def forward(ctx, a, b):
        # each operand only for the other's gradient (PyTorch saves no more: y = x * 2 leaves x free to change)
        need_a, need_b = ctx.needs_input_grad[:2]
        ctx.save_for_backward(a if need_b else None, b if need_a else None)
        return dispatch.binary("mul", a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = formula_mul(grad, b) if ctx.needs_input_grad[0] else None
        gb = formula_mul(grad, a) if ctx.needs_input_grad[1] else None
        return ga, gb


class Div(Op):
    """a / b. Saves its inputs, not its output (as PyTorch), so the output may change in place."""

    differentiable_backward = True
    tensor_operands = 2  # x + 2 lists the 2, as PyTorch's wrapped scalar

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b)  # a only for b's gradient, as PyTorch
        return dispatch.binary("div", a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = formula_div(grad, b) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:
            gb = formula_neg(formula_div(formula_div(formula_mul(grad, a), b), b))
        return ga, gb


class Pow(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, a, b):
        out = dispatch.binary("pow", a, b)
        # the output is needed only for the exponent's gradient (PyTorch saves it only then too)
        ctx.save_for_backward(a, b, out if ctx.needs_input_grad[1] else None)
        return out

    @staticmethod
    def backward(ctx, grad):
        a, b, out = ctx.saved_tensors
        ga = gb = None
        if ctx.needs_input_grad[0] and isinstance(b, (int, float)) and b == 0:
            # zeros, as PyTorch's: b * a ** (b - 1) would be NaN at a = 0 (a derivative of x ** n)
            values = detached(grad)
            ga = dispatch.full(values.shape, 0, values.dtype, dispatch.device_type_of(values))
        elif ctx.needs_input_grad[0]:
            # A Python exponent stays a Python number: a 0-d array would promote float32 to float64.
            b_minus_1 = b - 1 if isinstance(b, (int, float)) else formula_sub(b, 1)
            ga = formula_mul(grad, formula_mul(b, formula_pow(a, b_minus_1)))
        if ctx.needs_input_grad[1]:
            log_a = float(np.log(a)) if isinstance(a, (int, float)) else formula_log(a)
            gb = formula_mul(formula_mul(grad, out), log_a)
        return ga, gb


class Neg(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x):
        return dispatch.unary("neg", x)

    @staticmethod
    def backward(ctx, grad):
        return formula_neg(grad)


class Exp(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x):
        out = dispatch.unary("exp", x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return formula_mul(grad, out)


class Log(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return dispatch.unary("log", x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return formula_div(grad, x)


class _Activation(Op):
    """act(x) on a fused kernel; backward from the saved output (or input, for relu): the fused
    derivative kernel on arrays, the same derivative as a ``formula`` when recorded."""

    kernel = ""
    saves_output = True
    differentiable_backward = True

    @classmethod
    def forward(cls, ctx, x):
        out = dispatch.unary(cls.kernel, x)
        ctx.save_for_backward(out if cls.saves_output else x)
        return out

    @classmethod
    def backward(cls, ctx, grad):
        (saved,) = ctx.saved_tensors
        if on_graph(grad, saved):
            return cls.formula(grad, saved)
        return dispatch.activation_backward(f"{cls.kernel}_backward", grad, saved)

    @staticmethod
    def formula(grad: Any, saved: Any) -> Any:
        raise NotImplementedError


class Tanh(_Activation):
    kernel = "tanh"

    @staticmethod
    def formula(grad, y):
        return formula_mul(grad, formula_sub(1, formula_square(y)))


class Sigmoid(_Activation):
    kernel = "sigmoid"

    @staticmethod
    def formula(grad, y):
        return formula_mul(grad, formula_mul(y, formula_sub(1, y)))


class Relu(_Activation):
    kernel = "relu"
    saves_output = False

    @staticmethod
    def formula(grad, x):
        passes = dispatch_pointwise.logical_not(dispatch_pointwise.compare("le", detached(x), 0))  # NaN passes
        return formula_mul(grad, piecewise_constant(x, dispatch.cast(passes, x.dtype)))


class Cast(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return dispatch.cast(x, dtype)

    @staticmethod
    def backward(ctx, grad):
        return formula_cast(grad, ctx.dtype), None


class ToDevice(Op):
    """A copy on another device; the gradient goes back to the source device."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, device_type):
        ctx.device_type = dispatch.device_type_of(x)
        return dispatch.to_device(x, device_type)

    @staticmethod
    def backward(ctx, grad):
        if on_graph(grad):
            return ToDevice.apply(grad, ctx.device_type), None
        return dispatch.to_device(grad, ctx.device_type), None


class Remainder(Op):
    """a - b * floor(a / b): the sign of the divisor, as Python's % and torch.remainder."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return dispatch.binary("remainder", a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        gb = None
        if ctx.needs_input_grad[1]:
            gb = dispatch.unary("neg", dispatch.binary("mul", grad, dispatch.binary("floor_divide", a, b)))
        return grad, gb


class Abs(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return dispatch.unary("abs", x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        # sign(0) = 0: no gradient at the kink, as PyTorch
        return formula_mul(grad, piecewise_constant(x, dispatch.unary("sign", detached(x))))


class Sqrt(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x):
        out = dispatch.unary("sqrt", x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return formula_div(grad, formula_mul(out, 2))


class Clamp(Op):
    """min(max(x, low), high); the gradient passes where low <= x <= high."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, low, high):
        ctx.save_for_backward(x)
        ctx.low, ctx.high = low, high
        return dispatch_pointwise.clamp(x, low, high)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if on_graph(grad):
            ones = dispatch.full(grad.shape, 1, grad.dtype, dispatch.device_type_of(detached(grad)))
            inside = dispatch_pointwise.clamp_backward(ones, detached(x), ctx.low, ctx.high)
            return formula_mul(grad, piecewise_constant(x, inside)), None, None
        return dispatch_pointwise.clamp_backward(grad, x, ctx.low, ctx.high), None, None


class ClampTensor(Op):
    """min(max(x, low), high) with tensor bounds (either may be None), broadcast and promoted; the
    gradient goes to x where low <= x <= high, to low where x < low < high, and to high where
    x > high or high < low (the bound that wins when they cross), as PyTorch's."""

    @staticmethod
    def forward(ctx, x, low, high):
        ctx.save_for_backward(x, low, high)
        out = x if low is None else dispatch.binary("maximum", x, low)
        return out if high is None else dispatch.binary("minimum", out, high)

    @staticmethod
    def backward(ctx, grad):
        x, low, high = ctx.saved_tensors
        compare = dispatch_pointwise.compare

        def where(condition):
            return dispatch_index.where(condition, grad, 0)

        if high is None:
            return where(compare("ge", x, low)), where(compare("lt", x, low)), None
        if low is None:
            return where(compare("le", x, high)), None, where(compare("gt", x, high))
        inside = compare("logical_and", compare("ge", x, low), compare("le", x, high))
        below = compare("logical_and", compare("lt", x, low), compare("lt", low, high))
        above = compare("logical_or", compare("gt", x, high), compare("lt", high, low))
        return where(inside), where(below), where(above)


class _Extremum(Op):
    """Element-wise maximum or minimum of two tensors; a tie splits the gradient in halves."""

    take_max = True
    differentiable_backward = True

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return dispatch.binary("maximum" if cls.take_max else "minimum", a, b)

    @classmethod
    def backward(cls, ctx, grad):
        a, b = ctx.saved_tensors
        if not isinstance(grad, Tensor):
            return dispatch_pointwise.extremum_backward(grad, a, b, cls.take_max)
        # recorded: grad times each side's share (1, 0 or 1/2 on a tie), constant where defined
        ones = dispatch.full(grad.shape, 1, grad.dtype, dispatch.device_type_of(grad._data))
        share_a, share_b = dispatch_pointwise.extremum_backward(ones, detached(a), detached(b), cls.take_max)
        return formula_mul(grad, piecewise_constant(a, share_a)), formula_mul(grad, piecewise_constant(b, share_b))


class Maximum(_Extremum):
    take_max = True


class Minimum(_Extremum):
    take_max = False


# --- public functions -------------------------------------------------------------------------

@accepts_out()
def remainder(input: Any, other: Any) -> Any:  # noqa: A002 - torch's argument name
    """input % other with the sign of ``other`` (Python's rule, as torch.remainder)."""
    return Remainder.apply(operand(input), operand(other))


@accepts_out("exact")
def abs(input: Any) -> Any:  # noqa: A001,A002 - mirrors torch.abs
    """|input|; its gradient is sign(input) (0 at 0).

    Raises:
        DTypeError: a bool tensor (PyTorch refuses it too).
    """
    return Abs.apply(require_kinds(tensor_arg(input, "abs"), "abs", "iuf"))


@accepts_out()
def sqrt(input: Any) -> Any:  # noqa: A002
    return Sqrt.apply(tensor_arg(input, "sqrt"))


def clamp_bounds(min: Any, max: Any) -> tuple[Any, Any]:  # noqa: A002
    """The (low, high) of a clamp as Python numbers (None where absent).

    Raises:
        ValueError: both are None. TypeError: a bound that is not a number or a one-element tensor.
    """
    low, high = scalar_arg(min, "clamp (min)"), scalar_arg(max, "clamp (max)")
    if low is None and high is None:
        raise ValueError("clamp: At least one of 'min' or 'max' must not be None")
    return low, high


@accepts_out("exact")
def clamp(input: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    """Each element clamped into [min, max] (a missing bound is open); if min > max, all become
    max. Bounds are numbers or tensors (broadcast, and promoted with ``input`` as PyTorch does; a
    0-d tensor that does not require grad beside a number bound counts as a number, as in PyTorch).

    Raises:
        ValueError: both bounds are None. TypeError: a number bound beside a tensor bound that is not
            0-d or requires grad.
    """
    x = tensor_arg(input, "clamp")
    if tensor_bounds(min, max, "clamp"):
        return ClampTensor.apply(x, min, max)
    return Clamp.apply(x, *clamp_bounds(min, max))


def tensor_bounds(min: Any, max: Any, name: str) -> bool:  # noqa: A002
    """Whether a clamp's bounds take the tensor form (each a tensor or None) rather than the number
    form (each a number, a 0-d tensor that does not require grad, or None), as PyTorch's argument
    parser picks between its two overloads.

    Raises:
        ValueError: both are None. TypeError: a number beside a tensor that is not 0-d or requires grad.
    """
    bounds = [b for b in (min, max) if b is not None]
    if not bounds:
        raise ValueError(f"{name}: At least one of 'min' or 'max' must not be None")
    if not any(isinstance(b, Tensor) for b in bounds) or all(isinstance(b, Tensor) for b in bounds):
        return isinstance(bounds[0], Tensor)
    if any(isinstance(b, Tensor) and (b.ndim or b.requires_grad) for b in bounds):
        raise TypeError(f"{name}() received an invalid combination of arguments: min and max must be both tensors "
                        "or both numbers (either may be None; a 0-d tensor that does not require grad counts as a number)")
    return False


clip = clamp
absolute = abs


@accepts_out()
def maximum(input: Any, other: Any) -> Any:  # noqa: A002
    """Element-wise maximum of two tensors (NaN if either is NaN), broadcast."""
    return Maximum.apply(tensor_arg(input, "maximum"), tensor_arg(other, "maximum"))


@accepts_out()
def minimum(input: Any, other: Any) -> Any:  # noqa: A002
    """Element-wise minimum of two tensors (NaN if either is NaN), broadcast."""
    return Minimum.apply(tensor_arg(input, "minimum"), tensor_arg(other, "minimum"))

"""Element-wise scalings by powers and constants: ``frexp`` (a number's mantissa and binary
exponent), ``ldexp`` (x * 2**e), ``float_power`` (pow in float64) and the angle conversions
``deg2rad`` / ``rad2deg``. Each is differentiable where PyTorch's is, through the ops it is
written with (mul, pow) or its own backward (frexp's mantissa).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad import return_types
from zgrad.autograd.function import Op
from zgrad.kernels import dispatch, dispatch_math
from zgrad.kernels.promotion import get_default_dtype, is_floating, result_type
from zgrad.ops import functions
from zgrad.ops._args import operand, tensor_arg
from zgrad.ops.out_argument import accepts_out
from zgrad.tensor import Tensor

__all__ = ["frexp", "ldexp", "float_power", "deg2rad", "rad2deg"]

_INT32 = np.dtype(np.int32)
_FLOAT64 = np.dtype(np.float64)


class Frexp(Op):
    """(mantissa, exponent) with x = mantissa * 2**exponent, |mantissa| in [0.5, 1) (0, inf and NaN
    are their own mantissa, with exponent 0); the mantissa's gradient is grad / 2**exponent."""

    @staticmethod
    def forward(ctx, x):
        exponent = dispatch_math.unary_math("frexp_exponent", x)
        ctx.save_for_backward(exponent)
        return dispatch_math.unary_math("frexp_mantissa", x), dispatch.cast(exponent, _INT32)

    @staticmethod
    def backward(ctx, grad_mantissa, grad_exponent):
        (exponent,) = ctx.saved_tensors
        return dispatch.binary("mul", grad_mantissa, dispatch_math.unary_math("exp2", dispatch.unary("neg", exponent)))


def frexp(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """Each element split into a mantissa (input's dtype, magnitude in [0.5, 1)) and an int32
    exponent, as C's frexp: ``input == mantissa * 2 ** exponent``.

    Returns:
        ``zgrad.return_types.frexp(mantissa, exponent)``.

    Raises:
        RuntimeError: a bool or integer tensor (PyTorch's message).
    """
    x = tensor_arg(input, "frexp")
    if not is_floating(x.dtype):
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    mantissa, exponent = Frexp.apply(x)
    return return_types.frexp(mantissa, exponent)


@accepts_out()
def ldexp(input: Any, other: Any) -> Any:  # noqa: A002
    """input * 2**other, element-wise, in the floating dtype the two promote to (the default one
    for two integer tensors)."""
    x, exponent = tensor_arg(input, "ldexp"), tensor_arg(other, "ldexp", "other")
    dtype = dispatch.float_dtype(result_type(x._data, exponent._data))
    return functions.mul(x.to(dtype), functions.pow(2.0, exponent.to(dtype)))


def _double(x: Any) -> Any:
    return x.to(_FLOAT64) if isinstance(x, Tensor) else float(x)


@accepts_out()
def float_power(input: Any, exponent: Any) -> Any:  # noqa: A002
    """input ** exponent computed in float64 (the result is float64 whatever the dtypes); either
    may be a number.

    Raises:
        TypeError: neither is a tensor.
    """
    base, power = operand(input), operand(exponent)
    if not isinstance(base, Tensor) and not isinstance(power, Tensor):
        raise TypeError(f"float_power() expects a Tensor as input or exponent; got {type(base).__name__} and "
                        f"{type(power).__name__}")
    return functions.pow(_double(base), _double(power))


def _scaled(name: str, input: Any, factor: float) -> Any:  # noqa: A002
    x = tensor_arg(input, name)
    return functions.mul(x if is_floating(x.dtype) else x.to(get_default_dtype()), factor)


@accepts_out()
def deg2rad(input: Any) -> Any:  # noqa: A002
    """Each element converted from degrees to radians (integers give the default float dtype)."""
    return _scaled("deg2rad", input, math.pi / 180.0)


@accepts_out()
def rad2deg(input: Any) -> Any:  # noqa: A002
    """Each element converted from radians to degrees (integers give the default float dtype)."""
    return _scaled("rad2deg", input, 180.0 / math.pi)

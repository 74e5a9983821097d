"""Division with a rounding mode (``torch.div(a, b, rounding_mode="trunc" | "floor")``): the
quotient rounded toward zero or down, in the promoted dtype of the operands (integers stay
integers, divided exactly), made of the kernel layer's element-wise ops so it runs on every
backend. Its gradient is zero, as PyTorch's.
"""

from __future__ import annotations

from typing import Any

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch, dispatch_math, dispatch_pointwise
from zgrad.kernels.promotion import result_type

__all__ = ["RoundedDivision", "rounded_division"]


def _negative(x: Any) -> Any:
    return dispatch_pointwise.compare("lt", x, 0)


def _trunc_integer(a: Any, b: Any) -> Any:
    """a / b rounded toward zero, exactly, for integers: the floor quotient, plus one where the
    true quotient is negative and inexact (a nonzero remainder, operands of opposite signs)."""
    floor = dispatch.binary("floor_divide", a, b)
    inexact = dispatch_pointwise.compare("ne", dispatch.binary("remainder", a, b), 0)
    opposite = dispatch_pointwise.compare("logical_xor", _negative(a), _negative(b))
    return dispatch.binary("add", floor, dispatch_pointwise.compare("logical_and", inexact, opposite), floor.dtype)


def _trunc_floating(a: Any, b: Any) -> Any:
    """trunc(a / b) for floating results."""
    return dispatch_math.unary_math("trunc", dispatch.binary("div", a, b))


class RoundedDivision(Op):
    """a / b rounded by ``mode`` ("trunc" or "floor"); zero gradients."""

    @staticmethod
    def forward(ctx, a, b, mode):
        ctx.inputs = [(x.shape, x.dtype, dispatch.device_type_of(x)) if hasattr(x, "dtype") else None for x in (a, b)]
        if mode == "floor":  # Python's floor division, exact for floats too (as PyTorch's)
            return dispatch.binary("floor_divide", a, b)
        return _trunc_integer(a, b) if result_type(a, b).kind in "biu" else _trunc_floating(a, b)

    @staticmethod
    def backward(ctx, grad):
        zeros = [None if spec is None else dispatch.full(spec[0], 0, *spec[1:]) for spec in ctx.inputs]
        return zeros[0], zeros[1], None


def rounded_division(a: Any, b: Any, mode: str) -> Any:
    """``a / b`` rounded toward zero (``mode="trunc"``) or down (``"floor"``); tensors or numbers."""
    return RoundedDivision.apply(a, b, mode)


"""The element-wise math methods of :class:`zgrad.Tensor` (``sin``, ``erf``, ``floor``, ``atan2``,
``bitwise_and``, ``logical_and``, ... with their in-place forms ``sin_``, ..., and those of ``exp``,
``log``, ``tanh``, ``sigmoid``, ``sqrt``, ``abs``, ``neg``, ``pow``, ``remainder`` and the
comparisons ``eq_``, ``lt_``, ...), the bitwise operators
``& | ^ ~ << >>`` and ``//`` (reflected and in place).

Each out-of-place method *is* the ``zgrad`` function of the same name (bound as a method, so the
tensor is its ``input``): a method and its function cannot disagree. Each in-place method runs that
function and writes the result into the tensor under the rules of :mod:`zgrad.tensor_inplace`
(recorded in the graph when it must be, PyTorch's errors for leaves and for a result dtype the
tensor cannot hold). ``zgrad/__init__.py`` imports this module with the other method modules.
"""

from __future__ import annotations

from typing import Any, Callable

from zgrad.errors import DTypeError
from zgrad.kernels import dispatch, dispatch_pointwise
from zgrad.kernels.promotion import can_cast
from zgrad.ops import binary_math, compare, elementwise, functions, rounding, unary_math
from zgrad.tensor import Tensor, tensor_methods

__all__ = ["TensorPointwise"]


def _array(x: Any) -> Any:
    return x._data if isinstance(x, Tensor) else x


@tensor_methods
class TensorPointwise:
    """The element-wise math methods and bitwise operators of :class:`zgrad.Tensor` (bound onto it;
    never instantiated)."""

    # --- out of place: the functions themselves -------------------------------------------------

    sin, cos, tan, asin, acos, atan = (unary_math.sin, unary_math.cos, unary_math.tan, unary_math.asin,
                                       unary_math.acos, unary_math.atan)
    sinh, cosh, asinh, acosh, atanh = unary_math.sinh, unary_math.cosh, unary_math.asinh, unary_math.acosh, unary_math.atanh
    arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh
    erf, erfc, erfinv, log1p, expm1 = unary_math.erf, unary_math.erfc, unary_math.erfinv, unary_math.log1p, unary_math.expm1
    log2, log10, exp2, rsqrt, reciprocal = (unary_math.log2, unary_math.log10, unary_math.exp2, unary_math.rsqrt,
                                            unary_math.reciprocal)
    floor, ceil, round, trunc, fix, frac = (rounding.floor, rounding.ceil, rounding.round, rounding.trunc, rounding.fix,
                                            rounding.frac)
    sign, sgn, nan_to_num, clamp_min, clamp_max = (rounding.sign, rounding.sgn, rounding.nan_to_num, rounding.clamp_min,
                                                   rounding.clamp_max)
    isnan, isinf, isposinf, isneginf, isfinite, signbit = (rounding.isnan, rounding.isinf, rounding.isposinf,
                                                           rounding.isneginf, rounding.isfinite, rounding.signbit)
    atan2, arctan2, fmod, hypot = binary_math.atan2, binary_math.arctan2, binary_math.fmod, binary_math.hypot
    logaddexp, logaddexp2, copysign, lerp = (binary_math.logaddexp, binary_math.logaddexp2, binary_math.copysign,
                                             binary_math.lerp)
    bitwise_and, bitwise_or, bitwise_xor, bitwise_not = (binary_math.bitwise_and, binary_math.bitwise_or,
                                                         binary_math.bitwise_xor, binary_math.bitwise_not)
    bitwise_left_shift, bitwise_right_shift = binary_math.bitwise_left_shift, binary_math.bitwise_right_shift
    floor_divide = binary_math.floor_divide
    logical_and, logical_or, logical_xor = compare.logical_and, compare.logical_or, compare.logical_xor

    # --- operators ------------------------------------------------------------------------------

    def __and__(self, other: Any) -> Any:
        return binary_math.bitwise_and(self, other)

    def __rand__(self, other: Any) -> Any:
        return binary_math.bitwise_and(other, self)

    def __or__(self, other: Any) -> Any:
        return binary_math.bitwise_or(self, other)

    def __ror__(self, other: Any) -> Any:
        return binary_math.bitwise_or(other, self)

    def __xor__(self, other: Any) -> Any:
        return binary_math.bitwise_xor(self, other)

    def __rxor__(self, other: Any) -> Any:
        return binary_math.bitwise_xor(other, self)

    def __lshift__(self, other: Any) -> Any:
        return binary_math.bitwise_left_shift(self, other)

    def __rlshift__(self, other: Any) -> Any:
        return binary_math.bitwise_left_shift(other, self)

    def __rshift__(self, other: Any) -> Any:
        return binary_math.bitwise_right_shift(self, other)

    def __rrshift__(self, other: Any) -> Any:
        return binary_math.bitwise_right_shift(other, self)

    def __floordiv__(self, other: Any) -> Any:
        return binary_math.floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return binary_math.floor_divide(other, self)

    def __invert__(self) -> Any:
        return binary_math.bitwise_not(self)

    # --- in place -------------------------------------------------------------------------------

    def _math_(self, function: Callable[..., Any], *args: Any) -> Any:
        """self = function(self, *args), written into self's memory (``args`` broadcast to self).

        Raises:
            DTypeError: the result's dtype cannot be cast to self's (an integer tensor's ``sin_``).
            ZgradError: an operand that would broadcast self to a larger shape.
        """
        self._check_shapes([_array(a) for a in args])

        def result_of(source: Any) -> Any:
            result = function(source, *args)
            if not can_cast(result.dtype, self.dtype):
                raise DTypeError(f"result type {dispatch.scalar_type_name(result.dtype)} can't be cast to the "
                                 f"desired output type {dispatch.scalar_type_name(self.dtype)}")
            return result

        return self._inplace(lambda: dispatch_pointwise.write(self._data, result_of(self.detach())._data),
                             result_of, *args)

    def exp_(self) -> Any:
        return self._math_(functions.exp)

    def log_(self) -> Any:
        return self._math_(functions.log)

    def tanh_(self) -> Any:
        return self._math_(functions.tanh)

    def sigmoid_(self) -> Any:
        return self._math_(functions.sigmoid)

    def sqrt_(self) -> Any:
        return self._math_(elementwise.sqrt)

    def abs_(self) -> Any:
        return self._math_(elementwise.abs)

    def neg_(self) -> Any:
        return self._math_(functions.neg)

    def pow_(self, exponent: Any) -> Any:
        return self._math_(functions.pow, exponent)

    def square_(self) -> Any:
        return self._math_(functions.square)

    def remainder_(self, other: Any) -> Any:
        return self._math_(elementwise.remainder, other)

    __imod__ = remainder_

    def sin_(self) -> Any:
        return self._math_(unary_math.sin)

    def cos_(self) -> Any:
        return self._math_(unary_math.cos)

    def tan_(self) -> Any:
        return self._math_(unary_math.tan)

    def asin_(self) -> Any:
        return self._math_(unary_math.asin)

    def acos_(self) -> Any:
        return self._math_(unary_math.acos)

    def atan_(self) -> Any:
        return self._math_(unary_math.atan)

    def sinh_(self) -> Any:
        return self._math_(unary_math.sinh)

    def cosh_(self) -> Any:
        return self._math_(unary_math.cosh)

    def asinh_(self) -> Any:
        return self._math_(unary_math.asinh)

    def acosh_(self) -> Any:
        return self._math_(unary_math.acosh)

    def atanh_(self) -> Any:
        return self._math_(unary_math.atanh)

    arcsin_, arccos_, arctan_, arcsinh_, arccosh_, arctanh_ = asin_, acos_, atan_, asinh_, acosh_, atanh_

    def erf_(self) -> Any:
        return self._math_(unary_math.erf)

    def erfc_(self) -> Any:
        return self._math_(unary_math.erfc)

    def erfinv_(self) -> Any:
        return self._math_(unary_math.erfinv)

    def log1p_(self) -> Any:
        return self._math_(unary_math.log1p)

    def expm1_(self) -> Any:
        return self._math_(unary_math.expm1)

    def log2_(self) -> Any:
        return self._math_(unary_math.log2)

    def log10_(self) -> Any:
        return self._math_(unary_math.log10)

    def exp2_(self) -> Any:
        return self._math_(unary_math.exp2)

    def rsqrt_(self) -> Any:
        return self._math_(unary_math.rsqrt)

    def reciprocal_(self) -> Any:
        return self._math_(unary_math.reciprocal)

    def floor_(self) -> Any:
        return self._math_(rounding.floor)

    def ceil_(self) -> Any:
        return self._math_(rounding.ceil)

    def round_(self, *, decimals: int = 0) -> Any:
        return self._math_(lambda x: rounding.round(x, decimals=decimals))

    def trunc_(self) -> Any:
        return self._math_(rounding.trunc)

    fix_ = trunc_

    def frac_(self) -> Any:
        return self._math_(rounding.frac)

    def sign_(self) -> Any:
        return self._math_(rounding.sign)

    sgn_ = sign_

    def nan_to_num_(self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Any:
        return self._math_(lambda x: rounding.nan_to_num(x, nan, posinf, neginf))

    def clamp_min_(self, min: Any) -> Any:  # noqa: A002 - torch's argument name
        return self._math_(lambda x: rounding.clamp_min(x, min))

    def clamp_max_(self, max: Any) -> Any:  # noqa: A002
        return self._math_(lambda x: rounding.clamp_max(x, max))

    def atan2_(self, other: Any) -> Any:
        return self._math_(binary_math.atan2, other)

    arctan2_ = atan2_

    def fmod_(self, other: Any) -> Any:
        return self._math_(binary_math.fmod, other)

    def hypot_(self, other: Any) -> Any:
        return self._math_(binary_math.hypot, other)

    def copysign_(self, other: Any) -> Any:
        return self._math_(binary_math.copysign, other)

    def lerp_(self, end: Any, weight: Any) -> Any:
        return self._math_(binary_math.lerp, end, weight)

    def bitwise_and_(self, other: Any) -> Any:
        return self._math_(binary_math.bitwise_and, other)

    def bitwise_or_(self, other: Any) -> Any:
        return self._math_(binary_math.bitwise_or, other)

    def bitwise_xor_(self, other: Any) -> Any:
        return self._math_(binary_math.bitwise_xor, other)

    def bitwise_not_(self) -> Any:
        return self._math_(binary_math.bitwise_not)

    def bitwise_left_shift_(self, other: Any) -> Any:
        return self._math_(binary_math.bitwise_left_shift, other)

    def bitwise_right_shift_(self, other: Any) -> Any:
        return self._math_(binary_math.bitwise_right_shift, other)

    def floor_divide_(self, other: Any) -> Any:
        return self._math_(binary_math.floor_divide, other)

    __iand__, __ior__, __ixor__, __ifloordiv__ = bitwise_and_, bitwise_or_, bitwise_xor_, floor_divide_
    __ilshift__, __irshift__ = bitwise_left_shift_, bitwise_right_shift_

    # --- comparisons and logic in place: 1 or 0 (True or False) in self's dtype -------------------

    def eq_(self, other: Any) -> Any:
        return self._math_(compare.eq, other)

    def ne_(self, other: Any) -> Any:
        return self._math_(compare.ne, other)

    def lt_(self, other: Any) -> Any:
        return self._math_(compare.lt, other)

    def le_(self, other: Any) -> Any:
        return self._math_(compare.le, other)

    def gt_(self, other: Any) -> Any:
        return self._math_(compare.gt, other)

    def ge_(self, other: Any) -> Any:
        return self._math_(compare.ge, other)

    def logical_and_(self, other: Any) -> Any:
        return self._math_(compare.logical_and, other)

    def logical_or_(self, other: Any) -> Any:
        return self._math_(compare.logical_or, other)

    def logical_xor_(self, other: Any) -> Any:
        return self._math_(compare.logical_xor, other)

    def logical_not_(self) -> Any:
        return self._math_(compare.logical_not)

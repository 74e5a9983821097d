"""The special-function, number and alias methods of :class:`zgrad.Tensor`: ``lgamma``,
``digamma``, ``polygamma``, ``mvlgamma``, ``i0``, ``sinc``, ``logit``, ``xlogy``, ``igamma``,
``igammac``, ``float_power``, ``fmax``, ``fmin``, ``heaviside``, ``gcd``, ``lcm``, ``deg2rad``,
``rad2deg``, ``ldexp``, ``nextafter``, ``frexp``, ``addcmul``, ``addcdiv``, PyTorch's aliases
(``absolute``, ``negative``, ``positive``, ``subtract``, ``multiply``, ``divide``,
``true_divide``, ``greater``, ``greater_equal``, ``less``, ``less_equal``, ``not_equal``) and
the in-place forms of all these.

As in :mod:`zgrad.tensor_pointwise`, each out-of-place method *is* the ``zgrad`` function of
its name; each in-place method runs that function through ``Tensor._math_`` (the graph and dtype
rules of in-place math), made by one factory, :func:`_in_place`. ``zgrad/__init__.py`` imports
this module with the other method modules.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from zgrad import special
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.ops import (
    binary_math, functions, power_scaling, special_binary, special_unary,
)
from zgrad.tensor import Tensor, tensor_methods

__all__ = ["TensorSpecial"]

_FLOAT64 = np.dtype(np.float64)


def _in_place(function: Callable[..., Any], name: str = "") -> Callable[..., Any]:
    """The in-place method of ``function`` (the zgrad function ``name``, by default its own name):
    self = function(self, *args, **kwargs), the positional arguments broadcast to self (see
    ``Tensor._math_``)."""
    name = name or function.__name__
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return self._math_(partial(function, **kwargs) if kwargs else function, *args)

    method.__name__ = f"{name}_"
    method.__doc__ = f"In-place form of :func:`zgrad.{name}`."
    return method


def _polygamma(input: Any, n: int) -> Any:  # noqa: A002 - torch's argument name
    return special_unary.polygamma(n, input)


def _mvlgamma(input: Any, p: int) -> Any:  # noqa: A002
    return special_unary.mvlgamma(input, p)


@tensor_methods
class TensorSpecial:
    """The special-function, number and alias methods of :class:`zgrad.Tensor` (bound onto it;
    never instantiated)."""

    # --- out of place: the functions themselves -------------------------------------------------

    lgamma, digamma, i0 = special_unary.lgamma, special_unary.digamma, special_unary.i0
    sinc, logit, xlogy = special.sinc, special.logit, special.xlogy
    igamma, igammac = special_binary.igamma, special_binary.igammac
    float_power, ldexp, frexp = power_scaling.float_power, power_scaling.ldexp, power_scaling.frexp
    deg2rad, rad2deg = power_scaling.deg2rad, power_scaling.rad2deg
    fmax, fmin, heaviside = binary_math.fmax, binary_math.fmin, binary_math.heaviside
    gcd, lcm, nextafter = binary_math.gcd, binary_math.lcm, binary_math.nextafter
    addcmul, addcdiv = functions.addcmul, functions.addcdiv
    positive = functions.positive
    # the aliases are the methods themselves (bound before this module by zgrad/__init__.py)
    absolute, negative, subtract, multiply, divide = Tensor.abs, Tensor.neg, Tensor.sub, Tensor.mul, Tensor.div
    true_divide, greater, greater_equal, less, less_equal = Tensor.div, Tensor.gt, Tensor.ge, Tensor.lt, Tensor.le
    not_equal = Tensor.ne

    def polygamma(self, n: int) -> Any:
        """polygamma(n, self) (see :func:`zgrad.polygamma`)."""
        return special_unary.polygamma(n, self)

    def mvlgamma(self, p: int) -> Any:
        """mvlgamma(self, p) (see :func:`zgrad.mvlgamma`)."""
        return special_unary.mvlgamma(self, p)

    # --- in place -------------------------------------------------------------------------------

    lgamma_, digamma_ = _in_place(special_unary.lgamma), _in_place(special_unary.digamma)
    i0_ = _in_place(special_unary.i0)
    polygamma_, mvlgamma_ = _in_place(_polygamma, "polygamma"), _in_place(_mvlgamma, "mvlgamma")
    sinc_, logit_, xlogy_ = _in_place(special.sinc), _in_place(special.logit), _in_place(special.xlogy)
    igamma_, igammac_ = _in_place(special_binary.igamma), _in_place(special_binary.igammac)
    ldexp_, deg2rad_ = _in_place(power_scaling.ldexp), _in_place(power_scaling.deg2rad)
    rad2deg_ = _in_place(power_scaling.rad2deg)
    heaviside_, gcd_, lcm_ = _in_place(binary_math.heaviside), _in_place(binary_math.gcd), _in_place(binary_math.lcm)
    nextafter_ = _in_place(binary_math.nextafter)
    absolute_, negative_ = Tensor.abs_, Tensor.neg_
    greater_, greater_equal_, less_, less_equal_ = Tensor.gt_, Tensor.ge_, Tensor.lt_, Tensor.le_
    not_equal_ = Tensor.ne_
    subtract_, multiply_, divide_, true_divide_ = Tensor.sub_, Tensor.mul_, Tensor.div_, Tensor.div_

    def float_power_(self, exponent: Any) -> Any:
        """self = self ** exponent, in float64: self must be a float64 tensor.

        Raises:
            RuntimeError: self is not float64 (PyTorch's message).
        """
        if self.dtype != _FLOAT64:
            raise RuntimeError(f"the base given to float_power_ has dtype {scalar_type_name(self.dtype)} but the "
                               f"operation's result requires dtype Double")
        return self._math_(power_scaling.float_power, exponent)

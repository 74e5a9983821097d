"""``math`` for kernels running in Numba's CUDA simulator: numpy's IEEE results (inf, NaN, in the
argument's dtype) where Python's math module raises or rounds to float64.

Only the functions the CUDA kernels call; imported in their place by
:mod:`zgrad.kernels.cuda.kernels.common` when ``NUMBA_ENABLE_CUDASIM=1``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "exp", "log", "tanh", "sqrt", "erf", "erfc", "inf", "nan", "isinf", "isnan", "fabs", "pow", "floor", "sin", "cos",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log1p", "expm1", "log2", "log10",
    "fmod", "copysign", "atan2", "hypot", "lgamma", "frexp", "nextafter",
]

inf = float("inf")
nan = float("nan")


def _quiet(ufunc: Any) -> Any:
    def apply(x: Any, *more: Any) -> Any:
        with np.errstate(all="ignore"):
            return ufunc(x, *more)
    apply.__name__ = ufunc.__name__
    return apply


exp = _quiet(np.exp)
log = _quiet(np.log)
log1p = _quiet(np.log1p)
tanh = _quiet(np.tanh)
sqrt = _quiet(np.sqrt)
fabs = _quiet(np.fabs)
pow = _quiet(np.power)  # noqa: A001 - math's name
floor = _quiet(np.floor)
sin, cos, tan = _quiet(np.sin), _quiet(np.cos), _quiet(np.tan)
asin, acos, atan = _quiet(np.arcsin), _quiet(np.arccos), _quiet(np.arctan)
sinh, cosh = _quiet(np.sinh), _quiet(np.cosh)
asinh, acosh, atanh = _quiet(np.arcsinh), _quiet(np.arccosh), _quiet(np.arctanh)
log1p, expm1, log2, log10 = _quiet(np.log1p), _quiet(np.expm1), _quiet(np.log2), _quiet(np.log10)
fmod, copysign = _quiet(np.fmod), _quiet(np.copysign)
atan2, hypot = _quiet(np.arctan2), _quiet(np.hypot)
nextafter = _quiet(np.nextafter)


def frexp(x: Any) -> tuple:
    mantissa, exponent = np.frexp(x)
    return mantissa, int(exponent)


def isnan(x: Any) -> bool:
    return bool(np.isnan(x))


def isinf(x: Any) -> bool:
    return bool(np.isinf(x))


def _rounded(function: Any) -> Any:
    """``function`` of math (exact to float64) rounded to its argument's dtype."""
    def apply(x: Any) -> Any:
        return type(x)(function(float(x))) if isinstance(x, np.floating) else function(x)
    apply.__name__ = function.__name__
    return apply


erf = _rounded(math.erf)
erfc = _rounded(math.erfc)


def lgamma(x: Any) -> Any:
    """log |Gamma(x)| rounded to x's dtype; inf at the poles (0 and the negative integers), where
    Python's raises."""
    if x <= 0 and float(x).is_integer():
        return type(x)(inf)
    return _rounded(math.lgamma)(x)

"""``math`` for kernels running in Numba's CUDA simulator: numpy's IEEE results (inf, NaN, in the
argument's dtype) where Python's math module raises or rounds to float64.

Only the functions the CUDA kernels call; imported in their place by
:mod:`zgrad.kernels.cuda.kernels.common` when ``NUMBA_ENABLE_CUDASIM=1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["exp", "log", "log1p", "tanh", "sqrt", "erf", "inf", "nan", "isinf", "isnan", "fabs", "pow", "floor"]

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


def isnan(x: Any) -> bool:
    return bool(np.isnan(x))


def isinf(x: Any) -> bool:
    return bool(np.isinf(x))


def erf(x: Any) -> Any:
    """The error function in ``x``'s dtype (math.erf is exact to float64; rounding it is enough)."""
    import math
    return type(x)(math.erf(float(x))) if isinstance(x, np.floating) else math.erf(x)

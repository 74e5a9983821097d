"""The CPU backend of the running reductions and order statistics: running products, running
max/min with indices, running logsumexp, stable row sorts and the mode, with their gradients.

Part of :mod:`zgrad.kernels.cpu.backend` (which re-exports every function here); the same
contract holds: each function writes into ``out`` and returns it. Row functions take 2-D (N, C)
C-contiguous arrays and work along C; the Numba kernels are :mod:`kernels.scan`.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cpu import kernels
from zgrad.kernels.cpu.sorting import argsort
from zgrad.kernels.promotion import HALF_DTYPES

__all__ = [
    "cumprod", "cumsum", "cumprod_backward_rows", "cumextreme_rows", "logcumsumexp_rows", "logcumsumexp_backward_rows",
    "argsort_rows", "mode_rows",
]


def running(x, axis, product, reverse, out):
    """out = the running sums (``product``: products) of x along ``axis``, accumulated in out's
    dtype, from its end when ``reverse``: the row kernel along a contiguous last axis, numpy's
    accumulate elsewhere."""
    if axis == x.ndim - 1 and x.ndim >= 1 and x.flags.c_contiguous and out.flags.c_contiguous \
            and x.dtype.kind in "biuf" and out.dtype not in HALF_DTYPES:
        kernels.scan.running_rows(x.reshape(-1, x.shape[-1]), product, reverse, out.reshape(-1, x.shape[-1]))
        return out
    ufunc = np.multiply if product else np.add
    if reverse:
        ufunc.accumulate(np.flip(x, axis), axis=axis, dtype=out.dtype, out=np.flip(out, axis))
        return out
    return ufunc.accumulate(x, axis=axis, dtype=out.dtype, out=out)


def cumprod(x, axis, out):
    """out = the running products of x along ``axis``, accumulated in out's dtype."""
    return running(x, axis, True, False, out)


def cumsum(x, axis, reverse, out):
    """out = the running sums of x along ``axis``, from its end when ``reverse``."""
    return running(x, axis, False, reverse, out)


def cumprod_backward_rows(x, grad, out):
    kernels.scan.cumprod_backward(x, grad, out)
    return out


def cumextreme_rows(x, largest, values_out, indices_out):
    """Running max (``largest``) or min of each row and the index it was taken from."""
    kernels.scan.cumextreme(x, bool(largest), values_out, indices_out)
    return values_out, indices_out


def logcumsumexp_rows(x, out):
    kernels.scan.logcumsumexp(x, out)
    return out


def logcumsumexp_backward_rows(grad, x, result, out):
    kernels.scan.logcumsumexp_backward(grad, x, result, out)
    return out


def argsort_rows(x, out):
    """out[r] = the int64 positions that sort row x[r] ascending: stable, NaNs last."""
    return argsort(x, False, out)


def mode_rows(sorted_values, sorted_indices, values_out, indices_out):
    """The most frequent value of each ascending row and its last index (see :mod:`kernels.scan`)."""
    kernels.scan.mode(sorted_values, sorted_indices, values_out, indices_out)
    return values_out, indices_out

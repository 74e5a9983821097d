"""The CPU backend of the running reductions and order statistics: running products, running
max/min with indices, running logsumexp, stable row sorts and the mode, with their gradients.

Part of :mod:`zgrad.kernels.cpu.backend` (which re-exports every function here); the same
contract holds: each function writes into ``out`` and returns it. Row functions take 2-D (N, C)
C-contiguous arrays and work along C; the Numba kernels are :mod:`kernels.scan`.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cpu import kernels

__all__ = [
    "cumprod", "cumprod_backward_rows", "cumextreme_rows", "logcumsumexp_rows", "logcumsumexp_backward_rows",
    "argsort_rows", "mode_rows",
]


def cumprod(x, axis, out):
    """out = the running products of x along ``axis``, accumulated in out's dtype."""
    return np.multiply.accumulate(x, axis=axis, dtype=out.dtype, out=out)


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
    out[...] = np.argsort(x, axis=1, kind="stable")
    return out


def mode_rows(sorted_values, sorted_indices, values_out, indices_out):
    """The most frequent value of each ascending row and its last index (see :mod:`kernels.scan`)."""
    kernels.scan.mode(sorted_values, sorted_indices, values_out, indices_out)
    return values_out, indices_out

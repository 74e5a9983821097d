"""The CUDA backend of the running reductions and order statistics (host side of
:mod:`kernels.scan`): running max/min with indices, running logsumexp, the gradient of a running
product, stable row sorts and the mode.

Part of :mod:`zgrad.kernels.cuda.backend`; each function writes into ``out`` (or the ``*_out``
arrays) and returns it. Row functions take C-contiguous (R, C) device arrays and work along C.
"""

from __future__ import annotations

from typing import Any

from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.elementwise import unary_op

__all__ = [
    "cumprod_backward_rows", "cumextreme_rows", "logcumsumexp_rows", "logcumsumexp_backward_rows", "argsort_rows",
    "mode_rows",
]


def _per_row(kernel: Any, rows: Any, *args: Any) -> None:
    """Launch a one-thread-per-row ``kernel`` over the non-empty rows of ``rows``."""
    if rows.size:
        rt.launch(kernel, rt.grid_1d(rows.shape[0]), *(a.arg() if hasattr(a, "arg") else a for a in args))


def cumprod_backward_rows(x, grad, out):
    _per_row(kernels.scan.cumprod_backward, x, x, grad, out)
    return out


def cumextreme_rows(x, largest, values_out, indices_out):
    _per_row(kernels.scan.cumextreme, x, x, bool(largest), values_out, indices_out)
    return values_out, indices_out


def logcumsumexp_rows(x, out):
    _per_row(kernels.scan.logcumsumexp, x, x, out)
    return out


def logcumsumexp_backward_rows(grad, x, result, out):
    _per_row(kernels.scan.logcumsumexp_backward, x, grad, x, result, out)
    return out


def argsort_rows(x, out):
    """out[r] = the int64 positions that sort row x[r] ascending: stable, NaNs last (a bitonic
    sort of the row's positions padded to a power of two)."""
    if not x.size:
        return out
    rows, count = x.shape
    width = 1 << (count - 1).bit_length()
    order = out if width == count else DeviceArray.empty((rows, width), out.dtype)
    rt.launch(kernels.scan.iota_rows, rt.grid_1d(order.size), order.arg())
    pairs = rt.grid_1d(rows * width // 2)
    block = 2
    while block <= width:
        stride = block // 2
        while stride:
            rt.launch(kernels.scan.bitonic_step, pairs, x.arg(), order.arg(), block, stride)
            stride //= 2
        block *= 2
    return out if order is out else unary_op("copy", order[:, :count], out)


def mode_rows(sorted_values, sorted_indices, values_out, indices_out):
    _per_row(kernels.scan.mode, sorted_values, sorted_values, sorted_indices, values_out, indices_out)
    return values_out, indices_out

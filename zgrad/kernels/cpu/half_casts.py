"""Casts between float32 and float16 or bfloat16 arrays by the vectorised loops of
:mod:`zgrad.kernels.cpu.kernels.half_casts`, for the backend's ``copy``."""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cpu import kernels
from zgrad.kernels.promotion import BFLOAT16, FLOAT16

__all__ = ["cast_by_kernel"]

_FLOAT32 = np.dtype(np.float32)
_KERNELS = {(_FLOAT32, BFLOAT16): "float32_to_bfloat16", (BFLOAT16, _FLOAT32): "bfloat16_to_float32",
            (_FLOAT32, FLOAT16): "float32_to_float16", (FLOAT16, _FLOAT32): "float16_to_float32"}
# Below this many elements numpy's own cast costs less than a kernel call.
_MIN_SIZE = 256


def cast_by_kernel(x, out: np.ndarray) -> bool:
    """Cast array ``x`` into ``out`` of the same shape by a kernel where one serves the pair of
    dtypes, and return True; return False, having done nothing, otherwise (numpy casts then).

    Arrays laid out alike (both C-ordered, both transposed, any permutation of dense axes) are cast
    in memory order. Otherwise strided operands go through a C-ordered copy: numpy copies even
    16-bit elements faster than it casts them.
    """
    if type(x) is not np.ndarray or x.size < _MIN_SIZE or x.shape != out.shape:
        return False
    name = _KERNELS.get((x.dtype, out.dtype))
    if name is None or (FLOAT16 in (x.dtype, out.dtype) and not kernels.half_casts.FLOAT16_IN_HARDWARE):
        return False
    if not (x.flags.c_contiguous and out.flags.c_contiguous):
        x, out = _in_memory_order(x, out)
    target = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    source, flat_target = np.ascontiguousarray(x).reshape(-1), target.reshape(-1)
    if source.dtype == _FLOAT32:
        getattr(kernels.half_casts, name)(source, flat_target.view(np.uint16))
    else:
        getattr(kernels.half_casts, name)(source.view(np.uint16), flat_target)
    if target is not out:
        np.copyto(out, target)
    return True


def _in_memory_order(x: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x and out with their axes in the order of x's strides, largest first (C-ordered views where
    x is dense in some order and out laid out alike)."""
    order = sorted(range(x.ndim), key=lambda axis: -abs(x.strides[axis]))
    return x.transpose(order), out.transpose(order)

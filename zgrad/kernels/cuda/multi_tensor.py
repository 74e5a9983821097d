"""The CUDA backend's ops over lists of tensors (host side of :mod:`kernels.multi_tensor`): a
launch per group of up to ``MAX_TENSORS`` tensors instead of one per tensor. Lists the kernels
cannot take (a strided or empty tensor, mixed dtypes, integers) go tensor by tensor. Part of
:mod:`zgrad.kernels.cuda.backend`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.elementwise import binary_op
from zgrad.kernels.cuda.reduce import launch_rows, vector_norm
from zgrad.kernels.promotion import FULL_FLOAT_DTYPES

__all__ = ["groupable", "mul_each", "vector_norms"]


def groupable(arrays: Sequence[DeviceArray], dtype: np.dtype) -> bool:
    """Whether the multi-tensor kernels take ``arrays``: non-empty, C-contiguous, all of the
    floating ``dtype``."""
    return dtype in FULL_FLOAT_DTYPES and all(a.dtype == dtype and a.size and a.flags.c_contiguous for a in arrays)


def _groups(arrays: Sequence[DeviceArray]) -> list[tuple[int, tuple[Any, ...]]]:
    """(index of the first, kernel arguments) of each group of at most MAX_TENSORS arrays."""
    most = kernels.multi_tensor.MAX_TENSORS
    return [(start, tuple(a.flat_arg() for a in arrays[start:start + most])) for start in range(0, len(arrays), most)]


def vector_norms(arrays: Sequence[DeviceArray], order: float, out: DeviceArray) -> DeviceArray:
    """out[k] = the ``order``-norm of arrays[k] (see :func:`reduce.vector_norm`), out (n,) in the
    arrays' dtype: one launch per group for their partial results, one for all the norms."""
    if not groupable(arrays, out.dtype):
        for k, a in enumerate(arrays):
            vector_norm(a, order, out[k:k + 1].reshape(()))
        return out
    t = out.dtype.type
    blocks, block = rt.grid_1d(max(a.size for a in arrays))
    partials = DeviceArray.empty((len(arrays), blocks), out.dtype)
    for start, group in _groups(arrays):
        rt.launch(kernels.multi_tensor.norm_partials, ((blocks, len(group)), block), group, t(order),
                  partials.flat_arg(), start)
    # each row of partials combines as in a long array's norm: sums add (order 1), extremes compare
    combine = t(order if math.isinf(order) else 1.0)
    root = t(1.0 if math.isinf(order) or order == 0 else 1.0 / order)
    launch_rows(kernels.rows.row_norm, len(arrays), partials.flat_arg(), *partials.shape, combine, root,
                out.flat_arg())
    return out


def mul_each(arrays: Sequence[DeviceArray], factor: DeviceArray) -> None:
    """arrays[k] *= factor in place for every k (``factor``: a one-element device array)."""
    if not groupable(arrays, factor.dtype):
        for a in arrays:
            binary_op("mul", a, factor, a)
        return
    blocks, block = rt.grid_1d(max(a.size for a in arrays))
    for _, group in _groups(arrays):
        rt.launch(kernels.multi_tensor.scale, ((blocks, len(group)), block), group, factor.flat_arg())

"""State arrays of the optimizers: raw arrays on the parameter's device, in its dtype.

A state entry is a raw array (numpy, or a device array on CUDA), as the fused kernels take it,
under PyTorch's name (``exp_avg``, ``square_avg``, ...), plus an int ``step``. A kernel argument
an option turns off (AMSGrad's ``max_exp_avg_sq`` without ``amsgrad``) gets :func:`unused`
instead of a state entry, so the state holds exactly the entries PyTorch's would.
"""

from __future__ import annotations

import functools
from typing import Any

from zgrad.kernels import dispatch
from zgrad.tensor import Tensor

__all__ = ["full_like", "unused"]


def full_like(param: Tensor, value: float = 0) -> Any:
    """A new C-contiguous array of ``param``'s shape, dtype and device, filled with ``value``."""
    return dispatch.full(param.shape, value, param.dtype, dispatch.device_type_of(param._data))


def unused(param: Tensor) -> Any:
    """An empty array of ``param``'s dtype and device, for a state argument the kernel ignores
    (one per dtype and device, shared: it has no element to write)."""
    return _empty(param._data.dtype, dispatch.device_type_of(param._data))


@functools.cache
def _empty(dtype: Any, device_type: str) -> Any:
    return dispatch.empty((0,), dtype, device_type)

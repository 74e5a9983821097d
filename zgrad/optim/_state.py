"""State arrays of the optimizers: raw arrays on the parameter's device, in its dtype.

A state entry is a raw array (numpy, or a device array on CUDA), as the fused kernels take it,
under PyTorch's name (``exp_avg``, ``square_avg``, ...), plus an int ``step``. A kernel argument
an option turns off (AMSGrad's ``max_exp_avg_sq`` without ``amsgrad``) gets :func:`unused`
instead of a state entry, so the state holds exactly the entries PyTorch's would. LBFGS keeps
lists of arrays (its history) and numbers besides; :func:`as_tensors` and :func:`as_arrays` convert
such values between raw arrays and tensors sharing their memory, through lists and tuples.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from zgrad.kernels import dispatch
from zgrad.tensor import Tensor

__all__ = ["as_arrays", "as_tensors", "full_like", "is_array", "unused"]


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


def is_array(value: Any) -> bool:
    """Whether ``value`` is a raw array: a numpy array, or a device array on CUDA."""
    return isinstance(value, np.ndarray) or (not isinstance(value, Tensor) and dispatch.device_type_of(value) == "cuda")


def as_tensors(value: Any) -> Any:
    """``value`` with each raw array in it (also in its lists and tuples) wrapped as a tensor
    that shares the array's memory; anything else as it is."""
    if is_array(value):
        return Tensor(value)
    return _map_items(as_tensors, value)


def as_arrays(value: Any) -> Any:
    """``value`` with each tensor in it (also in its lists and tuples) replaced by its raw
    array, not copied; anything else as it is."""
    if isinstance(value, Tensor):
        return value._data
    return _map_items(as_arrays, value)


def _map_items(convert: Any, value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(convert(item) for item in value)
    return value

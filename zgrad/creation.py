"""Tensor factories: ``tensor``, ``zeros``, ``ones``, ``rand``, ``randn``, ``from_numpy``, ``from_dlpack``."""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.device import as_device
from zgrad.kernels import dispatch
from zgrad.random import default_generator
from zgrad.tensor import Tensor

__all__ = ["tensor", "zeros", "ones", "full", "empty", "rand", "randn", "zeros_like", "ones_like",
           "from_numpy", "from_dlpack", "arange"]

DEFAULT_DTYPE = np.dtype(np.float32)


def _shape(size: tuple[Any, ...]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for n in size:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"a tensor size must be a non-negative int, got {n!r} in {size!r}")
    return tuple(int(n) for n in size)


def _finish(array: np.ndarray, requires_grad: bool, device: Any) -> Tensor:
    if device is not None and as_device(device).type != "cpu":
        dispatch.backend(as_device(device).type)
        raise NotImplementedError(f"creating tensors on {device} is not supported yet")
    return Tensor(array).requires_grad_(requires_grad) if requires_grad else Tensor(array)


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A new tensor holding a copy of ``data``.

    A numpy array keeps its dtype; Python floats give float32 and ints int64, unless ``dtype``
    says otherwise.

    Raises:
        AutogradError: ``requires_grad`` on a non-floating dtype.
    """
    if isinstance(data, Tensor):
        data = data.numpy()
    if dtype is not None:
        array = np.array(data, dtype=np.dtype(dtype))
    elif isinstance(data, np.ndarray):
        array = data.copy()
    else:
        array = np.array(data)
        if array.dtype == np.float64:
            array = array.astype(DEFAULT_DTYPE)
    return _finish(array, requires_grad, device)


def empty(*size: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    return _finish(np.empty(_shape(size), dtype=dtype or DEFAULT_DTYPE), requires_grad, device)


def full(size: Any, fill_value: float, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    return _finish(np.full(_shape((size,)), fill_value, dtype=dtype or DEFAULT_DTYPE), requires_grad, device)


def zeros(*size: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A tensor of zeros; ``size`` as ints or one tuple."""
    return _finish(np.zeros(_shape(size), dtype=dtype or DEFAULT_DTYPE), requires_grad, device)


def ones(*size: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A tensor of ones; ``size`` as ints or one tuple."""
    return _finish(np.ones(_shape(size), dtype=dtype or DEFAULT_DTYPE), requires_grad, device)


def zeros_like(t: Tensor, requires_grad: bool = False) -> Tensor:
    return zeros(t.shape, dtype=t.dtype, requires_grad=requires_grad)


def ones_like(t: Tensor, requires_grad: bool = False) -> Tensor:
    return ones(t.shape, dtype=t.dtype, requires_grad=requires_grad)


def rand(*size: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """Uniform samples in [0, 1) from the default generator (see ``manual_seed``)."""
    dtype = np.dtype(dtype or DEFAULT_DTYPE)
    return _finish(default_generator().random(_shape(size), dtype=dtype), requires_grad, device)


def randn(*size: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """Standard normal samples from the default generator (see ``manual_seed``)."""
    dtype = np.dtype(dtype or DEFAULT_DTYPE)
    return _finish(default_generator().standard_normal(_shape(size), dtype=dtype), requires_grad, device)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None) -> Tensor:
    array = np.arange(start, end, step) if end is not None else np.arange(start)
    return Tensor(array.astype(dtype) if dtype is not None else array)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array`` (writes to one show in the other)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    return Tensor(array)


def from_dlpack(obj: Any) -> Tensor:
    """A tensor sharing memory with any object that implements the DLPack protocol."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack expects an object with __dlpack__, got {type(obj).__name__}")
    return Tensor(np.from_dlpack(obj))

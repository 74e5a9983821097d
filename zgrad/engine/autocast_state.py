"""Autocast's state, per thread as PyTorch's: which device types autocast and to which dtype,
whether casts of weights are cached, how deep the ``autocast`` blocks nest, and that cache.

``zgrad.amp.autocast`` sets it; the ops consult it through
:func:`zgrad.ops.autocast.autocast_op`. A new thread starts with autocast off everywhere.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from zgrad.kernels.promotion import BFLOAT16

__all__ = ["DEVICE_TYPES", "thread_state", "is_enabled", "set_enabled", "get_dtype", "dtype_setting", "set_dtype",
           "is_cache_enabled", "set_cache_enabled", "increment_nesting", "decrement_nesting", "clear_cache",
           "check_device_type"]

DEVICE_TYPES = ("cpu", "cuda")
_DEFAULT_DTYPES = {"cpu": BFLOAT16, "cuda": np.dtype(np.float16)}  # PyTorch's


class _AutocastState(threading.local):
    """One thread's autocast settings (``threading.local`` runs ``__init__`` in each thread).

    Attributes:
        active: True while some device type autocasts and no autocast op is running: the one
            flag an op reads when autocast is off.
        enabled: device type -> whether it autocasts.
        dtypes: device type -> the dtype set for it (absent: PyTorch's default).
        cache_enabled: whether casts of leaf float32 weights are cached.
        nesting: how many ``autocast`` blocks are open; the cache is dropped when it returns to 0.
        casts: (id(weight), dtype) -> (weight, its cast), the cache (the weight is held so its id stays
            its own).
    """

    def __init__(self) -> None:
        self.active = False
        self.enabled = dict.fromkeys(DEVICE_TYPES, False)
        self.dtypes: dict[str, np.dtype] = {}
        self.cache_enabled = True
        self.nesting = 0
        self.casts: dict[tuple[int, np.dtype], tuple[Any, Any]] = {}


thread_state = _AutocastState()
"""The calling thread's state (a ``threading.local``)."""


def check_device_type(device_type: Any) -> str:
    """``device_type`` if autocast knows it.

    Raises:
        ValueError: ``device_type`` is not a str (PyTorch's message).
        RuntimeError: a device type other than "cpu" and "cuda".
    """
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type not in DEVICE_TYPES:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}' "
                           f"(zgrad autocasts {' and '.join(DEVICE_TYPES)})")
    return device_type


def is_enabled(device_type: str) -> bool:
    """Whether ``device_type`` autocasts in the calling thread."""
    return thread_state.enabled[check_device_type(device_type)]


def set_enabled(device_type: str, enabled: bool) -> None:
    """Turn autocast of ``device_type`` on or off for the calling thread."""
    state = thread_state
    state.enabled[check_device_type(device_type)] = bool(enabled)
    state.active = any(state.enabled.values())


def get_dtype(device_type: str) -> np.dtype:
    """The dtype ``device_type`` autocasts to in the calling thread (default: bfloat16 on the CPU,
    float16 on CUDA, as PyTorch)."""
    dtype = thread_state.dtypes.get(check_device_type(device_type))
    return dtype if dtype is not None else _DEFAULT_DTYPES[device_type]


def dtype_setting(device_type: str) -> np.dtype | None:
    """The dtype set for ``device_type`` in the calling thread; None where the default holds."""
    return thread_state.dtypes.get(check_device_type(device_type))


def set_dtype(device_type: str, dtype: Any) -> None:
    """Set the dtype ``device_type`` autocasts to in the calling thread (None: the default)."""
    check_device_type(device_type)
    if dtype is None:
        thread_state.dtypes.pop(device_type, None)
    else:
        thread_state.dtypes[device_type] = np.dtype(dtype)


def is_cache_enabled() -> bool:
    """Whether autocast caches casts of weights in the calling thread."""
    return thread_state.cache_enabled


def set_cache_enabled(enabled: bool) -> None:
    thread_state.cache_enabled = bool(enabled)


def increment_nesting() -> int:
    thread_state.nesting += 1
    return thread_state.nesting


def decrement_nesting() -> int:
    thread_state.nesting -= 1
    return thread_state.nesting


def clear_cache() -> None:
    """Drop the calling thread's cached casts."""
    thread_state.casts.clear()

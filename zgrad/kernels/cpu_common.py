"""What the modules of the CPU backend share: lazy imports of the Numba kernel modules, and the
1-D view the element-wise kernels take.

A kernel module is imported (and numba with it) on the first call that needs it, so importing
the backend imports no numba, compiles nothing and starts no threads.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import numpy as np

__all__ = ["flat", "kernel_module"]


@functools.cache
def kernel_module(name: str) -> ModuleType:
    """The Numba kernel module ``zgrad.kernels.<name>``, imported on first use."""
    return importlib.import_module(f"zgrad.kernels.{name}")


def flat(a: np.ndarray) -> np.ndarray:
    """A 1-D C-contiguous view (or copy, for strided input) of ``a``."""
    return np.ascontiguousarray(a).reshape(-1)

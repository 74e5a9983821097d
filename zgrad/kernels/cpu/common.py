"""What the host modules of the CPU backend share: the 1-D view the element-wise kernels take, and
the silence of numpy's floating-point reports."""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["flat", "ieee_results"]


def flat(a: np.ndarray) -> np.ndarray:
    """A 1-D C-contiguous view (or copy, for strided input) of ``a``."""
    if type(a) is np.ndarray:
        return a.ravel()  # the same, in one call
    return np.ascontiguousarray(a).reshape(-1)


def ieee_results(kernel: Callable) -> Callable:
    """``kernel`` with numpy's floating-point error reports off: a division by zero, an invalid
    operation (0/0, the root of a negative number) or an overflow gives its IEEE result (inf,
    NaN) silently, as PyTorch's kernels do, where numpy would print a RuntimeWarning. For the
    kernels on numpy's division, power and root ufuncs; the Numba kernels report nothing."""
    return np.errstate(all="ignore")(kernel)

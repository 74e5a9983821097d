"""What the host modules of the CPU backend share: the 1-D view the element-wise kernels take."""

from __future__ import annotations

import numpy as np

__all__ = ["flat"]


def flat(a: np.ndarray) -> np.ndarray:
    """A 1-D C-contiguous view (or copy, for strided input) of ``a``."""
    return np.ascontiguousarray(a).reshape(-1)

"""What the host modules of the CPU backend share: the 1-D view the element-wise kernels take,
and the float16 forms of the index kernels (Numba has no float16 arithmetic)."""

from __future__ import annotations

import numpy as np

__all__ = ["flat", "bits", "widened"]


def flat(a: np.ndarray) -> np.ndarray:
    """A 1-D C-contiguous view (or copy, for strided input) of ``a``."""
    return np.ascontiguousarray(a).reshape(-1)


def bits(a: np.ndarray) -> np.ndarray:
    """``a`` viewed as unsigned integers of its width where it is float16: a kernel that only
    moves elements moves their bits."""
    return a.view(np.uint16) if a.dtype == np.float16 else a


def widened(kernel, index: np.ndarray, src: np.ndarray, *options, out: np.ndarray) -> np.ndarray:
    """Run an index kernel that combines ``src`` into ``out``; a float16 ``out`` is combined in
    float32 and rounded back once, as PyTorch's CPU kernels accumulate half floats."""
    if out.dtype != np.float16:
        kernel(index, src, *options, out)
        return out
    wide = out.astype(np.float32)
    kernel(index, src.astype(np.float32), *options, wide)
    np.copyto(out, wide, casting="unsafe")
    return out

"""Array kernels (Numba CPU and Numba CUDA) behind one dispatch keyed by device.

Importing this package imports no numpy and no numba and compiles nothing: ``zgrad/__init__``
sets numpy's BLAS up (:mod:`zgrad.kernels.blas`) before numpy loads; backends load on first use
and Numba kernels compile lazily (and are cached on disk) on their first call.
"""

__all__ = ["blas", "dispatch"]

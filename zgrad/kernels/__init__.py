"""Array kernels (Numba CPU and Numba CUDA) behind one dispatch keyed by device.

Importing this package imports no numba and compiles nothing: backends load on first use and
Numba kernels compile lazily (and are cached on disk) on their first call.
"""

from zgrad.kernels import dispatch

__all__ = ["dispatch"]

"""The Numba CPU kernels of zgrad, one module per group, each imported on first use.

Host code reaches a module as an attribute of this package (``kernels.conv.im2col(...)`` after
``from zgrad.kernels.cpu import kernels``): the first access imports it, and numba with it (see
:mod:`zgrad.kernels._lazy`). Importing a kernel module compiles nothing: every kernel compiles on
its first call for the dtype it is given (and is cached on disk). The contract every kernel follows:

- arguments are C-contiguous numpy arrays (element-wise kernels: 1-D, the caller ravels;
  row-wise kernels: 2-D (N, C), reducing over C), float32 or float64, computed in that dtype;
- results go into ``out`` (or state arrays are updated in place) and nothing is returned, except
  by ``cross_entropy_forward``, which returns (loss sum, counted rows);
- scalars are Python floats, ints and bools;
- large calls run multi-threaded (``NUMBA_NUM_THREADS`` threads), small ones on the caller's thread.
"""

from zgrad.kernels._lazy import lazy_submodules

__all__ = [
    "activation", "attention", "batch_norm", "collectives", "conv", "elementwise", "embedding", "gather", "half_casts", "loss",
    "norm", "optim", "pointwise", "pool", "reduce", "rnn", "rowwise", "scan", "search", "sort_keys", "special", "special_functions", "vector_math",
    "winograd",
]

__getattr__ = lazy_submodules(__name__, __all__)

"""The Numba CUDA kernels of zgrad, one module per group, each imported on first use.

Host code reaches a module as an attribute of this package (``kernels.rows.variance`` after
``from zgrad.kernels.cuda import kernels``): the first access imports it (see
:mod:`zgrad.kernels._lazy`) under the simulator's launch lock, since a launch in progress swaps
module globals. What the modules share (the ``cuda.jit`` options, the math kernels call) is in
:mod:`zgrad.kernels.cuda.kernels.common`.
"""

from zgrad.kernels._lazy import lazy_submodules
from zgrad.kernels.cuda.runtime import import_lock

__all__ = ["attention", "common", "elementwise", "elementwise_math", "elementwise_special", "index", "layer_norm", "layers", "linalg", "multi_tensor", "optim", "rnn", "rows", "scan",
           "simulator_math", "sorting"]

__getattr__ = lazy_submodules(__name__, __all__, import_lock)

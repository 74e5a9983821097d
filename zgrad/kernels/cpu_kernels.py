"""The Numba CPU kernels of zgrad, as one namespace for the CPU backend.

Importing this module imports numba but compiles nothing: every kernel compiles on its first call
for the dtype it is given (and is cached on disk). The contract every kernel follows:

- arguments are C-contiguous numpy arrays (element-wise kernels: 1-D, the caller ravels;
  row-wise kernels: 2-D (N, C), reducing over C), float32 or float64, computed in that dtype;
- results go into ``out`` (or state arrays are updated in place) and nothing is returned, except
  by ``cross_entropy_forward``, which returns (loss sum, counted rows);
- scalars are Python floats, ints and bools;
- large calls run multi-threaded (``NUMBA_NUM_THREADS`` threads), small ones on the caller's thread.
"""

from zgrad.kernels.cpu_elementwise import (
    exp_forward,
    log_forward,
    relu_backward,
    relu_forward,
    sigmoid_backward,
    sigmoid_forward,
    tanh_backward,
    tanh_forward,
)
from zgrad.kernels.cpu_optim import adadelta_step, adagrad_step, adam_step, rmsprop_step, sgd_step
from zgrad.kernels.cpu_rowwise import (
    bias_act_forward,
    cross_entropy_backward,
    cross_entropy_forward,
    log_softmax_backward,
    log_softmax_forward,
    softmax_backward,
    softmax_forward,
)

__all__ = [
    "adadelta_step",
    "adagrad_step",
    "adam_step",
    "bias_act_forward",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "exp_forward",
    "log_forward",
    "log_softmax_backward",
    "log_softmax_forward",
    "relu_backward",
    "relu_forward",
    "rmsprop_step",
    "sgd_step",
    "sigmoid_backward",
    "sigmoid_forward",
    "softmax_backward",
    "softmax_forward",
    "tanh_backward",
    "tanh_forward",
]

"""The CUDA backend: the op vocabulary (:mod:`zgrad.kernels.vocabulary`) on device arrays
(:class:`~zgrad.kernels.cuda.array.DeviceArray`), every op on Numba CUDA kernels.

Imported by dispatch on the first CUDA use; importing it checks that CUDA work can run here (a
GPU, or Numba's simulator with ``NUMBA_ENABLE_CUDASIM=1``) and raises
:class:`~zgrad.kernels.cuda.runtime.CudaUnavailableError` otherwise. Every function writes into
``out`` and returns it; kernels are compiled on their first launch. The groups live in
``pointwise`` (element-wise), ``reduce`` (reductions, rows, losses, matmul), ``optim`` (the fused
optimizer steps), ``index`` (indexing, embeddings), ``layers`` (convolution, pooling,
normalization) and ``sequence`` (LSTM, GRU), modules of this package.

Kernels run on the calling thread's stream: a device array produced on one thread and read on
another needs :func:`synchronize` on the producer first (the RPC and collectives' staging does
this).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels.cuda import allocation_cache, memory_pool
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.attention import attention, attention_backward  # noqa: F401 - fused attention
from zgrad.kernels.cuda.dlpack import dlpack_device, from_dlpack, to_dlpack  # noqa: F401 - DLPack
from zgrad.kernels.cuda.elementwise import upload
from zgrad.kernels.cuda.index import (  # noqa: F401 - the indexing and embedding ops
    check_index_range, concatenate, embedding, embedding_backward, embedding_bag, embedding_bag_backward,
    embedding_bag_per_sample_weights_backward, embedding_renorm, gather, index_add, put_positions, scatter,
    scatter_add, scatter_slice, stack, take, take_positions,
)
from zgrad.kernels.cuda.math_ops import binary_math, lerp, nan_to_num, orthogonal_polynomial, unary_math  # noqa: F401 - math functions
from zgrad.kernels.cuda.layers import (  # noqa: F401 - convolution, pooling and normalization
    adaptive_avg_pool2d, adaptive_avg_pool2d_backward, avg_pool2d, avg_pool2d_backward, batch_norm,
    batch_norm_backward, conv2d, conv2d_backward, group_norm, group_norm_backward, max_pool2d, max_pool2d_backward,
)
from zgrad.kernels.cuda.pointwise import (  # noqa: F401 - element-wise ops
    abs, add, add_scaled, addcdiv, addcmul, bias_act, clamp, clamp_backward, compare, copy, div, divide_inplace,
    dropout, dropout_backward, exp, extremum_backward, floor_divide, gelu, gelu_backward, leaky_relu,
    leaky_relu_backward, log, logical_not, maximum, minimum, mul, neg, pointwise_loss, pointwise_loss_backward,
    pow, reduce_and_copy, reduce_inplace, reduce_pair, relu,
    relu_backward, remainder, scale_copy, sigmoid, sigmoid_backward, sign, smooth_activation,
    smooth_activation_backward, sqrt, sub, tanh, tanh_backward, where,
)
from zgrad.kernels.cuda.linalg import (  # noqa: F401 - factorizations and solves: CPU only, each raises
    linalg_cholesky, linalg_cholesky_ex, linalg_det, linalg_eigh, linalg_inv, linalg_lu_factor, linalg_qr,
    linalg_slogdet, linalg_solve, linalg_svd,
)
from zgrad.kernels.cuda.sampling import (  # noqa: F401 - random draws (on the host, copied up)
    multinomial, random_exponential, random_integers, random_normal, random_uniform,
)
from zgrad.kernels.cuda.multi_tensor import mul_each, vector_norms  # noqa: F401 - ops over lists of tensors
from zgrad.kernels.cuda.optim import (  # noqa: F401 - the fused optimizer steps
    adadelta_step, adagrad_step, adam_step, adam_steps, adamax_step, asgd_step, nadam_step,
    non_finite_check_and_unscale, radam_step, rmsprop_step, rprop_step, sgd_step,
)
from zgrad.kernels.cuda.reduce import (  # noqa: F401 - reductions, rows, losses, matmul
    argmax, argmin, class_loss, class_loss_backward, cross_entropy, cross_entropy_backward, cumprod, cumsum,
    count_nonzero, distribute_equal, extreme_rows, extreme_value, extremes_rows, log_softmax, log_softmax_backward, logsumexp_backward_rows, logsumexp_rows,
    matmul, nansum, nll, nll_backward, pointwise_loss_sum, prod, prod_backward_rows, softmax,
    softmax_backward, sum, var_backward_rows, var_rows, vector_norm,
)
from zgrad.kernels.cuda.scans import (  # noqa: F401 - running reductions and order statistics
    argsort_rows, cumextreme_rows, cumprod_backward_rows, logcumsumexp_backward_rows, logcumsumexp_rows, mode_rows,
)
from zgrad.kernels.cuda.sorting import (  # noqa: F401
    argsort, argsort_slices, argtopk, nonzero, scatter_reduce, searchsorted, select_rows,
)
from zgrad.kernels.cuda.sequence import gru_backward, gru_forward, lstm_backward, lstm_forward  # noqa: F401

# Ops that take float16 and bfloat16 arrays themselves (see zgrad.kernels.half_precision): matmul
# runs them on the tensor cores through cuBLAS, accumulating in float32, and widens them itself
# where cuBLAS cannot run.
HALF_NATIVE_OPS = frozenset({"matmul"})

DEVICE_TYPE = "cuda"

rt.require_device()


def device_count() -> int:
    """How many CUDA devices this process can use."""
    return rt.device_count()


def device_properties() -> dict[str, Any]:
    """Name, compute capability, multiprocessors and peak GB/s and GFLOP/s of the device."""
    return rt.device_properties()


def memory_info() -> tuple[int, int]:
    """(free, total) bytes of the device's memory (the host's in the simulator)."""
    return rt.memory_info()


def synchronize() -> None:
    """Wait for the calling thread's queued kernels and copies."""
    rt.synchronize()


def memory_stats() -> dict[str, int]:
    """Bytes in use and kept for reuse by zgrad's allocations, their peaks, and event counts
    (:func:`zgrad.kernels.cuda.allocation_cache.memory_stats`)."""
    return allocation_cache.memory_stats()


def reset_peak_memory_stats() -> None:
    """Start the peaks of :func:`memory_stats` again from the current values."""
    allocation_cache.reset_peak_memory_stats()


def empty_cache() -> None:
    """Give back the memory kept for reuse: every thread's freed allocations, then (on a GPU with
    the driver's pool) the pool's unused memory to the driver, after waiting for the device."""
    allocation_cache.empty_cache()
    if not rt.SIMULATOR:
        memory_pool.release_unused()


# --- allocation and transfer ----------------------------------------------------------------------

def empty(shape: tuple[int, ...], dtype: np.dtype) -> DeviceArray:
    return DeviceArray.empty(shape, dtype)


def full(shape: tuple[int, ...], value: Any, dtype: np.dtype) -> DeviceArray:
    return copy(value, DeviceArray.empty(shape, dtype))


def zeros(shape: tuple[int, ...], dtype: np.dtype) -> DeviceArray:
    return full(shape, 0, dtype)


def asarray(data: Any, dtype: np.dtype | None = None) -> DeviceArray:
    """``data`` on the device: a DeviceArray as it is (cast when ``dtype`` differs), anything
    numpy takes copied up."""
    if isinstance(data, DeviceArray):
        return data if dtype is None or data.dtype == dtype else data.astype(dtype)
    return upload(data, dtype)


def to_host(x: DeviceArray) -> np.ndarray:
    """A host copy of ``x`` (blocks until it is there)."""
    return x.to_host()


def pinned_copy(x: np.ndarray) -> np.ndarray:
    """A copy of host array ``x`` in a pinned buffer of the pool (page-locked: the device reads it
    by DMA), given back to the pool once the copy and every view of it are gone."""
    host = rt.pinned_pool().lease(x.shape, x.dtype)
    np.copyto(host, x)
    return host


def is_pinned(x: np.ndarray) -> bool:
    """Whether host array ``x`` is (a view of) a pinned buffer leased from the pool."""
    return rt.is_leased(x)


def staged_to_host(x: DeviceArray) -> np.ndarray:
    """A C-contiguous host copy of ``x`` in a pinned buffer of the pool, copied on the calling
    thread's stream (blocks until it is there); the buffer goes back to the pool once the copy and
    every view of it are gone."""
    host = rt.pinned_pool().lease(x.shape, x.dtype)
    return x.to_host(out=host)

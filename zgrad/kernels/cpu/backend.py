"""The CPU backend: the op vocabulary (:mod:`zgrad.kernels.vocabulary`) on numpy arrays.

Every function writes into ``out`` and returns it. Single-pass numpy ufuncs and BLAS are used
as they are (they already run at memory or FLOP speed); fused kernels, where one Numba loop
replaces several numpy temporaries, come from the modules of :mod:`zgrad.kernels.cpu.kernels`, each
imported (and so numba with it) only on the first call that needs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.errors import ZgradError
from zgrad.kernels.cpu import kernels
from zgrad.kernels.cpu.common import flat, ieee_results
from zgrad.kernels.cpu.half_casts import cast_by_kernel
from zgrad.kernels.cpu.parts import ufunc_in_parts
from zgrad.kernels.cpu.attention import attention, attention_backward  # noqa: F401 - fused attention
from zgrad.kernels.cpu.layers import (  # noqa: F401 - convolution, pooling and normalization ops
    adaptive_avg_pool2d, adaptive_avg_pool2d_backward, avg_pool2d, avg_pool2d_backward, batch_norm,
    batch_norm_backward, conv2d, conv2d_backward, group_norm, group_norm_backward, max_pool2d, max_pool2d_backward,
)
from zgrad.kernels.cpu.linalg import (  # noqa: F401 - matrix factorizations and solves (LAPACK)
    linalg_cholesky, linalg_cholesky_ex, linalg_det, linalg_eigh, linalg_inv, linalg_lu_factor, linalg_qr,
    linalg_slogdet, linalg_solve, linalg_svd,
)
from zgrad.kernels.cpu.scans import (  # noqa: F401 - running reductions and order statistics
    argsort_rows, cumextreme_rows, cumprod, cumprod_backward_rows, cumsum, logcumsumexp_backward_rows, logcumsumexp_rows,
    mode_rows,
)
from zgrad.kernels.cpu.math_ops import binary_math, lerp, nan_to_num, orthogonal_polynomial, unary_math  # noqa: F401 - math functions
from zgrad.kernels.cpu.sequence import (  # noqa: F401 - embeddings, recurrences, dropout, activations, losses
    check_index_range, class_loss, class_loss_backward, dropout, dropout_backward, embedding, embedding_backward, embedding_bag,
    embedding_bag_backward, embedding_bag_per_sample_weights_backward, embedding_renorm, gelu, gelu_backward,
    gru_backward, gru_forward, leaky_relu, leaky_relu_backward, lstm_backward, lstm_forward, nll, nll_backward,
    pointwise_loss, pointwise_loss_backward, pointwise_loss_sum, smooth_activation, smooth_activation_backward, zeros,
)
from zgrad.kernels.cpu.sorting import (  # noqa: F401
    argsort, argsort_slices, argtopk, nonzero, scatter_reduce, searchsorted, select_rows,
)
from zgrad.kernels.cpu.tensor_ops import (  # noqa: F401 - the tensor-API ops
    abs, add_scaled, addcdiv, addcmul, argmax, argmin, clamp, clamp_backward, compare, count_nonzero, distribute_equal,
    extreme_rows, extremes_rows, sum_over,
    extremum_backward, floor_divide, gather, index_add, logical_not, logsumexp_backward_rows, logsumexp_rows, maximum, minimum,
    prod_backward_rows, remainder, scatter, scatter_add, sign, sqrt,
    take, var_backward_rows, var_rows, vector_norm, where,
)
from zgrad.kernels.sampling import (  # noqa: F401 - random draws (host code, shared with the CUDA backend)
    multinomial, random_exponential, random_integers, random_normal, random_uniform,
)
from zgrad.kernels.promotion import HALF_DTYPES
from zgrad.kernels.threads import PARALLEL_MIN_SIZE
from zgrad.kernels.vocabulary import ACTIVATION_CODES

DEVICE_TYPE = "cpu"


def _rows(a: np.ndarray) -> np.ndarray:
    """A 2-D (rows, last axis) C-contiguous view (or copy) of ``a``."""
    a = np.ascontiguousarray(a)
    return a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)


# --- allocation -------------------------------------------------------------------------------

def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.empty(shape, dtype)


def full(shape: tuple[int, ...], value: float, dtype: np.dtype) -> np.ndarray:
    return np.full(shape, value, dtype=dtype)


def asarray(data, dtype: np.dtype | None = None) -> np.ndarray:
    return np.asarray(data, dtype=dtype)


def to_host(x: np.ndarray) -> np.ndarray:
    return x


def to_dlpack(x: np.ndarray, **kwargs: Any) -> Any:
    return x.__dlpack__(**kwargs)


def dlpack_device(x: np.ndarray) -> tuple[int, int]:
    return x.__dlpack_device__()


def from_dlpack(obj: Any) -> np.ndarray:
    return np.from_dlpack(obj)


# --- element-wise -----------------------------------------------------------------------------

def add(a, b, out):
    return ufunc_in_parts(np.add, (a, b), out, PARALLEL_MIN_SIZE)


def sub(a, b, out):
    return ufunc_in_parts(np.subtract, (a, b), out, PARALLEL_MIN_SIZE)


def mul(a, b, out):
    return ufunc_in_parts(np.multiply, (a, b), out, PARALLEL_MIN_SIZE)


@ieee_results
def div(a, b, out):
    return ufunc_in_parts(np.true_divide, (a, b), out, PARALLEL_MIN_SIZE)


@ieee_results
def pow(a, b, out):  # noqa: A001 - op vocabulary name
    if out.dtype.kind in "iu" and np.any(np.less(b, 0)):
        return _integer_pow_negative(a, b, out)
    return np.power(a, b, out=out)


def _integer_pow_negative(a, b, out):
    """Integer powers with negative exponents, as PyTorch's: a number exponent is refused; a tensor
    exponent gives 1 for a base of 1, +-1 for -1 (by the exponent's parity) and 0 for any other."""
    if np.ndim(b) == 0 and not isinstance(b, np.ndarray):
        raise ZgradError("Integers to negative integer powers are not allowed.")
    negative = np.less(b, 0)
    powers = np.power(a, np.where(negative, 0, b))
    reciprocal = np.where(np.equal(a, 1), 1, np.where(np.equal(a, -1), np.where(np.remainder(b, 2) == 0, 1, -1), 0))
    np.copyto(out, np.where(negative, reciprocal, powers), casting="unsafe")
    return out


def neg(x, out):
    return ufunc_in_parts(np.negative, (x,), out, PARALLEL_MIN_SIZE)


def _unary_fused(name: str, x, out):
    if x.size == 0:
        return out
    flat_out = out.reshape(-1)
    getattr(kernels.elementwise, name)(flat(x), flat_out)
    return out


def exp(x, out):
    return _unary_fused("exp_forward", x, out)


def log(x, out):
    return _unary_fused("log_forward", x, out)


def tanh(x, out):
    return np.tanh(x, out=out)  # numpy's SIMD tanh beats a portable Numba loop; fused uses stay in Numba


def sigmoid(x, out):
    return _unary_fused("sigmoid_forward", x, out)


def relu(x, out):
    if x.dtype.kind != "f":  # integer relu (PyTorch keeps the dtype); the fused kernel is for floats
        return np.maximum(x, 0, out=out)
    return _unary_fused("relu_forward", x, out)


def _backward_fused(name: str, grad, saved, out):
    if out.size == 0:
        return out
    getattr(kernels.elementwise, name)(flat(grad), flat(saved), out.reshape(-1))
    return out


def relu_backward(grad, x, out):
    return _backward_fused("relu_backward", grad, x, out)


def tanh_backward(grad, y, out):
    return _backward_fused("tanh_backward", grad, y, out)


def sigmoid_backward(grad, y, out):
    return _backward_fused("sigmoid_backward", grad, y, out)


# --- linear algebra and reductions ------------------------------------------------------------

# numpy's bundled OpenBLAS runs a float32 product A·Bᵀ (B a transposed C-order matrix, as in
# ``x @ weight.T``) slowly when A has few rows. Computing (B·Aᵀ)ᵀ instead and copying it into
# ``out`` measured faster where n >= 8·m, and no faster or slower elsewhere, so only that case is
# swapped (figures: bench/README.md, Design figures).
_SWAP_MIN_RATIO = 8
_SWAP_MIN_FLOPS = 1 << 18


def _short_times_transposed(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.ndim == 2 and b.ndim == 2 and a.dtype == np.float32 and b.dtype == np.float32
        and b.flags.f_contiguous and not b.flags.c_contiguous
        and a.shape[0] * _SWAP_MIN_RATIO <= b.shape[1]
        and a.shape[0] * a.shape[1] * b.shape[1] >= _SWAP_MIN_FLOPS
    )


def matmul(a, b, out, bias=None, row_sums=None):
    """out = a @ b (numpy's matmul), plus ``bias`` (broadcast) when given; with ``row_sums``
    given (2-D ``a``), a's rows summed into it."""
    if row_sums is not None:
        sum_over(a, (1,), False, row_sums)
    if a.ndim > 2 and b.ndim == 2 and out.flags.c_contiguous:
        # numpy runs a stack of matrices times one matrix as one BLAS call per matrix; folding the
        # stack into the rows of one product (copying ``a`` first where its layout does not fold,
        # as PyTorch does) gives BLAS one large product to block and thread.
        _matmul_2d(a.reshape(-1, a.shape[-1]), b, out.reshape(-1, out.shape[-1]))
    else:
        _matmul_2d(a, b, out)
    if bias is not None:
        add(out, bias, out)
    return out


def _matmul_2d(a, b, out):
    if _short_times_transposed(a, b):
        np.copyto(out, np.matmul(b.T, a.T).T)
        return out
    return np.matmul(a, b, out=out)


# The reductions accumulate in out's dtype (numpy's loop dtype for a reduction with ``out``), so an
# int64 ``out`` sums bool and small-integer inputs without wrapping.

sum = sum_over  # noqa: A001 - op vocabulary name


def prod(x, axis, keepdims, out):
    return np.multiply.reduce(x, axis=axis, keepdims=keepdims, out=out)


def nansum(x, axis, keepdims, out):
    return np.nansum(x, axis=axis, dtype=out.dtype, keepdims=keepdims, out=out)


def extreme_value(x, largest: bool):
    """The max (``largest``) or min of a non-empty array, as a Python number."""
    return (x.max() if largest else x.min()).item()


# --- layout -----------------------------------------------------------------------------------

def copy(x, out):
    if cast_by_kernel(x, out):  # float32 <-> float16, bfloat16
        return out
    # beyond the half range is inf, and NaN or inf as an integer is undefined, silently as in PyTorch
    if out.dtype in HALF_DTYPES or (out.dtype.kind in "iu" and getattr(x, "dtype", out.dtype).kind == "f"):
        return _unsafe_cast(x, out)
    np.copyto(out, x, casting="unsafe")
    return out


@ieee_results
def _unsafe_cast(x, out):
    np.copyto(out, x, casting="unsafe")
    return out


def stack(arrays, axis, out):
    if axis == 0 and arrays[0].ndim and out.flags.c_contiguous:
        # Stacking along a new first axis lays the arrays end to end, which is concatenating them
        # along their own first axis: numpy does that without np.stack's per-array expand_dims.
        np.concatenate(arrays, axis=0, out=out.reshape(-1, *arrays[0].shape[1:]))
        return out
    return np.stack(arrays, axis=axis, out=out)


def concatenate(arrays, axis, out):
    return np.concatenate(arrays, axis=axis, out=out)


def _is_advanced(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, (list, np.ndarray)) for p in parts)


def scatter_slice(index, values, out):
    """out[index] += values (the backward of indexing; ``out`` starts zeroed).

    Integer-array indices may repeat a position; ``np.add.at`` adds every occurrence, where
    ``out[index] += values`` would keep only the last one.
    """
    if _is_advanced(index):
        np.add.at(out, index, values)
    else:
        out[index] += values
    return out


# --- row-wise fused kernels (last axis) -------------------------------------------------------

def bias_act(x, bias, activation: str, out):
    kernels.rowwise.bias_act_forward(_rows(x), flat(bias), ACTIVATION_CODES[activation], out.reshape(-1, out.shape[-1]))
    return out


def softmax(x, out):
    kernels.rowwise.softmax_forward(_rows(x), out.reshape(-1, out.shape[-1]))
    return out


def log_softmax(x, out):
    kernels.rowwise.log_softmax_forward(_rows(x), out.reshape(-1, out.shape[-1]))
    return out


def softmax_backward(grad, y, out):
    kernels.rowwise.softmax_backward(_rows(grad), _rows(y), out.reshape(-1, out.shape[-1]))
    return out


def log_softmax_backward(grad, y, out):
    kernels.rowwise.log_softmax_backward(_rows(grad), _rows(y), out.reshape(-1, out.shape[-1]))
    return out


def cross_entropy(logits, targets, ignore_index: int, mean: bool, probs_out, loss_out, divisor_out):
    """loss_out = the sum of the counted rows' losses, over their count when ``mean`` (NaN for
    none); divisor_out = that count (or 1); softmax into ``probs_out``."""
    total, counted = kernels.rowwise.cross_entropy_forward(_rows(logits), targets, ignore_index, probs_out)
    divisor = counted if mean else 1
    loss_out[()] = total / divisor if divisor else np.nan
    divisor_out[()] = divisor
    return loss_out


def cross_entropy_backward(probs, targets, ignore_index: int, grad, divisor, out):
    """out = grad / divisor * (probs - onehot(targets)), 0 on ignored rows."""
    divisor = float(divisor)
    scale = float(grad) / divisor if divisor else np.nan
    kernels.rowwise.cross_entropy_backward(probs, targets, ignore_index, scale, out)
    return out


# --- optimizer updates (in place on contiguous parameters) ------------------------------------

def sgd_step(param, grad, momentum_buf, lr, momentum, dampening, weight_decay, nesterov, first_step, maximize):
    kernels.optim.sgd_step(
        param.reshape(-1), flat(grad), momentum_buf.reshape(-1),
        lr, momentum, dampening, weight_decay, nesterov, first_step, maximize,
    )


def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay, amsgrad,
              maximize, decoupled_weight_decay):
    kernels.optim.adam_step(
        param.reshape(-1), flat(grad), exp_avg.reshape(-1), exp_avg_sq.reshape(-1), max_exp_avg_sq.reshape(-1),
        step, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay,
    )


def rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps, weight_decay, momentum,
                 centered, maximize):
    kernels.optim.rmsprop_step(
        param.reshape(-1), flat(grad), square_avg.reshape(-1), grad_avg.reshape(-1), momentum_buffer.reshape(-1),
        lr, alpha, eps, weight_decay, momentum, centered, maximize,
    )


def non_finite_check_and_unscale(grad, found_inf, inv_scale: float):
    """grad *= inv_scale in place; found_inf[0] = 1 where grad holds an inf or NaN."""
    if grad.flags.c_contiguous and grad.dtype in (np.float32, np.float64):
        kernels.optim.non_finite_check_and_unscale(grad.reshape(-1), found_inf, float(inv_scale))
        return grad
    if not np.isfinite(grad).all():
        found_inf[0] = 1
    np.multiply(grad, np.float32(inv_scale), out=grad, casting="unsafe")  # in float32 at least, as PyTorch
    return grad


def adagrad_step(param, grad, state_sum, step, lr, lr_decay, weight_decay, eps, maximize):
    kernels.optim.adagrad_step(param.reshape(-1), flat(grad), state_sum.reshape(-1), step, lr, lr_decay, weight_decay,
                          eps, maximize)


def adadelta_step(param, grad, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize):
    kernels.optim.adadelta_step(param.reshape(-1), flat(grad), square_avg.reshape(-1), acc_delta.reshape(-1), lr, rho,
                           eps, weight_decay, maximize)


def nadam_step(param, grad, exp_avg, exp_avg_sq, step, mu_product, lr, beta1, beta2, eps, weight_decay, momentum_decay,
               maximize, decoupled_weight_decay):
    kernels.optim.nadam_step(param.reshape(-1), flat(grad), exp_avg.reshape(-1), exp_avg_sq.reshape(-1), step,
                             mu_product, lr, beta1, beta2, eps, weight_decay, momentum_decay, maximize,
                             decoupled_weight_decay)


def radam_step(param, grad, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay, maximize,
               decoupled_weight_decay):
    kernels.optim.radam_step(param.reshape(-1), flat(grad), exp_avg.reshape(-1), exp_avg_sq.reshape(-1), step, lr,
                             beta1, beta2, eps, weight_decay, maximize, decoupled_weight_decay)


def adamax_step(param, grad, exp_avg, exp_inf, step, lr, beta1, beta2, eps, weight_decay, maximize):
    kernels.optim.adamax_step(param.reshape(-1), flat(grad), exp_avg.reshape(-1), exp_inf.reshape(-1), step, lr,
                              beta1, beta2, eps, weight_decay, maximize)


def asgd_step(param, grad, ax, eta, mu, lambd, weight_decay, maximize):
    kernels.optim.asgd_step(param.reshape(-1), flat(grad), ax.reshape(-1), eta, mu, lambd, weight_decay, maximize)


def rprop_step(param, grad, prev, step_size, etaminus, etaplus, step_size_min, step_size_max, maximize):
    kernels.optim.rprop_step(param.reshape(-1), flat(grad), prev.reshape(-1), step_size.reshape(-1), etaminus,
                             etaplus, step_size_min, step_size_max, maximize)


# --- collective reductions (1-D C-contiguous arrays, in place) --------------------------------

_REDUCE_CODES = {"sum": 0, "product": 1, "min": 2, "max": 3}
_REDUCE_UFUNCS = {"sum": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum}
# dtypes the Numba reduction kernels compile for; others (the small integers) take numpy's ufuncs.
_KERNEL_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


def _reduce(kernel: str, op: str, out, numpy_fallback, *arrays) -> None:
    if out.dtype in _KERNEL_DTYPES:
        getattr(kernels.collectives, kernel)(out, *arrays, _REDUCE_CODES[op])
    else:
        numpy_fallback(_REDUCE_UFUNCS[op])


def reduce_inplace(out, src, op: str):
    _reduce("reduce_inplace", op, out, lambda ufunc: ufunc(out, src, out=out), src)
    return out


def reduce_pair(out, a, b, op: str):
    _reduce("reduce_pair", op, out, lambda ufunc: ufunc(a, b, out=out), a, b)
    return out


def reduce_and_copy(out, copy_out, src, op: str):
    def fallback(ufunc):
        ufunc(out, src, out=out)
        np.copyto(copy_out, out)

    _reduce("reduce_and_copy", op, out, fallback, copy_out, src)
    return out


def divide_inplace(out, divisor: int):
    if out.dtype not in _KERNEL_DTYPES:
        np.true_divide(out, divisor, out=out, casting="unsafe")
    elif out.dtype.kind == "f":
        kernels.collectives.divide_inplace(out, divisor)
    else:
        kernels.collectives.divide_inplace_trunc(out, divisor)
    return out


def scale_copy(out, src, divisor: int):
    if out.dtype in _KERNEL_DTYPES and src.dtype == out.dtype:
        kernels.collectives.scale_copy(out, src, divisor)
    else:
        np.true_divide(src, divisor, out=out, casting="unsafe")
    return out

"""The CPU backend of the tensor-API ops: comparisons, clamp, maximum/minimum, selection by index
or mask, reductions with indices, variance, logsumexp, and in-place updates.

Part of :mod:`zgrad.kernels.cpu.backend` (which re-exports every function here); the same contract holds:
each function writes into ``out`` and returns it. Single numpy calls are used where they already
run at memory speed; the Numba kernels of :mod:`kernels.pointwise`, :mod:`kernels.gather` and
:mod:`kernels.reduce` are imported (with numba) on the first call that needs them.
"""

from __future__ import annotations

import math

import numpy as np

from zgrad.kernels.cpu import kernels
from zgrad.kernels.cpu.common import flat, ieee_results

__all__ = [
    "remainder", "floor_divide", "maximum", "minimum", "abs", "sign", "sqrt", "clamp", "clamp_backward", "extremum_backward",
    "compare", "logical_not", "where", "argmax", "argmin", "extreme_rows", "extremes_rows", "sum_over", "count_nonzero",
    "take", "gather", "index_add",
    "scatter", "scatter_add", "var_rows", "var_backward_rows", "logsumexp_rows", "logsumexp_backward_rows", "distribute_equal",
    "prod_backward_rows", "vector_norm", "add_scaled", "addcmul", "addcdiv",
]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # the dtypes of the Numba reductions here
_KERNEL_SUM_MIN_SIZE = 1 << 12  # below it numpy's call costs less than the kernel's

_COMPARISONS = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


# --- element-wise -----------------------------------------------------------------------------

@ieee_results
def remainder(a, b, out):
    return np.remainder(a, b, out=out)  # Python's sign rule (the divisor's), as torch.remainder


@ieee_results
def floor_divide(a, b, out):
    return np.floor_divide(a, b, out=out)


def maximum(a, b, out):
    return np.maximum(a, b, out=out)


def minimum(a, b, out):
    return np.minimum(a, b, out=out)


def abs(x, out):  # noqa: A001 - op vocabulary name
    return np.absolute(x, out=out)


def sign(x, out):
    if out.dtype in (np.float32, np.float64):
        if out.size:
            kernels.special.sign_forward(flat(x), out.reshape(-1))  # 0 for NaN, as PyTorch
        return out
    np.sign(x, out=out)
    if out.dtype.kind == "f":
        np.copyto(out, 0, where=np.isnan(out))
    return out


@ieee_results
def sqrt(x, out):
    return np.sqrt(x, out=out)


def clamp(x, low, high, out):
    """out = x clamped to [low, high] (None: open); ``out`` may be ``x``."""
    if out.dtype.kind != "f" or not out.flags.c_contiguous:
        return np.clip(x, low, high, out=out)
    kernels.pointwise.clamp_forward(
        flat(x), -np.inf if low is None else low, np.inf if high is None else high, out.reshape(-1)
    )
    return out


def clamp_backward(grad, x, low, high, out):
    kernels.pointwise.clamp_backward(flat(grad), flat(x), low, high, out.reshape(-1))
    return out


def extremum_backward(grad, a, b, take_max, out_a, out_b):
    """Gradients of maximum/minimum for same-shaped ``grad``, ``a``, ``b``, into ``out_a``/``out_b``."""
    kernels.pointwise.extremum_backward(
        flat(grad), flat(a), flat(b), take_max, out_a.reshape(-1), out_b.reshape(-1)
    )
    return out_a, out_b


def compare(op, a, b, out):
    """``op`` in eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor, into a bool ``out``."""
    return _COMPARISONS[op](a, b, out=out)


def logical_not(x, out):
    return np.logical_not(x, out=out)


def where(cond, a, b, out):
    """out = a where cond else b (all broadcast to ``out``); ``b`` may be ``out`` itself."""
    if b is not out:
        np.copyto(out, b, casting="unsafe")
    np.copyto(out, a, casting="unsafe", where=cond)
    return out


# --- selection and reductions -----------------------------------------------------------------

def sum_over(x, axis, keepdims, out):
    """out = the sum of x over the axes ``axis`` (a tuple). Float32 and float64 arrays summed over
    their last axes (or all) by the row kernel, in float64 and at memory speed (numpy's pairwise
    sum of float32 runs at a third of it), one long row cut into a piece per thread; the rest by
    numpy's reduction, in ``out``'s dtype."""
    if x.dtype not in _FLOATS or out.dtype not in _FLOATS or x.size < _KERNEL_SUM_MIN_SIZE \
            or axis != tuple(range(x.ndim - len(axis), x.ndim)) or not x.flags.c_contiguous:
        return np.add.reduce(x, axis=axis, keepdims=keepdims, out=out)  # np.sum's own wrapper costs more
    rows = x.reshape(-1, math.prod(x.shape[x.ndim - len(axis):]))
    pieces, tail = _pieces(rows, kernels.reduce.sum_rows.task_count(rows.size))
    if pieces is None:
        kernels.reduce.sum_rows(rows, out.reshape(-1))
        return out
    partial = np.empty(pieces.shape[0], np.float64)
    kernels.reduce.sum_rows(pieces, partial)
    out[...] = np.add.reduce(partial) + np.add.reduce(tail, dtype=np.float64)
    return out


def extreme_rows(x, largest, out):
    """out[r] = the max (``largest``) or min of the non-empty row x[r] (rows, n); NaN wins. Float
    rows by the row kernel; one long row (a full reduction) cut into a piece per thread, or on one
    thread by numpy's 1-D reduction, which streams memory faster; other dtypes by numpy's."""
    reduce = np.maximum.reduce if largest else np.minimum.reduce  # np.max's reductions, without its wrapper
    if x.dtype not in _FLOATS:
        return reduce(x, axis=1, out=out)
    pieces, tail = _pieces(x, kernels.reduce.extreme_rows.task_count(x.size))
    if pieces is None:
        if x.shape[0] == 1:
            out[0] = reduce(x[0])
        else:
            kernels.reduce.extreme_rows(x, bool(largest), out)
        return out
    partial = np.empty(pieces.shape[0], x.dtype)
    kernels.reduce.extreme_rows(pieces, bool(largest), partial)
    out[0] = reduce(np.concatenate((partial, tail)))
    return out


def extremes_rows(x, smallest, largest):
    """smallest[r], largest[r] = the min and max of the non-empty row x[r] (rows, n); NaN wins.
    Float rows in one pass by the row kernel, one long row cut into a piece per thread; other
    dtypes by numpy's two reductions."""
    if x.dtype not in _FLOATS:
        np.min(x, axis=1, out=smallest)
        np.max(x, axis=1, out=largest)
        return smallest, largest
    pieces, tail = _pieces(x, kernels.reduce.extremes_rows.task_count(x.size))
    if pieces is None:
        kernels.reduce.extremes_rows(x, smallest, largest)
        return smallest, largest
    low, high = np.empty(pieces.shape[0], x.dtype), np.empty(pieces.shape[0], x.dtype)
    kernels.reduce.extremes_rows(pieces, low, high)
    smallest[0], largest[0] = np.min(np.concatenate((low, tail))), np.max(np.concatenate((high, tail)))
    return smallest, largest


def _pieces(x, count: int):
    """One row ``x`` (1, n) as ``count`` equal rows (a view) and the few elements left over, or
    (None, None) where ``x`` has several rows or ``count`` is 1."""
    if x.shape[0] != 1 or count < 2:
        return None, None
    row = x[0]
    length = row.size // count
    return row[:count * length].reshape(count, length), row[count * length:]


def count_nonzero(x, axis, out):
    """out = how many elements of x are not zero over the axes ``axis`` (a tuple), as int64: one
    pass, without a mask (numpy's count makes one for all but a full count of bool)."""
    if not x.size or x.dtype not in _FLOATS and x.dtype != np.bool_:
        out[...] = np.count_nonzero(x, axis=axis)
        return out
    kept = [d for d in range(x.ndim) if d not in axis]
    rows = np.ascontiguousarray(x.transpose(kept + list(axis))).reshape(out.size, -1)
    if out.size == 1:
        kernels.reduce.count_nonzero(rows.reshape(-1), out.reshape(1))
    else:
        kernels.reduce.count_nonzero_rows(rows, out.reshape(-1))
    return out


def argmax(x, axis, keepdims, out):
    return np.argmax(x, axis=axis, out=out, keepdims=keepdims)


def argmin(x, axis, keepdims, out):
    return np.argmin(x, axis=axis, out=out, keepdims=keepdims)


def take(x, index, axis, out):
    return np.take(x, index, axis=axis, out=out)


def gather(x, index, out):
    """3-D gather (see :mod:`kernels.gather`); ``out`` is a fresh (outer, k, inner) array."""
    kernels.gather.gather(x, index, out)
    return out


def scatter(index, src, out):
    """3-D scatter (see :mod:`kernels.gather`) into a C-contiguous (outer, size, inner) ``out``."""
    kernels.gather.scatter(index, src, out)
    return out


def index_add(index, src, out):
    """out[o, index[j], i] += src[o, j, i] into a C-contiguous (outer, size, inner) ``out``."""
    kernels.gather.index_add(index, src, out)
    return out


def scatter_add(index, src, out):
    """3-D scatter-add (see :mod:`kernels.gather`) into a C-contiguous (outer, size, inner) ``out``."""
    kernels.gather.scatter_add(index, src, out)
    return out


# --- row reductions ---------------------------------------------------------------------------

def var_rows(x, correction, mean_out, var_out):
    kernels.reduce.var_forward(x, float(correction), mean_out, var_out)
    return var_out


def var_backward_rows(x, mean, coef, out):
    kernels.reduce.var_backward(x, mean, coef, out)
    return out


def logsumexp_rows(x, out):
    kernels.reduce.logsumexp_forward(x, out)
    return out


def logsumexp_backward_rows(grad, x, result, out):
    kernels.reduce.logsumexp_backward(grad, x, result, out)
    return out


def distribute_equal(x, value, grad, out):
    kernels.reduce.distribute_equal(flat(x), x.dtype.type(value), float(grad), out.reshape(-1))
    return out


def prod_backward_rows(x, grad, out):
    kernels.reduce.prod_backward(x, grad, out)
    return out


def vector_norm(x, order, out):
    """out (0-d) = the ``order``-norm of every element of ``x``, in one pass."""
    kernels.reduce.vector_norm(flat(x), float(order), out.reshape(1))
    return out


# --- in-place updates -------------------------------------------------------------------------

def _fusable(out, *others) -> bool:
    return out.flags.c_contiguous and all(
        isinstance(o, np.ndarray) and o.shape == out.shape and o.dtype == out.dtype for o in others
    )


def add_scaled(out, other, alpha):
    """out += alpha * other (``other`` broadcast to ``out``)."""
    if _fusable(out, other):
        kernels.pointwise.add_scaled(out.reshape(-1), flat(other), alpha)
    else:
        np.add(out, np.multiply(other, alpha), out=out, casting="same_kind")
    return out


def addcmul(out, t1, t2, value):
    """out += value * t1 * t2."""
    if _fusable(out, t1, t2):
        kernels.pointwise.addcmul(out.reshape(-1), flat(t1), flat(t2), value)
    else:
        np.add(out, np.multiply(np.multiply(t1, t2), value), out=out, casting="same_kind")
    return out


@ieee_results
def addcdiv(out, t1, t2, value):
    """out += value * t1 / t2."""
    if _fusable(out, t1, t2):
        kernels.pointwise.addcdiv(out.reshape(-1), flat(t1), flat(t2), value)
    else:
        np.add(out, np.multiply(np.true_divide(t1, t2), value), out=out, casting="same_kind")
    return out

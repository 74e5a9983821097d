"""The CUDA backend's reductions, row-wise ops, losses over rows and matrix product (host side of
:mod:`kernels.rows` and :mod:`kernels.linalg`).

Reductions over any axes move the reduced axes last into a C-contiguous (kept, reduced) matrix
(one strided copy unless they already are last) and run one block per row. Part of
:mod:`zgrad.kernels.cuda.backend`; each function writes into ``out`` and returns it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad.kernels.cuda import cublas, cublas_lt, kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.elementwise import binary_op, ternary_op, unary_op
from zgrad.kernels.cuda.pointwise import copy as cast_copy
from zgrad.kernels.promotion import HALF_DTYPES

__all__ = [
    "contiguous", "rows_of", "launch_rows", "launch_short_rows", "launch_column_reduce", "warp_rows_launch", "sum", "prod", "nansum", "cumsum", "cumprod", "prod_backward_rows", "extreme_value", "extreme_rows", "extremes_rows", "count_nonzero", "argmax",
    "argmin", "softmax", "log_softmax",
    "softmax_backward", "log_softmax_backward", "logsumexp_rows", "logsumexp_backward_rows", "var_rows",
    "var_backward_rows", "distribute_equal", "vector_norm", "cross_entropy", "cross_entropy_backward", "class_loss",
    "class_loss_backward", "nll", "nll_backward", "pointwise_loss_sum", "matmul",
]


def contiguous(x: DeviceArray) -> DeviceArray:
    """``x`` if C-contiguous, else a C-contiguous copy."""
    return x if x.flags.c_contiguous else unary_op("copy", x, DeviceArray.empty(x.shape, x.dtype))


def rows_of(x: DeviceArray, axes: tuple[int, ...]) -> DeviceArray:
    """``x`` with ``axes`` moved last, as a C-contiguous (kept, reduced) matrix."""
    perm = [d for d in range(x.ndim) if d not in axes] + list(axes)
    count = math.prod(x.shape[d] for d in axes)
    moved = contiguous(x.transpose(perm))
    return moved.reshape(-1, count) if count else moved.reshape(moved.size, 0)


def launch_rows(kernel: Any, rows: int, *args: Any) -> None:
    """Launch a one-block-per-row ``kernel`` over ``rows`` rows (none for 0); DeviceArrays among
    ``args`` go as their kernel arguments."""
    if rows:
        rt.launch(kernel, rt.row_launch(rows), *_kernel_args(args))


def launch_short_rows(warp_kernel: Any, block_kernel: Any, rows: int, n: int, *args: Any) -> None:
    """Launch ``warp_kernel`` a warp per row over ``rows`` rows of ``n`` elements where a warp holds
    such a row (``kernels.rows.WARP_ROW_PER_LANE`` a lane), else ``block_kernel`` a block per row
    (none for 0 rows); DeviceArrays among ``args`` go as their kernel arguments."""
    config = warp_rows_launch(rows, n)
    if config is None:
        launch_rows(block_kernel, rows, *args)
    elif rows:
        rt.launch(warp_kernel, config, *_kernel_args(args))


def _kernel_args(args: tuple) -> list:
    return [a.arg() if isinstance(a, DeviceArray) else a for a in args]


def sum(x, axis, keepdims, out):  # noqa: A001 - op vocabulary name
    """out = x summed over the axes ``axis`` (a tuple), accumulated in out's dtype."""
    return _reduce(x, axis, out, kernels.rows.SUM)


def prod(x, axis, keepdims, out):
    """out = the product of x over the axes ``axis`` (a tuple), accumulated in out's dtype."""
    return _reduce(x, axis, out, kernels.rows.PROD)


def nansum(x, axis, keepdims, out):
    """out = the sum of x's non-NaN elements over the axes ``axis``, accumulated in out's dtype."""
    return _reduce(x, axis, out, kernels.rows.NANSUM)


def _identity(op: int) -> int:
    """What the reduction ``op`` gives for no elements: 1 for a product, else 0."""
    return 1 if op == kernels.rows.PROD else 0


# The warp shuffles that combine a block's values take 32- and 64-bit numbers only: a sum or
# product into bool or a narrower or unsigned integer dtype (``sum(dtype=zgrad.uint8)``) is
# computed in int64 over the input cast to that dtype, then cast to it: the same result, as
# integer sums and products wrap alike and a bool result is whether the total is nonzero.
_SHUFFLED = frozenset(map(np.dtype, ("int32", "int64")))


def _reduce(x, axis, out, op: int):
    if out.dtype.kind in "biu" and out.dtype not in _SHUFFLED:
        narrow = x if x.dtype == out.dtype else cast_copy(x, DeviceArray.empty(x.shape, out.dtype))
        wide = _reduce(narrow, axis, DeviceArray.empty(out.shape, np.dtype(np.int64)), op)
        return cast_copy(wide, out)
    run = _column_run(x, tuple(axis))
    if run is not None:
        return _reduce_columns(x, run, out, op)
    matrix = rows_of(x, tuple(axis))
    target = out if out.flags.c_contiguous else DeviceArray.empty(out.shape, out.dtype)
    flat = target.reshape(-1)
    rows, length = matrix.shape
    if length == 0:
        unary_op("copy", _identity(op), flat)
    elif _splits(rows, length):
        for r in range(rows):
            _split_row_reduce(matrix[r], flat[r:r + 1], op)
    else:
        launch_rows(kernels.rows.row_reduce, rows, matrix.flat_arg(), rows, length, op, flat.flat_arg())
    return out if target is out else unary_op("copy", target, out)


# A reduction over adjacent axes of a C-contiguous array followed by enough elements for a warp's
# loads to be adjacent (a bias's gradient: the sum over the batch; attention weights averaged over
# the heads) reads it in place as columns; else its reduced axes are moved last by a transposing
# copy and each row is reduced by a block.
COLUMNS_MIN = 32
ROWS_PER_CHUNK = 16  # rows a thread sums in the first of the two column passes, at least
COLUMN_CHUNKS_MAX = 256


def _column_run(x: DeviceArray, axes: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(outer, reduced, inner) element counts when ``axes`` are adjacent axes of C-contiguous,
    non-empty ``x`` with at least :data:`COLUMNS_MIN` elements after them, else None."""
    if not axes or not x.flags.c_contiguous or x.size == 0:
        return None
    first, last = min(axes), max(axes)
    if sorted(axes) != list(range(first, last + 1)) or last == x.ndim - 1:
        return None
    inner = math.prod(x.shape[last + 1:])
    if inner < COLUMNS_MIN:
        return None
    return math.prod(x.shape[:first]), math.prod(x.shape[first:last + 1]), inner


def _reduce_columns(x, run: tuple[int, int, int], out, op: int):
    """out = x reduced over the middle of its (outer, reduced, inner) ``run`` by column sums:
    chunks of rows, then the chunks' partial results (a launch each; one when there are few
    rows)."""
    k = kernels.rows
    outer, rows, inner = run
    columns = outer * inner
    target = out if out.flags.c_contiguous else DeviceArray.empty(out.shape, out.dtype)
    result = target.reshape(1, columns)
    chunks = min(COLUMN_CHUNKS_MAX, -(-rows // ROWS_PER_CHUNK))
    if chunks == 1:
        launch_column_reduce(x, rows, inner, op, result)
    else:
        partial = DeviceArray.empty((chunks, columns), out.dtype)
        launch_column_reduce(x, rows, inner, op, partial)
        combine = k.PROD if op == k.PROD else k.SUM  # a NaN a nansum's chunk made is a result
        launch_column_reduce(partial, chunks, columns, combine, result)
    return out if target is out else unary_op("copy", target, out)


def launch_column_reduce(x: DeviceArray, rows: int, inner: int, op: int, out: DeviceArray) -> None:
    """Row p of C-contiguous (chunks, C) ``out`` = the ``op`` reduction of chunk p of the ``rows``
    of C-contiguous ``x``, read as (C // ``inner``, ``rows``, ``inner``): column j is
    x[j // inner, :, j % inner] (``kernels.rows.column_reduce``). A (rows, C) matrix has ``inner``
    C."""
    columns = out.shape[1]
    rt.launch(kernels.rows.column_reduce, rt.plane_launch(out.shape[0], columns), x.flat_arg(), rows, columns, inner,
              op, out.flat_arg())


# A row reduction runs one block per row: a few long rows (a loss's .sum(), a full reduction, a
# tensor's max or argmax) would leave all but a few multiprocessors idle (one block summed 64M
# floats at 0.3% of the memory's peak on an H100). Such rows are reduced in two launches: blocks
# over chunks of the row, then one block over the chunks' results (for argmax and argmin, each
# chunk's best value with its index).
SPLIT_MAX_ROWS = 16
SPLIT_MIN_LENGTH = 1 << 16


def _splits(rows: int, length: int) -> bool:
    """Whether rows this few and this long are each reduced in two passes."""
    return rows <= SPLIT_MAX_ROWS and length >= SPLIT_MIN_LENGTH


def _chunk_length(length: int) -> int:
    """The elements a block takes of a long row in the first pass: the row shared among the
    grid's blocks, rounded up to a multiple of 4 so that every chunk starts where the kernels'
    vector loads may start."""
    chunk = -(-length // rt.blocks_for(length))
    return chunk + -chunk % 4


def _split_row_reduce(row: DeviceArray, out: DeviceArray, op: int) -> None:
    """out[0] = the ``op`` reduction of a long contiguous 1-D ``row``, in out's dtype."""
    k = kernels.rows
    # the chunks' partial results combine as a plain sum or product: a NaN that a nansum's chunk
    # makes of inf - inf is a result, not an element to skip
    combine = k.PROD if op == k.PROD else k.SUM
    _two_passes(row, out, lambda m, o: launch_rows(k.row_reduce, m.shape[0], m.flat_arg(), *m.shape, op, o.flat_arg()),
                lambda m, o: launch_rows(k.row_reduce, 1, m.flat_arg(), *m.shape, combine, o.flat_arg()))


def _two_passes(row: DeviceArray, out: DeviceArray, reduce_rows: Any, reduce_partials: Any) -> None:
    """out[0] = a long contiguous 1-D ``row`` reduced in two launches (three when the chunks do
    not divide it): ``reduce_rows(matrix, results)`` over chunks of the row (a block each), then
    ``reduce_partials(matrix, out)`` over the (1, chunks) matrix of their results."""
    length = row.shape[0]
    chunk = _chunk_length(length)
    parts, rest = divmod(length, chunk)
    partial = DeviceArray.empty((parts + (1 if rest else 0),), out.dtype)
    reduce_rows(row[:parts * chunk].reshape(parts, chunk), partial[:parts])
    if rest:
        reduce_rows(row[parts * chunk:].reshape(1, rest), partial[parts:])
    reduce_partials(partial.reshape(1, -1), out)


def vector_norm(x, order, out):
    """out (0-d) = the ``order``-norm of every element of x (``kernels.rows.row_norm``): one block,
    or for a long array blocks over chunks and one block over their partial results."""
    k = kernels.rows
    t = out.dtype.type
    flat = contiguous(x).reshape(-1)
    target = out.reshape(1)
    root = t(1.0 if math.isinf(order) or order == 0 else 1.0 / order)
    empty = math.inf if order == -math.inf else 0
    if flat.size == 0:
        unary_op("copy", empty, target)
    elif flat.size < SPLIT_MIN_LENGTH:
        launch_rows(k.row_norm, 1, flat.flat_arg(), 1, flat.size, t(order), root, target.flat_arg())
    else:  # partial sums of |x| ** order add up (order 1), partial extremes compare (inf, -inf)
        combine = t(order if math.isinf(order) else 1.0)
        _two_passes(flat, target,
                    lambda m, o: launch_rows(k.row_norm, m.shape[0], m.flat_arg(), *m.shape, t(order), t(1.0),
                                             o.flat_arg()),
                    lambda m, o: launch_rows(k.row_norm, 1, m.flat_arg(), *m.shape, combine, root, o.flat_arg()))
    return out


def _scan(x, axis: int, product: bool, reverse: bool, exclusive: bool, out):
    """out = the running sums (or products) of x along ``axis``: see ``kernels.rows.row_scan``."""
    matrix = rows_of(x, (axis,))
    in_place = axis == x.ndim - 1 and out.flags.c_contiguous  # rows of out are rows of the result
    scanned = out.reshape(matrix.shape) if in_place else DeviceArray.empty(matrix.shape, out.dtype)
    launch_rows(kernels.rows.row_scan, matrix.shape[0], matrix.arg(), bool(product), bool(reverse),
                bool(exclusive), scanned.arg())
    if in_place:
        return out
    perm = [d for d in range(x.ndim) if d != axis] + [axis]
    moved = scanned.reshape(tuple(x.shape[d] for d in perm)).transpose(tuple(np.argsort(perm)))
    return unary_op("copy", moved, out)


def cumsum(x, axis, reverse, out):
    """out = the running sums of x along ``axis`` (from its end when ``reverse``), accumulated in
    out's dtype."""
    return _scan(x, axis, False, reverse, False, out)


def cumprod(x, axis, out):
    """out = the running products of x along ``axis``, accumulated in out's dtype."""
    return _scan(x, axis, True, False, False, out)


def prod_backward_rows(x, grad, out):
    """out[r, j] = grad[r] * the product of x[r, k] over every k != j: the exclusive running
    products from the left and from the right multiplied, without a division (exact with zeros)."""
    after = DeviceArray.empty(x.shape, out.dtype)
    _scan(x, 1, True, False, True, out)
    _scan(x, 1, True, True, True, after)
    binary_op("mul", out, after, out)
    return binary_op("mul", out, grad.reshape(-1, 1), out)


def extreme_value(x: DeviceArray, largest: bool) -> Any:
    """The max (``largest``) or min of a non-empty array, as a Python number (blocks)."""
    out = DeviceArray.empty((1,), x.dtype)
    return extreme_rows(contiguous(x).reshape(1, -1), largest, out).item()


def extreme_rows(x, largest, out):
    """out[r] = the max (``largest``) or min of the non-empty row x[r] (rows, n); NaN wins. A few
    long rows are read by many blocks each (two passes), as row sums are."""
    k = kernels.rows
    largest = bool(largest)
    if not _splits(*x.shape):
        launch_rows(k.row_extreme, x.shape[0], x.arg(), largest, out.arg())
        return out
    rows = contiguous(x)
    for r in range(rows.shape[0]):
        _two_passes(rows[r], out[r:r + 1], lambda m, o: launch_rows(k.row_extreme, m.shape[0], m, largest, o),
                    lambda m, o: launch_rows(k.row_extreme, 1, m, largest, o))
    return out


def extremes_rows(x, smallest, largest):
    """smallest[r], largest[r] = the min and max of the non-empty row x[r] (rows, n); NaN wins."""
    return extreme_rows(x, False, smallest), extreme_rows(x, True, largest)


def count_nonzero(x, axis, out):
    """out = how many elements of x are not zero over the axes ``axis`` (a tuple), as int64."""
    return sum(binary_op("ne", x, 0, DeviceArray.empty(x.shape, np.dtype(np.bool_))), axis, False, out)


def _arg_extreme(x, axis, keepdims, out, largest: bool):
    if axis is None:
        matrix = contiguous(x).reshape(1, -1)
    else:
        matrix = rows_of(x, (axis,))
    flat = DeviceArray.empty((matrix.shape[0],), np.dtype(np.int64))
    if _splits(*matrix.shape):
        for r in range(matrix.shape[0]):
            _split_arg_extreme(contiguous(matrix[r]), bool(largest), flat[r:r + 1])
    else:
        launch_rows(kernels.rows.row_arg_extreme, matrix.shape[0], matrix.arg(), bool(largest), flat.arg())
    return unary_op("copy", flat.reshape(out.shape), out)


def _split_arg_extreme(row: DeviceArray, largest: bool, out: DeviceArray) -> None:
    """out[0] = the index of the max (``largest``) or min of a long contiguous 1-D ``row``: the
    best of each chunk with its index (a block per chunk), then the best of those pairs."""
    k = kernels.rows
    length = row.shape[0]
    chunk = _chunk_length(length)
    chunks = -(-length // chunk)
    values, indices = DeviceArray.empty((chunks,), row.dtype), DeviceArray.empty((chunks,), np.dtype(np.int64))
    launch_rows(k.chunk_arg_extremes, chunks, row, chunk, largest, values, indices)
    launch_rows(k.arg_extreme_of_pairs, 1, values, indices, largest, out)


def argmax(x, axis, keepdims, out):
    return _arg_extreme(x, axis, keepdims, out, True)


def argmin(x, axis, keepdims, out):
    return _arg_extreme(x, axis, keepdims, out, False)


def _last_axis_rows(a: DeviceArray) -> DeviceArray:
    a = contiguous(a)
    return a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)


def warp_rows_launch(rows: int, n: int) -> tuple[int, int] | None:
    """The launch of a warp-per-row kernel (``kernels.rows.WARP_ROW_PER_LANE``) over ``rows`` rows
    of ``n`` elements, or None when a row is longer than a warp holds."""
    block = rt.row_launch(rows)[1]
    lanes = min(kernels.common.WARP, block)
    if n > lanes * kernels.rows.WARP_ROW_PER_LANE:
        return None
    return rt.row_launch(-(-rows // (block // lanes)))


def _softmax(x, out, log: bool):
    rows = _last_axis_rows(x)
    k = kernels.rows
    block = rt.row_launch(rows.shape[0])[1]
    kernel = k.softmax_cached if rows.shape[1] <= k.CACHED_ROW_PER_THREAD * block else k.softmax
    launch_short_rows(k.softmax_warp_rows, kernel, *rows.shape, rows.flat_arg(), *rows.shape, log, out.flat_arg())
    return out


def softmax(x, out):
    return _softmax(x, out, False)


def log_softmax(x, out):
    return _softmax(x, out, True)


def _softmax_backward(grad, y, out, log: bool):
    g, rows = _last_axis_rows(grad), _last_axis_rows(y)
    launch_short_rows(kernels.rows.softmax_backward_warp_rows, kernels.rows.softmax_backward, *rows.shape,
                      g.flat_arg(), rows.flat_arg(), *rows.shape, log, out.flat_arg())
    return out


def softmax_backward(grad, y, out):
    return _softmax_backward(grad, y, out, False)


def log_softmax_backward(grad, y, out):
    return _softmax_backward(grad, y, out, True)


def logsumexp_rows(x, out):
    launch_rows(kernels.rows.logsumexp, x.shape[0], contiguous(x).flat_arg(), *x.shape, out.flat_arg())
    return out


def logsumexp_backward_rows(grad, x, result, out):
    return ternary_op("exp_shifted_scale", x, result.reshape(-1, 1), grad.reshape(-1, 1), out)


def var_rows(x, correction, mean_out, var_out):
    launch_rows(kernels.rows.variance, x.shape[0], x.arg(), x.dtype.type(correction), mean_out.arg(),
                var_out.arg())
    return var_out


def var_backward_rows(x, mean, coef, out):
    return ternary_op("centered_scale", x, mean.reshape(-1, 1), coef.reshape(-1, 1), out)


def distribute_equal(x, value, grad, out):
    """``grad`` split evenly over the elements of x equal to ``value`` (over the NaNs when it is
    NaN), 0 elsewhere."""
    mask = DeviceArray.empty(x.shape, np.dtype(np.bool_))
    if value != value:
        binary_op("ne", x, x, mask)
    else:
        binary_op("eq", x, value, mask)
    count = DeviceArray.empty((), np.dtype(np.int64))
    sum(mask, tuple(range(x.ndim)), False, count)
    return ternary_op("where", mask, x.dtype.type(grad) / x.dtype.type(max(count.item(), 1)), 0, out)


# --- losses over rows ---------------------------------------------------------------------------

def _or_weight(weight: Any, dtype: np.dtype) -> DeviceArray:
    return weight if weight.size else DeviceArray.empty((0,), dtype)


def cross_entropy(logits, targets, ignore_index: int, mean: bool, probs_out, loss_out, divisor_out):
    """loss_out = the sum of the counted rows' losses, over their count when ``mean`` (NaN for
    none); divisor_out = that count (or 1); softmax into ``probs_out``. Nothing waits."""
    rows, dtype = logits.shape[0], logits.dtype
    per_row = DeviceArray.empty((2, rows), dtype)  # the rows' losses and weights, summed together
    class_loss(logits, targets, DeviceArray.empty((0,), dtype), ignore_index, 0.0, probs_out, per_row[0], per_row[1])
    totals = DeviceArray.empty((2,), dtype)
    sum(per_row, (1,), False, totals)
    rt.launch(kernels.rows.loss_ratio, (1, 1), totals.flat_arg(), bool(mean), loss_out.flat_arg(),
              divisor_out.flat_arg())
    return loss_out


def cross_entropy_backward(probs, targets, ignore_index: int, grad, divisor, out):
    """out = grad / divisor * (probs - onehot(targets)), 0 on ignored rows (grad and divisor: 0-d
    device arrays, read by the kernel)."""
    if out.size:
        grad = grad if grad.dtype == probs.dtype else unary_op("copy", grad, DeviceArray.empty((), probs.dtype))
        rt.launch(kernels.rows.cross_entropy_backward, rt.grid_1d(out.size), probs.flat_arg(), probs.shape[1],
                  contiguous(targets).flat_arg(), int(ignore_index), contiguous(grad).flat_arg(), divisor.flat_arg(),
                  out.flat_arg())
    return out


def class_loss(logits, targets, weight, ignore_index: int, smoothing: float, probs_out, loss_out, weight_out):
    logits = contiguous(logits)
    args = (logits.flat_arg(), *logits.shape, contiguous(targets).flat_arg(),
            contiguous(_or_weight(weight, logits.dtype)).flat_arg(), int(ignore_index), logits.dtype.type(smoothing),
            probs_out.flat_arg(), loss_out.flat_arg(), weight_out.flat_arg())
    launch_short_rows(kernels.rows.class_loss_warp_rows, kernels.rows.class_loss, *logits.shape, *args)
    return loss_out


def class_loss_backward(probs, targets, weight, ignore_index: int, smoothing: float, row_grad, out):
    launch_rows(kernels.rows.class_loss_backward, probs.shape[0], probs.flat_arg(), *probs.shape,
                contiguous(targets).flat_arg(), contiguous(_or_weight(weight, probs.dtype)).flat_arg(),
                int(ignore_index), probs.dtype.type(smoothing), contiguous(row_grad).flat_arg(), out.flat_arg())
    return out


def nll(log_probs, targets, weight, ignore_index: int, loss_out, weight_out):
    if targets.size:
        rt.launch(kernels.rows.nll, rt.grid_1d(targets.size), contiguous(log_probs).arg(), targets.arg(),
                  _or_weight(weight, log_probs.dtype).arg(), int(ignore_index), loss_out.arg(), weight_out.arg())
    return loss_out


def nll_backward(targets, weight, ignore_index: int, row_grad, out):
    if out.size:
        rt.launch(kernels.rows.nll_backward, rt.grid_1d(out.size), targets.arg(),
                  _or_weight(weight, out.dtype).arg(), int(ignore_index), contiguous(row_grad).reshape(-1).arg(),
                  out.arg())
    return out


def pointwise_loss_sum(a, b, squared: bool, divisor: float, out):
    """out (0-d) = sum((a - b)**2) or sum(|a - b|), over ``divisor`` (NaN for 0). Nothing waits."""
    if not divisor:
        return unary_op("copy", math.nan, out)
    errors = binary_op("squared_error" if squared else "absolute_error", a, b, DeviceArray.empty(a.shape, a.dtype))
    sum(errors, tuple(range(a.ndim)), False, out)
    return out if divisor == 1 else binary_op("div", out, divisor, out)


# --- matrix product ------------------------------------------------------------------------------

def _as_3d(a: DeviceArray, batch: tuple[int, ...]) -> DeviceArray:
    """``a`` (..., m, k) broadcast to ``batch`` + (m, k), its batch dims merged into one (a view
    when they collapse, else a copy)."""
    full = a.broadcast_to(batch + a.shape[-2:]) if a.shape[:-2] != batch else a
    if not batch:
        return full.reshape(1, *a.shape[-2:]) if full.flags.c_contiguous else full[None]
    if len(batch) == 1:
        return full
    merged = np.lib.stride_tricks.as_strided
    strides = full.strides
    if all(strides[d] == strides[d + 1] * full.shape[d + 1] for d in range(len(batch) - 1)):
        layout = merged(full._layout, (int(np.prod(batch)),) + a.shape[-2:], (strides[len(batch) - 1],) + strides[-2:])
        return DeviceArray(full._base, layout)
    return contiguous(full).reshape(-1, *a.shape[-2:])


def _gemm_of_copies(a: DeviceArray, b: DeviceArray, out: DeviceArray, tf32: bool | None) -> bool:
    """cuBLAS's product of C-contiguous copies of operands it cannot read as they are (a gradient
    broadcast from a sum has no unit stride), where cuBLAS takes the dtype: a copy costs far less
    than zgrad's own matmul kernel. False, copying nothing, where cuBLAS is not used."""
    if not cublas.takes_dtype(out.dtype) or a.dtype != out.dtype or b.dtype != out.dtype:
        return False
    return cublas.gemm(contiguous(a), contiguous(b), out, tf32)


def matmul(a, b, out, bias=None, row_sums=None, tf32=None):
    """numpy's matmul of device arrays (vectors promoted and dropped, batch broadcast), plus
    ``bias`` (broadcast) when given, and with ``row_sums`` given (2-D ``a``), a's rows summed into
    it; for matrix products a 1-D bias or the sums of the product's dtype are worked in cuBLASLt's
    epilogue where it runs. float16 and bfloat16 go to cuBLAS as they are (tensor cores, float32
    accumulation); where it cannot take them, they are computed in float32 and rounded once.
    ``tf32``: whether cuBLAS may run a float32 product in TF32 (None: the matrix-product switch;
    a convolution passes its own)."""
    if row_sums is not None:
        if out.size and a.shape[-1] and cublas_lt.gemm_row_sums(a[None], b[None], row_sums, out[None]):
            return out
        _row_sums(a, row_sums)
    if out.size == 0:
        return out
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b
    batch = tuple(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    m, n = a2.shape[-2], b2.shape[-1]
    result = out.reshape(batch + (m, n)) if out.flags.c_contiguous else DeviceArray.empty(batch + (m, n), out.dtype)
    if a2.shape[-1] == 0:
        unary_op("copy", 0, result)
    else:
        a3, b3, out3 = _as_3d(a2, batch), _as_3d(b2, batch), _as_3d(result, batch)
        if bias is not None and bias.ndim == 1 and cublas_lt.gemm_bias(a3, b3, bias, out3):
            bias = None  # added already
        elif not cublas.gemm(a3, b3, out3, tf32) and not _gemm_of_copies(a3, b3, out3, tf32):
            if out.dtype in HALF_DTYPES:  # zgrad's kernel computes half types in float32, rounded once
                wide = DeviceArray.empty(result.shape, np.dtype(np.float32))
                matmul(a2.astype(np.float32), b2.astype(np.float32), wide)
                cast_copy(wide, result)
            else:
                linalg = kernels.linalg
                tiles = -(-m // linalg.TILE) * -(-n // linalg.TILE) * max(1, int(np.prod(batch)))
                rt.launch(linalg.matmul, (rt.blocks_for(tiles), (linalg.TILE, linalg.TILE)), a3.arg(), b3.arg(),
                          out3.arg())
    if result._base is not out._base:
        unary_op("copy", result.reshape(out.shape), out)
    return out if bias is None else _add_bias(out, bias)


def _row_sums(a: DeviceArray, out: DeviceArray) -> DeviceArray:
    """out = the sums of 2-D ``a``'s rows, read in place where ``a`` is a transposed C-contiguous
    matrix (a gradient g.T: its column sums); half types summed in float32 and rounded once."""
    if a.dtype in HALF_DTYPES:
        return cast_copy(_row_sums(a.astype(np.float32), DeviceArray.empty(out.shape, np.dtype(np.float32))), out)
    if a.T.flags.c_contiguous and not a.flags.c_contiguous:
        return sum(a.T, (0,), False, out)
    return sum(a, (1,), False, out)


def _add_bias(out: DeviceArray, bias: DeviceArray) -> DeviceArray:
    """out += bias (broadcast); half types added in float32 and rounded once, as other ops."""
    if out.dtype not in HALF_DTYPES and bias.dtype not in HALF_DTYPES:
        return binary_op("add", out, bias, out)
    wide = out.astype(np.float32)
    return cast_copy(binary_op("add", wide, bias.astype(np.float32), wide), out)

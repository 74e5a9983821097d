"""CUDA kernels over several tensors at once (PyTorch's ``_foreach`` kernels): ``arrays`` is a
tuple of up to :data:`MAX_TENSORS` flat C-contiguous arrays of one dtype, grid y picks the tensor
and grid x and the threads stride over its elements. One launch serves a group of a model's
gradients where a launch per tensor cost the host more than the kernel's work (``clip_grad_norm_``
of a transformer's 100+ parameters). Host side: :mod:`zgrad.kernels.cuda.multi_tensor`. Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import kernel, math
from zgrad.kernels.cuda.kernels.rows import MAX_BLOCK, block_extreme, block_sum, extreme_of, norm_term
from zgrad.kernels.cuda.kernels.vectors import VECTOR, fits4, load4, store4

__all__ = ["MAX_TENSORS", "norm_partials", "scale"]

# Tensors per launch: each array argument is seven kernel parameters (56 bytes), and a launch's
# parameters must fit in 4 KiB on every device.
MAX_TENSORS = 8


@kernel
def norm_partials(arrays, order, partials, first):
    """partials[first + k, b] = over the elements of arrays[k] that block b (of grid x) strides
    over: the largest |x| for order inf, the smallest for -inf (inf for none), the count of
    non-zeros for order 0, else the sum of |x| ** order (squares for 2). ``order`` in partials'
    dtype; partials flat, rows of gridDim.x."""
    buf = cuda.shared.array(MAX_BLOCK, partials.dtype)
    T = partials.dtype.type
    k = cuda.blockIdx.y
    x = arrays[k]
    start, step = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, cuda.gridDim.x * cuda.blockDim.x
    # groups of 4 adjacent elements where x starts on the boundary (vectors.load4), then the rest
    groups = x.size // VECTOR if fits4(x) else 0
    tail = VECTOR * groups + start
    if math.isinf(order):
        largest = order > T(0)
        m = T(0) if largest else T(math.inf)
        for g in range(start, groups, step):
            a0, a1, a2, a3 = load4(x, VECTOR * g)
            m = extreme_of(extreme_of(m, T(math.fabs(a0)), largest), T(math.fabs(a1)), largest)
            m = extreme_of(extreme_of(m, T(math.fabs(a2)), largest), T(math.fabs(a3)), largest)
        for i in range(tail, x.size, step):
            m = extreme_of(m, T(math.fabs(x[i])), largest)
        result = block_extreme(buf, m, largest)
    else:
        acc0 = acc1 = T(0)
        for g in range(start, groups, step):
            a0, a1, a2, a3 = load4(x, VECTOR * g)
            acc0 += norm_term(T(math.fabs(a0)), order, T) + norm_term(T(math.fabs(a1)), order, T)
            acc1 += norm_term(T(math.fabs(a2)), order, T) + norm_term(T(math.fabs(a3)), order, T)
        for i in range(tail, x.size, step):
            acc0 += norm_term(T(math.fabs(x[i])), order, T)
        result = block_sum(buf, acc0 + acc1)
    if cuda.threadIdx.x == 0:
        partials[(first + k) * cuda.gridDim.x + cuda.blockIdx.x] = result


@kernel
def scale(arrays, factor):
    """arrays[k] *= factor[0] in place for every k (grid y: k)."""
    x = arrays[cuda.blockIdx.y]
    f = factor[0]
    start, step = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, cuda.gridDim.x * cuda.blockDim.x
    groups = x.size // VECTOR if fits4(x) else 0
    for g in range(start, groups, step):
        a0, a1, a2, a3 = load4(x, VECTOR * g)
        store4(x, VECTOR * g, a0 * f, a1 * f, a2 * f, a3 * f)
    for i in range(VECTOR * groups + start, x.size, step):
        x[i] = x[i] * f


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64, with
    a full group of tensors and a group of one."""
    from numba import types

    cases = []
    for dt in (types.float32, types.float64):
        for count in (MAX_TENSORS, 1):
            group = types.UniTuple(dt[::1], count)
            cases += [
                ("norm_partials", norm_partials.py_func, (group, dt, dt[::1], types.int64)),
                ("scale", scale.py_func, (group, dt[::1])),
            ]
    return cases

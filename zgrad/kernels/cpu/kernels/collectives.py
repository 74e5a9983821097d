"""Reduction kernels of the collectives (``zgrad.distributed``) and of DDP's gradient buckets.

Plain loops over 1-D C-contiguous arrays of one dtype (float32, float64, int32, int64), writing
into preallocated ``out`` arrays; compiled serial (a collective reduces a chunk while the mesh's
threads move the next one, so it should not take every core) and with the GIL released.

``op`` codes: 0 sum, 1 product, 2 min, 3 max. Min and max propagate NaN as numpy's
``minimum``/``maximum`` do. Integer arithmetic wraps as numpy's and PyTorch's does.
"""

from __future__ import annotations

from zgrad.kernels._jit import kernel

__all__ = ["SUM", "PRODUCT", "MIN", "MAX", "reduce_inplace", "reduce_pair", "reduce_and_copy", "divide_inplace",
           "divide_inplace_trunc", "scale_copy"]

SUM, PRODUCT, MIN, MAX = 0, 1, 2, 3


@kernel
def _combine(a, b, op):
    """op(a, b) for one element (inlined into the loops below by LLVM)."""
    if op == SUM:
        return a + b
    if op == PRODUCT:
        return a * b
    if op == MIN:
        return a if (a <= b or a != a) else b
    return a if (a >= b or a != a) else b


@kernel
def reduce_inplace(out, src, op):
    """out = op(out, src), element-wise."""
    if op == SUM:  # the hot case, as its own loop so that it vectorises
        for i in range(out.size):
            out[i] += src[i]
        return
    for i in range(out.size):
        out[i] = _combine(out[i], src[i], op)


@kernel
def reduce_pair(out, a, b, op):
    """out = op(a, b), element-wise (``out`` may be ``a`` or ``b``)."""
    if op == SUM:
        for i in range(out.size):
            out[i] = a[i] + b[i]
        return
    for i in range(out.size):
        out[i] = _combine(a[i], b[i], op)


@kernel
def reduce_and_copy(out, copy_out, src, op):
    """out = op(out, src) and copy_out = the same values, in one pass over memory."""
    if op == SUM:
        for i in range(out.size):
            value = out[i] + src[i]
            out[i] = value
            copy_out[i] = value
        return
    for i in range(out.size):
        value = _combine(out[i], src[i], op)
        out[i] = value
        copy_out[i] = value


@kernel
def divide_inplace(out, divisor):
    """out = out / divisor for floating ``out``."""
    d = out.dtype.type(divisor)
    for i in range(out.size):
        out[i] = out[i] / d


@kernel
def divide_inplace_trunc(out, divisor):
    """out = out / divisor for integer ``out``, truncating toward zero (C's and NCCL's rule)."""
    d = out.dtype.type(divisor)
    for i in range(out.size):
        q = out[i] // d  # floors
        if q < 0 and q * d != out[i]:
            q += 1
        out[i] = q


@kernel
def scale_copy(out, src, divisor):
    """out = src / divisor (a gradient copied into its bucket, averaged on the way)."""
    d = out.dtype.type(divisor)
    for i in range(out.size):
        out[i] = src[i] / d

"""Dispatch of the element-wise tensor-API ops: clamp, comparisons, the gradients of clamp and
maximum/minimum, in-place updates, random fills and multinomial draws.

The companion of :mod:`zgrad.kernels.dispatch` (whose rules hold here: the backend comes from the
arrays' device, ``out`` is allocated here with numpy's broadcasting and promotion), split off to
keep each module to one job. Plain binary ops (remainder, maximum, minimum) and unary ops (abs,
sqrt) go through :func:`dispatch.binary` / :func:`dispatch.unary`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zgrad.errors import DTypeError
from zgrad.kernels.dispatch import (
    as_dtype, backend_of, broadcast_shape, broadcast_to, cast, cpp_type_name, integer_operand, scalar_type_name,
)
from zgrad.kernels.memory_overlap import check_inplace
from zgrad.kernels.promotion import result_type

__all__ = [
    "clamp", "clamp_dtype", "clamp_backward", "extremum_backward", "compare", "logical_not", "write", "inplace_binary",
    "mul_each_", "unary_inplace", "add_scaled_", "addcmul_", "addcdiv_", "random_uniform_", "random_normal_",
    "random_integers_", "random_exponential_", "multinomial",
]


def _shape_of(a: Any) -> tuple[int, ...]:
    return getattr(a, "shape", ())


def _bound(value: float | None, default: float) -> float:
    return default if value is None else value


def clamp_dtype(x: Any, low: float | None, high: float | None) -> np.dtype:
    """The dtype of a clamp of array ``x`` by Python-number bounds, by PyTorch's promotion: an
    integer or bool array with a float bound gives the default dtype, a bool one with an int bound
    int64, any other the array's own.

    Raises:
        DTypeError: the result would be bool (PyTorch has no clamp of bools by bools).
    """
    dtype = result_type(x, *(bound for bound in (low, high) if bound is not None))
    if dtype == np.bool_:
        raise DTypeError("\"clamp_scalar_cpu\" not implemented for 'Bool'")
    return dtype


def clamp(x: Any, low: float | None, high: float | None, out: Any = None):
    """x clamped to [low, high] (either may be None) into ``out`` (fresh unless given: in place),
    in the dtype :func:`clamp_dtype` gives.

    Raises:
        RuntimeError: in place, a result dtype other than ``out``'s (PyTorch's "result type Float
            can't be cast to the desired output type long int").
    """
    be = backend_of(x)
    dtype = clamp_dtype(x, low, high)
    if out is None:
        x = as_dtype(x, dtype)
        out = be.empty(x.shape, dtype)
    elif dtype != out.dtype:
        raise RuntimeError(f"result type {scalar_type_name(dtype)} can't be cast to the desired output type "
                           f"{cpp_type_name(out.dtype)}")
    if any(bound != bound for bound in (low, high) if bound is not None):  # a NaN bound: NaN everywhere, as PyTorch
        return write(out, np.nan)
    if dtype.kind in "iu":
        low, high = (None if bound is None else _integer_bound(bound, dtype) for bound in (low, high))
    return be.clamp(x, low, high, out)


_BOUND_TYPE_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int", "int64": "long int"}


def _integer_bound(bound: Any, dtype: np.dtype) -> int:
    """A clamp bound converted to integer ``dtype`` as PyTorch converts it: a negative bound of an
    unsigned dtype wraps (uint8 clamped by -1 is clamped by 255), within the dtype's magnitude.

    Raises:
        RuntimeError: a bound beyond that (PyTorch's "value cannot be converted ... without overflow").
    """
    info = np.iinfo(dtype)
    low = -int(info.max) if dtype.kind == "u" else int(info.min)
    if not low <= bound <= info.max:
        name = _BOUND_TYPE_NAMES.get(dtype.name, dtype.name)
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    return int(integer_operand(int(bound), dtype))


def clamp_backward(grad: Any, x: Any, low: float | None, high: float | None):
    """grad where low <= x <= high, else 0."""
    be = backend_of(grad, x)
    if grad.dtype != x.dtype:
        grad = cast(grad, x.dtype)
    return be.clamp_backward(grad, x, _bound(low, -np.inf), _bound(high, np.inf), be.empty(x.shape, x.dtype))


def extremum_backward(grad: Any, a: Any, b: Any, take_max: bool):
    """The gradients (for a, for b) of maximum(a, b) or minimum(a, b), in the broadcast shape."""
    be = backend_of(grad, a, b)
    dtype = grad.dtype
    a = broadcast_to(a, grad.shape) if a.shape != grad.shape else a
    b = broadcast_to(b, grad.shape) if b.shape != grad.shape else b
    a = a if a.dtype == dtype else cast(a, dtype)
    b = b if b.dtype == dtype else cast(b, dtype)
    return be.extremum_backward(grad, a, b, take_max, be.empty(grad.shape, dtype), be.empty(grad.shape, dtype))


def compare(op: str, a: Any, b: Any):
    """``op`` (eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor) as a bool array, broadcast."""
    be = backend_of(a, b)
    out = be.empty(broadcast_shape(_shape_of(a), _shape_of(b)), np.dtype(np.bool_))
    return be.compare(op, a, b, out)


def logical_not(x: Any):
    be = backend_of(x)
    return be.logical_not(x, be.empty(x.shape, np.dtype(np.bool_)))


# --- in place ---------------------------------------------------------------------------------

def write(out: Any, value: Any):
    """out[...] = value (an array broadcast to ``out``, or a scalar), cast to ``out``'s dtype.

    Raises:
        RuntimeError: ``value`` partly overlaps ``out``, or ``out`` is an expanded view
            (:func:`memory_overlap.check_inplace`); so do the in-place functions below.
    """
    check_inplace(out, value)
    return backend_of(out, value).copy(value, out)


def inplace_binary(op: str, out: Any, other: Any):
    """out = op(out, other) in place, ``op`` in add, sub, mul, div (``other`` broadcast to ``out``)."""
    check_inplace(out, other)
    if out.dtype.kind in "iu":
        other = integer_operand(other, out.dtype)
    return getattr(backend_of(out, other), op)(out, other, out)


def mul_each_(arrays: Sequence[Any], factor: Any) -> None:
    """arrays[k] *= factor in place for every k (``factor`` a scalar or a one-element array of their
    backend): a backend with ``mul_each`` takes the list at once (CUDA: a launch per group)."""
    be = backend_of(*arrays)
    if hasattr(be, "mul_each") and not isinstance(factor, (int, float)):
        be.mul_each(arrays, factor)
        return
    for a in arrays:
        inplace_binary("mul", a, factor)


def unary_inplace(op: str, x: Any):
    """x = op(x) in place for an element-wise ``op`` (the kernels take contiguous memory: a
    strided ``x`` goes through a contiguous copy)."""
    be = backend_of(x)
    if x.flags.c_contiguous:
        return getattr(be, op)(x, x)
    return be.copy(getattr(be, op)(x, be.empty(x.shape, x.dtype)), x)


def add_scaled_(out: Any, other: Any, alpha: float):
    """out += alpha * other, in one pass where the shapes match."""
    check_inplace(out, other)
    return backend_of(out, other).add_scaled(out, other, alpha)


def addcmul_(out: Any, t1: Any, t2: Any, value: float):
    """out += value * t1 * t2, in one pass where the shapes match."""
    check_inplace(out, t1, t2)
    return backend_of(out, t1, t2).addcmul(out, t1, t2, value)


def addcdiv_(out: Any, t1: Any, t2: Any, value: float):
    """out += value * t1 / t2, in one pass where the shapes match."""
    check_inplace(out, t1, t2)
    return backend_of(out, t1, t2).addcdiv(out, t1, t2, value)


def random_uniform_(out: Any, low: float, high: float, generator: Any):
    """Fill a floating ``out`` with U[low, high) drawn from ``generator`` (a numpy Generator)."""
    return backend_of(out).random_uniform(generator, low, high, out)


def random_normal_(out: Any, mean: float, std: float, generator: Any):
    """Fill a floating ``out`` with N(mean, std^2) drawn from ``generator``."""
    return backend_of(out).random_normal(generator, mean, std, out)


def random_integers_(out: Any, low: int, high: int, generator: Any):
    """Fill ``out`` with integers uniform in [low, high) drawn from ``generator``."""
    return backend_of(out).random_integers(generator, low, high, out)


def random_exponential_(out: Any, rate: float, generator: Any):
    """Fill a floating ``out`` with Exp(rate) drawn from ``generator``."""
    return backend_of(out).random_exponential(generator, rate, out)


def multinomial(probs: Any, num_samples: int, replacement: bool, generator: Any):
    """``num_samples`` int64 category indices per row of the 2-D weights ``probs``, drawn from
    ``generator`` with or without replacement.

    Raises:
        ZgradError: a negative, infinite or NaN weight, or a row that sums to 0.
    """
    be = backend_of(probs)
    out = be.empty((probs.shape[0], num_samples), np.dtype(np.int64))
    return be.multinomial(generator, probs, replacement, out)

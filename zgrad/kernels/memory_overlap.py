"""PyTorch's memory-overlap checks before an in-place write (its TensorIterator's), for host and
CUDA arrays alike.

An in-place kernel reads its operands while it writes its output. Where an operand lies partly
over the output (``x[1:] += x[:-1]``, ``x /= x[0]``), some of its elements are read after they
were overwritten, in an order a GPU does not fix: the result would change from run to run. PyTorch
refuses such writes, and so does zgrad, with PyTorch's messages. Allowed, as there: an operand
that is the output, or lies over exactly its elements in the same order (each element is read
before it is written); operands in other memory; and layouts too hard to compare (not dense:
strided slices, negative strides), which PyTorch does not check either. An output whose elements
share memory (an expanded view) is refused too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["PARTIAL_OVERLAP_ERROR", "INTERNAL_OVERLAP_ERROR", "check_inplace"]

PARTIAL_OVERLAP_ERROR = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to "
                         "a single memory location. Please clone() the tensor before performing the operation.")
INTERNAL_OVERLAP_ERROR = ("unsupported operation: more than one element of the written-to tensor refers to a single "
                          "memory location. Please clone() the tensor before performing the operation.")


def check_inplace(out: Any, *sources: Any) -> None:
    """Refuse an in-place write into array ``out`` that reads the arrays (or scalars) ``sources``.

    Raises:
        RuntimeError: ``out`` has elements that share memory, or a source partly overlaps it
            (PyTorch's messages: clone the tensor first).
    """
    strides = getattr(out, "strides", None)
    if strides is None or out.size == 0:
        return
    if 0 in strides and any(step == 0 and n > 1 for step, n in zip(strides, out.shape)):
        raise RuntimeError(INTERNAL_OVERLAP_ERROR)
    for source in sources:
        if source is not out and _overlaps_partly(out, source):
            raise RuntimeError(PARTIAL_OVERLAP_ERROR)


def _overlaps_partly(a: Any, b: Any) -> bool:
    """Whether array ``b`` shares memory with array ``a`` other than element for element (both
    dense; False where either is not, or is empty, or ``b`` is not an array)."""
    if getattr(b, "strides", None) is None or a.size == 0 or b.size == 0:
        return False
    if isinstance(a, np.ndarray):
        if not isinstance(b, np.ndarray) or not np.may_share_memory(a, b):
            return False
        start_a, start_b = a.__array_interface__["data"][0], b.__array_interface__["data"][0]
    else:
        if getattr(b, "_base", None) is not getattr(a, "_base", a):  # a device array's allocation
            return False
        start_a, start_b = a.data_ptr(), b.data_ptr()
    if not (_dense(a) and _dense(b)):
        return False
    end_a, end_b = start_a + a.nbytes, start_b + b.nbytes
    if (start_a, end_a) == (start_b, end_b):  # element for element unless laid out otherwise
        return _steps(a) != _steps(b) or a.itemsize != b.itemsize
    return start_a < end_b and start_b < end_a


def _steps(a: Any) -> list[tuple[int, int]]:
    """(stride, length) of ``a``'s axes longer than one element (the others' strides mean nothing)."""
    return [(step, n) for step, n in zip(a.strides, a.shape) if n != 1]


def _dense(a: Any) -> bool:
    """Whether ``a``'s elements fill its span without gaps or repeats, in some order of its axes
    (PyTorch's ``is_non_overlapping_and_dense``); negative strides are not."""
    expected = a.itemsize
    for step, n in sorted(_steps(a)):
        if step != expected:
            return False
        expected *= n
    return True

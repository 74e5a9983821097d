"""Dispatch of the element-wise reductions that collectives and DDP's gradient buckets run.

They work on flat, C-contiguous arrays of one dtype that they allocated themselves (or received
data viewed with ``np.frombuffer``): these functions check only what a wrong caller could get
wrong without noticing, then call the backend of the arrays' device (``dispatch.backend_of``).
"""

from __future__ import annotations

from typing import Any

from zgrad.kernels.dispatch import backend_of

__all__ = ["REDUCE_OPS", "reduce_inplace", "reduce_pair", "reduce_and_copy", "divide_inplace", "scale_copy"]

REDUCE_OPS = ("sum", "product", "min", "max")


def _same_flat(*arrays: Any) -> None:
    first = arrays[0]
    for a in arrays:
        if a.ndim != 1 or not a.flags.c_contiguous or a.dtype != first.dtype or a.size != first.size:
            raise ValueError(f"collective kernels take 1-D C-contiguous arrays of one dtype and size; got "
                             f"{[(x.shape, str(x.dtype)) for x in arrays]}")


def _check_op(op: str) -> None:
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction {op!r}; expected one of {', '.join(REDUCE_OPS)}")


def reduce_inplace(out: Any, src: Any, op: str):
    """out = op(out, src) element-wise, ``op`` in :data:`REDUCE_OPS`; returns ``out``."""
    _check_op(op)
    _same_flat(out, src)
    return backend_of(out, src).reduce_inplace(out, src, op)


def reduce_pair(out: Any, a: Any, b: Any, op: str):
    """out = op(a, b) element-wise (``out`` may be ``a`` or ``b``); returns ``out``."""
    _check_op(op)
    _same_flat(out, a, b)
    return backend_of(out, a, b).reduce_pair(out, a, b, op)


def reduce_and_copy(out: Any, copy_out: Any, src: Any, op: str):
    """out = op(out, src) and copy_out = out, in one pass; returns ``out``."""
    _check_op(op)
    _same_flat(out, copy_out, src)
    return backend_of(out, copy_out, src).reduce_and_copy(out, copy_out, src, op)


def divide_inplace(out: Any, divisor: int):
    """out = out / divisor (integers truncate toward zero); returns ``out``."""
    _same_flat(out)
    return backend_of(out).divide_inplace(out, int(divisor))


def scale_copy(out: Any, src: Any, divisor: int):
    """out = src / divisor, ``src`` of ``out``'s size (any dtype, cast); returns ``out``."""
    if src.size != out.size or out.ndim != 1 or not out.flags.c_contiguous:
        raise ValueError(f"scale_copy: out must be 1-D C-contiguous with src's {src.size} elements, got {out.shape}")
    return backend_of(out, src).scale_copy(out, src.reshape(-1), int(divisor))

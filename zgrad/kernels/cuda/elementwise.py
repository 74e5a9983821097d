"""Host side of the element-wise CUDA ops: operands made kernel-ready (scalars, broadcasting,
strided views collapsed to at most 4-D), then one launch of a kernel of
:mod:`zgrad.kernels.cuda.kernels.elementwise`.

Part of the CUDA backend (:mod:`zgrad.kernels.cuda.backend` re-exports the op functions); every function
writes into ``out`` and returns it.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.promotion import result_type

__all__ = ["device_operand", "unary_op", "binary_op", "ternary_op", "upload"]

_ND = 4  # the rank of the strided kernels


def upload(value: Any, dtype: Any = None) -> DeviceArray:
    """A host array (or nested lists) copied to the device."""
    return DeviceArray.from_host(np.asarray(value, dtype=dtype))


@functools.lru_cache(maxsize=1024)
def _scalar(value: Any, dtype: np.dtype) -> DeviceArray:
    # Cached for every thread: waited for once, so that other threads' streams read it complete.
    scalar = upload(value, dtype)
    rt.synchronize()
    return scalar


def device_operand(x: Any, like: Sequence[Any]) -> DeviceArray:
    """``x`` as a DeviceArray: itself, or a Python/numpy scalar in the dtype PyTorch's promotion
    gives it next to the array operands ``like`` (a 0-d device array, cached), or a host array
    uploaded."""
    if isinstance(x, DeviceArray):
        return x
    if isinstance(x, np.ndarray) and x.ndim:
        return upload(x)
    value = x.item() if isinstance(x, (np.ndarray, np.generic)) else x
    arrays = [a for a in like if isinstance(a, DeviceArray)]
    dtype = result_type(*arrays, value) if arrays else np.asarray(value).dtype
    return _scalar(value, np.dtype(dtype))


def _collapse(shape: tuple[int, ...], strides: list[tuple[int, ...]]) -> tuple[list[int], list[list[int]]]:
    """Merge dimensions every operand walks contiguously and drop those of size 1."""
    dims: list[int] = []
    steps: list[list[int]] = [[] for _ in strides]
    for d, n in enumerate(shape):
        if n == 1:
            continue
        if dims and all(s[-1] == st[d] * n for s, st in zip(steps, strides)):
            dims[-1] *= n
            for s, st in zip(steps, strides):
                s[-1] = st[d]
        else:
            dims.append(n)
            for s, st in zip(steps, strides):
                s.append(st[d])
    return dims, steps


def _placed(views: list[DeviceArray], steps: list[list[int]], pad: int) -> list[Any]:
    """Each view as the n-d kernels take it: the 1-D array of its allocation, then its place
    (element offset, its strides in elements over the collapsed shape padded to 4-D)."""
    args: list[Any] = []
    for view, st in zip(views, steps):
        item = view.itemsize
        args += (view.memory_arg(), (view.storage_offset(),) + (0,) * pad + tuple(s // item for s in st))
    return args


def _flat_operands(ops: list[DeviceArray], out: DeviceArray) -> list[Any] | None:
    """The operands as the flat kernels take them over a C-contiguous ``out``'s elements: 1-D
    arrays of those of out's shape when C-contiguous, single elements (a scalar) as a view
    repeating it (stride 0); None when another operand needs the n-d kernel."""
    flat = []
    for o in ops:
        if o.shape == out.shape and o.flags.c_contiguous:
            flat.append(o.flat_arg())
        elif o.size == 1:
            flat.append(_repeating(o, out.size))
        else:
            return None
    return flat


@functools.lru_cache(maxsize=256)
def _repeating(element: DeviceArray, size: int) -> Any:
    """The kernel argument reading the one element of ``element`` ``size`` times (cached: the
    scalars of :func:`_scalar` recur in every step)."""
    return DeviceArray(element._base, np.lib.stride_tricks.as_strided(element._layout, (size,), (0,))).arg()


def _run(table: dict, name: str, out: DeviceArray, operands: list[Any], p: Any, q: Any) -> DeviceArray:
    if out.size == 0:
        return out
    flat_kernel, nd_kernel = table[name]
    ops = [o if type(o) is DeviceArray else device_operand(o, operands + [out]) for o in operands]
    ptype = (ops[0].dtype if out.dtype.kind == "b" else out.dtype).type
    params = (ptype(p), ptype(q))
    config = rt.grid_1d(out.size)
    flat = _flat_operands(ops, out) if out.flags.c_contiguous else None
    if flat is not None:
        rt.launch(flat_kernel, config, *flat, *params, out.flat_arg())
        return out
    views = [o if o.shape == out.shape else o.broadcast_to(out.shape) for o in ops] + [out]
    dims, steps = _collapse(out.shape, [v.strides for v in views])
    if len(dims) > _ND:  # rare: split the leading dimension into launches of lower rank
        for i in range(out.shape[0]):
            _run(table, name, out[i], [v[i] for v in views[:-1]], p, q)
        return out
    pad = _ND - len(dims)
    rt.launch(nd_kernel, config, *_placed(views[:-1], steps[:-1], pad), *params, *_placed([out], steps[-1:], pad),
              (1,) * pad + tuple(dims))
    return out


def unary_op(name: str, x: Any, out: DeviceArray, p: Any = 0, q: Any = 0) -> DeviceArray:
    """out = name(x) element-wise (``x`` broadcast to out)."""
    return _run(kernels.elementwise.UNARY, name, out, [x], p, q)


def binary_op(name: str, a: Any, b: Any, out: DeviceArray, p: Any = 0, q: Any = 0) -> DeviceArray:
    """out = name(a, b) element-wise, numpy-broadcast; scalars allowed."""
    return _run(kernels.elementwise.BINARY, name, out, [a, b], p, q)


def ternary_op(name: str, a: Any, b: Any, c: Any, out: DeviceArray, p: Any = 0, q: Any = 0) -> DeviceArray:
    """out = name(a, b, c) element-wise, numpy-broadcast; scalars allowed."""
    return _run(kernels.elementwise.TERNARY, name, out, [a, b, c], p, q)

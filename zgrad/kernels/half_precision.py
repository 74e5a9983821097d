"""How kernels compute on float16 and bfloat16 arrays: in float32, storing the result once.

This is the one place that decides it. Dispatch wraps every backend it loads in a
:class:`HalfPrecisionBackend`, which wraps each op of the vocabulary: an op called with a 16-bit
floating array (or a list of them, as ``stack`` takes) gets float32 copies of those arrays
instead, and afterwards the copies of the arrays it may have written are rounded back into the
originals. So the kernels, the
Numba CPU ones and the CUDA ones alike, never see a half type: an op loads its operands, computes
and accumulates in float32 (a matmul, a sum, a softmax, a variance) and rounds its result to the
half dtype once, as PyTorch's CPU kernels do, instead of rounding after every step.

Which arguments an op writes is not declared per op: every writable 16-bit argument is rounded
back (an argument it only read gets its own bits back, since widening is exact), the ones the op
returned last, so that an input viewing an output's memory cannot overwrite the result.
Allocation and transfer ops (:data:`STORAGE_OPS`) move the half dtype itself and are not wrapped,
nor are the ops a backend lists in its ``HALF_NATIVE_OPS``: those take half arrays themselves and
accumulate in float32 on their own (the CUDA backend's matmul, on the tensor cores through cuBLAS).
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any, Callable

import numpy as np

from zgrad.kernels.promotion import HALF_DTYPES
from zgrad.kernels.vocabulary import OPS

__all__ = ["STORAGE_OPS", "HalfPrecisionBackend"]

_FLOAT32 = np.dtype(np.float32)
_SEQUENCES = frozenset({list, tuple})
# Ops that make, cast or move arrays of any dtype (a cast to float16 is ``copy``): not widened.
STORAGE_OPS = frozenset({"empty", "full", "zeros", "asarray", "to_host", "copy", "to_dlpack", "dlpack_device",
                         "from_dlpack"})


def _is_half(value: Any) -> bool:
    return getattr(value, "dtype", None) in HALF_DTYPES


def _needs_widening(values: Any) -> bool:
    """Whether any of ``values`` (or of the lists among them) is a 16-bit floating array; written
    for speed, as every kernel call of every dtype asks it."""
    for value in values:
        dtype = getattr(value, "dtype", None)
        if dtype in HALF_DTYPES:
            return True
        if dtype is None and type(value) in _SEQUENCES \
                and not HALF_DTYPES.isdisjoint([getattr(item, "dtype", None) for item in value]):
            return True
    return False


class _Widener:
    """The float32 copies made for one call, each once per original array, and the rounding back."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._copies: dict[int, tuple[Any, Any]] = {}  # id(original) -> (original, float32 copy)

    def widen(self, value: Any) -> Any:
        if type(value) in _SEQUENCES:
            return type(value)(self.widen(item) for item in value)
        if not _is_half(value):
            return value
        if isinstance(value, np.generic):
            return np.float32(value)
        known = self._copies.get(id(value))
        if known is not None:
            return known[1]
        wide = self._module.copy(value, self._module.empty(value.shape, _FLOAT32))
        self._copies[id(value)] = (value, wide)
        return wide

    def narrow(self, result: Any) -> Any:
        returned = {id(item) for item in (result if type(result) in _SEQUENCES else (result,))}
        pairs = [pair for pair in self._copies.values() if pair[0].flags.writeable]
        pairs.sort(key=lambda pair: id(pair[1]) in returned)  # the op's results are rounded back last
        for original, wide in pairs:
            self._module.copy(wide, original)
        originals = {id(wide): original for original, wide in self._copies.values()}
        if type(result) in _SEQUENCES:
            return type(result)(originals.get(id(item), item) for item in result)
        return originals.get(id(result), result)


def _in_float32(op: Callable, module: ModuleType) -> Callable:
    @functools.wraps(op)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not kwargs:  # the common call, checked here without a further call
            for value in args:
                dtype = getattr(value, "dtype", None)
                if dtype in HALF_DTYPES or (dtype is None and type(value) in _SEQUENCES):
                    break
            else:
                return op(*args)
        if not _needs_widening(args) and not (kwargs and _needs_widening(kwargs.values())):
            return op(*args, **kwargs)
        widener = _Widener(module)
        result = op(*(widener.widen(a) for a in args), **{k: widener.widen(v) for k, v in kwargs.items()})
        return widener.narrow(result)
    return call


class HalfPrecisionBackend:
    """A backend module (implementing :data:`~zgrad.kernels.vocabulary.OPS`) whose ops compute on
    float16 and bfloat16 arrays in float32 (see the module docstring); every other attribute is
    the module's own, and ``module`` is the module itself."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        native = getattr(module, "HALF_NATIVE_OPS", frozenset())
        for op in OPS:
            kernel = getattr(module, op)
            setattr(self, op, kernel if op in STORAGE_OPS or op in native else _in_float32(kernel, module))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)


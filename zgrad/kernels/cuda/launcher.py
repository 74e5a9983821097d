"""Kernel launches on a GPU without Numba's per-launch argument path.

Numba launches a kernel by typing every argument, choosing the compiled overload, turning each
device array into a cuda.core ``StridedMemoryView`` and then into its ABI fields (meminfo, parent,
size, itemsize, data pointer, shape, strides), scalars into ctypes values, and calling cuda.core's
``launch``. All of that is Python, per argument and per launch; a minGPT step makes about 500
launches. Here each (kernel, argument types) pair is launched through Numba once (which compiles
it); after that a :class:`Plan` remembers the compiled kernel and one converter per parameter, and
later launches with arguments of the same types go straight to cuda.core's ``launch`` with the same
values Numba would pass. A device array's kind (what selects the overload) and fields are read
once per array object and kept on it (an array's memory, shape and strides never change); the kind
is read from the array's flags and strides, not from Numba's type of it, whose construction costs
several times more and which every fresh array of a step would build once.

A plan is made only when its parameters for the launch that makes it equal, value for value and
type for type, what Numba's own conversion (``_Kernel._prepare_args``) gives for the same
arguments; otherwise that (kernel, types) pair keeps Numba's path, with a RuntimeWarning once per
process. Kernels that need more than this (debug builds, argument extensions, cooperative
launches, a type without a converter here: records, complex numbers) keep Numba's path too.
Setting ``ZGRAD_CUDA_NUMBA_LAUNCH=1`` before the first launch keeps it for every kernel. Only for
a real GPU: the simulator launches through Numba (``runtime.launch``).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["launch", "plans"]

_NO_PLAN = object()  # a (kernel, types) pair that always goes through Numba
_plans: dict[tuple, Any] = {}
_configs: dict[tuple, Any] = {}
_READ = "_zgrad_launch_read"  # attribute of a device array: its (kind, ABI fields), once read
_NUMBA_ONLY = os.environ.get("ZGRAD_CUDA_NUMBA_LAUNCH") == "1"


def plans() -> int:
    """How many (kernel, argument types) pairs launch directly (tests, benchmarks)."""
    return sum(plan is not _NO_PLAN for plan in _plans.values())


_INT64_END = 1 << 63
_UINT64_INT = "int past int64"  # Numba types a Python int from 2**63 on as uint64
_INT = {int}


def _kind(value: Any) -> Any:
    """What selects a compiled overload for ``value``: for a device array, its :func:`_read` kind;
    else the Python type (int, float, bool and numpy scalars type by class; an int by its range
    too)."""
    kind = type(value)
    if kind is int:
        return _UINT64_INT if value >= _INT64_END else kind
    if kind is tuple:
        kinds = tuple(map(type, value))
        if set(kinds) == _INT and max(value) < _INT64_END:  # a shape or strides: no call per item
            return kinds
        return tuple(_kind(item) for item in value)
    if getattr(kind, "device_ctypes_pointer", None) is None:  # not a device array: scalars, host arrays
        return kind
    return _read(value)[0]


def _on_the_host(value: Any) -> bool:
    """Whether ``value`` is (or a tuple holds) a host array."""
    return isinstance(value, np.ndarray) or (type(value) is tuple and any(_on_the_host(v) for v in value))


def _dim3(dims: Any) -> tuple[int, int, int]:
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    return (*dims, *(1,) * (3 - len(dims)))


def launch(kernel: Any, grid: Any, block: Any, stream: Any, args: tuple) -> None:
    """Launch ``kernel`` over (``grid``, ``block``) on ``stream`` with ``args``: through the
    kernel's :class:`Plan` when its argument types have one, else through Numba (compiling on
    first use) and then make the plan."""
    key = (kernel, *[_kind(a) for a in args])
    plan = _plans.get(key)
    if plan is None or plan is _NO_PLAN:
        kernel[grid, block, stream](*args)
        if plan is None:
            _plans[key] = _NO_PLAN if _NUMBA_ONLY else (Plan.of(kernel, args, stream) or _NO_PLAN)
        return
    config = _configs.get((grid, block))
    if config is None:
        config = _configs[grid, block] = _numba_launch()[1](grid=_dim3(grid), block=_dim3(block), shmem_size=0)
    plan.launch(stream, config, args)


@functools.cache
def _numba_launch() -> tuple[Callable, type]:
    """cuda.core's launch function and LaunchConfig class, as Numba's CUDA target imports them
    (imported at the first plan: the simulator has none)."""
    from numba.cuda import dispatcher
    return dispatcher.launch, dispatcher.LaunchConfig


def _read(array: Any) -> tuple[tuple, tuple]:
    """(kind, fields) of a device array, read on first use and kept on it.

    The kind is (class, dtype, ndim, C-contiguous, F-contiguous, has a zero stride, empty): Numba
    types a device array by its class, dtype, ndim and a layout that follows from the other four,
    so arrays of one kind have one Numba type (a kind may be finer than a type; that only makes one
    more plan).
    The fields are its kernel parameters as Numba passes them: meminfo and parent (null), size,
    itemsize, data pointer, shape, byte strides."""
    read = array.__dict__.get(_READ)
    if read is None:
        dtype, ndim, size, strides, flags = array.dtype, array.ndim, array.size, tuple(array.strides), array.flags
        kind = (type(array), dtype, ndim, flags["C_CONTIGUOUS"], flags["F_CONTIGUOUS"], 0 in strides, size == 0)
        fields = (0, 0, size, dtype.itemsize, array.device_ctypes_pointer.value or 0, *array.shape,
                  *(strides if ndim else ()))
        read = array.__dict__[_READ] = (kind, fields)
    return read


def _array_fields(array: Any) -> tuple:
    """A device array's kernel parameters (:func:`_read`)."""
    return _read(array)[1]


def _scalar(ctype: Any) -> Callable[[Any], tuple]:
    return lambda value: (ctype(value),)


def _ctype(numba_type: Any) -> Any:
    """The ctypes class Numba passes a scalar of ``numba_type`` as (None for others)."""
    from numba.cuda import types
    if isinstance(numba_type, types.Integer):
        return getattr(ctypes, f"c_{numba_type}")
    return {types.float64: ctypes.c_double, types.float32: ctypes.c_float}.get(numba_type)


def _converter(numba_type: Any) -> Callable[[Any], tuple] | None:
    """How an argument of ``numba_type`` becomes its kernel parameters (as in Numba's
    ``_Kernel._prepare_args``), or None for a type this module leaves to Numba."""
    from numba.cuda import types
    if isinstance(numba_type, types.Array):
        return _array_fields
    if isinstance(numba_type, types.UniTuple):  # a shape, a group of arrays: one C-level pass
        if isinstance(numba_type.dtype, types.Array):
            return lambda value: tuple(itertools.chain.from_iterable(map(_array_fields, value)))
        ctype = _ctype(numba_type.dtype)
        if ctype is not None:
            return lambda value: tuple(map(ctype, value))
    if isinstance(numba_type, types.BaseTuple):
        items = [_converter(t) for t in numba_type]
        if any(c is None for c in items):
            return None
        return lambda value: tuple(field for convert, item in zip(items, value) for field in convert(item))
    if isinstance(numba_type, types.Boolean):
        return lambda value: (bool(value),)
    if numba_type == types.float16:
        return lambda value: (ctypes.c_uint16(np.float16(value).view(np.uint16)),)
    ctype = _ctype(numba_type)
    return None if ctype is None else _scalar(ctype)


class Plan:
    """One compiled kernel and its parameters' converters (see the module docstring)."""

    __slots__ = ("converters", "kernel")

    def __init__(self, kernel: Any, converters: list) -> None:
        self.kernel = kernel  # cuda.core's Kernel of the compiled overload
        self.converters = converters

    @classmethod
    def of(cls, dispatcher: Any, args: tuple, stream: Any) -> Plan | None:
        """The plan for launching ``dispatcher`` with arguments typed as ``args`` are, once Numba
        has compiled it for them (launched it once on ``stream``); None where Numba's own path is
        needed."""
        from numba.cuda.typing.typeof import Purpose, typeof
        if any(_on_the_host(a) for a in args):  # Numba copies those to the device each launch
            return None
        try:
            argtypes = tuple(typeof(a, Purpose.argument) for a in args)
        except ValueError:
            return None
        compiled = dispatcher.overloads.get(argtypes)
        if (compiled is None or getattr(compiled, "debug", False) or getattr(compiled, "cooperative", False)
                or getattr(compiled, "launch_config_sensitive", False)
                or getattr(dispatcher, "_launch_config_sensitive", False)
                or dispatcher.targetoptions.get("extensions") or tuple(compiled.argument_types) != argtypes):
            return None
        converters = [_converter(t) for t in argtypes]
        if any(c is None for c in converters):
            return None
        kernel = compiled._codelibrary.get_cufunc().kernel
        plan = cls(kernel, converters)
        return plan if _agrees_with_numba(compiled, argtypes, args, plan.values(args), stream) else None

    def launch(self, stream: Any, config: Any, args: tuple) -> None:
        """Launch the kernel with ``config`` on ``stream`` with the parameters of ``args``."""
        _numba_launch()[0](stream, config, self.kernel, *self.values(args))

    def values(self, args: tuple) -> list:
        """The kernel parameters for ``args``, in order."""
        values: list = []
        for convert, value in zip(self.converters, args):
            values.extend(convert(value))
        return values


_warned: list[bool] = []


def _agrees_with_numba(compiled: Any, argtypes: tuple, args: tuple, values: list, stream: Any) -> bool:
    """Whether ``values`` are the parameters Numba's own conversion gives for ``args`` (same
    Python or ctypes type, same bytes); warns once per process where they are not."""
    expected: list = []
    try:
        for numba_type, value in zip(argtypes, args):
            compiled._prepare_args(numba_type, value, stream, [], expected)
    except Exception as exc:  # noqa: BLE001 - any failure means Numba's path, as the warning says
        return _differs(compiled, f"Numba's conversion raised {type(exc).__name__}: {exc}")
    read = [flag for numba_type in argtypes for flag in _read_by_kernel(numba_type)]
    if not len(expected) == len(values) == len(read):
        return _differs(compiled, f"{len(values)} parameters where Numba passes {len(expected)}")
    for i, (ours, theirs, compared) in enumerate(zip(values, expected, read)):
        if type(ours) is not type(theirs) and not (type(ours) is bool and isinstance(theirs, (bool, np.bool_))):
            return _differs(compiled, f"parameter {i} is a {type(ours).__name__} where Numba passes a "
                                      f"{type(theirs).__name__}")
        same = bytes(ours) == bytes(theirs) if isinstance(ours, ctypes._SimpleCData) else ours == theirs
        if compared and not same:
            return _differs(compiled, f"parameter {i} is {ours!r} where Numba passes {theirs!r}")
    return True


def _read_by_kernel(numba_type: Any) -> list[bool]:
    """For each parameter an argument of ``numba_type`` becomes, whether the compiled kernel reads
    it: a C- or F-ordered array's strides it does not (Numba indexes such arrays from their shape,
    and passes them in a canonical form that, for axes of one element, may differ from the
    array's own)."""
    from numba.cuda import types
    if isinstance(numba_type, types.Array):
        return [True] * (5 + numba_type.ndim) + [numba_type.layout == "A"] * numba_type.ndim
    if isinstance(numba_type, types.BaseTuple):
        return [flag for item in numba_type for flag in _read_by_kernel(item)]
    return [True]


def _differs(compiled: Any, reason: str) -> bool:
    if not _warned:
        _warned.append(True)
        name = getattr(getattr(compiled, "py_func", None), "__name__", "a kernel")
        warnings.warn(f"zgrad's direct CUDA launch is off for {name} with these argument types: {reason}; it "
                      "launches through Numba (correct, slower). Please report this with your numba-cuda and "
                      "cuda-core versions.", RuntimeWarning, stacklevel=4)
    return False

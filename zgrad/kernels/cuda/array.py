"""``DeviceArray``: an n-d array in CUDA device memory with the numpy array interface zgrad's
dispatch and ops use (shape, dtype, strides, flags, basic indexing as views, reshape, transpose,
broadcast views), and nothing that would compute on the host behind the caller's back.

A DeviceArray is a strided view (shape, byte strides, byte offset) of a 1-D device allocation.
Layout arithmetic is numpy's own, run on a *layout dummy*: a numpy array placed at a fake address
that is never read, so every basic index, transpose and broadcast gets numpy's exact rules.
``arg()`` gives the view kernels take: a numba device array on a GPU, a simulator array over a
numpy view in the simulator.

There is deliberately no ``__array__``: numpy refuses a DeviceArray, so a CUDA op that would
fall back to a numpy function fails loudly instead of silently computing on the host.
"""

from __future__ import annotations

import functools
import math
import operator
import sys
from typing import Any

import numpy as np

from zgrad.errors import OutOfMemoryError
from zgrad.kernels.cuda import allocation_cache
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.memory_pool import is_out_of_memory
from zgrad.kernels.index_keys import is_basic_index
from zgrad.kernels.promotion import BFLOAT16

__all__ = ["FAKE_ADDRESS_SPAN", "DeviceArray"]

_FAKE_ADDRESS = 1 << 44  # where layout dummies "live"; never dereferenced
FAKE_ADDRESS_SPAN = (_FAKE_ADDRESS, 2 * _FAKE_ADDRESS)
"""Where layout dummies' data pointers lie: [first, end). Reading there crashes the process."""
_BFLOAT16_BITS = np.dtype(np.uint16)


class _Interface:
    def __init__(self, interface: dict) -> None:
        self.__array_interface__ = interface


def _layout(shape: tuple[int, ...], strides: tuple[int, ...], dtype: np.dtype, offset: int) -> np.ndarray:
    layout = np.asarray(_Interface({"data": (_FAKE_ADDRESS + offset, False), "shape": tuple(shape),
                                    "strides": tuple(strides), "typestr": dtype.str, "descr": dtype.descr,
                                    "version": 3}))
    return layout if layout.dtype == dtype else layout.view(dtype)  # bfloat16's typestr reads back as raw bytes


def _kernel_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype kernels see ``dtype``'s memory as: bfloat16, which Numba has no type for, as its bits."""
    return _BFLOAT16_BITS if dtype == BFLOAT16 else dtype


def _offset_of(layout: np.ndarray) -> int:
    return layout.__array_interface__["data"][0] - _FAKE_ADDRESS


def _simulated_elements(allocation: Any, start: int, dtype: np.dtype) -> np.ndarray:
    """A simulator allocation's memory from byte ``start`` on as the whole ``dtype`` elements it
    holds (a wider dtype's view may leave a few bytes over)."""
    raw = allocation._ary.view(np.uint8)[start:]
    return raw[:raw.size - raw.size % dtype.itemsize].view(dtype)


def _allocate(size: int, dtype: np.dtype) -> Any:
    """A 1-D device array for ``size`` elements of ``dtype`` (at least one), freed memory of this
    thread's reused where it has some of that length (:mod:`~zgrad.kernels.cuda.allocation_cache`).

    Raises:
        OutOfMemoryError: the device is full, even after the memory kept for reuse went back.
    """
    length, kernel_dtype = max(size, 1), _kernel_dtype(dtype)
    try:
        return allocation_cache.allocate(length, kernel_dtype, _new_allocation, is_out_of_memory, _memory_holders)
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        raise OutOfMemoryError(_out_of_memory_message(length * kernel_dtype.itemsize)) from exc


def _out_of_memory_message(wanted: int) -> str:
    try:
        free, total = rt.memory_info()
        capacity = f"GPU 0 has a total capacity of {_size(total)} of which {_size(free)} is free."
    except Exception as exc:  # noqa: BLE001 - the message must not hide the out-of-memory error
        capacity = f"GPU 0's free memory could not be read ({exc})."
    stats = allocation_cache.memory_stats()
    allocated, reserved = stats["allocated_bytes.all.current"], stats["reserved_bytes.all.current"]
    return (f"CUDA out of memory. Tried to allocate {_size(wanted)}. {capacity} "
            f"Of the allocated memory {_size(allocated)} is allocated by zgrad, and "
            f"{_size(reserved - allocated)} is reserved by zgrad but unallocated. Free tensors you no longer need "
            "(and call zgrad.cuda.empty_cache() so that other processes can use the memory), or use a smaller batch.")


def _size(nbytes: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if nbytes < 1024:
            return f"{nbytes:.2f} {unit}" if unit != "B" else f"{nbytes} bytes"
        nbytes /= 1024
    return f"{nbytes:.2f} GiB"


def _new_allocation(length: int, dtype: np.dtype) -> Any:
    if rt.SIMULATOR:
        return rt.cuda.to_device(np.empty(length, dtype))
    return rt.device_vector(length, dtype)


class DeviceArray:
    """An n-d strided view of CUDA device memory (see the module docstring)."""

    __slots__ = ("_base", "_layout", "_arg", "_start", "_whole")
    zgrad_device_type = "cuda"  # what dispatch.device_type_of reports

    def __init__(self, base: Any, layout: np.ndarray, start: int | None = None) -> None:
        self._base = base
        self._layout = layout
        self._arg = None
        self._start = start  # the byte offset in the allocation, once known
        self._whole = None  # whether this view is its whole allocation, C-ordered, once known

    def _offset(self) -> int:
        """Where this view starts in its allocation, in bytes (read from the layout once)."""
        start = self._start
        if start is None:
            start = self._start = _offset_of(self._layout)
        return start

    # --- making ---------------------------------------------------------------------------------

    @classmethod
    def empty(cls, shape: tuple[int, ...], dtype: np.dtype) -> "DeviceArray":
        """Uninitialised C-contiguous device memory of ``shape`` and ``dtype``."""
        dtype = np.dtype(dtype)
        shape = tuple(shape)
        return cls(_allocate(math.prod(shape), dtype), _fresh_layout(shape, dtype), 0)

    @classmethod
    def from_host(cls, array: np.ndarray) -> "DeviceArray":
        """A device copy of host ``array``, queued on this thread's stream; returns once the host
        memory may be reused, without waiting for the device.

        From ordinary (pageable) memory the driver stages the bytes before the call returns, so
        nothing waits for the work queued before it. A pinned buffer of the pool is read by the
        device later, so that copy is waited for. Another thread that reads the result needs a
        :func:`zgrad.kernels.cuda.runtime.synchronize` on this one first, as for any kernel's output.
        """
        array = array if array.flags.c_contiguous else array.copy()  # ascontiguousarray would make 0-d 1-d
        out = cls.empty(array.shape, array.dtype)
        if array.size:
            if rt.SIMULATOR:
                out._base._ary[: array.size] = array.reshape(-1).view(out._base._ary.dtype)
            else:
                out._base[: array.size].copy_to_device(array.reshape(-1).view(out._base.dtype), stream=rt.current_stream())
            if rt.is_leased(array):
                rt.synchronize()
        return out

    def _view(self, layout: np.ndarray) -> "DeviceArray":
        return DeviceArray(self._base, layout)

    def _same_start(self, layout: np.ndarray) -> "DeviceArray":
        """A view whose first element is this one's (a reshape, transpose, broadcast, dtype view)."""
        return DeviceArray(self._base, layout, self._start)

    def view(self, dtype: Any) -> "DeviceArray":
        """This memory read as ``dtype`` (numpy's ``view`` and its rules; no copy): another element
        size scales the last axis, which must then be contiguous."""
        return self._same_start(self._layout.view(np.dtype(dtype)))

    # --- what kernels take ----------------------------------------------------------------------

    def arg(self) -> Any:
        """This view as the device array a kernel takes (cached)."""
        if self._arg is None:
            layout, dtype = self._layout, _kernel_dtype(self._layout.dtype)
            offset = self._offset()
            if rt.SIMULATOR:
                host = _simulated_elements(self._base, offset, dtype)
                self._arg = rt.simulator_array(np.lib.stride_tricks.as_strided(host, layout.shape, layout.strides))
            else:
                from numba.cuda.cudadrv.devicearray import DeviceNDArray
                self._arg = DeviceNDArray(layout.shape, layout.strides, dtype, stream=rt.current_stream(),
                                          gpu_data=self._base.gpu_data.view(offset))
        return self._arg

    def flat_arg(self) -> Any:
        """The elements of this C-contiguous view as the 1-D device array a kernel takes: the
        allocation's own array when the view spans all of it (no new wrapper), else a 1-D view."""
        whole = self._whole
        if whole is None:
            layout = self._layout
            whole = self._whole = (layout.size == self._base.size and layout.flags.c_contiguous and self._offset() == 0
                                   and self._base.dtype == _kernel_dtype(layout.dtype))
        return self._base if whole else self.reshape(-1).arg()

    def memory_arg(self) -> Any:
        """The whole allocation under this view as the 1-D device array (of this view's element
        type) that kernels index with explicit offsets and strides: the allocation's own array,
        no new wrapper, unless this view reads the memory as another dtype (then the whole
        elements of that dtype in the allocation)."""
        base, dtype = self._base, _kernel_dtype(self._layout.dtype)
        if base.dtype == dtype:
            return base
        if rt.SIMULATOR:
            return rt.simulator_array(_simulated_elements(base, 0, dtype))
        count = base.size * base.dtype.itemsize // dtype.itemsize
        from numba.cuda.cudadrv.devicearray import DeviceNDArray
        return DeviceNDArray((count,), (dtype.itemsize,), dtype, stream=rt.current_stream(), gpu_data=base.gpu_data)

    def is_sole_view(self) -> bool:
        """Whether this C-contiguous, writeable view spans its whole allocation and nothing else
        refers to that memory: no other DeviceArray, no kernel argument or export but the one this
        array caches. Whoever holds the only reference to this array may then keep its memory (the
        engine keeps a leaf's first gradient so, without a copy). Memory zgrad did not allocate
        (imported through DLPack) is never a sole view."""
        layout = self._layout
        if (not (layout.flags.c_contiguous and layout.flags.writeable)
                or layout.nbytes != self._base.size * self._base.dtype.itemsize or self._offset()):
            return False
        sole_base, sole_memory = _sole_counts()
        base, memory = _holders(self)
        return base <= sole_base and memory <= sole_memory + (self._arg is not None)

    def to_host(self, out: np.ndarray | None = None) -> np.ndarray:
        """A host (numpy) copy, into ``out`` (C-contiguous, this shape and dtype) when given;
        blocks until this thread's queued work and the copy are done."""
        source = self if self.flags.c_contiguous else self.copy()
        out = np.empty(self.shape, self.dtype) if out is None else out
        if out.size:
            bits = out.view(_kernel_dtype(out.dtype))
            if rt.SIMULATOR:
                bits.reshape(-1)[:] = source.arg().copy_to_host().reshape(-1)
            else:
                source.arg().copy_to_host(bits, stream=rt.current_stream())
            rt.synchronize()
        return out

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA Array Interface of this view (on a GPU; the simulator has none)."""
        if rt.SIMULATOR:
            raise AttributeError("the CUDA simulator's arrays have no __cuda_array_interface__")
        return self.arg().__cuda_array_interface__

    def storage_offset(self) -> int:
        """Where this view starts in its allocation, in elements."""
        return self._offset() // self.itemsize

    def data_ptr(self) -> int:
        """The address of this view's first element: on the device, or in the simulator the host
        address of its stand-in memory."""
        base = self._base._ary.ctypes.data if rt.SIMULATOR else self._base.device_ctypes_pointer.value
        return base + self._offset()

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("can't convert a cuda device array to numpy implicitly: copy it to the host first "
                        "(Tensor.cpu(), or .to_host() on the array)")

    # --- the numpy array interface (read through the layout by C getters: no Python call) ------

    shape = property(operator.attrgetter("_layout.shape"))
    strides = property(operator.attrgetter("_layout.strides"))
    dtype = property(operator.attrgetter("_layout.dtype"))
    ndim = property(operator.attrgetter("_layout.ndim"))
    size = property(operator.attrgetter("_layout.size"))
    itemsize = property(operator.attrgetter("_layout.itemsize"))
    nbytes = property(operator.attrgetter("_layout.nbytes"))
    flags = property(operator.attrgetter("_layout.flags"))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype})"

    @property
    def T(self) -> "DeviceArray":  # noqa: N802 - numpy's name
        return self.transpose()

    def transpose(self, *axes: Any) -> "DeviceArray":
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return self._same_start(self._layout.transpose(axes or None))

    def squeeze(self, axis: Any = None) -> "DeviceArray":
        return self._same_start(self._layout.squeeze(axis))

    def swapaxes(self, a: int, b: int) -> "DeviceArray":
        return self._same_start(self._layout.swapaxes(a, b))

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> "DeviceArray":
        """The ``offset``-th diagonal of the matrices in ``axis1``, ``axis2`` as a view (numpy's)."""
        return self._view(self._layout.diagonal(offset, axis1, axis2))

    def sliding_window_view(self, size: int, axis: int) -> "DeviceArray":
        """The windows of ``size`` along ``axis`` as a view (numpy's ``sliding_window_view``)."""
        return self._view(np.lib.stride_tricks.sliding_window_view(self._layout, size, axis))

    def as_strided(self, shape: tuple[int, ...], strides: tuple[int, ...]) -> "DeviceArray":
        """A view starting at this one's first element with ``shape`` and byte ``strides`` (numpy's
        ``as_strided``: unchecked, so the caller keeps it inside the allocation)."""
        return self._same_start(np.lib.stride_tricks.as_strided(self._layout, tuple(shape), tuple(strides)))

    def broadcast_to(self, shape: tuple[int, ...]) -> "DeviceArray":
        """A read-only broadcast view to ``shape`` (numpy's rules and errors)."""
        return self._same_start(np.broadcast_to(self._layout, tuple(shape)))

    def reshape(self, *shape: Any, copy: bool | None = None) -> "DeviceArray":
        """numpy's reshape: a view where the strides allow one, else (unless ``copy`` is False,
        which raises ValueError then) a contiguous copy reshaped."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        new_shape = _reshaped(self.size, shape)
        if not copy:
            try:
                return self._same_start(self._layout.reshape(new_shape, copy=False))
            except ValueError:
                if copy is False:
                    raise
        source = self.copy()
        return DeviceArray(source._base, _fresh_layout(new_shape, source.dtype), 0)

    def __getitem__(self, index: Any) -> "DeviceArray":
        if is_basic_index(index):
            parts = index if isinstance(index, tuple) else (index,)
            if not any(p is Ellipsis for p in parts):
                parts = parts + (Ellipsis,)  # a 0-d view, never a scalar read from the (fake) memory
            return self._view(self._layout[parts])
        return _backend().take_positions(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        target = self[index] if is_basic_index(index) else None
        if target is None:
            _backend().put_positions(self, index, value)
        else:
            _backend().copy(value, target)

    # --- copies and reductions (on the device) --------------------------------------------------

    def copy(self) -> "DeviceArray":
        return _backend().copy(self, DeviceArray.empty(self.shape, self.dtype))

    def astype(self, dtype: Any, copy: bool = True) -> "DeviceArray":
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        return _backend().copy(self, DeviceArray.empty(self.shape, dtype))

    def min(self) -> Any:
        return _backend().extreme_value(self, largest=False)

    def max(self) -> Any:
        return _backend().extreme_value(self, largest=True)

    def item(self) -> Any:
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return self.to_host().reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def tolist(self) -> Any:
        return self.to_host().tolist()


@functools.lru_cache(maxsize=4096)
def _fresh_layout(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The layout of a new C-contiguous array (cached: a step allocates the same shapes again, and
    layouts are never changed in place, only viewed)."""
    return _layout(shape, _c_strides(shape, dtype.itemsize), dtype, 0)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _holders(array: DeviceArray) -> tuple[int, int]:
    """References to ``array``'s allocation object, and to its memory (:func:`_memory_holders`),
    as counted from here."""
    allocation = array._base
    return sys.getrefcount(allocation), _memory_holders(allocation)


def _memory_holders(allocation: Any) -> int:
    """References to ``allocation``'s memory as counted from here (each kernel argument or export
    viewing it holds one): in the simulator to the host array that owns it, on a GPU Numba's count
    of its memory pointer's views; a huge count for memory zgrad did not allocate, or that is
    already freed (collecting a reference cycle runs the memory's finalizer before the
    allocation's own ``__del__``)."""
    if rt.SIMULATOR:
        owner = allocation._ary
        while isinstance(owner.base, np.ndarray):  # numpy's views refer to the array that owns the memory
            owner = owner.base
        return sys.getrefcount(owner)
    memory = allocation.gpu_data
    if memory is None or getattr(memory, "_owner", True) is not None:  # another's memory, or a view of it
        return sys.maxsize
    finalizer = getattr(memory, "_finalizer", None)
    if finalizer is not None and not finalizer.alive:
        return sys.maxsize
    return memory.refct  # Numba counts the views of its allocations


_SOLE_COUNTS: list[tuple[int, int]] = []


def _sole_counts() -> tuple[int, int]:
    """What :func:`_holders` counts for a fresh array that only one name holds (measured once, on
    the allocator in use: the counts differ between Python versions, Numba's memory managers and
    the simulator)."""
    if not _SOLE_COUNTS:
        probe = DeviceArray.empty((1,), np.dtype(np.float32))
        _SOLE_COUNTS.append(_holders(probe))
    return _SOLE_COUNTS[0]


def _reshaped(size: int, shape: tuple[Any, ...]) -> tuple[int, ...]:
    """``shape`` with a -1 resolved, checked against ``size`` (numpy's error text)."""
    if math.prod(shape) == size and all(type(n) is int and n >= 0 for n in shape):
        return shape  # the common case: nothing to resolve
    shape = tuple(int(n) for n in shape)
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    known = math.prod(n for n in shape if n != -1)
    if -1 in shape:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // known if n == -1 else n for n in shape)
    if math.prod(shape) != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    return shape


def _backend() -> Any:
    from zgrad.kernels import dispatch
    return dispatch.backend("cuda")

"""DLPack for device arrays: export a :class:`DeviceArray` as a ``dltensor`` capsule (what
``torch.from_dlpack``, CuPy and JAX take) and import any producer's CUDA tensor through cuda-core's
``StridedMemoryView``, both without a copy.

Export builds the ``DLManagedTensor`` with ctypes: the capsule keeps the array (and so its device
memory) alive until the consumer calls the deleter, or until the capsule dies unconsumed. Stream
order: before exporting, the producer's queued work is waited for (the consumer's stream may be any
stream; waiting is the one order that holds for all of them).

Only on a real GPU: the simulator's "device" memory is host memory, which no consumer can take as
a CUDA pointer.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray, _c_strides, _layout

__all__ = ["KDL_CUDA", "to_dlpack", "dlpack_device", "from_dlpack"]

KDL_CUDA = 2  # DLDeviceType kDLCUDA
_CAPSULE_NAME = b"dltensor"
_USED_NAME = b"used_dltensor"
_DTYPE_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # DLDataTypeCode by numpy kind


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

# The capsule API through a handle of our own (argument types set here touch no one else's), and
# the destructor taking the capsule as a raw pointer: it runs while the capsule is being freed,
# when making a Python object of it again would resurrect it.
_capi = ctypes.PyDLL(None)
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_PyCapsule_New = _capi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_PyCapsule_IsValid = _capi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_PyCapsule_GetPointer = _capi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# What an exported capsule keeps alive (the allocation, the array, the struct and its
# shape/strides), by the struct's address; the deleter drops the entry. The allocation is held by
# name: a reference to it is what tells DeviceArray.is_sole_view that an export still reads it.
_exported: dict[int, tuple[Any, ...]] = {}
_exported_lock = threading.Lock()


@_DELETER
def _delete(managed: Any) -> None:
    with _exported_lock:
        _exported.pop(ctypes.addressof(managed.contents), None)


@_CAPSULE_DESTRUCTOR
def _destroy_unconsumed(capsule: Any) -> None:
    if _PyCapsule_IsValid(capsule, _CAPSULE_NAME):  # never renamed "used_dltensor": nobody took it
        address = _PyCapsule_GetPointer(capsule, _CAPSULE_NAME)
        with _exported_lock:
            _exported.pop(address, None)


def _require_gpu(what: str) -> None:
    if rt.SIMULATOR:
        raise BufferError(f"{what}: DLPack needs a real GPU; the CUDA simulator's memory is host memory "
                          "(copy the tensor with .cpu() first)")


def dlpack_device(array: DeviceArray) -> tuple[int, int]:
    """(kDLCUDA, 0): zgrad uses device 0 of the process."""
    _require_gpu("__dlpack_device__")
    return KDL_CUDA, 0


def to_dlpack(array: DeviceArray, stream: Any = None, max_version: Any = None, **_: Any) -> Any:
    """A ``dltensor`` capsule viewing ``array``'s device memory (no copy).

    Raises:
        BufferError: in the simulator, or for a dtype DLPack cannot name.
    """
    _require_gpu("__dlpack__")
    dtype = array.dtype
    if dtype.kind not in _DTYPE_CODES:
        raise BufferError(f"__dlpack__: dtype {dtype} has no DLPack type code")
    rt.synchronize()  # the consumer reads what this thread's stream has queued
    itemsize = dtype.itemsize
    shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
    strides = (ctypes.c_int64 * max(array.ndim, 1))(*(s // itemsize for s in array.strides))
    managed = _Managed()
    tensor = managed.dl_tensor
    tensor.data = array.arg().device_ctypes_pointer.value or 0
    tensor.device = _Device(KDL_CUDA, 0)
    tensor.ndim = array.ndim
    tensor.dtype = _DataType(_DTYPE_CODES[dtype.kind], 8 * itemsize, 1)
    tensor.shape, tensor.strides, tensor.byte_offset = shape, strides, 0
    managed.manager_ctx = None
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    with _exported_lock:
        _exported[address] = (array._base, array, managed, shape, strides)
    return _PyCapsule_New(address, _CAPSULE_NAME, _destroy_unconsumed)


def from_dlpack(obj: Any) -> DeviceArray:
    """A DeviceArray viewing ``obj``'s CUDA memory (no copy), ordered after the producer's work on
    this thread's stream; ``obj`` (its memory) stays alive as long as the view.

    Raises:
        BufferError: ``obj`` is not on CUDA device 0, or has negative strides.
    """
    _require_gpu("from_dlpack")
    from cuda.core.utils import StridedMemoryView
    view = StridedMemoryView.from_dlpack(obj, stream_ptr=int(rt.current_stream()))
    if not view.is_device_accessible or view.device_id != 0:
        raise BufferError(f"from_dlpack: the tensor is on device {view.device_id}; zgrad computes on CUDA device 0")
    dtype = np.dtype(view.dtype)
    shape = tuple(int(n) for n in view.shape)
    if view.strides is None:
        strides = _c_strides(shape, dtype.itemsize)
    else:
        strides = tuple(int(s) * dtype.itemsize for s in view.strides)
    if any(s < 0 for s in strides):
        raise BufferError("from_dlpack: negative strides are not supported; make the tensor contiguous first")
    span = 1 + sum((n - 1) * s // dtype.itemsize for n, s in zip(shape, strides)) if all(shape) else 1
    base = rt.cuda.from_cuda_array_interface(
        {"shape": (span,), "strides": None, "typestr": dtype.str, "data": (int(view.ptr), False), "version": 3},
        owner=view, sync=False)
    return DeviceArray(base, _layout(shape, strides, dtype, 0))


"""Matrix products through NVIDIA's cuBLAS: the CUDA backend's GEMM on a real GPU.

cuBLAS comes from the ``nvidia-cublas`` wheel (``pip install "zgrad[cublas]"``; a PyTorch with CUDA
installs it too) or a CUDA toolkit, found by ``cuda.pathfinder`` (part of cuda-python) and called
through ctypes: one call, ``cublasGemmStridedBatchedEx``, covers every product zgrad makes
(float32, float64, float16 and bfloat16; batches, broadcast operands with a batch stride of 0,
transposed views without a copy). Each thread has its own cuBLAS handle bound to its own stream,
so a product is ordered with the thread's Numba kernels and never synchronizes the host.

float32 products run in full float32 unless PyTorch's switch allows TF32
(``zgrad.backends.cuda.matmul.allow_tf32`` or ``zgrad.set_float32_matmul_precision("high")``; a
convolution's products follow ``zgrad.backends.cudnn.allow_tf32``, which its caller passes).
Half-precision products run on the tensor cores and accumulate in float32.

:func:`gemm` returns False where cuBLAS cannot take the product (Numba's simulator, no library, an
integer or complex dtype, a layout with no unit stride); the caller then runs zgrad's Numba kernel.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import warnings
from typing import Any, NamedTuple

import numpy as np

from zgrad.kernels import matmul_precision
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.promotion import BFLOAT16

__all__ = ["OP_N", "OP_T", "CublasError", "Problem", "available", "gemm", "library_path", "load_library", "problem",
           "takes_dtype"]

# cuBLAS's enums (cublas_api.h, library_types.h)
OP_N, OP_T = 0, 1  # cublasOperation_t
_R_32F, _R_64F, _R_16F, _R_16BF = 0, 1, 2, 14
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32, _COMPUTE_64F = 68, 77, 70
_GEMM_DEFAULT = -1
_INT32_MAX = (1 << 31) - 1

# dtype -> (cudaDataType, compute type, ctypes scalar type of alpha and beta)
_TYPES = {
    np.dtype(np.float32): (_R_32F, _COMPUTE_32F, ctypes.c_float),
    np.dtype(np.float64): (_R_64F, _COMPUTE_64F, ctypes.c_double),
    np.dtype(np.float16): (_R_16F, _COMPUTE_32F, ctypes.c_float),
    np.dtype(BFLOAT16): (_R_16BF, _COMPUTE_32F, ctypes.c_float),
}

INSTALL_HINT = ('install cuBLAS with pip install "zgrad[cublas]" (the nvidia-cublas wheel) or a CUDA toolkit; '
                "until then zgrad's own matmul kernel runs, several times slower")


class CublasError(RuntimeError):
    """A cuBLAS call failed (its status code and name in the message)."""


def load_library(name: str, label: str, otherwise: str) -> ctypes.CDLL | None:
    """The NVIDIA library ``name`` (from its wheel or a CUDA toolkit, as ``cuda.pathfinder`` finds
    it) loaded, or None, warning that ``label`` could not be loaded and what happens ``otherwise``."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        return ctypes.CDLL(load_nvidia_dynamic_lib(name).abs_path)
    except Exception as exc:  # noqa: BLE001 - any failure to find or load it means: no library
        warnings.warn(f"{label} could not be loaded ({type(exc).__name__}: {str(exc).splitlines()[0]}); {otherwise}",
                      RuntimeWarning, stacklevel=4)
        return None


@functools.cache
def _library() -> ctypes.CDLL | None:
    """cuBLAS loaded, its functions typed; None in the simulator or where it cannot be found
    (warned once, with the install hint)."""
    lib = None if rt.SIMULATOR else load_library("cublas", "cuBLAS", INSTALL_HINT)
    if lib is None:
        return None
    handle, i32, i64, ptr = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p
    lib.cublasCreate_v2.argtypes = [ctypes.POINTER(handle)]
    lib.cublasSetStream_v2.argtypes = [handle, ptr]
    lib.cublasDestroy_v2.argtypes = [handle]
    lib.cublasGemmStridedBatchedEx.argtypes = [
        handle, i32, i32, i32, i32, i32, ptr,
        ptr, i32, i32, i64,
        ptr, i32, i32, i64,
        ptr, ptr, i32, i32, i64,
        i32, i32, i32,
    ]
    for name in ("cublasCreate_v2", "cublasSetStream_v2", "cublasDestroy_v2", "cublasGemmStridedBatchedEx"):
        getattr(lib, name).restype = ctypes.c_int
    lib.cublasGetStatusName.argtypes = [ctypes.c_int]
    lib.cublasGetStatusName.restype = ctypes.c_char_p
    return lib


def available() -> bool:
    """Whether products run through cuBLAS here (a real GPU and the library found)."""
    return _library() is not None


def takes_dtype(dtype: Any) -> bool:
    """Whether cuBLAS is present here and multiplies matrices of ``dtype``."""
    return np.dtype(dtype) in _TYPES and available()


def library_path() -> str | None:
    """Where the cuBLAS in use was loaded from (None when :func:`available` is False)."""
    lib = _library()
    return None if lib is None else lib._name


def _check(status: int, call: str) -> None:
    if status != 0:
        name = _library().cublasGetStatusName(status).decode()
        raise CublasError(f"{call} failed: {name} (status {status})")


class _Handle:
    """A cuBLAS handle bound to the making thread's stream; destroyed with the thread's locals
    (each handle holds a workspace in device memory)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        self.value = ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(self.value)), "cublasCreate")
        _check(lib.cublasSetStream_v2(self.value, ctypes.c_void_p(int(rt.current_stream()))), "cublasSetStream")

    def __del__(self) -> None:
        if self.value:
            self._lib.cublasDestroy_v2(self.value)


_local = threading.local()


def _handle() -> ctypes.c_void_p:
    """This thread's cuBLAS handle (made on first use)."""
    handle = getattr(_local, "handle", None)
    if handle is None:
        handle = _local.handle = _Handle(_library())
    return handle.value


def _column_major(matrix: Any, rows: int, cols: int) -> tuple[int, int] | None:
    """How cuBLAS reads the row-major ``rows`` x ``cols`` matrix ``matrix`` (a 3-D view's last two
    axes) as a column-major operand of the transposed product: (operation, leading dimension), or
    None when neither axis has a unit stride."""
    item = matrix.itemsize
    s_row, s_col = matrix.strides[-2] // item, matrix.strides[-1] // item
    if matrix.strides[-2] % item or matrix.strides[-1] % item:
        return None
    if (cols == 1 or s_col == 1) and (rows == 1 or s_row >= cols):
        return OP_N, max(s_row, cols, 1)
    if (rows == 1 or s_row == 1) and (cols == 1 or s_col >= rows):
        return OP_T, max(s_col, rows, 1)
    return None


def _batch_stride(matrix: Any) -> int | None:
    stride = matrix.strides[0]
    return stride // matrix.itemsize if stride >= 0 and stride % matrix.itemsize == 0 else None


class Problem(NamedTuple):
    """A row-major product out[z] = a[z] @ b[z] as cuBLAS computes it: the column-major
    out^T = b^T @ a^T, so cuBLAS's first operand is ``b`` and its second ``a``."""

    rows: int  # of cuBLAS's result: out's columns
    cols: int  # of cuBLAS's result: out's rows
    inner: int
    batch: int
    first: tuple[int, int, int]  # b's (operation, leading dimension, batch stride)
    second: tuple[int, int, int]  # a's
    ld_out: int
    stride_out: int
    data_type: int
    compute: int
    scalar: Any  # the ctypes type of alpha and beta


def problem(a: Any, b: Any, out: Any, tf32: bool | None = None) -> Problem | None:
    """How cuBLAS takes out[z] = a[z] @ b[z] for 3-D device views (batch broadcast by a zero batch
    stride), or None where it cannot (a dtype it lacks, operands of another dtype, sizes past
    int32, an operand or out without a unit stride). A float32 product runs in TF32 when ``tf32``
    says so, or when it is None and the matrix-product switch allows it."""
    types = _TYPES.get(np.dtype(out.dtype))
    if types is None or a.dtype != out.dtype or b.dtype != out.dtype:
        return None
    batch, m, n = out.shape
    k = a.shape[2]
    if max(batch, m, n, k) > _INT32_MAX or out.strides[2] != out.itemsize:
        return None
    b_layout, a_layout = _column_major(b, k, n), _column_major(a, m, k)
    ldc = out.strides[1] // out.itemsize
    strides = _batch_stride(a), _batch_stride(b), _batch_stride(out)
    if b_layout is None or a_layout is None or None in strides or (m > 1 and ldc < n):
        return None
    data_type, compute, scalar = types
    if compute == _COMPUTE_32F and data_type == _R_32F and (matmul_precision.allow_tf32() if tf32 is None else tf32):
        compute = _COMPUTE_32F_FAST_TF32
    return Problem(n, m, k, batch, (*b_layout, strides[1]), (*a_layout, strides[0]), max(ldc, n, 1), strides[2],
                   data_type, compute, scalar)


def gemm(a: Any, b: Any, out: Any, tf32: bool | None = None) -> bool:
    """out[z] = a[z] @ b[z] for 3-D device views (batch broadcast by a zero batch stride), through
    cuBLAS on this thread's stream (float32 in TF32 as :func:`problem` says for ``tf32``). Returns
    False, computing nothing, where cuBLAS cannot take it.

    Raises:
        CublasError: cuBLAS refused a call it was given.
    """
    p = problem(a, b, out, tf32) if _library() is not None else None
    if p is None:
        return False
    alpha, beta = p.scalar(1.0), p.scalar(0.0)
    (op_b, ld_b, stride_b), (op_a, ld_a, stride_a) = p.first, p.second
    status = _library().cublasGemmStridedBatchedEx(
        _handle(), op_b, op_a, p.rows, p.cols, p.inner, ctypes.byref(alpha),
        b.data_ptr(), p.data_type, ld_b, stride_b,
        a.data_ptr(), p.data_type, ld_a, stride_a,
        ctypes.byref(beta), out.data_ptr(), p.data_type, p.ld_out, p.stride_out,
        p.batch, p.compute, _GEMM_DEFAULT)
    _check(status, "cublasGemmStridedBatchedEx")
    return True

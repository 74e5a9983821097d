"""Matrix products with a bias added in cuBLASLt's epilogue: a linear layer's ``x @ W.T + b`` as one
library call, where cuBLAS's GEMM and a separate addition write the product and then read and
write it again.

cuBLASLt comes with cuBLAS (the same ``nvidia-cublas`` wheel, ``libcublasLt``) and is called
through ctypes: ``cublasLtMatmul`` with the epilogue ``CUBLASLT_EPILOGUE_BIAS``, which adds a
vector to every row of the (row-major) product. Each thread has its own handle, workspace and, per
problem (dtype, shape, operations, leading dimensions, pointer alignments), the operation and
layout descriptors and the algorithm cuBLASLt's heuristic picked, made on first use.

A dtype's first product in a process is checked against the same product of small integers (exact
in every dtype and summation order) read back to the host: one wait for the device, once. Where
cuBLASLt has no algorithm for a product, that product takes cuBLAS's GEMM and an addition, as in
Numba's simulator; where it cannot be loaded, refuses a call or gets the check wrong, the path
turns off (for that dtype) with a warning.

:func:`gemm_bias` returns False where it does not compute the product; the caller then does.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import warnings
from typing import Any

import numpy as np

from zgrad.kernels.cuda import cublas
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray

__all__ = ["available", "gemm_bias"]

# cuBLASLt's enums (cublasLt.h)
_DESC_TRANSA, _DESC_TRANSB, _DESC_EPILOGUE, _DESC_BIAS_POINTER = 3, 4, 7, 8
_EPILOGUE_BIAS = 4
_PREF_MAX_WORKSPACE_BYTES = 1
_PREF_MIN_ALIGNMENT = {"a": 5, "b": 6, "c": 7, "d": 8}
_SCALE_TYPES = {ctypes.c_float: 0, ctypes.c_double: 1}  # CUDA_R_32F, CUDA_R_64F: alpha and beta's type

WORKSPACE_BYTES = 4 << 20  # per thread
_MAX_ALIGNMENT = 256  # what cuBLASLt assumes of a pointer unless told less


class _Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _HeuristicResult(ctypes.Structure):
    _fields_ = [("algo", _Algo), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


@functools.cache
def _library() -> ctypes.CDLL | None:
    """cuBLASLt loaded, its functions typed; None in the simulator, without cuBLAS, or where it
    cannot be loaded (warned once)."""
    if not cublas.available():
        return None
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        lib = ctypes.CDLL(load_nvidia_dynamic_lib("cublasLt").abs_path)
    except Exception as exc:  # noqa: BLE001 - any failure to find or load it means: no cuBLASLt
        warnings.warn(f"cuBLASLt could not be loaded ({type(exc).__name__}: {str(exc).splitlines()[0]}); linear "
                      f"layers add their bias after cuBLAS's product", RuntimeWarning, stacklevel=3)
        return None
    p, i32, u64, i64, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64, ctypes.c_size_t
    out = ctypes.POINTER(p)
    signatures = {
        "cublasLtCreate": [out], "cublasLtDestroy": [p],
        "cublasLtMatmulDescCreate": [out, i32, i32], "cublasLtMatmulDescDestroy": [p],
        "cublasLtMatmulDescSetAttribute": [p, i32, p, size],
        "cublasLtMatrixLayoutCreate": [out, i32, u64, u64, i64], "cublasLtMatrixLayoutDestroy": [p],
        "cublasLtMatmulPreferenceCreate": [out], "cublasLtMatmulPreferenceDestroy": [p],
        "cublasLtMatmulPreferenceSetAttribute": [p, i32, p, size],
        "cublasLtMatmulAlgoGetHeuristic": [p, p, p, p, p, p, p, i32, ctypes.POINTER(_HeuristicResult),
                                           ctypes.POINTER(i32)],
        "cublasLtMatmul": [p, p, p, p, p, p, p, p, p, p, p, p, ctypes.POINTER(_Algo), p, size, p],
    }
    for name, argtypes in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, ctypes.c_int
    lib.cublasLtGetStatusName.argtypes, lib.cublasLtGetStatusName.restype = [i32], ctypes.c_char_p
    return lib


_NOT_SUPPORTED = 15  # CUBLAS_STATUS_NOT_SUPPORTED


class _NotSupported(cublas.CublasError):
    """cuBLASLt has no algorithm for a product with a bias (not an error: the bias is added after)."""


def _check(status: int, call: str) -> None:
    if status != 0:
        name = _library().cublasLtGetStatusName(status).decode()
        kind = _NotSupported if status == _NOT_SUPPORTED else cublas.CublasError
        raise kind(f"{call} failed: {name} (status {status})")


def _set(setter: Any, target: ctypes.c_void_p, attribute: int, value: Any) -> None:
    _check(setter(target, attribute, ctypes.byref(value), ctypes.sizeof(value)), setter.__name__)


def _alignment(address: int) -> int:
    """The largest power of two up to 256 that divides ``address``."""
    return min(address & -address, _MAX_ALIGNMENT) if address else _MAX_ALIGNMENT


class _Plan:
    """The descriptors of one problem and the algorithm picked for it (destroyed with the plan)."""

    def __init__(self, lib: ctypes.CDLL, handle: ctypes.c_void_p, p: cublas.Problem, alignments: dict[str, int],
                 bias_address: int) -> None:
        self._lib = lib
        self.desc, self.layouts = ctypes.c_void_p(), []
        _check(lib.cublasLtMatmulDescCreate(ctypes.byref(self.desc), p.compute, _SCALE_TYPES[p.scalar]),
               "cublasLtMatmulDescCreate")
        (op_b, ld_b, _), (op_a, ld_a, _) = p.first, p.second
        setter = lib.cublasLtMatmulDescSetAttribute
        _set(setter, self.desc, _DESC_TRANSA, ctypes.c_int32(op_b))
        _set(setter, self.desc, _DESC_TRANSB, ctypes.c_int32(op_a))
        _set(setter, self.desc, _DESC_EPILOGUE, ctypes.c_uint32(_EPILOGUE_BIAS))
        self.set_bias(bias_address)
        # Layouts describe the matrices as stored, before their operation
        self._layout(p.data_type, *((p.rows, p.inner) if op_b == cublas.OP_N else (p.inner, p.rows)), ld_b)
        self._layout(p.data_type, *((p.inner, p.cols) if op_a == cublas.OP_N else (p.cols, p.inner)), ld_a)
        self._layout(p.data_type, p.rows, p.cols, p.ld_out)
        preference = ctypes.c_void_p()
        _check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(preference)), "cublasLtMatmulPreferenceCreate")
        try:
            setter = lib.cublasLtMatmulPreferenceSetAttribute
            _set(setter, preference, _PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(WORKSPACE_BYTES))
            for name, alignment in alignments.items():
                _set(setter, preference, _PREF_MIN_ALIGNMENT[name], ctypes.c_uint32(alignment))
            self.result, found = _HeuristicResult(), ctypes.c_int(0)
            a_layout, b_layout, c_layout = self.layouts
            _check(lib.cublasLtMatmulAlgoGetHeuristic(handle, self.desc, a_layout, b_layout, c_layout, c_layout,
                                                      preference, 1, ctypes.byref(self.result), ctypes.byref(found)),
                   "cublasLtMatmulAlgoGetHeuristic")
        finally:
            lib.cublasLtMatmulPreferenceDestroy(preference)
        if found.value < 1:
            raise _NotSupported("cublasLtMatmulAlgoGetHeuristic found no algorithm for a product with a bias")

    def _layout(self, data_type: int, rows: int, cols: int, ld: int) -> None:
        layout = ctypes.c_void_p()
        _check(self._lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), data_type, rows, cols, ld),
               "cublasLtMatrixLayoutCreate")
        self.layouts.append(layout)

    def set_bias(self, address: int) -> None:
        _set(self._lib.cublasLtMatmulDescSetAttribute, self.desc, _DESC_BIAS_POINTER, ctypes.c_void_p(address))

    def __del__(self) -> None:
        for layout in getattr(self, "layouts", ()):
            self._lib.cublasLtMatrixLayoutDestroy(layout)
        if getattr(self, "desc", None):
            self._lib.cublasLtMatmulDescDestroy(self.desc)


class _ThreadState:
    """This thread's cuBLASLt handle, workspace and plans."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        self.handle = ctypes.c_void_p()
        _check(lib.cublasLtCreate(ctypes.byref(self.handle)), "cublasLtCreate")
        self.workspace = DeviceArray.empty((WORKSPACE_BYTES,), np.dtype(np.uint8))
        self.plans: dict[tuple, _Plan] = {}

    def __del__(self) -> None:
        self.plans.clear()
        if getattr(self, "handle", None):
            self._lib.cublasLtDestroy(self.handle)


_local = threading.local()


def _state() -> _ThreadState:
    state = getattr(_local, "state", None)
    if state is None:
        state = _local.state = _ThreadState(_library())
    return state


def available(dtype: Any = np.float32) -> bool:
    """Whether products of ``dtype`` with a bias run through cuBLASLt here (so far)."""
    return _library() is not None and _dtypes.get(np.dtype(dtype), True)


# Per dtype: its first product checked and right (True), or the path off for it (False): the
# library has no algorithm for it, refused a call, or got the check wrong (the last two warned).
_dtypes: dict[np.dtype, bool] = {}
_check_lock = threading.Lock()


def gemm_bias(a: Any, b: Any, bias: Any, out: Any) -> bool:
    """out[0] = a[0] @ b[0] + bias (added to every row) for 3-D device views with a batch of one
    and a C-contiguous 1-D ``bias`` of out's columns and dtype, through cuBLASLt on this thread's
    stream. Returns False, computing nothing, where it does not take the product."""
    if out.shape[0] != 1 or bias.dtype != out.dtype or bias.shape != (out.shape[2],) \
            or bias.strides[0] != bias.itemsize or _library() is None:
        return False
    p = cublas.problem(a, b, out)
    if p is None:
        return False
    works = _dtypes.get(out.dtype)
    if works is None:
        works = _check_dtype(out.dtype)
    if not works:
        return False
    try:
        return _matmul(p, a, b, bias, out)
    except cublas.CublasError as exc:
        _turn_off(out.dtype, str(exc))
        return False


def _matmul(p: cublas.Problem, a: Any, b: Any, bias: Any, out: Any) -> bool:
    """The product through the thread's plan for it (made on first use); False, computing
    nothing, where cuBLASLt has no algorithm for it."""
    state = _state()
    addresses = {"a": b.data_ptr(), "b": a.data_ptr(), "c": out.data_ptr(), "d": out.data_ptr()}  # cuBLASLt's A is b
    alignments = {name: _alignment(address) for name, address in addresses.items()}
    bias_address = bias.data_ptr()
    key = (p, tuple(alignments.values()), _alignment(bias_address))
    try:
        if key not in state.plans:
            state.plans[key] = _Plan(_library(), state.handle, p, alignments, bias_address)
        plan = state.plans[key]
        if plan is None:
            return False
        plan.set_bias(bias_address)
        alpha, beta = p.scalar(1.0), p.scalar(0.0)
        a_layout, b_layout, c_layout = plan.layouts
        _check(_library().cublasLtMatmul(
            state.handle, plan.desc, ctypes.byref(alpha), addresses["a"], a_layout, addresses["b"], b_layout,
            ctypes.byref(beta), addresses["c"], c_layout, addresses["d"], c_layout, ctypes.byref(plan.result.algo),
            state.workspace.data_ptr(), WORKSPACE_BYTES, ctypes.c_void_p(int(rt.current_stream()))), "cublasLtMatmul")
    except _NotSupported:
        state.plans[key] = None
        return False
    return True


def _check_dtype(dtype: np.dtype) -> bool:
    """Whether cuBLASLt computes a product with a bias of ``dtype`` right: small integers, exact
    in every dtype and order of summation, through a linear layer's layout (b a transposed view)
    and a plain one. Off for ``dtype`` where it has no algorithm for them, and, warning, where it
    refuses a call or gets them wrong."""
    with _check_lock:
        if dtype in _dtypes:
            return _dtypes[dtype]
        rng = np.random.default_rng(0)
        x, w, bias = (rng.integers(-3, 4, shape).astype(np.float32) for shape in ((5, 7), (6, 7), (6,)))
        expected = x @ w.T + bias
        works = True
        try:
            x_dev = DeviceArray.from_host(x.astype(dtype)).reshape(1, 5, 7)
            bias_dev = DeviceArray.from_host(bias.astype(dtype))
            linear_layout = DeviceArray.from_host(w.astype(dtype)).transpose(1, 0)
            for b in (linear_layout, DeviceArray.from_host(np.ascontiguousarray(w.T).astype(dtype))):
                out = DeviceArray.empty((1, 5, 6), dtype)
                if not _matmul(cublas.problem(x_dev, b[None], out), x_dev, b[None], bias_dev, out):
                    works = False
                    break
                got = out.to_host().astype(np.float32).reshape(5, 6)
                if not np.array_equal(got, expected):
                    _turn_off(dtype, f"a product with a bias came out wrong (largest error {np.abs(got - expected).max()})")
                    return False
        except cublas.CublasError as exc:
            _turn_off(dtype, str(exc))
            return False
        _dtypes[dtype] = works
        return works


def _turn_off(dtype: np.dtype, reason: str) -> None:
    _dtypes[dtype] = False
    warnings.warn(f"cuBLASLt's bias epilogue is off for {dtype} in this process: {reason}; linear layers add their "
                  f"bias after cuBLAS's product", RuntimeWarning, stacklevel=4)

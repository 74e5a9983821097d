"""Matrix products with a linear layer's bias work in cuBLASLt's epilogue: the forward's
``x @ W.T + b`` (:func:`gemm_bias`) and the backward's weight gradient ``g.T @ x`` with the bias's,
``g`` summed over its rows (:func:`gemm_row_sums`), each as one library call, where cuBLAS's GEMM
and a separate kernel read or write the product, or read ``g``, once more.

cuBLASLt comes with cuBLAS (the same ``nvidia-cublas`` wheel, ``libcublasLt``) and is called
through ctypes: ``cublasLtMatmul`` with the epilogue ``CUBLASLT_EPILOGUE_BIAS`` (a vector added to
every row of the row-major product) or ``CUBLASLT_EPILOGUE_BGRADB`` (the left operand's rows
summed: cuBLASLt's B is the row-major left operand). Each thread has its own handle, workspace
and, per problem (epilogue, dtype, shape, operations, leading dimensions, pointer alignments), the
operation and layout descriptors and the algorithm cuBLASLt's heuristic picked, made on first use.

Each epilogue's first product of a dtype in a process is checked against the same product of small
integers (exact in every dtype and summation order) read back to the host: one wait for the
device, once. Where cuBLASLt has no algorithm for a product, the caller computes it as before
(cuBLAS's GEMM and a kernel, as in Numba's simulator); where it cannot be loaded, refuses a call or
gets the check wrong, the epilogue turns off for that dtype with a warning.

Both functions return False where they do not compute the product; the caller then does.
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

__all__ = ["BIAS", "BIAS_GRADIENT", "available", "gemm_bias", "gemm_row_sums"]

# cuBLASLt's enums (cublasLt.h)
_DESC_TRANSA, _DESC_TRANSB, _DESC_EPILOGUE, _DESC_BIAS_POINTER = 3, 4, 7, 8
BIAS, BIAS_GRADIENT = 4, 512  # CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_BGRADB
_EPILOGUE_NAMES = {BIAS: "bias", BIAS_GRADIENT: "bias-gradient"}
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
    lib = cublas.available() and cublas.load_library(
        "cublasLt", "cuBLASLt", "linear layers' biases and bias gradients take kernels of their own")
    if not lib:
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
    """cuBLASLt has no algorithm for a product with an epilogue (not an error: the caller computes it)."""


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

    def __init__(self, lib: ctypes.CDLL, handle: ctypes.c_void_p, p: cublas.Problem, epilogue: int,
                 alignments: dict[str, int], vector_address: int) -> None:
        self._lib = lib
        self.desc, self.layouts = ctypes.c_void_p(), []
        _check(lib.cublasLtMatmulDescCreate(ctypes.byref(self.desc), p.compute, _SCALE_TYPES[p.scalar]),
               "cublasLtMatmulDescCreate")
        (op_b, ld_b, _), (op_a, ld_a, _) = p.first, p.second
        setter = lib.cublasLtMatmulDescSetAttribute
        _set(setter, self.desc, _DESC_TRANSA, ctypes.c_int32(op_b))
        _set(setter, self.desc, _DESC_TRANSB, ctypes.c_int32(op_a))
        _set(setter, self.desc, _DESC_EPILOGUE, ctypes.c_uint32(epilogue))
        self.set_vector(vector_address)
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
        self.algo = ctypes.byref(self.result.algo)
        if found.value < 1:
            raise _NotSupported(f"cublasLtMatmulAlgoGetHeuristic found no algorithm for the {_EPILOGUE_NAMES[epilogue]} "
                                f"epilogue")

    def _layout(self, data_type: int, rows: int, cols: int, ld: int) -> None:
        layout = ctypes.c_void_p()
        _check(self._lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), data_type, rows, cols, ld),
               "cublasLtMatrixLayoutCreate")
        self.layouts.append(layout)

    def set_vector(self, address: int) -> None:
        """Where the epilogue reads the bias or writes the bias gradient."""
        self.vector_address = address
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
        self.workspace_address = self.workspace.data_ptr()
        self.stream = ctypes.c_void_p(int(rt.current_stream()))
        self.plans: dict[tuple, _Plan | None] = {}

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


def available(dtype: Any = np.float32, epilogue: int = BIAS) -> bool:
    """Whether products of ``dtype`` with ``epilogue`` run through cuBLASLt here (so far)."""
    return _library() is not None and _works.get((np.dtype(dtype), epilogue), True)


# Per (dtype, epilogue): its first product checked and right (True), or the path off for it (False):
# the library has no algorithm for it, refused a call, or got the check wrong (the last two warned).
_works: dict[tuple[np.dtype, int], bool] = {}
_check_lock = threading.Lock()


def gemm_bias(a: Any, b: Any, bias: Any, out: Any) -> bool:
    """out[0] = a[0] @ b[0] + bias (added to every row) for 3-D device views with a batch of one
    and a C-contiguous 1-D ``bias`` of out's columns and dtype, through cuBLASLt on this thread's
    stream. Returns False, computing nothing, where it does not take the product."""
    return _gemm_with(a, b, bias, out, BIAS, out.shape[2])


def gemm_row_sums(a: Any, b: Any, sums: Any, out: Any) -> bool:
    """out[0] = a[0] @ b[0] and sums[i] = the sum of a[0, i, :] (a linear layer's weight gradient
    g.T @ x with its bias's, g summed over its rows) for 3-D device views with a batch of one and
    a C-contiguous 1-D ``sums`` of out's rows and dtype, through cuBLASLt on this thread's stream.
    Returns False, computing nothing, where it does not take the product."""
    return _gemm_with(a, b, sums, out, BIAS_GRADIENT, out.shape[1])


def _gemm_with(a: Any, b: Any, vector: Any, out: Any, epilogue: int, length: int) -> bool:
    if out.shape[0] != 1 or vector.dtype != out.dtype or vector.shape != (length,) \
            or vector.strides[0] != vector.itemsize or _library() is None:
        return False
    p = cublas.problem(a, b, out)
    if p is None:
        return False
    works = _works.get((out.dtype, epilogue))
    if works is None:
        works = _check_epilogue(out.dtype, epilogue)
    if not works:
        return False
    try:
        return _matmul(p, a, b, vector, out, epilogue)
    except cublas.CublasError as exc:
        _turn_off(out.dtype, epilogue, str(exc))
        return False


# alpha = 1 and beta = 0 by reference, for each type they take
_ONE = {scalar: ctypes.byref(scalar(1.0)) for scalar in _SCALE_TYPES}
_ZERO = {scalar: ctypes.byref(scalar(0.0)) for scalar in _SCALE_TYPES}


def _matmul(p: cublas.Problem, a: Any, b: Any, vector: Any, out: Any, epilogue: int) -> bool:
    """The product through the thread's plan for it (made on first use); False, computing
    nothing, where cuBLASLt has no algorithm for it."""
    state = _state()
    first, second, target, vector_address = b.data_ptr(), a.data_ptr(), out.data_ptr(), vector.data_ptr()  # A is b
    key = (p, epilogue, _alignment(first), _alignment(second), _alignment(target), _alignment(vector_address))
    try:
        plan = state.plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            alignments = dict(zip("abcd", key[2:5] + key[4:5]))
            plan = state.plans[key] = _Plan(_library(), state.handle, p, epilogue, alignments, vector_address)
        if plan is None:
            return False
        if plan.vector_address != vector_address:
            plan.set_vector(vector_address)
        a_layout, b_layout, c_layout = plan.layouts
        _check(_library().cublasLtMatmul(
            state.handle, plan.desc, _ONE[p.scalar], first, a_layout, second, b_layout, _ZERO[p.scalar], target,
            c_layout, target, c_layout, plan.algo, state.workspace_address, WORKSPACE_BYTES, state.stream),
            "cublasLtMatmul")
    except _NotSupported:
        state.plans[key] = None
        return False
    return True


_UNPLANNED = object()


def _check_epilogue(dtype: np.dtype, epilogue: int) -> bool:
    """Whether cuBLASLt computes products of ``dtype`` with ``epilogue`` right: small integers,
    exact in every dtype and order of summation, through a linear layer's layouts (the forward's
    weight and the backward's output gradient transposed views) and plain ones. Off for the pair
    where it has no algorithm for them, and, warning, where it refuses a call or gets them wrong."""
    with _check_lock:
        if (dtype, epilogue) in _works:
            return _works[(dtype, epilogue)]
        rng = np.random.default_rng(0)
        left, right = rng.integers(-3, 4, (5, 7)).astype(np.float32), rng.integers(-3, 4, (7, 6)).astype(np.float32)
        vector = rng.integers(-3, 4, 6).astype(np.float32)
        expected = (left @ right + vector, None) if epilogue == BIAS else (left @ right, left.sum(1))
        works = True
        try:
            vector_dev = DeviceArray.from_host(vector.astype(dtype) if epilogue == BIAS else np.zeros(5, dtype))
            for transposed in (True, False):
                a_dev, b_dev = (_on_device(m, dtype, transposed and side == epilogue)
                                for m, side in ((left, BIAS_GRADIENT), (right, BIAS)))
                out = DeviceArray.empty((1, 5, 6), dtype)
                if not _matmul(cublas.problem(a_dev[None], b_dev[None], out), a_dev[None], b_dev[None], vector_dev, out,
                               epilogue):
                    works = False
                    break
                got = [out.to_host().astype(np.float32).reshape(5, 6)]
                if epilogue == BIAS_GRADIENT:
                    got.append(vector_dev.to_host().astype(np.float32))
                for value, wanted in zip(got, expected):
                    if not np.array_equal(value, wanted):
                        _turn_off(dtype, epilogue, f"a product came out wrong (largest error "
                                  f"{np.abs(value - wanted).max()})")
                        return False
        except cublas.CublasError as exc:
            _turn_off(dtype, epilogue, str(exc))
            return False
        _works[(dtype, epilogue)] = works
        return works


def _on_device(matrix: np.ndarray, dtype: np.dtype, as_transposed_view: bool) -> DeviceArray:
    """``matrix`` in ``dtype`` on the device: as a linear layer passes the operand it transposes
    (the forward's right, W.T; the backward's left, g.T), a transposed view, when asked."""
    if as_transposed_view:
        return DeviceArray.from_host(np.ascontiguousarray(matrix.T).astype(dtype)).transpose(1, 0)
    return DeviceArray.from_host(matrix.astype(dtype))


def _turn_off(dtype: np.dtype, epilogue: int, reason: str) -> None:
    _works[(dtype, epilogue)] = False
    warnings.warn(f"cuBLASLt's {_EPILOGUE_NAMES[epilogue]} epilogue is off for {dtype} in this process: {reason}; "
                  f"linear layers compute it after cuBLAS's product", RuntimeWarning, stacklevel=4)

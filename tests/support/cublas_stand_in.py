"""Stand-ins for cuBLAS and cuBLASLt in Numba's CUDA simulator: :func:`install_stand_in` makes
``zgrad.kernels.cuda.cublas`` call :class:`StandInCublas`, which computes each
``cublasGemmStridedBatchedEx`` exactly as cuBLAS defines it (column-major operands, op N/T, leading
dimensions, batch strides, beta = 0 not reading C) from the simulator's device memory, which is
host memory; :func:`install_lt_stand_in` makes ``zgrad.kernels.cuda.cublas_lt`` call
:class:`StandInCublasLt`, which does the same for ``cublasLtMatmul`` with its descriptors (stored
shapes and leading dimensions, transposes, the bias and bias-gradient epilogues). Code that maps row-major views onto
the libraries' column-major products is checked with them: a wrong operation, leading dimension,
stride or bias pointer gives a wrong product or bias gradient.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

from zgrad.kernels.promotion import BFLOAT16

__all__ = ["StandInCublas", "StandInCublasLt", "install_lt_stand_in", "install_stand_in"]

_DTYPES = {0: np.float32, 1: np.float64, 2: np.float16, 14: BFLOAT16}


def _memory(address: int, count: int, dtype) -> np.ndarray:
    buffer = (ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(address)
    return np.frombuffer(buffer, dtype)


class StandInCublas:
    """cublasGemmStridedBatchedEx's definition, computed on host memory."""

    def __init__(self) -> None:
        self.calls = []

    def cublasGemmStridedBatchedEx(self, handle, op_a, op_b, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb,
                                   stride_b, beta, c, c_type, ldc, stride_c, batch, compute, algo):
        self.calls.append({"op_a": op_a, "op_b": op_b, "batch": batch, "stride_a": stride_a, "compute": compute})
        dtype = _DTYPES[c_type]

        def operand(address, op, ld, stride, rows, cols):
            stored_rows, stored_cols = (rows, cols) if op == 0 else (cols, rows)
            assert ld >= max(1, stored_rows), f"cuBLAS refuses ld {ld} < {stored_rows}"
            extent = (batch - 1) * stride + (stored_cols - 1) * ld + stored_rows
            flat = _memory(address, extent, dtype)
            out = np.empty((batch, rows, cols), np.float64)
            for z in range(batch):
                stored = np.lib.stride_tricks.as_strided(flat[z * stride:], (stored_rows, stored_cols),
                                                         (np.dtype(dtype).itemsize, ld * np.dtype(dtype).itemsize))
                out[z] = stored if op == 0 else stored.T
            return out

        left = operand(a, op_a, lda, stride_a, m, k)
        right = operand(b, op_b, ldb, stride_b, k, n)
        assert ldc >= max(1, m)
        flat = _memory(c, (batch - 1) * stride_c + (n - 1) * ldc + m, dtype)
        for z in range(batch):
            target = np.lib.stride_tricks.as_strided(flat[z * stride_c:], (m, n), (np.dtype(dtype).itemsize, ldc * np.dtype(dtype).itemsize))
            product = alpha._obj.value * (left[z] @ right[z])
            # cuBLAS does not read C when beta is 0 (uninitialized memory may hold NaN)
            target[...] = product if beta._obj.value == 0 else product + beta._obj.value * target
        return 0


def install_stand_in(monkeypatch: pytest.MonkeyPatch) -> StandInCublas:
    """cuBLAS present, as a new stand-in (for this test): the calls it took are in its ``calls``."""
    from zgrad.kernels.cuda import cublas
    fake = StandInCublas()
    monkeypatch.setattr(cublas, "_library", lambda: fake)
    monkeypatch.setattr(cublas, "_handle", lambda: None)
    return fake


# cublasLtMatmulDescAttributes_t values zgrad sets, and the epilogues
_LT_DESC_ATTRIBUTES = {3: "transa", 4: "transb", 7: "epilogue", 8: "bias"}
_LT_EPILOGUE_DEFAULT, _LT_EPILOGUE_BIAS, _LT_EPILOGUE_BGRADB = 1, 4, 512


class StandInCublasLt:
    """The cuBLASLt calls zgrad makes, as the library defines them, on host memory: descriptors,
    layouts and preferences are Python objects behind integer handles; ``cublasLtMatmul``
    computes D = alpha op(A) op(B) + beta C, plus the bias down D's column-major rows (epilogue
    BIAS) or writing op(B) summed over k, one per column of D, to the bias pointer (BGRADB).

    ``drop_bias``: leave out the bias or its gradient (a library getting the product wrong);
    ``status``: what ``cublasLtMatmul`` returns (a refusal when not 0)."""

    def __init__(self, drop_bias: bool = False, status: int = 0) -> None:
        self.objects: dict[int, object] = {}
        self.matmuls: list[dict] = []
        self.heuristics = 0
        self.drop_bias, self.status = drop_bias, status

    def _new(self, reference, value) -> int:
        key = len(self.objects) + 1
        self.objects[key] = value
        reference._obj.value = key
        return 0

    def _destroy(self, handle) -> int:
        return 0

    cublasLtDestroy = cublasLtMatmulDescDestroy = cublasLtMatrixLayoutDestroy = _destroy
    cublasLtMatmulPreferenceDestroy = _destroy

    def cublasLtCreate(self, reference) -> int:
        return self._new(reference, "handle")

    def cublasLtMatmulDescCreate(self, reference, compute, scale_type) -> int:
        return self._new(reference, {"compute": compute, "scale": scale_type, "transa": 0, "transb": 0,
                                     "epilogue": _LT_EPILOGUE_DEFAULT, "bias": None})

    def cublasLtMatmulDescSetAttribute(self, desc, attribute, buffer, size) -> int:
        value = buffer._obj
        assert size == ctypes.sizeof(value), f"attribute {attribute}: {size} bytes given for a {type(value).__name__}"
        expected = ctypes.c_void_p if attribute == 8 else ctypes.c_uint32 if attribute == 7 else ctypes.c_int32
        assert isinstance(value, expected), f"attribute {attribute} takes a {expected.__name__}"
        self.objects[desc.value][_LT_DESC_ATTRIBUTES[attribute]] = value.value
        return 0

    def cublasLtMatrixLayoutCreate(self, reference, data_type, rows, cols, ld) -> int:
        assert ld >= max(1, rows), f"cuBLASLt refuses ld {ld} < rows {rows}"
        return self._new(reference, (data_type, rows, cols, ld))

    def cublasLtMatmulPreferenceCreate(self, reference) -> int:
        return self._new(reference, {})

    def cublasLtMatmulPreferenceSetAttribute(self, preference, attribute, buffer, size) -> int:
        assert size == ctypes.sizeof(buffer._obj)
        self.objects[preference.value][attribute] = buffer._obj.value
        return 0

    def cublasLtMatmulAlgoGetHeuristic(self, handle, desc, a, b, c, d, preference, requested, results, found) -> int:
        assert requested >= 1
        self.heuristics += 1
        found._obj.value = 1
        return 0

    def cublasLtGetStatusName(self, status) -> bytes:
        return b"CUBLAS_STATUS_NOT_SUPPORTED" if status == 15 else b"CUBLAS_STATUS_%d" % status

    def _matrix(self, address, layout):
        data_type, rows, cols, ld = self.objects[layout.value]
        dtype = np.dtype(_DTYPES[data_type])
        flat = _memory(address, (cols - 1) * ld + rows, dtype)
        return np.lib.stride_tricks.as_strided(flat, (rows, cols), (dtype.itemsize, ld * dtype.itemsize)), dtype

    def cublasLtMatmul(self, handle, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, d, d_layout, algo,
                       workspace, workspace_size, stream) -> int:
        if self.status:
            return self.status
        op = self.objects[desc.value]
        assert c == d and c_layout.value == d_layout.value, "zgrad writes D over C"
        stored_a, _ = self._matrix(a, a_layout)
        stored_b, _ = self._matrix(b, b_layout)
        target, dtype = self._matrix(d, d_layout)
        left = stored_a.astype(np.float64) if op["transa"] == 0 else stored_a.T.astype(np.float64)
        right = stored_b.astype(np.float64) if op["transb"] == 0 else stored_b.T.astype(np.float64)
        assert left.shape[1] == right.shape[0] and (left.shape[0], right.shape[1]) == target.shape
        result = alpha._obj.value * (left @ right)
        if beta._obj.value != 0:
            result += beta._obj.value * target
        if op["epilogue"] == _LT_EPILOGUE_BIAS and not self.drop_bias:
            result += _memory(op["bias"], target.shape[0], dtype).astype(np.float64)[:, None]
        if op["epilogue"] == _LT_EPILOGUE_BGRADB and not self.drop_bias:  # op(B) summed over k, per column of D
            _memory(op["bias"], target.shape[1], dtype)[:] = right.sum(0)
        target[...] = result
        self.matmuls.append({"epilogue": op["epilogue"], "shape": target.shape, "transa": op["transa"],
                             "transb": op["transb"]})
        return 0


def install_lt_stand_in(monkeypatch: pytest.MonkeyPatch, **options) -> StandInCublasLt:
    """cuBLASLt present, as a new stand-in (for this test), none of its state kept from before:
    the products it took are in its ``matmuls``."""
    from zgrad.kernels.cuda import cublas_lt
    fake = StandInCublasLt(**options)
    monkeypatch.setattr(cublas_lt, "_library", lambda: fake)
    monkeypatch.setattr(cublas_lt, "_local", threading.local())
    monkeypatch.setattr(cublas_lt, "_works", {})
    return fake

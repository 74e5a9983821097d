"""A stand-in for cuBLAS in Numba's CUDA simulator: :func:`install_stand_in` makes
``zgrad.kernels.cuda.cublas`` call :class:`StandInCublas`, which computes each
``cublasGemmStridedBatchedEx`` exactly as cuBLAS defines it (column-major operands, op N/T, leading
dimensions, batch strides, beta = 0 not reading C) from the simulator's device memory, which is
host memory. Code that maps row-major views onto cuBLAS's GEMM is checked with it: a wrong
operation, leading dimension or stride gives a wrong product.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from zgrad.kernels.promotion import BFLOAT16

__all__ = ["StandInCublas", "install_stand_in"]

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

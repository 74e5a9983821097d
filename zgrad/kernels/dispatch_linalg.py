"""Dispatch of the matrix factorizations and solves (``linalg_*`` in the op vocabulary): the
backend from the arrays' device, the results allocated here, batched over leading dimensions.

The companion of :mod:`zgrad.kernels.dispatch` (its rules hold here). The CPU backend runs them
on LAPACK; the CUDA backend raises an error naming the op and the fix (move to the CPU).
Callers pass floating arrays of one dtype (checked above, with PyTorch's messages).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels.dispatch import backend_of, broadcast_shape

__all__ = ["solve", "inv", "det", "slogdet", "cholesky", "cholesky_ex", "qr", "svd", "eigh", "lu_factor"]


def solve(a: Any, b: Any):
    """X with a X = b: ``a`` (..., n, n), ``b`` (..., n, k), batch dimensions broadcast."""
    be = backend_of(a, b)
    shape = broadcast_shape(a.shape[:-2], b.shape[:-2]) + b.shape[-2:]
    return be.linalg_solve(a, b, be.empty(shape, a.dtype))


def inv(a: Any):
    """The inverse of each (..., n, n) matrix."""
    be = backend_of(a)
    return be.linalg_inv(a, be.empty(a.shape, a.dtype))


def det(a: Any):
    """The determinant of each (..., n, n) matrix, shape (...)."""
    be = backend_of(a)
    return be.linalg_det(a, be.empty(a.shape[:-2], a.dtype))


def slogdet(a: Any) -> tuple[Any, Any]:
    """(sign, log|det|) of each (..., n, n) matrix."""
    be = backend_of(a)
    return be.linalg_slogdet(a, be.empty(a.shape[:-2], a.dtype), be.empty(a.shape[:-2], a.dtype))


def cholesky(a: Any, upper: bool):
    """The lower Cholesky factor L (a = L L^T), or U = L^T when ``upper``."""
    be = backend_of(a)
    return be.linalg_cholesky(a, upper, be.empty(a.shape, a.dtype))


def cholesky_ex(a: Any) -> tuple[Any, Any]:
    """(L, info) of each symmetric (..., n, n) matrix, read from its lower triangle: info (...)
    int32, 0 or the order of the first leading minor that is not positive-definite."""
    be = backend_of(a)
    return be.linalg_cholesky_ex(a, be.empty(a.shape, a.dtype), be.empty(a.shape[:-2], np.int32))


def lu_factor(a: Any) -> tuple[Any, Any, Any]:
    """(LU, pivots, info) of each (..., m, n) matrix, LAPACK's getrf: L and U packed, int32 1-based
    pivots (..., min(m, n)), int32 info (...)."""
    be = backend_of(a)
    batch = a.shape[:-2]
    return be.linalg_lu_factor(a, be.empty(a.shape, a.dtype), be.empty(batch + (min(a.shape[-2:]),), np.int32),
                               be.empty(batch, np.int32))


def qr(a: Any, mode: str) -> tuple[Any, Any]:
    """(Q, R) of a = QR; ``mode`` "reduced" (Q (..., m, k), R (..., k, n), k = min(m, n)),
    "complete" (Q (..., m, m), R (..., m, n)) or "r" (an empty Q)."""
    be = backend_of(a)
    m, n = a.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    batch = a.shape[:-2]
    q_shape = (0,) if mode == "r" else batch + (m, k)
    return be.linalg_qr(a, mode, be.empty(q_shape, a.dtype), be.empty(batch + (k, n), a.dtype))


def svd(a: Any, full_matrices: bool) -> tuple[Any, Any, Any]:
    """(U, S, Vh) of a = U diag(S) Vh, S descending; U (..., m, m or k), Vh (..., n or k, n)."""
    be = backend_of(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    u = be.empty(batch + (m, m if full_matrices else k), a.dtype)
    vh = be.empty(batch + (n if full_matrices else k, n), a.dtype)
    return be.linalg_svd(a, full_matrices, u, be.empty(batch + (k,), a.dtype), vh)


def eigh(a: Any, upper: bool) -> tuple[Any, Any]:
    """(eigenvalues ascending (..., n), eigenvectors as columns (..., n, n)) of symmetric ``a``."""
    be = backend_of(a)
    return be.linalg_eigh(a, upper, be.empty(a.shape[:-1], a.dtype), be.empty(a.shape, a.dtype))

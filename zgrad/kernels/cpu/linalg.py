"""The CPU backend's matrix factorizations and solves: numpy's LAPACK bindings, batched over the
leading dimensions. Part of :mod:`zgrad.kernels.cpu.backend`; each function writes into its
``out`` arrays and returns them.

numpy's ``LinAlgError`` becomes zgrad's :class:`~zgrad.errors.LinAlgError` with PyTorch's wording.
"""

from __future__ import annotations

import numpy as np

from zgrad.errors import LinAlgError

__all__ = [
    "linalg_solve", "linalg_inv", "linalg_det", "linalg_slogdet", "linalg_cholesky", "linalg_qr", "linalg_svd",
    "linalg_eigh", "linalg_lu_factor", "linalg_cholesky_ex",
]

_FAILURES = {
    "linalg.solve": "The solver failed because the input matrix is singular.",
    "linalg.inv": "The inversion could not be completed because the input matrix is singular.",
    "linalg.cholesky": "The factorization could not be completed because the input is not positive-definite.",
    "linalg.qr": "The QR decomposition did not converge.",
    "linalg.svd": "The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
                  "repeated singular values.",
    "linalg.eigh": "The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
                   "repeated eigenvalues.",
}


def _lapack(op: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, its LinAlgError raised as zgrad's, naming ``op``."""
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError:
        raise LinAlgError(f"{op}: {_FAILURES[op]}") from None


def linalg_solve(a, b, out):
    """out = a^-1 b for batches of square ``a`` and matrices ``b`` (batch dims broadcast)."""
    np.copyto(out, _lapack("linalg.solve", np.linalg.solve, a, b))
    return out


def linalg_inv(a, out):
    np.copyto(out, _lapack("linalg.inv", np.linalg.inv, a))
    return out


def linalg_det(a, out):
    np.copyto(out, np.linalg.det(a))
    return out


def linalg_slogdet(a, sign_out, logabs_out):
    sign, logabs = np.linalg.slogdet(a)
    np.copyto(sign_out, sign)
    np.copyto(logabs_out, logabs)
    return sign_out, logabs_out


def linalg_cholesky(a, upper, out):
    """out = L with a = L L^T (lower), or its transpose U with a = U^T U (``upper``)."""
    lower = _lapack("linalg.cholesky", np.linalg.cholesky, a)
    np.copyto(out, lower.swapaxes(-1, -2) if upper else lower)
    return out


def linalg_qr(a, mode, q_out, r_out):
    """Q and R of a = QR in numpy's (and PyTorch's) ``mode``; ``q_out`` is empty in mode "r"."""
    if mode == "r":
        np.copyto(r_out, _lapack("linalg.qr", np.linalg.qr, a, mode="r"))
        return q_out, r_out
    q, r = _lapack("linalg.qr", np.linalg.qr, a, mode=mode)
    np.copyto(q_out, q)
    np.copyto(r_out, r)
    return q_out, r_out


def linalg_svd(a, full_matrices, u_out, s_out, vh_out):
    """a = U diag(S) Vh, singular values in descending order."""
    u, s, vh = _lapack("linalg.svd", np.linalg.svd, a, full_matrices=full_matrices)
    np.copyto(u_out, u)
    np.copyto(s_out, s)
    np.copyto(vh_out, vh)
    return u_out, s_out, vh_out


def linalg_eigh(a, upper, w_out, v_out):
    """Eigenvalues (ascending) and eigenvectors of symmetric ``a``, read from its lower (or
    ``upper``) triangle."""
    w, v = _lapack("linalg.eigh", np.linalg.eigh, a, UPLO="U" if upper else "L")
    np.copyto(w_out, w)
    np.copyto(v_out, v)
    return w_out, v_out


def linalg_lu_factor(a, lu_out, pivots_out, info_out):
    """LAPACK's getrf for each (m, n) matrix of ``a``: a = P L U with partial pivoting, L unit lower
    and U upper packed in ``lu_out``, the 1-based int32 row ``pivots_out`` (row i swapped with row
    pivots[i] at step i) and ``info_out``: 0, or the 1-based index of the first zero pivot (there
    the column is not scaled and the factorization goes on, as getrf's).

    Column by column, each step vectorized over the batch and the rows (numpy has no getrf).
    """
    m, n = a.shape[-2:]
    flat = np.array(a, copy=True).reshape(-1, m, n)
    pivots = np.empty((flat.shape[0], min(m, n)), np.int32)
    info = np.zeros(flat.shape[0], np.int32)
    for j in range(min(m, n)):
        p = j + np.argmax(np.abs(flat[:, j:, j]), axis=1)
        pivots[:, j] = p + 1
        swapped = np.flatnonzero(p != j)
        if swapped.size:
            top = flat[swapped, j, :].copy()
            flat[swapped, j, :] = flat[swapped, p[swapped], :]
            flat[swapped, p[swapped], :] = top
        pivot = flat[:, j, j]
        zero = pivot == 0
        info[zero & (info == 0)] = j + 1
        if j + 1 < m:
            flat[:, j + 1:, j] /= np.where(zero, 1, pivot)[:, None]
            flat[:, j + 1:, j + 1:] -= flat[:, j + 1:, j, None] * flat[:, j, None, j + 1:]
    np.copyto(lu_out, flat.reshape(a.shape))
    np.copyto(pivots_out, pivots.reshape(pivots_out.shape))
    np.copyto(info_out, info.reshape(info_out.shape))
    return lu_out, pivots_out, info_out


def linalg_cholesky_ex(a, out, info_out):
    """LAPACK's potrf for each symmetric matrix of ``a``, read from its lower triangle: out = L
    (lower) and ``info_out`` 0, or the order of the first leading minor that is not
    positive-definite. There, as potrf, the columns before it hold L, its diagonal element the
    non-positive value met, and the rest of the lower triangle ``a``'s values.
    """
    n = a.shape[-1]
    flat = np.tril(np.array(a, copy=True)).reshape(-1, n, n)
    info = np.zeros(flat.shape[0], np.int32)
    for index, matrix in enumerate(flat):
        try:
            flat[index] = np.linalg.cholesky(matrix)
        except np.linalg.LinAlgError:
            info[index] = _potf2(matrix)
    np.copyto(out, flat.reshape(a.shape))
    np.copyto(info_out, info.reshape(info_out.shape))
    return out, info_out


def _potf2(lower: np.ndarray) -> int:
    """Unblocked Cholesky of one matrix's lower triangle in place, stopping at the first
    non-positive pivot: its 1-based order (0 if none)."""
    for j in range(lower.shape[0]):
        pivot = lower[j, j] - lower[j, :j] @ lower[j, :j]
        if not pivot > 0:
            lower[j, j] = pivot
            return j + 1
        lower[j, j] = np.sqrt(pivot)
        lower[j + 1:, j] = (lower[j + 1:, j] - lower[j + 1:, :j] @ lower[j, :j]) / lower[j, j]
    return 0

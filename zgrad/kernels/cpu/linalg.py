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
    "linalg_eigh",
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

"""The matrix factorizations and solves of the op vocabulary on the CUDA backend: none has a
kernel here (they are LAPACK's on the CPU), so each raises an error that names the op and the fix.
Matrix products and norms, which do run on CUDA, are in :mod:`zgrad.kernels.cuda.reduce`. Part of
:mod:`zgrad.kernels.cuda.backend`.
"""

from __future__ import annotations

from zgrad.errors import ZgradError

__all__ = [
    "linalg_solve", "linalg_inv", "linalg_det", "linalg_slogdet", "linalg_cholesky", "linalg_qr", "linalg_svd",
    "linalg_eigh", "linalg_lu_factor", "linalg_cholesky_ex",
]


def _cpu_only(op: str) -> ZgradError:
    return ZgradError(f"{op} runs on the CPU only: zgrad has no CUDA kernel for it. Move its input to the CPU "
                      f"(tensor.cpu()), and the result back with .cuda() if needed.")


def linalg_solve(a, b, out):
    raise _cpu_only("linalg.solve")


def linalg_inv(a, out):
    raise _cpu_only("linalg.inv")


def linalg_det(a, out):
    raise _cpu_only("linalg.det")


def linalg_slogdet(a, sign_out, logabs_out):
    raise _cpu_only("linalg.slogdet")


def linalg_cholesky(a, upper, out):
    raise _cpu_only("linalg.cholesky")


def linalg_qr(a, mode, q_out, r_out):
    raise _cpu_only("linalg.qr")


def linalg_svd(a, full_matrices, u_out, s_out, vh_out):
    raise _cpu_only("linalg.svd")


def linalg_eigh(a, upper, w_out, v_out):
    raise _cpu_only("linalg.eigh")


def linalg_lu_factor(a, lu_out, pivots_out, info_out):
    raise _cpu_only("linalg.lu_factor")


def linalg_cholesky_ex(a, out, info_out):
    raise _cpu_only("linalg.cholesky_ex")

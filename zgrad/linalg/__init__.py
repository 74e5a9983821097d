"""``zgrad.linalg``: PyTorch's ``torch.linalg`` (real matrices). Products and norms run on every
backend; factorizations and solves run on the CPU (LAPACK) and raise an error naming the fix on
CUDA. Every function is differentiable with PyTorch's gradient formulas.
"""

from zgrad.errors import LinAlgError
from zgrad.linalg.decompositions import cholesky, cholesky_ex, eigh, eigvalsh, qr, svd, svdvals
from zgrad.linalg.lu import inv_ex, lu, lu_factor, lu_factor_ex, lu_solve, solve_ex
from zgrad.linalg.matrix_functions import (
    diagonal, matrix_exp, matrix_power, matrix_rank, multi_dot, solve_triangular, vander,
)
from zgrad.linalg.condition import cond
from zgrad.linalg.tensor_solvers import tensorinv, tensorsolve
from zgrad.linalg.norms import matrix_norm, norm, vector_norm
from zgrad.linalg.products import cross, matmul, vecdot
from zgrad.linalg.solvers import det, inv, lstsq, pinv, slogdet, solve

__all__ = [
    "LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "inv_ex",
    "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power",
    "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular", "svd",
    "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot", "vector_norm",
]

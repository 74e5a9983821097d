"""``zgrad.linalg``: PyTorch's ``torch.linalg`` (real matrices). Products and norms run on every
backend; factorizations and solves run on the CPU (LAPACK) and raise an error naming the fix on
CUDA. Every function is differentiable with PyTorch's gradient formulas.
"""

from zgrad.errors import LinAlgError
from zgrad.linalg.decompositions import cholesky, eigh, eigvalsh, qr, svd, svdvals
from zgrad.linalg.matrix_functions import matrix_exp, matrix_power, matrix_rank, multi_dot, solve_triangular
from zgrad.linalg.norms import matrix_norm, norm, vector_norm
from zgrad.linalg.products import cross, matmul, vecdot
from zgrad.linalg.solvers import det, inv, lstsq, pinv, slogdet, solve

__all__ = [
    "LinAlgError", "cholesky", "cross", "det", "eigh", "eigvalsh", "inv", "lstsq", "matmul", "matrix_exp", "matrix_norm",
    "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular", "svd",
    "svdvals", "vecdot", "vector_norm",
]

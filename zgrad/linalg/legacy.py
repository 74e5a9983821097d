"""PyTorch's older linear-algebra functions, ``torch.cholesky``, ``torch.qr``,
``torch.triangular_solve``, ``torch.cholesky_inverse``, ``torch.pinverse``, ``torch.nuclear_norm``,
``torch.frobenius_norm``, ``torch.lu``, ``torch.lu_solve`` and ``torch.lu_unpack``, on ``zgrad.linalg``'s: each is the ``torch.linalg`` call PyTorch's deprecation
message names, with its warning where PyTorch gives one, so the results and gradients are those
of ``zgrad.linalg``.
"""

from __future__ import annotations

import warnings
from typing import Any

from zgrad import ops, return_types
from zgrad.creation import eye
from zgrad.linalg.decompositions import cholesky as linalg_cholesky
from zgrad.linalg.decompositions import qr as linalg_qr
from zgrad.linalg.lu import lu_factor_ex, lu_unpack
from zgrad.linalg.lu import lu_solve as linalg_lu_solve
from zgrad.linalg.matrix_functions import cholesky_solve, solve_triangular
from zgrad.linalg.norms import matrix_norm, vector_norm
from zgrad.linalg.solvers import pinv
from zgrad.warning_location import user_stacklevel

__all__ = ["cholesky", "cholesky_inverse", "frobenius_norm", "lu", "lu_solve", "lu_unpack", "nuclear_norm", "pinverse",
           "qr", "triangular_solve"]


def _deprecated(message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=user_stacklevel())


def cholesky(input: Any, upper: bool = False) -> Any:  # noqa: A002 - PyTorch's names
    """The Cholesky factor of each symmetric positive-definite matrix of ``input``: lower L with
    A = L L^T, or with ``upper`` the upper U = L^T (deprecated in PyTorch, with its warning).

    Raises:
        LinAlgError: a matrix that is not positive-definite (as ``zgrad.linalg.cholesky``).
    """
    _deprecated("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
                "PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\n"
                "and\nU = torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH\n"
                "This transform will produce equivalent results for all valid (symmetric positive definite) inputs.")
    factor = linalg_cholesky(input)
    return factor.mT if upper else factor


def cholesky_inverse(input: Any, upper: bool = False) -> Any:  # noqa: A002
    """The inverse of A from its Cholesky factor ``input`` (A = L L^T, or U^T U with ``upper``), for
    each matrix of a batch."""
    identity = ops.expand(eye(input.shape[-1], dtype=input.dtype, device=input.device), tuple(input.shape))
    return cholesky_solve(identity, input, upper)


def qr(input: Any, some: bool = True) -> return_types.qr:  # noqa: A002
    """``(Q, R)`` with input = Q R: reduced with ``some``, else complete (deprecated in PyTorch,
    with its warning)."""
    _deprecated("torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future PyTorch release.\n"
                "The boolean parameter 'some' has been replaced with a string parameter 'mode'.\nQ, R = torch.qr(A, "
                "some)\nshould be replaced with\nQ, R = torch.linalg.qr(A, 'reduced' if some else 'complete')")
    q, r = linalg_qr(input, "reduced" if some else "complete")
    return return_types.qr(q, r)


def triangular_solve(input: Any, A: Any, upper: bool = True, transpose: bool = False,  # noqa: A002, N803
                     unitriangular: bool = False) -> return_types.triangular_solve:
    """``(X, A)`` with op(A) X = ``input``, op(A) = A or, with ``transpose``, A^T; A is read from its
    upper (``upper``) or lower triangle, with ones on the diagonal if ``unitriangular``. The second
    field is a copy of A broadcast to the batch (deprecated in PyTorch, with its warning)."""
    _deprecated("torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed in "
                "a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed and does not "
                "return a copy of one of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be replaced "
                "with\nX = torch.linalg.solve_triangular(A, B).")
    matrix = A.mT if transpose else A
    solution = solve_triangular(matrix, input, upper=upper != transpose, unitriangular=unitriangular)
    batch = tuple(solution.shape[:-2])
    return return_types.triangular_solve(solution, ops.clone(ops.expand(A, (*batch, *A.shape[-2:]))))


def pinverse(input: Any, rcond: float = 1e-15) -> Any:  # noqa: A002
    """The pseudo-inverse of each matrix of ``input``: singular values below ``rcond`` times the
    largest count as zero (``zgrad.linalg.pinv(input, atol=0, rtol=rcond)``)."""
    return pinv(input, atol=0.0, rtol=rcond)


def nuclear_norm(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """The sum of the singular values of each matrix of ``input`` over the two dimensions ``dim``
    (the last two by default; deprecated in PyTorch, with its warning). As in PyTorch, a bool in
    ``dim``'s place is ``keepdim``."""
    _deprecated("at::nuclear_norm is deprecated and it is just left for JIT compatibility. It will be removed in a "
                "future PyTorch release. Please use `linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead")
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    return matrix_norm(input, "nuc", (-2, -1) if dim is None else tuple(dim), keepdim)


def frobenius_norm(input: Any, dim: Any, keepdim: bool = False) -> Any:  # noqa: A002
    """The 2-norm of ``input`` over one or two dimensions ``dim`` (deprecated in PyTorch, with its
    warning).

    Raises:
        RuntimeError: more than two dimensions (PyTorch's message).
    """
    _deprecated("at::frobenius_norm is deprecated and it is just left for JIT compatibility. It will be removed in a "
                "future PyTorch release. Please use `linalg.vector_norm(A, 2., dim, keepdim)` instead")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions instead.")
    return vector_norm(input, 2.0, dims, keepdim)


def lu(A: Any, pivot: bool = True, get_infos: bool = False) -> tuple[Any, ...]:  # noqa: N803
    """``(LU, pivots)``, or with ``get_infos`` ``(LU, pivots, infos)``: :func:`zgrad.linalg.lu_factor_ex`
    (deprecated in PyTorch, with its warning).

    Raises:
        LinAlgError: without ``get_infos``, a singular matrix.
    """
    _deprecated("torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be "
                "removed in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be replaced "
                "with\nLU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = torch.lu(A, "
                "compute_pivots, get_infos=True)\nshould be replaced with\nLU, pivots, info = "
                "torch.linalg.lu_factor_ex(A, compute_pivots)")
    packed, pivots, info = lu_factor_ex(A, pivot=pivot, check_errors=not get_infos)
    return (packed, pivots, info) if get_infos else (packed, pivots)


def lu_solve(b: Any, LU_data: Any, LU_pivots: Any) -> Any:  # noqa: N803
    """X with A X = ``b`` from A's LU (:func:`zgrad.linalg.lu_solve` with its arguments in the older
    order; deprecated in PyTorch, with its warning)."""
    _deprecated("torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future "
                "PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\nX = torch.lu_solve(B, "
                "LU, pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)")
    return linalg_lu_solve(LU_data, LU_pivots, b)

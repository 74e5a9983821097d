"""The LU decomposition and what is built on it: ``lu_factor``, ``lu_factor_ex``, ``lu``,
``lu_unpack``, ``lu_solve``, ``inv_ex`` and ``solve_ex``, as ``torch.linalg``'s (real matrices, CPU;
on CUDA they raise an error naming the fix).

``lu_factor`` is one op (LAPACK's getrf, partial pivoting) whose gradient is PyTorch's formula
for A = P L U. Everything else is composed of differentiable ops on its packed result: L and U
are its triangles, P a constant permutation, and a solve is two triangular solves.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from zgrad.autograd.function import Op
from zgrad.creation import eye, wrap
from zgrad.errors import LinAlgError, ShapeError
from zgrad.kernels import dispatch_linalg
from zgrad.linalg._checks import matrices, same_dtype, square_matrices
from zgrad.linalg.matrix_functions import solve_triangular
from zgrad.ops import functions, shape
from zgrad.ops._args import tensor_arg
from zgrad.ops.indexing import where
from zgrad.ops.triangular import tril, triu

__all__ = ["LUFactorResult", "LUFactorExResult", "LUResult", "InvExResult", "SolveExResult", "lu_factor",
           "lu_factor_ex", "lu", "lu_unpack", "lu_solve", "inv_ex", "solve_ex"]


class LUFactorResult(NamedTuple):
    """What :func:`lu_factor` returns (``torch.return_types.linalg_lu_factor``)."""

    LU: Any
    pivots: Any


class LUFactorExResult(NamedTuple):
    """What :func:`lu_factor_ex` returns (``torch.return_types.linalg_lu_factor_ex``)."""

    LU: Any
    pivots: Any
    info: Any


class LUResult(NamedTuple):
    """What :func:`lu` and :func:`lu_unpack` return: A = P L U."""

    P: Any
    L: Any
    U: Any


class InvExResult(NamedTuple):
    """What :func:`inv_ex` returns (``torch.return_types.linalg_inv_ex``)."""

    inverse: Any
    info: Any


class SolveExResult(NamedTuple):
    """What :func:`solve_ex` returns (``torch.return_types.linalg_solve_ex``)."""

    result: Any
    info: Any


def _permutations(pivots: np.ndarray, m: int) -> np.ndarray:
    """perm (..., m) with (P^T A)[i] = A[perm[i]], from getrf's 1-based sequential row swaps."""
    flat = pivots.reshape(-1, pivots.shape[-1]) - 1
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        target = flat[:, j]
        perm[rows, j], perm[rows, target] = perm[rows, target], perm[rows, j].copy()
    return perm.reshape(pivots.shape[:-1] + (m,))


def _permutation_matrices(pivots: np.ndarray, m: int, dtype: np.dtype) -> np.ndarray:
    """P (..., m, m) with A = P L U: column i of P is the unit vector e_perm[i]."""
    perm = _permutations(pivots, m)
    matrices_ = np.zeros(perm.shape + (m,), dtype)
    np.put_along_axis(matrices_, perm[..., None], 1, axis=-1)  # row i has its 1 at perm[i]: that is P^T
    return np.swapaxes(matrices_, -1, -2)


def _substitute(t: np.ndarray, rhs: np.ndarray, lower: bool) -> np.ndarray:
    """t^-1 rhs for triangular square ``t`` (batched), by substitution as LAPACK's trsm: a zero on
    the diagonal gives inf and NaN, not an error."""
    n = t.shape[-1]
    out = np.array(np.broadcast_to(rhs, np.broadcast_shapes(t.shape[:-2], rhs.shape[:-2]) + rhs.shape[-2:]))
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in (range(n) if lower else range(n - 1, -1, -1)):
            done = slice(0, i) if lower else slice(i + 1, n)
            out[..., i, :] -= np.einsum("...k,...kc->...c", t[..., i, done], out[..., done, :])
            out[..., i, :] /= t[..., i, i, None]
    return out


def _solve_upper_t(u: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """rhs U^-T, for square upper U."""
    return np.swapaxes(_substitute(u, np.swapaxes(rhs, -1, -2), lower=False), -1, -2)


def _square_part(l1: np.ndarray, u1: np.ndarray, grad_l: np.ndarray, grad_u: np.ndarray) -> np.ndarray:
    """L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T: the gradient of B = L U for square L, U."""
    phi = np.tril(np.swapaxes(l1, -1, -2) @ grad_l, -1) + np.triu(grad_u @ np.swapaxes(u1, -1, -2))
    return _substitute(np.swapaxes(l1, -1, -2), _solve_upper_t(u1, phi), lower=False)


class LUFactor(Op):
    """The packed LU of getrf, computed before the op (with its pivots); the backward is PyTorch's
    for A = P L U, square, tall or wide."""

    @staticmethod
    def forward(ctx, a, lu_packed, pivots):
        ctx.save_for_backward(lu_packed)
        ctx.pivots = pivots
        return lu_packed

    @staticmethod
    def backward(ctx, grad):
        (packed,) = ctx.saved_tensors
        packed, grad = np.asarray(packed), np.asarray(grad)
        m, n = packed.shape[-2:]
        k = min(m, n)
        lower = np.tril(packed, -1)[..., :, :k] + np.eye(m, k, dtype=packed.dtype)
        upper = np.triu(packed)[..., :k, :]
        grad_l, grad_u = np.tril(grad, -1)[..., :, :k], np.triu(grad)[..., :k, :]
        if m > n:  # B = [L1; L2] U: L2's gradient reaches U and the rows below
            l1, l2, g1, g2 = lower[..., :n, :], lower[..., n:, :], grad_l[..., :n, :], grad_l[..., n:, :]
            below = _solve_upper_t(upper, g2)
            grad_b = np.concatenate([_square_part(l1, upper, g1, grad_u - np.swapaxes(l2, -1, -2) @ below), below], -2)
        elif m < n:  # B = L [U1 U2]: U2's gradient reaches L and the columns right of U1
            u1, u2, g1, g2 = upper[..., :, :m], upper[..., :, m:], grad_u[..., :, :m], grad_u[..., :, m:]
            right = _substitute(np.swapaxes(lower, -1, -2), g2, lower=False)
            grad_b = np.concatenate([_square_part(lower, u1, grad_l - right @ np.swapaxes(u2, -1, -2), g1), right], -1)
        else:
            grad_b = _square_part(lower, upper, grad_l, grad_u)
        return _permutation_matrices(ctx.pivots, m, grad_b.dtype) @ grad_b, None, None


def _factor(A: Any, op: str, pivot: bool) -> tuple[Any, np.ndarray, np.ndarray]:  # noqa: N803
    """(LU, pivots array, info array) of ``A``, LU differentiable.

    Raises:
        ZgradError: ``pivot=False`` (PyTorch has no CPU LU without pivoting either).
    """
    a = matrices(A, op)
    if not pivot:
        raise LinAlgError(f"{op}: LU without pivoting is not implemented on the CPU")
    packed, pivots, info = dispatch_linalg.lu_factor(a._data)
    return LUFactor.apply(a, packed, pivots), pivots, info


def _int_tensor(array: np.ndarray, like: Any) -> Any:
    return wrap(array, False).to(like.device)


def lu_factor_ex(A: Any, *, pivot: bool = True, check_errors: bool = False) -> LUFactorExResult:  # noqa: N803
    """``(LU, pivots, info)``: :func:`lu_factor`, and per matrix the int32 index (1-based) of the
    first zero pivot, or 0; a singular matrix is factorized all the same.

    Raises:
        LinAlgError: with ``check_errors``, a matrix with a zero pivot. ZgradError: ``pivot=False``.
    """
    packed, pivots, info = _factor(A, "linalg.lu_factor_ex", pivot)
    if check_errors:
        _raise_on_zero_pivot("linalg.lu_factor_ex", info, "lu_factor_ex")
    return LUFactorExResult(packed, _int_tensor(pivots, packed), _int_tensor(info, packed))


def _raise_on_zero_pivot(op: str, info: np.ndarray, solve_hint: str | None) -> None:
    """Raises LinAlgError (PyTorch's message) for the first matrix with a zero pivot."""
    failed = np.flatnonzero(info.reshape(-1))
    if not failed.size:
        return
    batch = f"(Batch element {failed[0]}): " if info.ndim else ""
    index = int(info.reshape(-1)[failed[0]])
    if solve_hint is None:
        raise LinAlgError(f"{op}: {batch}The diagonal element {index} is zero, the inversion could not be completed "
                          "because the input matrix is singular.")
    raise LinAlgError(f"torch.{op}: {batch}U[{index},{index}] is zero and using it on lu_solve would result in a "
                      "division by zero. If you still want to perform the factorization, consider calling "
                      "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor(A: Any, *, pivot: bool = True) -> LUFactorResult:  # noqa: N803
    """``(LU, pivots)`` of each (..., m, n) matrix of ``A`` = P L U: L (unit lower, diagonal not
    stored) and U packed in LU, int32 1-based ``pivots`` (..., min(m, n)) as LAPACK's getrf.
    Differentiable in LU.

    Raises:
        LinAlgError: a matrix with a zero pivot (singular: use :func:`lu_factor_ex`).
        ZgradError: ``pivot=False``, or a CUDA tensor.
    """
    packed, pivots, info = _factor(A, "linalg.lu_factor", pivot)
    _raise_on_zero_pivot("linalg.lu_factor", info, "lu_factor")
    return LUFactorResult(packed, _int_tensor(pivots, packed))


def lu_unpack(LU_data: Any, LU_pivots: Any, unpack_data: bool = True,  # noqa: N803 - PyTorch's names
              unpack_pivots: bool = True) -> LUResult:
    """``(P, L, U)`` from :func:`lu_factor`'s result: P (..., m, m), L (..., m, k) unit lower,
    U (..., k, n), k = min(m, n). Without ``unpack_data`` L and U are empty, without
    ``unpack_pivots`` P is. Differentiable in ``LU_data``."""
    packed = matrices(LU_data, "lu_unpack", "LU_data")
    m, n = packed.shape[-2:]
    k = min(m, n)
    if unpack_data:
        lower = tril(packed, -1)[..., :, :k] + eye(m, k, dtype=packed.dtype, device=packed.device)
        upper = triu(packed)[..., :k, :]
    else:
        lower = upper = _empty(packed)
    if unpack_pivots:
        pivots = np.asarray(tensor_arg(LU_pivots, "lu_unpack", "LU_pivots").cpu().numpy())
        permutation = _int_tensor(_permutation_matrices(pivots, m, packed.dtype), packed)
    else:
        permutation = _empty(packed)
    return LUResult(permutation, lower, upper)


def _empty(like: Any) -> Any:
    return wrap(np.empty(0, like.dtype), False).to(like.device)


def lu(A: Any, *, pivot: bool = True) -> LUResult:  # noqa: N803
    """``(P, L, U)`` with A = P L U for each (..., m, n) matrix of ``A``, partial pivoting;
    differentiable in L and U. A singular matrix is factorized too.

    Raises:
        ZgradError: ``pivot=False``, or a CUDA tensor.
    """
    packed, pivots, _ = _factor(A, "linalg.lu", pivot)
    return lu_unpack(packed, _int_tensor(pivots, packed))


def lu_solve(LU: Any, pivots: Any, B: Any, *, left: bool = True, adjoint: bool = False) -> Any:  # noqa: N803
    """X with A X = B from A's :func:`lu_factor` (``left``: X A = B otherwise; ``adjoint``: A^T in
    A's place). Batch dimensions broadcast; differentiable in LU and B.

    Raises:
        ShapeError: LU not square, or B's rows (columns with ``left=False``) not A's size.
        DTypeError: LU and B of different dtypes.
    """
    packed = square_matrices(LU, "torch.linalg.lu_solve", "A")
    b = matrices(B, "torch.linalg.lu_solve", "B")
    same_dtype("linalg.lu_solve", packed, b, ("LU", "B"))
    n = packed.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise ShapeError(f"torch.linalg.lu_solve: Incompatible shapes of A and B for the equation "
                         f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {b.shape[-2]}x{b.shape[-1]})")
    if not left:  # X A = B is A^T X^T = B^T
        return functions.transpose(lu_solve(packed, pivots, functions.transpose(b, -2, -1), adjoint=not adjoint),
                                   -2, -1)
    permutation, lower, upper = lu_unpack(packed, pivots)
    if adjoint:  # A^T = U^T L^T P^T: X = P L^-T U^-T B
        y = solve_triangular(functions.transpose(upper, -2, -1), b, upper=False)
        z = solve_triangular(functions.transpose(lower, -2, -1), y, upper=True, unitriangular=True)
        return functions.matmul(permutation, z)
    y = solve_triangular(lower, functions.matmul(functions.transpose(permutation, -2, -1), b), upper=False,
                         unitriangular=True)
    return solve_triangular(upper, y, upper=True)


def inv_ex(A: Any, *, check_errors: bool = False) -> InvExResult:  # noqa: N803
    """``(inverse, info)``: the inverse of each square matrix of ``A`` from its LU (NaN where it is
    singular) and getrf's info per matrix (0, or the first zero pivot's index).

    Raises:
        LinAlgError: with ``check_errors``, a singular matrix (PyTorch's message).
    """
    a = square_matrices(A, "linalg.inv_ex")
    packed, pivots, info = _factor(a, "linalg.inv_ex", True)
    if check_errors:
        _raise_on_zero_pivot("linalg.inv_ex", info, None)
    identity = eye(a.shape[-1], dtype=a.dtype, device=a.device)
    return InvExResult(_solve_or_nan(packed, pivots, info, identity, True), _int_tensor(info, packed))


def _solve_or_nan(packed: Any, pivots: np.ndarray, info: np.ndarray, b: Any, left: bool) -> Any:
    """:func:`lu_solve`, NaN for the singular matrices (info > 0): PyTorch leaves there whatever
    LAPACK's division by the zero pivot gave (inf and NaN)."""
    singular = info > 0
    if not singular.any():
        return lu_solve(packed, _int_tensor(pivots, packed), b, left=left)
    mask = _int_tensor(singular.reshape(singular.shape + (1, 1)), packed)
    identity = eye(packed.shape[-1], dtype=packed.dtype, device=packed.device)
    x = lu_solve(where(mask, identity, packed), _int_tensor(pivots, packed), b, left=left)
    return where(mask, float("nan"), x)


def solve_ex(A: Any, B: Any, *, left: bool = True, check_errors: bool = False) -> SolveExResult:  # noqa: N803
    """``(result, info)``: :func:`zgrad.linalg.solve`'s X (a vector ``B`` as there) from A's LU,
    NaN where A is singular, and getrf's info per matrix.

    Raises:
        LinAlgError: with ``check_errors``, a singular matrix. ShapeError: sizes that do not fit.
    """
    a = square_matrices(A, "linalg.solve_ex")
    b = tensor_arg(B, "linalg.solve_ex", "B")
    same_dtype("linalg.solve_ex", a, b)
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    packed, pivots, info = _factor(a, "linalg.solve_ex", True)
    if check_errors:
        if info.any():
            raise LinAlgError("linalg.solve_ex: The solver failed because the input matrix is singular.")
    x = _solve_or_nan(packed, pivots, info, shape.unsqueeze(b, -1) if vector else b, left)
    return SolveExResult(shape.squeeze(x, -1) if vector else x, _int_tensor(info, packed))

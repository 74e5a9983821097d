"""Matrix decompositions: ``cholesky``, ``qr``, ``svd``, ``svdvals``, ``eigh``, ``eigvalsh``, with
PyTorch's gradients (real matrices). CPU only (LAPACK through
:mod:`zgrad.kernels.dispatch_linalg`); on CUDA they raise an error naming the op and the fix.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from zgrad import return_types
from zgrad.autograd.function import Op
from zgrad.creation import zeros
from zgrad.errors import AutogradError, LinAlgError, ShapeError
from zgrad.kernels import dispatch, dispatch_linalg
from zgrad.linalg._arrays import diag_embed, mT, mm, symmetrize_lower, tril
from zgrad.linalg._checks import matrices, square_matrices
from zgrad.ops.autocast import autocast_op
from zgrad.tensor import Tensor

__all__ = ["QRResult", "SVDResult", "EighResult", "CholeskyExResult", "cholesky", "cholesky_ex", "qr", "svd", "svdvals",
           "eigh", "eigvalsh", "legacy_svd"]


class QRResult(NamedTuple):
    """What :func:`qr` returns."""

    Q: Any
    R: Any


class SVDResult(NamedTuple):
    """What :func:`svd` returns: A = U diag(S) Vh."""

    U: Any
    S: Any
    Vh: Any


class CholeskyExResult(NamedTuple):
    """What :func:`cholesky_ex` returns (``torch.return_types.linalg_cholesky_ex``)."""

    L: Any
    info: Any


class EighResult(NamedTuple):
    """What :func:`eigh` returns: A = eigenvectors diag(eigenvalues) eigenvectors^T."""

    eigenvalues: Any
    eigenvectors: Any


def _sub(a: Any, b: Any) -> Any:
    return dispatch.binary("sub", a, b)


def _skew(x: Any) -> Any:
    return _sub(x, mT(x))


def _solve_right(b: Any, r: Any) -> Any:
    """B R^-1 for square R."""
    return mT(dispatch_linalg.solve(mT(r), mT(b)))


class Cholesky(Op):
    @staticmethod
    def forward(ctx, a, upper):
        out = dispatch_linalg.cholesky(a, upper)
        ctx.upper = upper
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        lower, grad = (mT(out), mT(grad)) if ctx.upper else (out, grad)
        # PyTorch's: Phi(L^T gL), symmetrized with half the diagonal, then L^-T . L^-1
        phi = tril(mm(mT(lower), grad))
        sym = dispatch.binary("mul", dispatch.binary("add", phi, mT(tril(phi, -1))), 0.5)
        inverse = dispatch_linalg.inv(lower)
        return mm(mT(inverse), sym, inverse), None


def _qr_square_backward(q, r, grad_q, grad_r):
    """The gradient of A = QR for m >= n (Q (m, n), R (n, n)): (gQ + Q copyltu(M)) R^-T with
    M = R gR^T - gQ^T Q."""
    m = _sub(mm(r, mT(grad_r)), mm(mT(grad_q), q))
    return _solve_right(dispatch.binary("add", grad_q, mm(q, symmetrize_lower(m))), mT(r))


class QR(Op):
    @staticmethod
    def forward(ctx, a, mode):
        q, r = dispatch_linalg.qr(a, mode)
        ctx.mode = mode
        ctx.save_for_backward(a, q, r)
        return q, r

    @staticmethod
    def backward(ctx, grad_q, grad_r):
        a, q, r = ctx.saved_tensors
        m, n = a.shape[-2:]
        if ctx.mode == "r":
            raise AutogradError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
                                "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
        if ctx.mode == "complete" and m > n:
            raise AutogradError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        if m >= n:
            return _qr_square_backward(q, r, grad_q, grad_r), None
        # A = [X | Y], R = [U | V] with X = Q U square: Y's gradient is Q gV, X's the square case
        # with gQ + Y gV^T
        y, grad_u, grad_v = a[..., m:], grad_r[..., :m], grad_r[..., m:]
        grad_x = _qr_square_backward(q, r[..., :m], dispatch.binary("add", grad_q, mm(y, mT(grad_v))), grad_u)
        return dispatch.concatenate([grad_x, mm(q, grad_v)], -1), None


def _svd_backward(u, s, vh, grad_u, grad_s, grad_vh):
    """PyTorch's gradient of A = U diag(S) Vh (real), reduced U (m, k), Vh (k, n)."""
    m, n = u.shape[-2], vh.shape[-1]
    row, col = s.reshape(s.shape[:-1] + (1, -1)), s.reshape(s.shape + (1,))
    s2 = dispatch.binary("mul", s, s)
    e = _sub(s2.reshape(row.shape), s2.reshape(col.shape))  # E[j, k] = S_k^2 - S_j^2, 1 on the diagonal
    e = dispatch.binary("add", e, diag_embed(dispatch.full(s.shape, 1, s.dtype, dispatch.device_type_of(s))))
    middle = dispatch.binary("add", dispatch.binary("mul", _skew(mm(mT(u), grad_u)), row),
                             dispatch.binary("mul", col, _skew(mm(vh, mT(grad_vh)))))
    grad = dispatch.binary("add", dispatch.binary("div", middle, e), diag_embed(grad_s))
    if m > n:
        grad = mm(u, grad)
        grad_u_s = dispatch.binary("div", grad_u, row)
        grad = mm(dispatch.binary("add", grad, _sub(grad_u_s, mm(u, mT(u), grad_u_s))), vh)
    elif m < n:
        grad = mm(grad, vh)
        s_grad_vh = dispatch.binary("div", grad_vh, col)
        grad = mm(u, dispatch.binary("add", grad, _sub(s_grad_vh, mm(s_grad_vh, mT(vh), vh))))
    else:
        grad = mm(u, grad, vh)
    return grad


class SVD(Op):
    @staticmethod
    def forward(ctx, a, full_matrices):
        u, s, vh = dispatch_linalg.svd(a, full_matrices)
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx, grad_u, grad_s, grad_vh):
        u, s, vh = ctx.saved_tensors
        k = s.shape[-1]  # full matrices: only the first k columns of U and rows of Vh matter
        return _svd_backward(u[..., :k], s, vh[..., :k, :], grad_u[..., :k], grad_s, grad_vh[..., :k, :]), None


class SVDVals(Op):
    """The singular values alone; their gradient is U diag(gS) Vh."""

    @staticmethod
    def forward(ctx, a):
        u, s, vh = dispatch_linalg.svd(a, False)
        ctx.save_for_backward(u, vh)
        return s

    @staticmethod
    def backward(ctx, grad):
        u, vh = ctx.saved_tensors
        return mm(u, diag_embed(grad), vh)


class Eigh(Op):
    """Eigen-decomposition of symmetric matrices. Gradient (PyTorch's): V (skew(V^T gV) / 2 / E
    + diag(gw)) V^T with E[i, j] = w_j - w_i."""

    @staticmethod
    def forward(ctx, a, upper):
        w, v = dispatch_linalg.eigh(a, upper)
        ctx.save_for_backward(w, v)
        return w, v

    @staticmethod
    def backward(ctx, grad_w, grad_v):
        w, v = ctx.saved_tensors
        vt_gv = mm(mT(v), grad_v)
        skew = dispatch.binary("mul", _sub(vt_gv, mT(vt_gv)), 0.5)
        e = _sub(w.reshape(w.shape[:-1] + (1, -1)), w.reshape(w.shape + (1,)))
        e = dispatch.binary("add", e, diag_embed(dispatch.full(w.shape, 1, w.dtype, dispatch.device_type_of(w))))
        inner = dispatch.binary("add", dispatch.binary("div", skew, e), diag_embed(grad_w))
        return mm(v, inner, mT(v)), None


class EigvalsH(Op):
    """The eigenvalues alone; their gradient is V diag(gw) V^T."""

    @staticmethod
    def forward(ctx, a, upper):
        w, v = dispatch_linalg.eigh(a, upper)
        ctx.save_for_backward(v)
        return w

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return mm(v, diag_embed(grad), mT(v)), None


# --- public functions -------------------------------------------------------------------------

@autocast_op("linalg_cholesky")
def cholesky(A: Any, *, upper: bool = False) -> Any:  # noqa: N803 - torch's argument name
    """The Cholesky factor of each symmetric positive-definite matrix of ``A``: lower L with
    A = L L^T, or upper U = L^T with A = U^T U (``upper``). Reads A's lower triangle.

    Raises:
        LinAlgError: a matrix is not positive-definite. ShapeError: not square.
        DTypeError: not float32/float64. ZgradError: a CUDA tensor (CPU only).
    """
    return Cholesky.apply(square_matrices(A, "linalg.cholesky"), bool(upper))


def cholesky_ex(A: Any, *, upper: bool = False, check_errors: bool = False) -> CholeskyExResult:  # noqa: N803
    """``(L, info)``: :func:`cholesky` of each matrix of ``A`` and, per matrix, int32 0 or the order
    of the first leading minor that is not positive-definite. For such a matrix L holds what
    LAPACK's potrf left (the columns before that minor factored); differentiable where every
    matrix is positive-definite.

    Raises:
        LinAlgError: with ``check_errors``, a matrix that is not positive-definite (PyTorch's
            message). ZgradError: a CUDA tensor (CPU only).
    """
    a = square_matrices(A, "linalg.cholesky_ex")
    factor, info = dispatch_linalg.cholesky_ex(a._data)
    failed = info.reshape(-1).nonzero()[0]
    if check_errors and failed.size:
        batch = f"(Batch element {failed[0]}): " if info.ndim else ""
        raise LinAlgError(f"linalg.cholesky_ex: {batch}The factorization could not be completed because the input is "
                          f"not positive-definite (the leading minor of order {int(info.reshape(-1)[failed[0]])} is "
                          "not positive-definite).")
    info_tensor = Tensor(info).to(a.device)
    if not failed.size:
        return CholeskyExResult(cholesky(a, upper=upper), info_tensor)
    lower = Tensor(factor).to(a.device)
    return CholeskyExResult(lower.mT if upper else lower, info_tensor)


@autocast_op("linalg_qr")
def qr(A: Any, mode: str = "reduced") -> QRResult:  # noqa: N803
    """``(Q, R)`` with A = QR, Q orthonormal columns, R upper triangular: ``mode`` "reduced"
    (k = min(m, n) columns), "complete" (Q square) or "r" (R only; Q empty, no gradient).

    Raises:
        ValueError: an unknown mode. AutogradError (in backward): mode "r", or "complete" with m > n.
    """
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or "
                         "'complete'")
    return QRResult(*QR.apply(matrices(A, "linalg.qr"), mode))


@autocast_op("linalg_svd")
def svd(A: Any, full_matrices: bool = True, *, driver: str | None = None) -> SVDResult:  # noqa: N803
    """``(U, S, Vh)`` with A = U diag(S) Vh, S descending; U (..., m, m) and Vh (..., n, n) with
    ``full_matrices``, else (..., m, k) and (..., k, n), k = min(m, n). ``driver`` (CUDA-only in
    PyTorch) is accepted and ignored. Gradients need distinct singular values, as PyTorch's."""
    return SVDResult(*SVD.apply(matrices(A, "linalg.svd"), bool(full_matrices)))


def legacy_svd(input: Any, some: bool = True, compute_uv: bool = True) -> return_types.svd:  # noqa: A002
    """PyTorch's older ``torch.svd``: ``(U, S, V)`` with input = U diag(S) V^T, reduced (U (..., m, k),
    V (..., n, k)) with ``some``, else full. Without ``compute_uv``, U and V are zero-filled
    (..., m, m) and (..., n, n) matrices, as PyTorch's."""
    if not compute_uv:
        values = svdvals(input)
        *batch, m, n = input.shape
        return return_types.svd(zeros((*batch, m, m), dtype=values.dtype, device=values.device), values,
                                zeros((*batch, n, n), dtype=values.dtype, device=values.device))
    u, s, vh = svd(input, full_matrices=not some)
    return return_types.svd(u, s, vh.mT)


@autocast_op("linalg_svdvals")
def svdvals(A: Any, *, driver: str | None = None) -> Any:  # noqa: N803
    """The singular values of each matrix of ``A``, descending, shape (..., min(m, n))."""
    return SVDVals.apply(matrices(A, "linalg.svdvals"))


def _upper(UPLO: str) -> bool:  # noqa: N803
    if UPLO not in ("L", "U"):
        raise ShapeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO == "U"


@autocast_op("linalg_eigh")
def eigh(A: Any, UPLO: str = "L") -> EighResult:  # noqa: N803
    """``(eigenvalues, eigenvectors)`` of each symmetric matrix of ``A``, read from its lower
    (``UPLO="L"``) or upper triangle; eigenvalues ascending, eigenvectors as columns. Gradients
    need distinct eigenvalues, as PyTorch's."""
    return EighResult(*Eigh.apply(square_matrices(A, "linalg.eigh"), _upper(UPLO)))


@autocast_op("linalg_eigvalsh")
def eigvalsh(A: Any, UPLO: str = "L") -> Any:  # noqa: N803
    """The eigenvalues (ascending) of each symmetric matrix of ``A``."""
    return EigvalsH.apply(square_matrices(A, "linalg.eigvalsh"), _upper(UPLO))

"""Inverses, determinants and linear solves: ``inv``, ``det``, ``slogdet``, ``solve``, ``pinv``,
``lstsq``, with PyTorch's gradients. CPU only (LAPACK through :mod:`zgrad.kernels.dispatch_linalg`);
on CUDA they raise an error naming the op and the fix.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from zgrad.autograd.function import Op
from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_linalg, dispatch_pointwise, dispatch_reduce
from zgrad.linalg._arrays import diag_embed, mT, mm
from zgrad.linalg._checks import matrices, same_dtype, square_matrices
from zgrad.ops._args import tensor_arg
from zgrad.ops.functions import matmul, transpose
from zgrad.ops.shape import squeeze, unsqueeze
from zgrad.tensor import Tensor
from zgrad.ops.autocast import autocast_op

__all__ = ["SlogdetResult", "LstsqResult", "inv", "det", "slogdet", "logdet", "solve", "pinv", "lstsq"]


class SlogdetResult(NamedTuple):
    """What :func:`slogdet` returns: the sign of the determinant and the log of its absolute value."""

    sign: Any
    logabsdet: Any


class LstsqResult(NamedTuple):
    """What :func:`lstsq` returns (``torch.return_types.linalg_lstsq``)."""

    solution: Any
    residuals: Any
    rank: Any
    singular_values: Any


def _scalar_per_matrix(x: Any) -> Any:
    """A (...) array seen as (..., 1, 1), to scale each matrix of a batch."""
    return x.reshape(x.shape + (1, 1))


def _neg(x: Any) -> Any:
    return dispatch.unary("neg", x)


def _add(*arrays: Any) -> Any:
    result = arrays[0]
    for x in arrays[1:]:
        result = dispatch.binary("add", result, x)
    return result


class Inv(Op):
    @staticmethod
    def forward(ctx, a):
        out = dispatch_linalg.inv(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return _neg(mm(mT(out), grad, mT(out)))


class Det(Op):
    """The determinant; its gradient g det(A) A^-T is computed from an SVD (U diag(products of
    the other singular values) Vh, times the signs of det U and det Vh), so it holds for singular
    matrices too."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return dispatch_linalg.det(a)

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        u, s, vh = dispatch_linalg.svd(a, False)
        ones = dispatch.full(s.shape[:-1], 1, s.dtype, dispatch.device_type_of(s))
        others = dispatch_reduce.prod_backward(s, ones, -1)  # the product of the other singular values
        signs = dispatch.binary("mul", dispatch_linalg.det(u), dispatch_linalg.det(vh))
        scale = _scalar_per_matrix(dispatch.binary("mul", grad, signs))
        return dispatch.binary("mul", scale, mm(u, diag_embed(others), vh))


class Slogdet(Op):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return dispatch_linalg.slogdet(a)

    @staticmethod
    def backward(ctx, _grad_sign, grad_logabs):
        (a,) = ctx.saved_tensors
        return dispatch.binary("mul", _scalar_per_matrix(grad_logabs), mT(dispatch_linalg.inv(a)))


class Solve(Op):
    """X with A X = B for matrices B (batch dimensions broadcast)."""

    @staticmethod
    def forward(ctx, a, b):
        x = dispatch_linalg.solve(a, b)
        ctx.save_for_backward(a, x)
        ctx.shapes = a.shape, b.shape
        return x

    @staticmethod
    def backward(ctx, grad):
        a, x = ctx.saved_tensors
        grad_b = dispatch_linalg.solve(mT(a), grad)
        grad_a = _neg(mm(grad_b, mT(x))) if ctx.needs_input_grad[0] else None
        shape_a, shape_b = ctx.shapes
        return (None if grad_a is None else dispatch.sum_to(grad_a, shape_a),
                dispatch.sum_to(grad_b, shape_b) if ctx.needs_input_grad[1] else None)


class Pinv(Op):
    """The Moore-Penrose pseudo-inverse from an SVD, singular values at or below
    max(atol, rtol * the largest) counted as zero; PyTorch's gradient (that of a constant rank)."""

    @staticmethod
    def forward(ctx, a, atol, rtol):
        u, s, vh = dispatch_linalg.svd(a, False)
        tol = dispatch.binary("mul", s[..., :1], rtol)  # S is descending: its first is the largest
        tol = dispatch_index.where(dispatch_pointwise.compare("lt", tol, atol), atol, tol)
        kept = dispatch_pointwise.compare("gt", s, tol)
        s_inv = dispatch_index.where(kept, dispatch.binary("div", 1.0, dispatch_index.where(kept, s, 1.0)), 0.0)
        out = dispatch.matmul(dispatch.binary("mul", mT(vh), s_inv.reshape(s_inv.shape[:-1] + (1, -1))), mT(u))
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        a, p = ctx.saved_tensors
        m, n = a.shape[-2:]
        if m <= n:
            k = mm(mT(grad), p)
            k_ph = mm(k, mT(p))
            grad_a = _add(_neg(mT(mm(p, k))), k_ph, _neg(mm(a, p, k_ph)),
                          mm(mT(p), p, dispatch.binary("sub", mT(grad), mm(k, a))))
        else:
            k = mm(p, mT(grad))
            ph_k = mm(mT(p), k)
            grad_a = _add(_neg(mT(mm(k, p))), mm(dispatch.binary("sub", mT(grad), mm(a, k)), p, mT(p)), ph_k,
                          _neg(mm(ph_k, p, a)))
        return grad_a, None, None


# --- public functions -------------------------------------------------------------------------

@autocast_op("linalg_inv")
def inv(A: Any) -> Any:  # noqa: N803 - torch's argument name
    """The inverse of each square matrix of ``A`` (..., n, n).

    Raises:
        LinAlgError: a matrix is singular. ShapeError: not square. DTypeError: not float32/float64.
        ZgradError: a CUDA tensor (CPU only: move it with ``.cpu()``).
    """
    return Inv.apply(square_matrices(A, "linalg.inv"))


def det(A: Any) -> Any:  # noqa: N803
    """The determinant of each square matrix of ``A`` (..., n, n), shape (...); differentiable at
    singular matrices too."""
    return Det.apply(square_matrices(A, "linalg.det"))


def slogdet(A: Any) -> SlogdetResult:  # noqa: N803
    """``(sign, logabsdet)`` of the determinant of each square matrix of ``A``: sign 0 and
    logabsdet -inf for a singular one. The gradient flows through ``logabsdet``."""
    sign, logabsdet = Slogdet.apply(square_matrices(A, "linalg.slogdet"))
    return SlogdetResult(sign.detach_(), logabsdet)


def logdet(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """``torch.logdet``: log det of each square matrix: NaN where the determinant is negative,
    -inf where it is 0; the gradient is that of :func:`slogdet`'s ``logabsdet``."""
    sign, logabsdet = slogdet(square_matrices(input, "logdet", "input"))
    return logabsdet + sign.log()


@autocast_op("linalg_solve")
def solve(A: Any, B: Any, *, left: bool = True) -> Any:  # noqa: N803
    """X with A X = B (``left``) or X A = B, for square ``A`` (..., n, n). ``B`` is a batch of
    matrices (..., n, k), or of vectors (..., n) when it has one dimension, or one fewer than ``A``
    with the same batch sizes (PyTorch's rule); batch dimensions broadcast.

    Raises:
        LinAlgError: ``A`` is singular. ShapeError: sizes that do not fit. DTypeError: dtypes differ.
    """
    a = square_matrices(A, "linalg.solve")
    b = tensor_arg(B, "linalg.solve", "B")
    same_dtype("linalg.solve", a, b)
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if not left:
        if vector:
            raise ShapeError("linalg.solve: Vector broadcasting of the left hand side is not supported for left=False. "
                             "In this case linalg.solve is equivalent to B / A.squeeze(-1)")
        return transpose(Solve.apply(transpose(a, -2, -1), transpose(b, -2, -1)), -2, -1)
    b = unsqueeze(b, -1) if vector else b
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                         f"({a.shape[-2]}x{a.shape[-1]} and {'x'.join(str(n) for n in b.shape[-2:])})")
    x = Solve.apply(a, b)
    return squeeze(x, -1) if vector else x


@autocast_op("linalg_pinv")
def pinv(A: Any, *, atol: float | None = None, rtol: float | None = None, hermitian: bool = False) -> Any:  # noqa: N803
    """The Moore-Penrose pseudo-inverse of each matrix of ``A`` (..., m, n) -> (..., n, m).
    Singular values at or below max(atol, rtol * the largest) count as zero; with neither given,
    rtol is eps * max(m, n) (PyTorch's default). ``hermitian`` is accepted (the SVD serves both).
    """
    a = matrices(A, "linalg.pinv")
    if rtol is None:
        rtol = _default_rtol(a) if atol is None or atol <= 0 else 0.0
    return Pinv.apply(a, float(0.0 if atol is None else atol), float(rtol))


def _default_rtol(a: Any) -> float:
    return float(np.finfo(a.dtype).eps) * max(a.shape[-2:])


@autocast_op("linalg_lstsq")
def lstsq(A: Any, B: Any, rcond: float | None = None, *, driver: str | None = None) -> LstsqResult:  # noqa: N803
    """The least-squares solution X of A X = B for ``A`` (..., m, n) and ``B`` (..., m, k), as
    ``pinv(A) @ B`` with singular values at or below ``rcond`` times the largest dropped
    (default eps * max(m, n)), differentiable in both. As PyTorch's CPU drivers: ``rank`` is
    always computed; ``singular_values`` (and ``residuals``, the squared residual of each column,
    where m > n and A has full rank) only with the drivers "gelsd" and "gelss", else empty.

    Raises:
        ValueError: an unknown driver. DTypeError: the dtypes differ. ShapeError: sizes that do not fit.
    """
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise ValueError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
                         f"but got {driver}")
    a, b = matrices(A, "torch.linalg.lstsq"), tensor_arg(B, "linalg.lstsq", "B")
    if a.dtype != b.dtype:
        raise DTypeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype "
                         f"{dispatch.scalar_type_name(a.dtype)} and other's dtype {dispatch.scalar_type_name(b.dtype)}")
    vector = b.ndim == a.ndim - 1
    b = unsqueeze(b, -1) if vector else b
    if b.shape[-2] != a.shape[-2]:
        raise ShapeError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2) "
                         f"({a.shape[-2]} and {b.shape[-2]})")
    rtol = _default_rtol(a) if rcond is None or rcond < 0 else float(rcond)
    solution = matmul(Pinv.apply(a, 0.0, rtol), b)
    s = Tensor(dispatch_linalg.svd(a._data, False)[1])
    rank = (s > s[..., :1] * rtol).sum(-1)
    empty = Tensor(dispatch.empty((0,), a.dtype, dispatch.device_type_of(a._data)))
    singular_values, residuals = empty, empty
    if driver in ("gelsd", "gelss"):
        singular_values = s
        m, n = a.shape[-2:]
        if m > n and bool(np.all(dispatch.to_device(rank._data, "cpu") == n)):
            residuals = ((matmul(a, solution) - b) ** 2).sum(-2)
    return LstsqResult(squeeze(solution, -1) if vector else solution, residuals, rank, singular_values)

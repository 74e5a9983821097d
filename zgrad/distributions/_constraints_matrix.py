"""The constraints on matrices (triangular, Cholesky factors, symmetric, positive (semi)definite)
and the ones that join others along a dimension (``cat``, ``stack``); re-exported by
:mod:`zgrad.distributions.constraints`."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from zgrad.creation import full, tensor
from zgrad.distributions._constraint_base import Constraint
from zgrad.linalg import eigvalsh
from zgrad.linalg.norms import vector_norm
from zgrad.ops.functions import cat as cat_tensors
from zgrad.ops.functions import stack as stack_tensors
from zgrad.ops.reduce_logical import isclose
from zgrad.tensor import Tensor
from zgrad.type_info import finfo

__all__: list[str] = []


def _is_lower_triangular(value: Tensor) -> Tensor:
    return (value.tril() == value).reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)


class _LowerTriangular(Constraint):
    """Lower-triangular square matrices."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        return _is_lower_triangular(value)


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        return _is_lower_triangular(value) & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: each row of unit length."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        tolerance = finfo(value.dtype).eps * value.shape[-1] * 10  # PyTorch's slack for rounding
        unit_rows = ((vector_norm(value.detach(), dim=-1) - 1.0).abs() <= tolerance).all(-1)
        return _LowerCholesky().check(value) & unit_rows


class _Square(Constraint):
    """Square matrices."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        return full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1], device=value.device)


class _Symmetric(_Square):
    """Symmetric square matrices (within an absolute 1e-6)."""

    def check(self, value: Tensor) -> Tensor:
        square = super().check(value)
        if not bool(square.all()):
            return square
        return isclose(value, value.mT, atol=1e-6).all(-1).all(-1)


class _PositiveSemidefinite(_Symmetric):
    """Symmetric matrices with nonnegative eigenvalues."""

    def check(self, value: Tensor) -> Tensor:
        symmetric_ = super().check(value)
        if not bool(symmetric_.all()):
            return symmetric_
        # eigvalsh runs on the CPU only
        return (eigvalsh(value.detach().cpu()) >= 0).all(-1).to(value.device)


def _has_cholesky_factor(matrices: np.ndarray) -> np.ndarray:
    """Whether each matrix's Cholesky factorization succeeds (PyTorch's test: cholesky_ex's info)."""
    flat = matrices.reshape((-1,) + matrices.shape[-2:])
    try:
        np.linalg.cholesky(flat)
        return np.ones(matrices.shape[:-2], dtype=bool)
    except np.linalg.LinAlgError:
        ok = np.empty(len(flat), dtype=bool)
        for i, matrix in enumerate(flat):
            try:
                np.linalg.cholesky(matrix)
                ok[i] = True
            except np.linalg.LinAlgError:
                ok[i] = False
        return ok.reshape(matrices.shape[:-2])


class _PositiveDefinite(_Symmetric):
    """Symmetric matrices with a Cholesky factor."""

    def check(self, value: Tensor) -> Tensor:
        symmetric_ = super().check(value)
        if not bool(symmetric_.all()):
            return symmetric_
        return tensor(_has_cholesky_factor(value.detach().cpu().numpy()), device=value.device)


def _check_dim(dim: int, value: Tensor) -> None:
    if not -value.ndim <= dim < value.ndim:
        raise IndexError(f"dim {dim} out of range for value with {value.ndim} dimensions")


class _Joined(Constraint):
    """The base of :class:`_Cat` and :class:`_Stack`: the constraints ``cseq``, each on its part of a
    value along ``dim``; discrete when any of them is.

    Raises:
        TypeError: an entry of ``cseq`` that is no Constraint.
    """

    def __init__(self, cseq: Sequence[Constraint], dim: int = 0) -> None:
        if not all(isinstance(c, Constraint) for c in cseq):
            raise TypeError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.dim = dim

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return any(c.is_discrete for c in self.cseq)


class _Cat(_Joined):
    """``cseq[i]`` on the i-th block of ``lengths[i]`` entries along ``dim`` (as ``cat`` joins them).

    Raises:
        TypeError: an entry of ``cseq`` that is no Constraint.
        ValueError: ``lengths`` and ``cseq`` of different lengths.
    """

    def __init__(self, cseq: Sequence[Constraint], dim: int = 0, lengths: Sequence[int] | None = None) -> None:
        super().__init__(cseq, dim)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise ValueError(f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return max(c.event_dim for c in self.cseq)

    def check(self, value: Tensor) -> Tensor:
        _check_dim(self.dim, value)
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start += length
        return cat_tensors(checks, self.dim)


class _Stack(_Joined):
    """``cseq[i]`` on the i-th slice along ``dim`` (as ``stack`` joins them).

    Raises:
        TypeError: an entry of ``cseq`` that is no Constraint.
    """

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value: Tensor) -> Tensor:
        _check_dim(self.dim, value)
        slices = [value.select(self.dim, i) for i in range(value.shape[self.dim])]
        return stack_tensors([c.check(v) for v, c in zip(slices, self.cseq)], self.dim)

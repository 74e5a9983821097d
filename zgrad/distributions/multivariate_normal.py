"""``MultivariateNormal``: the Gaussian distribution over vectors, N(loc, Sigma)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from zgrad.creation import eye
from zgrad.distributions import constraints
from zgrad.distributions._loc_scale import _CentredAtLoc
from zgrad.distributions.utils import _standard_normal, lazy_property
from zgrad.linalg import cholesky, solve_triangular
from zgrad.memory_formats import Size
from zgrad.ops.layout import broadcast_shapes
from zgrad.ops.reorder import flip
from zgrad.tensor import Tensor

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat: Tensor, bvec: Tensor) -> Tensor:
    """Matrix-vector products over broadcast batch dimensions."""
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(scale_tril: Tensor, x: Tensor) -> Tensor:
    """x^T (L L^T)^-1 x = |L^-1 x|^2 for a lower-triangular L, over broadcast batch dimensions (L's
    batch shape must broadcast to x's)."""
    batch = tuple(broadcast_shapes(tuple(scale_tril.shape[:-2]), tuple(x.shape[:-1])))
    n = x.shape[-1]
    solved = solve_triangular(scale_tril.expand(batch + (n, n)), x.expand(batch + (n,)).unsqueeze(-1), upper=False)
    return solved.squeeze(-1).pow(2).sum(-1)


def _precision_to_scale_tril(precision: Tensor) -> Tensor:
    """The lower Cholesky factor of precision^-1, through the Cholesky factor of the reversed
    precision (no explicit inverse of the precision)."""
    reversed_factor = cholesky(flip(precision, (-2, -1)))
    inverse_factor = flip(reversed_factor, (-2, -1)).transpose(-2, -1)
    identity = eye(precision.shape[-1], dtype=precision.dtype, device=precision.device)
    return solve_triangular(inverse_factor, identity, upper=False)


class MultivariateNormal(_CentredAtLoc):
    """N(loc, Sigma) over vectors (the last dimension of ``loc`` is the event), with Sigma given as
    exactly one of a covariance matrix, a precision matrix, or its lower Cholesky factor
    ``scale_tril``. Every computation uses the Cholesky factor (computed once when another form is
    given); the batch shape broadcasts the matrix's and loc's leading dimensions.

    ``rsample`` is reparameterized (loc + L eps, eps ~ N(0, I)).

    Args:
        loc: the mean, at least one-dimensional.
        covariance_matrix: a positive-definite covariance.
        precision_matrix: a positive-definite precision (inverse covariance).
        scale_tril: a lower-triangular factor of the covariance with a positive diagonal.
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: a 0-d loc; not exactly one matrix; a matrix of fewer than two dimensions; with
            validation, a matrix outside its constraint (positive definite, lower Cholesky).
    """

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, covariance_matrix: Tensor | None = None, precision_matrix: Tensor | None = None,
                 scale_tril: Tensor | None = None, validate_args: bool | None = None) -> None:
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = {"covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix,
                 "scale_tril": scale_tril}
        given = {name: matrix for name, matrix in given.items() if matrix is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        (name, matrix), = given.items()
        if matrix.ndim < 2:
            what = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(f"{what} must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = tuple(broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        setattr(self, name, matrix.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> MultivariateNormal:
        new = self._get_checked_instance(MultivariateNormal, _instance)
        matrix_shape = tuple(batch_shape) + tuple(self.event_shape) * 2
        new.loc = self.loc.expand(tuple(batch_shape) + tuple(self.event_shape))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(matrix_shape))
        return self._finish_expand(new, batch_shape)

    def _matrix_shape(self) -> tuple[int, ...]:
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @lazy_property
    def scale_tril(self) -> Tensor:
        """L, the lower Cholesky factor of the covariance."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """L L^T."""
        factor = self._unbroadcasted_scale_tril
        return (factor @ factor.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """(L L^T)^-1 = L^-T L^-1."""
        factor = self._unbroadcasted_scale_tril
        identity = eye(factor.shape[-1], dtype=factor.dtype, device=factor.device)
        inverse = solve_triangular(factor, identity, upper=False)
        return (inverse.mT @ inverse).expand(self._matrix_shape())

    @property
    def variance(self) -> Tensor:
        """The covariance's diagonal: the squared rows of L summed."""
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        eps = _standard_normal(self._extended_shape(sample_shape), self.loc.dtype, self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        """-(k log(2 pi) + |L^-1 (value - loc)|^2) / 2 - log det L."""
        if self._validate_args:
            self._validate_sample(value)
        mahalanobis = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + mahalanobis) - self._half_log_det()

    def entropy(self) -> Tensor:
        """k (1 + log(2 pi)) / 2 + log det L."""
        entropy = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return entropy if len(self._batch_shape) == 0 else entropy.expand(self._batch_shape)

"""``StudentT``: Student's t distribution with ``df`` degrees of freedom, location and scale."""

from __future__ import annotations

import math
from typing import Any, Sequence

from zgrad.distributions import constraints
from zgrad.distributions.chi2 import Chi2
from zgrad.distributions.distribution import Distribution
from zgrad.distributions.utils import _standard_normal, broadcast_all
from zgrad.memory_formats import Size
from zgrad.ops.indexing import where
from zgrad.tensor import Tensor

__all__ = ["StudentT"]


class StudentT(Distribution):
    """loc + scale T, T = X / sqrt(Z / df) with X ~ N(0, 1), Z ~ Chi2(df).

    ``rsample`` is reparameterized (through the normal draw and the Chi2 draw's implicit gradient).

    Args:
        df: the degrees of freedom (positive).
        loc: the location (the mean where df > 1).
        scale: the scale (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a df or scale that is not positive, or a NaN loc.
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df: Tensor | float, loc: Tensor | float = 0.0, scale: Tensor | float = 1.0,
                 validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> StudentT:
        new = self._get_checked_instance(StudentT, _instance)
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        return self._finish_expand(new, batch_shape)

    @property
    def mean(self) -> Tensor:
        """loc where df > 1, NaN elsewhere."""
        return where(self.df <= 1, math.nan, self.loc)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        """scale**2 df / (df - 2) where df > 2, inf where 1 < df <= 2, NaN where df <= 1."""
        finite = self.scale.pow(2) * self.df / (self.df - 2)
        return where(self.df > 2, finite, where(self.df > 1, math.inf, math.nan))

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        normal = _standard_normal(self._extended_shape(sample_shape), self.df.dtype, self.df.device)
        chi2 = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * normal * (chi2 / self.df).rsqrt()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        normalizer = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
                      + (0.5 * self.df).lgamma() - (0.5 * (self.df + 1.0)).lgamma())
        return -0.5 * (self.df + 1.0) * (y**2.0 / self.df).log1p() - normalizer

    def entropy(self) -> Tensor:
        log_beta = (0.5 * self.df).lgamma() + math.lgamma(0.5) - (0.5 * (self.df + 1)).lgamma()
        return (self.scale.log()
                + 0.5 * (self.df + 1) * ((0.5 * (self.df + 1)).digamma() - (0.5 * self.df).digamma())
                + 0.5 * self.df.log() + log_beta)

"""``LogNormal``: exp of a normal variable."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.distributions import constraints
from zgrad.distributions._transform_elementwise import ExpTransform
from zgrad.distributions.normal import Normal
from zgrad.distributions.transformed_distribution import TransformedDistribution
from zgrad.tensor import Tensor

__all__ = ["LogNormal"]


class LogNormal(TransformedDistribution):
    """Y = exp(X), X ~ Normal(loc, scale).

    Args:
        loc: the mean of log Y.
        scale: the standard deviation of log Y (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a NaN loc or a scale that is not positive.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        super().__init__(Normal(loc, scale, validate_args=validate_args), ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> LogNormal:
        return super().expand(batch_shape, _instance=self._get_checked_instance(LogNormal, _instance))

    @property
    def loc(self) -> Tensor:
        """The mean of log Y."""
        return self.base_dist.loc

    @property
    def scale(self) -> Tensor:
        """The standard deviation of log Y."""
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Tensor:
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self) -> Tensor:
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc

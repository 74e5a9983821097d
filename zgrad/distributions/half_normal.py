"""``HalfNormal``: |X| for a centred normal X."""

from __future__ import annotations

import math
from typing import Any, Sequence

from zgrad.creation import zeros_like
from zgrad.distributions import constraints
from zgrad.distributions._transform_elementwise import AbsTransform
from zgrad.distributions.normal import Normal
from zgrad.distributions.transformed_distribution import TransformedDistribution
from zgrad.ops.indexing import where
from zgrad.tensor import Tensor

__all__ = ["HalfNormal"]


class HalfNormal(TransformedDistribution):
    """Y = |X|, X ~ Normal(0, scale).

    Args:
        scale: the scale of the full normal (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a scale that is not positive.
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None) -> None:
        super().__init__(Normal(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> HalfNormal:
        return super().expand(batch_shape, _instance=self._get_checked_instance(HalfNormal, _instance))

    @property
    def scale(self) -> Tensor:
        """The scale of the full normal."""
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def log_prob(self, value: Tensor) -> Tensor:
        """The normal's log density plus log 2 on [0, inf), -inf below."""
        if self._validate_args:
            self._validate_sample(value)
        return where(value >= 0, self.base_dist.log_prob(value) + math.log(2), -math.inf)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Tensor) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)

"""``Uniform``: the continuous uniform distribution on [low, high)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from zgrad.creation_random import rand
from zgrad.distributions import constraints
from zgrad.distributions.distribution import Distribution
from zgrad.distributions.utils import NUMBER_TYPES, broadcast_all
from zgrad.memory_formats import Size
from zgrad.tensor import Tensor

__all__ = ["Uniform"]


class Uniform(Distribution):
    """Uniform on the half-open interval [low, high), both broadcast to the batch shape.

    ``rsample`` is reparameterized (low + u (high - low), u ~ U[0, 1)).

    Args:
        low: the lower end (included).
        high: the upper end (excluded); must exceed ``low``.
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, low >= high somewhere.
    """

    has_rsample = True

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    def __init__(self, low: Tensor | float, high: Tensor | float, validate_args: bool | None = None) -> None:
        self.low, self.high = broadcast_all(low, high)
        scalar = isinstance(low, NUMBER_TYPES) and isinstance(high, NUMBER_TYPES)
        super().__init__(Size() if scalar else self.low.shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Uniform:
        new = self._get_checked_instance(Uniform, _instance)
        new.low = self.low.expand(batch_shape)
        new.high = self.high.expand(batch_shape)
        return self._finish_expand(new, batch_shape)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.interval(self.low, self.high)

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        """NaN: every point of the interval is a mode."""
        return math.nan * self.high

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        u = rand(self._extended_shape(sample_shape), dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value: Tensor) -> Tensor:
        """-log(high - low) inside [low, high), -inf outside."""
        if self._validate_args:
            self._validate_sample(value)
        inside = (self.low <= value).to(self.low.dtype) * (self.high > value).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value: Tensor) -> Tensor:
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()

"""``Exponential``: the waiting time of a Poisson process of rate ``rate``."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.creation import empty, zeros_like
from zgrad.distributions import constraints
from zgrad.distributions.exp_family import ExponentialFamily
from zgrad.distributions.utils import NUMBER_TYPES, broadcast_all
from zgrad.memory_formats import Size
from zgrad.tensor import Tensor

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    """Density rate exp(-rate x) on x >= 0.

    ``rsample`` is reparameterized (E / rate, E a standard exponential draw).

    Args:
        rate: the rate, 1 / scale (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a rate that is not positive.
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(Size() if isinstance(rate, NUMBER_TYPES) else self.rate.shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Exponential:
        new = self._get_checked_instance(Exponential, _instance)
        new.rate = self.rate.expand(batch_shape)
        return self._finish_expand(new, batch_shape)

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        draws = empty(self._extended_shape(sample_shape), dtype=self.rate.dtype, device=self.rate.device)
        return draws.exponential_() / self.rate

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return -(-value).log1p() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (-self.rate,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return -(-x).log()

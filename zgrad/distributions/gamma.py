"""``Gamma``: the Gamma distribution of shape ``concentration`` and rate ``rate``."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.distributions import constraints
from zgrad.distributions._standard_gamma import standard_gamma
from zgrad.distributions.exp_family import ExponentialFamily
from zgrad.distributions.utils import NUMBER_TYPES, broadcast_all
from zgrad.memory_formats import Size
from zgrad.ops.special_binary import gammainc
from zgrad.tensor import Tensor

__all__ = ["Gamma"]


class Gamma(ExponentialFamily):
    """Density rate**c x**(c - 1) exp(-rate x) / Gamma(c) on x >= 0, c = ``concentration``.

    ``rsample`` is reparameterized: a standard Gamma draw divided by ``rate``, whose gradient with
    respect to the concentration is the implicit one (the draw held at its CDF value, as PyTorch's
    ``_standard_gamma_grad``).

    Args:
        concentration: the shape alpha (positive).
        rate: the rate beta = 1 / scale (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a concentration or rate that is not positive.
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration: Tensor | float, rate: Tensor | float, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        scalar = isinstance(concentration, NUMBER_TYPES) and isinstance(rate, NUMBER_TYPES)
        super().__init__(Size() if scalar else self.concentration.shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Gamma:
        new = self._get_checked_instance(Gamma, _instance)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        return self._finish_expand(new, batch_shape)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)

    def log_prob(self, value: Tensor | float) -> Tensor:
        if not isinstance(value, Tensor):
            value = broadcast_all(value, self.rate)[0]
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration.xlogy(self.rate) + (self.concentration - 1).xlogy(value) - self.rate * value
                - self.concentration.lgamma())

    def cdf(self, value: Tensor) -> Tensor:
        """The regularized lower incomplete gamma function P(concentration, rate value)."""
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    def entropy(self) -> Tensor:
        return (self.concentration - self.rate.log() + self.concentration.lgamma()
                + (1.0 - self.concentration) * self.concentration.digamma())

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()

"""``Poisson``: counts of events at rate ``rate``."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.distributions import constraints
from zgrad.distributions.exp_family import ExponentialFamily
from zgrad.distributions.utils import NUMBER_TYPES, broadcast_all
from zgrad.engine.grad_mode import no_grad
from zgrad.memory_formats import Size
from zgrad.ops.sampling import poisson
from zgrad.tensor import Tensor

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """P(k) = rate**k exp(-rate) / k! on k = 0, 1, ...; samples are floats of the rate's dtype.

    Args:
        rate: the rate (nonnegative).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a negative rate.
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(Size() if isinstance(rate, NUMBER_TYPES) else self.rate.shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Poisson:
        new = self._get_checked_instance(Poisson, _instance)
        new.rate = self.rate.expand(batch_shape)
        return self._finish_expand(new, batch_shape)

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        with no_grad():
            return poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        """value log(rate) - rate - log(value!)."""
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.rate.log(),)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return x.exp()

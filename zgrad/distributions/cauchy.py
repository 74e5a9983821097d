"""``Cauchy``: the Lorentz distribution, the ratio of two centred normal variables."""

from __future__ import annotations

import math
from typing import Sequence

from zgrad.creation import empty, full
from zgrad.distributions._loc_scale import _LocScale
from zgrad.memory_formats import Size
from zgrad.tensor import Tensor

__all__ = ["Cauchy"]


class Cauchy(_LocScale):
    """Density 1 / (pi scale (1 + ((x - loc) / scale)**2)); no mean or variance.

    ``rsample`` is reparameterized (loc + scale C, C a standard Cauchy draw).

    Args:
        loc: the mode and median.
        scale: the half width at half maximum (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a NaN loc or a scale that is not positive.
    """

    @property
    def mean(self) -> Tensor:
        """NaN: the Cauchy distribution has no mean."""
        return full(self._extended_shape(), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def variance(self) -> Tensor:
        """inf: the Cauchy distribution has no finite variance."""
        return full(self._extended_shape(), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        eps = empty(self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()

"""``Normal``: the Gaussian distribution N(loc, scale**2)."""

from __future__ import annotations

import math
from typing import Sequence

from zgrad.distributions._loc_scale import _LocScale
from zgrad.distributions.exp_family import ExponentialFamily
from zgrad.distributions.utils import _standard_normal
from zgrad.memory_formats import Size
from zgrad.tensor import Tensor

__all__ = ["Normal"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class Normal(_LocScale, ExponentialFamily):
    """N(loc, scale**2), with ``loc`` and ``scale`` (tensors or numbers) broadcast to the batch shape.

    ``rsample`` is reparameterized (loc + eps * scale, eps ~ N(0, 1) from the default generator of
    the parameters' device), so gradients flow to loc and scale; ``log_prob``, ``cdf``, ``icdf``
    and ``entropy`` are differentiable too.

    Args:
        loc: the mean.
        scale: the standard deviation (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a NaN loc or a scale that is not positive.
    """

    _mean_carrier_measure = 0

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        eps = _standard_normal(self._extended_shape(sample_shape), self.loc.dtype, self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        """-(value - loc)**2 / (2 scale**2) - log(scale) - log(sqrt(2 pi))."""
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.scale**2) - self.scale.log() - _HALF_LOG_2PI

    def cdf(self, value: Tensor) -> Tensor:
        """(1 + erf((value - loc) / (scale sqrt(2)))) / 2."""
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def icdf(self, value: Tensor) -> Tensor:
        """loc + scale sqrt(2) erfinv(2 value - 1)."""
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self) -> Tensor:
        """0.5 + 0.5 log(2 pi) + log(scale)."""
        return 0.5 + _HALF_LOG_2PI + self.scale.log()

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal()

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return -0.25 * x.pow(2) / y + 0.5 * (-math.pi / y).log()

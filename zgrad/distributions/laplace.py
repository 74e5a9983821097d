"""``Laplace``: the double exponential distribution around ``loc``."""

from __future__ import annotations

import math
from typing import Sequence

from zgrad.creation import empty
from zgrad.distributions._loc_scale import _LocScale
from zgrad.memory_formats import Size
from zgrad.tensor import Tensor
from zgrad.type_info import finfo

__all__ = ["Laplace"]


class Laplace(_LocScale):
    """Density exp(-|x - loc| / scale) / (2 scale).

    ``rsample`` is reparameterized (inverse-cdf of a uniform draw).

    Args:
        loc: the mean and median.
        scale: the scale (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a NaN loc or a scale that is not positive.
    """

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        u = empty(self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        # (eps - 1, 1) rather than (-1, 1): log1p(-|u|) stays finite
        u = u.uniform_(finfo(self.loc.dtype).eps - 1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()

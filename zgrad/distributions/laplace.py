"""``Laplace``: the double exponential distribution around ``loc``."""

from __future__ import annotations

import math
from typing import Any, Sequence

from zgrad.creation import empty
from zgrad.distributions import constraints
from zgrad.distributions.distribution import Distribution
from zgrad.distributions.utils import NUMBER_TYPES, broadcast_all
from zgrad.memory_formats import Size
from zgrad.tensor import Tensor
from zgrad.type_info import finfo

__all__ = ["Laplace"]


class Laplace(Distribution):
    """Density exp(-|x - loc| / scale) / (2 scale).

    ``rsample`` is reparameterized (inverse-cdf of a uniform draw).

    Args:
        loc: the mean and median.
        scale: the scale (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a NaN loc or a scale that is not positive.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        scalar = isinstance(loc, NUMBER_TYPES) and isinstance(scale, NUMBER_TYPES)
        super().__init__(Size() if scalar else self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Laplace:
        new = self._get_checked_instance(Laplace, _instance)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return self._finish_expand(new, batch_shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

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

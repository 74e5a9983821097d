"""``Dirichlet``: a distribution over the probability simplex."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.creation import arange
from zgrad.distributions import constraints
from zgrad.distributions._standard_gamma import standard_gamma
from zgrad.distributions.exp_family import ExponentialFamily
from zgrad.memory_formats import Size
from zgrad.ops.indexing import where
from zgrad.tensor import Tensor

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """Density prod(x_i**(a_i - 1)) Gamma(sum a) / prod Gamma(a_i) on the simplex, a = ``concentration``
    (the last dimension is the event, the leading ones the batch).

    ``rsample`` is reparameterized: independent Gamma(a_i, 1) draws (each with its implicit gradient,
    see :class:`Gamma`) divided by their sum.

    Args:
        concentration: the positive concentrations, at least one-dimensional.
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: a 0-d concentration; with validation, a concentration that is not positive.
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Dirichlet:
        new = self._get_checked_instance(Dirichlet, _instance)
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        return self._finish_expand(new, batch_shape)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        gammas = standard_gamma(self.concentration.expand(self._extended_shape(sample_shape)))
        return gammas / gammas.sum(-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((self.concentration - 1.0).xlogy(value).sum(-1) + self.concentration.sum(-1).lgamma()
                - self.concentration.lgamma().sum(-1))

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self) -> Tensor:
        """(a - 1)+ normalized; where every a_i < 1 (the density is unbounded at every vertex), the first
        vertex (1, 0, ..., 0), as PyTorch gives."""
        shifted = (self.concentration - 1).clamp(min=0.0)
        mode = shifted / shifted.sum(-1, True)
        corner = (arange(shifted.shape[-1], device=mode.device) == 0).to(mode.dtype)
        return where((self.concentration < 1).all(-1, keepdim=True), corner, mode)

    @property
    def variance(self) -> Tensor:
        total = self.concentration.sum(-1, True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def entropy(self) -> Tensor:
        k = self.concentration.shape[-1]
        total = self.concentration.sum(-1)
        return (self.concentration.lgamma().sum(-1) - total.lgamma() - (k - total) * total.digamma()
                - ((self.concentration - 1.0) * self.concentration.digamma()).sum(-1))

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.concentration,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()

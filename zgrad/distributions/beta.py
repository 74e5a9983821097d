"""``Beta``: a distribution on [0, 1], the two-category Dirichlet."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.creation import tensor
from zgrad.distributions import constraints
from zgrad.distributions.dirichlet import Dirichlet
from zgrad.distributions.exp_family import ExponentialFamily
from zgrad.distributions.utils import NUMBER_TYPES, broadcast_all
from zgrad.kernels.promotion import get_default_dtype
from zgrad.memory_formats import Size
from zgrad.ops.functions import stack
from zgrad.tensor import Tensor

__all__ = ["Beta"]


class Beta(ExponentialFamily):
    """Density x**(a - 1) (1 - x)**(b - 1) / B(a, b) on [0, 1], a = ``concentration1``,
    b = ``concentration0``; built on a Dirichlet over (x, 1 - x).

    ``rsample`` is reparameterized (the Dirichlet's first coordinate: two Gamma draws with implicit
    gradients, g1 / (g1 + g0)).

    Args:
        concentration1: alpha (positive).
        concentration0: beta (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a concentration that is not positive.
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Tensor | float, concentration0: Tensor | float,
                 validate_args: bool | None = None) -> None:
        if isinstance(concentration1, NUMBER_TYPES) and isinstance(concentration0, NUMBER_TYPES):
            both = tensor([float(concentration1), float(concentration0)], dtype=get_default_dtype())
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            both = stack([concentration1, concentration0], -1)
        self._dirichlet = Dirichlet(both, validate_args=validate_args)
        super().__init__(self._dirichlet.batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Beta:
        new = self._get_checked_instance(Beta, _instance)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        return self._finish_expand(new, batch_shape)

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(stack([value, 1.0 - value], -1))

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()

    @property
    def concentration1(self) -> Tensor:
        """alpha, the first concentration."""
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        """beta, the second concentration."""
        return self._dirichlet.concentration[..., 1]

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return self.concentration1, self.concentration0

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return x.lgamma() + y.lgamma() - (x + y).lgamma()

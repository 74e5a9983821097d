"""``Bernoulli``: a 0/1 variable that is 1 with probability ``probs``."""

from __future__ import annotations

import math
from typing import Any, Sequence

from zgrad.creation import arange
from zgrad.distributions import constraints
from zgrad.distributions._probs_or_logits import _BinaryProbsOrLogits, _expand_probs_or_logits
from zgrad.distributions.exp_family import ExponentialFamily
from zgrad.distributions.utils import broadcast_all
from zgrad.memory_formats import Size
from zgrad.ops.indexing import where
from zgrad.ops.loss_pointwise import binary_cross_entropy_with_logits
from zgrad.ops.sampling import bernoulli
from zgrad.tensor import Tensor

__all__ = ["Bernoulli"]


class Bernoulli(_BinaryProbsOrLogits, ExponentialFamily):
    """1 with probability ``probs`` (or sigmoid(``logits``)), else 0; exactly one of the two given.

    Samples are floats of the parameter's dtype. ``log_prob`` and ``entropy`` are differentiable
    (binary cross-entropy with logits).

    Args:
        probs: the probability of 1, in [0, 1].
        logits: the log-odds of 1.
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: both or neither of probs/logits; with validation, probs outside [0, 1] or NaN logits.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs: Tensor | float | None = None, logits: Tensor | float | None = None,
                 validate_args: bool | None = None) -> None:
        self._set_probs_or_logits(probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Bernoulli:
        new = self._get_checked_instance(Bernoulli, _instance)
        _expand_probs_or_logits(self, new, batch_shape)
        return self._finish_expand(new, batch_shape)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        """1 where probs > 0.5, 0 where below, NaN at 0.5 (no single mode)."""
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return where(self.probs == 0.5, math.nan, mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    @property
    def param_shape(self) -> Size:
        return self._param.shape

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        return bernoulli(self.probs.detach().expand(self._extended_shape(sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        """-BCE(logits, value): value log p + (1 - value) log(1 - p), stable in the logits."""
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.probs.logit(),)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return x.exp().log1p()

"""``Categorical``: a distribution over {0, ..., K-1}, given by probabilities or logits."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from zgrad.creation import arange, full
from zgrad.distributions import constraints
from zgrad.distributions._probs_or_logits import _check_probs_or_logits, _expand_probs_or_logits
from zgrad.distributions.distribution import Distribution
from zgrad.distributions.utils import _draw_on_host, lazy_property, logits_to_probs, probs_to_logits
from zgrad.memory_formats import Size
from zgrad.tensor import Tensor
from zgrad.type_info import finfo

__all__ = ["Categorical"]


class Categorical(Distribution):
    """Categories 0..K-1 along the last dimension of ``probs`` or ``logits`` (exactly one given);
    the leading dimensions are the batch shape.

    ``probs`` need not sum to 1 (they are normalized); ``logits`` are normalized to log-probabilities.
    The other parameter is derived lazily (softmax, or log of the clamped probs). ``log_prob`` and
    ``entropy`` are differentiable with respect to the given parameter.

    Args:
        probs: nonnegative, finite event weights with a nonzero sum.
        logits: unnormalized event log-probabilities.
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: both or neither of probs/logits; a 0-d parameter; with validation, probs that are
            not a simplex once normalized (negative or non-finite) or NaN logits.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        _check_probs_or_logits(probs, logits)
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self._param = self.probs
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self._param = self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Categorical:
        new = self._get_checked_instance(Categorical, _instance)
        param_shape = tuple(batch_shape) + (self._num_events,)
        _expand_probs_or_logits(self, new, param_shape)
        new._num_events = self._num_events
        return self._finish_expand(new, batch_shape)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:
        """The normalized log-probabilities (log of the probs clamped to [eps, 1 - eps] when probs were
        given)."""
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        """The normalized probabilities (softmax of the logits when logits were given)."""
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        """batch_shape + (K,)."""
        return self._param.shape

    @property
    def mean(self) -> Tensor:
        """NaN: categories have no mean."""
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        """NaN: categories have no variance."""
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        """Category indices (int64) of shape sample_shape + batch_shape, from the default generator of
        the parameters' device."""
        shape = self._extended_shape(sample_shape)
        cdf = np.cumsum(self.probs.detach().cpu().numpy().astype(np.float64), axis=-1)

        def draw(generator: np.random.Generator) -> np.ndarray:
            scaled = generator.random(shape)[..., None] * cdf[..., -1:]
            # the count of cumulative probabilities at or below a uniform draw is the category drawn
            return np.minimum((scaled >= cdf).sum(-1), self._num_events - 1)

        return _draw_on_host(self._param, draw, dtype=np.int64)

    def log_prob(self, value: Tensor) -> Tensor:
        """log P(value), broadcasting ``value`` (integer categories) against the batch shape.

        Raises:
            ValueError: with validation, a value that is no tensor or outside {0, ..., K-1}.
        """
        if self._validate_args:
            self._validate_sample(value)
        index = value.long().unsqueeze(-1)
        shape = tuple(np.broadcast_shapes(tuple(index.shape), tuple(self.logits.shape)))
        return self.logits.expand(shape).gather(-1, index.expand(shape[:-1] + (1,))).squeeze(-1)

    def entropy(self) -> Tensor:
        """-sum(p log p) over the categories (0 log 0 counted as 0)."""
        logits = self.logits.clamp(min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(self._num_events, device=self._param.device).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values

"""``Binomial``: the number of successes in ``total_count`` Bernoulli trials."""

from __future__ import annotations

from typing import Any, Sequence


from zgrad.creation import arange
from zgrad.distributions import constraints
from zgrad.distributions._probs_or_logits import _BinaryProbsOrLogits, _expand_probs_or_logits
from zgrad.engine.grad_mode import no_grad
from zgrad.memory_formats import Size
from zgrad.ops.sampling import binomial
from zgrad.tensor import Tensor

__all__ = ["Binomial"]


def _clamp_by_zero(x: Tensor) -> Tensor:
    """max(x, 0) with gradient 1/2 at 0 (the mean of its one-sided derivatives)."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_BinaryProbsOrLogits):
    """P(k) = C(n, k) p**k (1 - p)**(n - k), n = ``total_count``, p = ``probs`` or sigmoid(``logits``)
    (exactly one given); ``total_count`` broadcasts with the probabilities and takes their dtype.

    Args:
        total_count: the number of trials (a nonnegative integer, or a tensor of them).
        probs: the success probability, in [0, 1].
        logits: the log-odds of success.
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: both or neither of probs/logits; with validation, a total_count that is no
            nonnegative integer, probs outside [0, 1], NaN logits.
    """

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count: Tensor | int = 1, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        (total_count,) = self._set_probs_or_logits(probs, logits, total_count)
        self.total_count = total_count.to(self._param.dtype)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Binomial:
        new = self._get_checked_instance(Binomial, _instance)
        new.total_count = self.total_count.expand(batch_shape)
        _expand_probs_or_logits(self, new, batch_shape)
        return self._finish_expand(new, batch_shape)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def param_shape(self) -> Size:
        return self._param.shape

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return binomial(self.total_count.expand(shape).to(self._param.dtype), self.probs.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        """log C(n, value) + value logit - n log(1 + exp(logit)), stable in the logits."""
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = (self.total_count + 1).lgamma()
        log_factorial_k = (value + 1).lgamma()
        log_factorial_nmk = (self.total_count - value + 1).lgamma()
        # n log(1 + exp(logits)) written so that exp never overflows
        normalizer = (self.total_count * _clamp_by_zero(self.logits)
                      + self.total_count * (-self.logits.abs()).exp().log1p() - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalizer

    def entropy(self) -> Tensor:
        """-sum_k P(k) log P(k) over the support.

        Raises:
            NotImplementedError: total_count differs across the batch.
        """
        self._homogeneous_total_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def _homogeneous_total_count(self, what: str) -> int:
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total_count

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """0..n along dimension 0.

        Raises:
            NotImplementedError: total_count differs across the batch.
        """
        total_count = self._homogeneous_total_count("enumerate_support")
        values = arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values

"""``Geometric``: the number of failures before the first success of Bernoulli trials."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.creation import empty, zeros_like
from zgrad.distributions import constraints
from zgrad.distributions._probs_or_logits import _BinaryProbsOrLogits, _expand_probs_or_logits
from zgrad.distributions.utils import broadcast_all
from zgrad.engine.grad_mode import no_grad
from zgrad.memory_formats import Size
from zgrad.ops.indexing import where
from zgrad.ops.loss_pointwise import binary_cross_entropy_with_logits
from zgrad.tensor import Tensor
from zgrad.type_info import finfo

__all__ = ["Geometric"]


class Geometric(_BinaryProbsOrLogits):
    """P(k) = (1 - p)**k p on k = 0, 1, ..., p = ``probs`` or sigmoid(``logits``) (exactly one given).
    Samples are floats of the parameter's dtype.

    Args:
        probs: the success probability, in (0, 1].
        logits: the log-odds of success.
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: both or neither of probs/logits; with validation, probs outside (0, 1] or NaN
            logits.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs: Tensor | float | None = None, logits: Tensor | float | None = None,
                 validate_args: bool | None = None) -> None:
        self._set_probs_or_logits(probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            positive = self.probs > 0
            if not bool(positive.all()):
                raise ValueError(f"Expected parameter probs ({type(self.probs).__name__} of shape "
                                 f"{tuple(self.probs.shape)}) of distribution {self!r} to be positive but found "
                                 f"invalid values:\n{self.probs.detach()[~positive]}")

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Geometric:
        new = self._get_checked_instance(Geometric, _instance)
        _expand_probs_or_logits(self, new, batch_shape)
        return self._finish_expand(new, batch_shape)

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        """floor(log(u) / log(1 - p)) for u ~ U(tiny, 1) (inverse-cdf sampling)."""
        with no_grad():
            u = empty(self._extended_shape(sample_shape), dtype=self.probs.dtype, device=self.probs.device)
            u = u.uniform_(finfo(self.probs.dtype).tiny, 1)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # p = 1 and k = 0: the 0 * log(0) term is 0
        probs = where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs

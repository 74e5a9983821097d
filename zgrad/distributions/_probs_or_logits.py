"""Distributions given by exactly one of ``probs`` and ``logits``: the check that one is given, the
expansion of whichever are set, and :class:`_BinaryProbsOrLogits`, the base of those with one
success probability (Bernoulli, Binomial, Geometric) that derives the other parameter lazily."""

from __future__ import annotations

from typing import Sequence

from zgrad.distributions.distribution import Distribution
from zgrad.distributions.utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits
from zgrad.tensor import Tensor

__all__: list[str] = []


def _check_probs_or_logits(probs: object, logits: object) -> None:
    """Check that exactly one of ``probs`` and ``logits`` is given (None is not given).

    Raises:
        ValueError: both or neither given.
    """
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


def _expand_probs_or_logits(source: Distribution, new: Distribution, param_shape: Sequence[int]) -> None:
    """Set on ``new`` each of ``probs`` and ``logits`` that ``source`` holds (given, or derived and
    read), expanded (not copied) to ``param_shape``; ``new._param`` is the last of them set."""
    for name in ("probs", "logits"):
        if name in source.__dict__:
            setattr(new, name, source.__dict__[name].expand(param_shape))
            new._param = new.__dict__[name]


class _BinaryProbsOrLogits(Distribution):
    """A distribution of one success probability per batch entry, given as ``probs`` or as ``logits``
    (its log-odds); the one not given is derived when first read."""

    _param: Tensor

    def _set_probs_or_logits(self, probs: Tensor | float | None, logits: Tensor | float | None,
                             *others: Tensor | float) -> tuple[Tensor, ...]:
        """Keep the given one of ``probs`` and ``logits`` (also as ``_param``), broadcast with ``others``
        (whose first tensor, if any, sets the dtype of numbers); returns ``others`` broadcast.

        Raises:
            ValueError: both or neither of ``probs`` and ``logits`` given.
        """
        _check_probs_or_logits(probs, logits)
        name, given = ("probs", probs) if probs is not None else ("logits", logits)
        *broadcast, self._param = broadcast_all(*others, given)
        setattr(self, name, self._param)
        return tuple(broadcast)

    @lazy_property
    def logits(self) -> Tensor:
        """The log-odds of success (of the probs clamped to [eps, 1 - eps] when probs were given)."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """The success probability (the sigmoid of the logits when logits were given)."""
        return logits_to_probs(self.logits, is_binary=True)

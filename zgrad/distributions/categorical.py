"""``Categorical``: a distribution over {0, ..., K-1}, given by probabilities or logits."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from zgrad import ops
from zgrad.distributions._support import as_tensor, constraint_error, extended_shape
from zgrad.engine.grad_mode import no_grad
from zgrad.random import numpy_generator
from zgrad.tensor import Tensor

__all__ = ["Categorical"]


class Categorical:
    """Categories 0..K-1 along the last dimension of ``probs`` or ``logits`` (exactly one given);
    the leading dimensions are the batch shape.

    ``probs`` need not sum to 1 (it is normalized); ``logits`` are normalized to log-probabilities.
    The other parameter is derived lazily as PyTorch does (softmax, or log of the clamped probs).
    ``log_prob`` and ``entropy`` are differentiable with respect to the given parameter.

    Raises:
        ValueError: both or neither of probs/logits, a 0-d parameter, negative or non-finite probs.
    """

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        self._validate = validate_args is not False
        if probs is not None:
            probs = as_tensor(probs)
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            if self._validate and not bool(np.all(np.isfinite(probs.numpy())) and np.all(probs.numpy() >= 0)):
                raise constraint_error("Categorical", "probs", probs, "Simplex()")
            self._probs, self._logits = probs / probs.sum(-1, keepdim=True), None
            param, self._given = probs, "probs"
        else:
            logits = as_tensor(logits)
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self._probs, self._logits = None, logits - logits.logsumexp(-1, keepdim=True)
            param, self._given = logits, "logits"
        self._num_events = param.shape[-1]
        self.batch_shape = tuple(param.shape[:-1])
        self.event_shape: tuple[int, ...] = ()

    @property
    def probs(self) -> Tensor:
        """The normalized probabilities (softmax of the logits when logits were given)."""
        if self._probs is None:
            self._probs = ops.softmax(self._logits, -1)
        return self._probs

    @property
    def logits(self) -> Tensor:
        """The normalized log-probabilities (log of probs clamped to [eps, 1 - eps] when probs were given)."""
        if self._logits is None:
            eps = float(np.finfo(self._probs.dtype).eps)
            self._logits = ops.log(ops.clamp(self._probs, eps, 1 - eps))
        return self._logits

    @property
    def param_shape(self) -> tuple[int, ...]:
        return (*self.batch_shape, self._num_events)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """Category indices (int64) of shape sample_shape + batch_shape, from the default generator."""
        shape = extended_shape(sample_shape, self.batch_shape)
        with no_grad():
            cdf = np.cumsum(np.asarray(self.probs.numpy(), dtype=np.float64), axis=-1)
        draws = numpy_generator().random(shape)[..., None] * cdf[..., -1:]
        # The count of cumulative probabilities at or below a uniform draw is the category drawn.
        indices = np.minimum((draws >= cdf).sum(-1), self._num_events - 1)
        return Tensor(indices.astype(np.int64))

    def log_prob(self, value: Any) -> Tensor:
        """log P(value), broadcasting ``value`` (integer categories) against the batch shape.

        Raises:
            ValueError: a value outside {0, ..., K-1}.
        """
        value = as_tensor(value)
        if self._validate:
            array = value.numpy()
            if array.size and (np.any(array != np.floor(array)) or array.min() < 0 or array.max() >= self._num_events):
                raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to "
                                 f"be within the support (IntegerInterval(lower_bound=0, upper_bound="
                                 f"{self._num_events - 1})) of the distribution {self!r}, but found invalid values:\n"
                                 f"{value}")
        index = ops.unsqueeze(value.long(), -1)
        shape = tuple(np.broadcast_shapes(index.shape, self.logits.shape))
        log_pmf = ops.expand(self.logits, shape)
        index = ops.expand(index, shape[:-1] + (1,))
        return ops.squeeze(ops.gather(log_pmf, -1, index), -1)

    def entropy(self) -> Tensor:
        """-sum(p log p) over the categories (0 log 0 counted as 0)."""
        min_real = float(np.finfo(self.logits.dtype).min)
        return -(ops.clamp(self.logits, min_real, None) * self.probs).sum(-1)

    def __repr__(self) -> str:
        return f"Categorical({self._given}: {self.param_shape})"

"""``Normal``: the Gaussian distribution N(loc, scale**2)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from zgrad import ops
from zgrad.distributions._support import as_tensor, constraint_error, extended_shape
from zgrad.engine.grad_mode import no_grad
from zgrad.random import numpy_generator
from zgrad.tensor import Tensor

__all__ = ["Normal"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class Normal:
    """N(loc, scale**2), with ``loc`` and ``scale`` (tensors or numbers) broadcast to the batch shape.

    ``rsample`` is reparameterized (loc + eps * scale, eps ~ N(0, 1) from the default generator),
    so gradients flow to loc and scale; ``log_prob`` and ``entropy`` are differentiable too.

    Raises:
        ValueError: a scale that is not positive (with ``validate_args``, the default).
    """

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        like = loc if isinstance(loc, Tensor) else scale
        loc, scale = as_tensor(loc, like), as_tensor(scale, like)
        self.batch_shape = tuple(np.broadcast_shapes(loc.shape, scale.shape))
        self.event_shape: tuple[int, ...] = ()
        self.loc = loc if loc.shape == self.batch_shape else ops.expand(loc, self.batch_shape)
        self.scale = scale if scale.shape == self.batch_shape else ops.expand(scale, self.batch_shape)
        if validate_args is not False and not bool(np.all(self.scale.numpy() > 0)):
            raise constraint_error(repr(self), "scale", self.scale, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale * self.scale

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """A reparameterized sample of shape sample_shape + batch_shape (differentiable)."""
        shape = extended_shape(sample_shape, self.batch_shape)
        eps = numpy_generator().standard_normal(shape, dtype=np.float32 if self.loc.dtype == np.float32 else
                                                  np.float64)
        return self.loc + Tensor(eps) * self.scale

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """A sample of shape sample_shape + batch_shape, outside the graph."""
        with no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: Any) -> Tensor:
        """-(value - loc)**2 / (2 scale**2) - log(scale) - log(sqrt(2 pi))."""
        value = as_tensor(value, self.loc)
        return -((value - self.loc) ** 2) / (2 * self.variance) - ops.log(self.scale) - _HALF_LOG_2PI

    def entropy(self) -> Tensor:
        """0.5 + 0.5 log(2 pi) + log(scale)."""
        return ops.log(self.scale) + (0.5 + _HALF_LOG_2PI)

    def __repr__(self) -> str:
        return f"Normal(loc: {self.loc.shape}, scale: {self.scale.shape})"

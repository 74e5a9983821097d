"""``ExponentialFamily``: distributions with density exp(<t(x), theta> - F(theta) + k(x)), whose
entropy (and KL divergence between two of one family) follow from the log normalizer F by
automatic differentiation (Bregman divergences)."""

from __future__ import annotations

from zgrad.autograd.gradients import grad
from zgrad.distributions.distribution import Distribution
from zgrad.tensor import Tensor

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """A distribution of an exponential family. A subclass gives ``_natural_params`` (theta),
    ``_log_normalizer(*theta)`` (F) and ``_mean_carrier_measure`` (E[k(x)]) to get :meth:`entropy`
    from them; most override ``entropy`` with a closed form."""

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        raise NotImplementedError

    def _log_normalizer(self, *natural_params: Tensor) -> Tensor:
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self) -> float:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """F(theta) - <theta, grad F(theta)> - E[k(x)], of shape batch_shape. As in PyTorch, theta is
        detached first: the result carries no gradient to the distribution's parameters."""
        params = [p.detach().requires_grad_() for p in self._natural_params]
        log_normalizer = self._log_normalizer(*params)
        gradients = grad(log_normalizer.sum(), params, create_graph=True)
        result = log_normalizer - self._mean_carrier_measure
        for param, gradient in zip(params, gradients):
            result = result - (param * gradient).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result

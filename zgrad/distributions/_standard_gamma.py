"""Gamma(concentration, 1) draws with implicit reparameterization gradients, for Gamma, Chi2,
Dirichlet, Beta and StudentT ``rsample``.

A draw x of Gamma(alpha, 1) is held at its CDF value F(x; alpha) while alpha moves, so
dx/dalpha = -(dF/dalpha) / (dF/dx). :func:`standard_gamma_grad` evaluates that derivative with
the approximations of Jankowiak and Obermeyer, "Pathwise Derivatives Beyond the
Reparameterization Trick" (ICML 2018), which PyTorch's ``_standard_gamma_grad`` uses too: a
Taylor series of the incomplete gamma function for small x, Rice's saddle point expansion for
large alpha, and a fitted bivariate rational function in (log(x / alpha), log(alpha)) elsewhere.
"""

from __future__ import annotations

import numpy as np

from zgrad.autograd.function import Function, FunctionCtx
from zgrad.distributions.utils import _draw_on_host
from zgrad.engine.grad_mode import no_grad
from zgrad.ops.indexing import where
from zgrad.tensor import Tensor
from zgrad.type_info import finfo

__all__ = ["standard_gamma", "standard_gamma_grad"]

_SERIES_BELOW_X = 0.8
_SADDLE_ABOVE_ALPHA = 8.0
_TAYLOR_TERMS = 5
# Rows: the coefficients' constant, linear and quadratic parts in u = log(x / alpha); columns: the
# numerator's then the denominator's cubic coefficients in v = log(alpha).
_RATIONAL = np.array([
    [0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084],
    [0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623],
    [0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
     -1.5247877e-07],
])


def _small_x(alpha: Tensor, x: Tensor) -> Tensor:
    """-(dP/dalpha) / p from the series gamma(alpha, x) = sum_n (-1)^n x^(alpha + n) / (n! (alpha + n))."""
    term, denom = 1.0, alpha
    series, series_dalpha = 1 / denom, 1 / (denom * denom)
    for n in range(1, _TAYLOR_TERMS + 1):
        term = term * (-x / n)
        denom = denom + 1
        series = series + term / denom
        series_dalpha = series_dalpha + term / (denom * denom)
    x_pow_alpha = x.pow(alpha)
    unnormalized_pdf = x.pow(alpha - 1) * (-x).exp()
    cdf_dalpha = (x.log() - alpha.digamma()) * x_pow_alpha * series - x_pow_alpha * series_dalpha
    result = -cdf_dalpha / unnormalized_pdf
    return where(result.isnan(), 0.0, result)


def _large_alpha(alpha: Tensor, x: Tensor) -> Tensor:
    """Rice's saddle point expansion; a polynomial near x = alpha, where the expansion is singular."""
    near = (0.9 * alpha <= x) & (x <= 1.1 * alpha)
    numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
    numer_2 = 1440 * alpha.pow(2) + 6 * x * (53 - 120 * x) - 65 * x.pow(2) / alpha + alpha * (107 + 3600 * x)
    polynomial = numer_1 * numer_2 / (1244160 * alpha.pow(4))
    denom = (8 * alpha).sqrt()
    term2 = denom / (alpha - x)
    term3 = (x - alpha - alpha * (x / alpha).log()).pow(-1.5)
    term23 = where(x < alpha, term2 - term3, term2 + term3)
    term1 = (x / alpha).log() * term23 - (2 / alpha).sqrt() * (alpha + x) / (alpha - x).pow(2)
    stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
    return where(near, polynomial, -stirling * x * term1 / denom)


def _rational(alpha: Tensor, x: Tensor) -> Tensor:
    u, v = (x / alpha).log(), alpha.log()
    coef = [_RATIONAL[0, i] + u * (_RATIONAL[1, i] + u * _RATIONAL[2, i]) for i in range(8)]
    numer = coef[0] + v * (coef[1] + v * (coef[2] + v * coef[3]))
    denom = coef[4] + v * (coef[5] + v * (coef[6] + v * coef[7]))
    return (numer / denom).exp()


def standard_gamma_grad(concentration: Tensor, sample: Tensor) -> Tensor:
    """dx/dalpha at fixed CDF for draws ``sample`` of Gamma(``concentration``, 1), computed in float64
    and returned in ``sample``'s dtype (no graph is recorded).

    Args:
        concentration: alpha, positive, broadcastable with ``sample``.
        sample: x, the draws.
    """
    # every branch is evaluated everywhere and the fitting one picked: the others may overflow
    with no_grad(), np.errstate(all="ignore"):
        alpha, x = concentration.double(), sample.double()
        result = where(x < _SERIES_BELOW_X, _small_x(alpha, x),
                       where(alpha > _SADDLE_ABOVE_ALPHA, _large_alpha(alpha, x), _rational(alpha, x)))
        return result.to(sample.dtype)


class _StandardGamma(Function):
    """Gamma(alpha, 1) draws from the default generator of alpha's device; backward is the implicit
    reparameterization gradient."""

    @staticmethod
    def forward(ctx: FunctionCtx, concentration: Tensor) -> Tensor:
        alpha = concentration.detach().cpu().numpy().astype(np.float64)
        # a draw that underflowed to 0 would give log(0) in log_prob and 0/0 in Dirichlet's normalization
        tiny = finfo(concentration.dtype).tiny
        sample = _draw_on_host(concentration, lambda generator: np.maximum(generator.standard_gamma(alpha), tiny))
        ctx.save_for_backward(concentration, sample)
        return sample

    @staticmethod
    def backward(ctx: FunctionCtx, grad_output: Tensor) -> Tensor:
        concentration, sample = ctx.saved_tensors
        return grad_output * standard_gamma_grad(concentration, sample)


def standard_gamma(concentration: Tensor) -> Tensor:
    """Gamma(``concentration``, 1) draws of ``concentration``'s shape, dtype and device from the default
    generator of that device; differentiable with respect to ``concentration`` (implicit
    reparameterization, see :func:`standard_gamma_grad`)."""
    return _StandardGamma.apply(concentration)


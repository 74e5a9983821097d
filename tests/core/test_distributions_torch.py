"""zgrad.distributions against torch.distributions in float64: every property and method torch
has (mean, mode, variance, stddev, entropy, perplexity, log_prob, cdf, icdf, enumerate_support,
shapes, support, repr) to 1e-12, the gradients of log_prob/cdf/entropy/moments, the error
messages, and the reparameterized samples' gradients (the same noise fed to both for the
location-scale families; PyTorch's implicit Gamma gradient at zgrad's draws)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import zgrad
from helpers import error_of, require_torch

TOL = dict(rtol=1e-12, atol=1e-12)
# zgrad's trigamma (the derivative of digamma) is exact to a few ulp; PyTorch's is off by ~1e-10
# relative, which shows in the gradients of the entropies built on digamma.
TRIGAMMA_TOL = dict(rtol=1e-8, atol=1e-9)

rng = np.random.default_rng(1234)


def real(*shape: int) -> np.ndarray:
    return rng.normal(size=shape)


def positive(*shape: int) -> np.ndarray:
    return rng.uniform(0.3, 2.5, shape)


def unit(*shape: int) -> np.ndarray:
    return rng.uniform(0.05, 0.95, shape)


def counts(high: int, *shape: int) -> np.ndarray:
    return rng.integers(0, high + 1, shape).astype(np.float64)


_A = rng.normal(size=(2, 3, 3))
COVARIANCE = _A @ _A.transpose(0, 2, 1) + 3 * np.eye(3)


@dataclass(frozen=True)
class Spec:
    """A distribution built by ``build(D, *params)`` (D: a distributions module), scored at ``value``
    (a function of the parameters, for supports that depend on them) and, when univariate, its icdf
    at ``probs``."""

    name: str
    build: Callable[..., Any]
    params: tuple[np.ndarray, ...]
    value: Callable[..., np.ndarray]
    digamma_entropy: bool = False

    def __str__(self) -> str:
        return self.name


def spec(name: str, build: Callable[..., Any], params: list[np.ndarray], value: Any, **kw: Any) -> Any:
    score = value if callable(value) else (lambda *_: value)
    return pytest.param(Spec(name, build, tuple(params), score, **kw), id=name)


def _transformed(D: Any, loc: Any, scale: Any) -> Any:
    T = D.transforms
    return D.TransformedDistribution(D.Normal(loc, scale), [T.AffineTransform(0.5, 2.0), T.SigmoidTransform()])


SPECS = [
    spec("normal", lambda D, a, b: D.Normal(a, b), [real(3), positive(2, 3)], real(4, 2, 3)),
    spec("bernoulli_probs", lambda D, p: D.Bernoulli(probs=p), [unit(3)], counts(1, 5, 3)),
    spec("bernoulli_logits", lambda D, z: D.Bernoulli(logits=z), [real(3)], counts(1, 5, 3)),
    spec("uniform", lambda D, a, w: D.Uniform(a, a + w), [real(3), positive(3)],
         lambda a, w: a + w * unit(4, 3)),
    spec("exponential", lambda D, r: D.Exponential(r), [positive(3)], positive(4, 3)),
    spec("laplace", lambda D, a, b: D.Laplace(a, b), [real(3), positive(3)], real(4, 3)),
    spec("cauchy", lambda D, a, b: D.Cauchy(a, b), [real(3), positive(3)], real(4, 3)),
    spec("beta", lambda D, a, b: D.Beta(a, b), [positive(3), positive(3)], unit(4, 3), digamma_entropy=True),
    spec("gamma", lambda D, a, b: D.Gamma(a, b), [positive(3), positive(3)], positive(4, 3), digamma_entropy=True),
    spec("chi2", lambda D, k: D.Chi2(k), [positive(3)], positive(4, 3), digamma_entropy=True),
    spec("dirichlet", lambda D, a: D.Dirichlet(a), [positive(2, 4)], rng.dirichlet(np.ones(4), (5, 2)),
         digamma_entropy=True),
    spec("poisson", lambda D, r: D.Poisson(r), [positive(3)], counts(6, 4, 3)),
    spec("binomial_probs", lambda D, p: D.Binomial(10, probs=p), [unit(3)], counts(10, 4, 3)),
    spec("binomial_logits", lambda D, z: D.Binomial(7, logits=z), [real(3)], counts(7, 4, 3)),
    spec("geometric_probs", lambda D, p: D.Geometric(probs=p), [unit(3)], counts(6, 4, 3)),
    spec("geometric_logits", lambda D, z: D.Geometric(logits=z), [real(3)], counts(6, 4, 3)),
    spec("categorical", lambda D, p: D.Categorical(probs=p), [positive(2, 4)], rng.integers(0, 4, (5, 2))),
    spec("one_hot_categorical", lambda D, z: D.OneHotCategorical(logits=z), [real(2, 4)],
         np.eye(4)[rng.integers(0, 4, (5, 2))]),
    spec("mvn_scale_tril", lambda D, m, s: D.MultivariateNormal(m, scale_tril=s),
         [real(3), np.linalg.cholesky(COVARIANCE)], real(4, 2, 3)),
    spec("mvn_covariance", lambda D, m, c: D.MultivariateNormal(m, covariance_matrix=c), [real(2, 3), COVARIANCE],
         real(4, 2, 3)),
    spec("mvn_precision", lambda D, m, p: D.MultivariateNormal(m, precision_matrix=p), [real(3), COVARIANCE],
         real(4, 2, 3)),
    spec("independent", lambda D, a, b: D.Independent(D.Normal(a, b), 1), [real(2, 3), positive(2, 3)],
         real(4, 2, 3)),
    spec("log_normal", lambda D, a, b: D.LogNormal(a, b), [real(3), positive(3)], positive(4, 3)),
    spec("half_normal", lambda D, b: D.HalfNormal(b), [positive(3)], positive(4, 3)),
    spec("student_t", lambda D, k, a, b: D.StudentT(k, a, b), [2 * positive(3), real(3), positive(3)], real(4, 3),
         digamma_entropy=True),
    spec("transformed", _transformed, [real(3), positive(3)], unit(4, 3)),
    spec("tanh_transformed",
         lambda D, a, b: D.TransformedDistribution(D.Normal(a, b), D.transforms.TanhTransform()),
         [real(3), positive(3)], 2 * unit(4, 3) - 1),
]

METHODS = ["mean", "mode", "variance", "stddev", "entropy", "perplexity", "log_prob", "cdf", "icdf",
           "enumerate_support", "enumerate_support_unexpanded"]


def _evaluate(dist: Any, lib: Any, method: str, value: np.ndarray, probs: np.ndarray) -> Any:
    if method in ("log_prob", "cdf"):
        return getattr(dist, method)(lib.tensor(value))
    if method == "icdf":
        return dist.icdf(lib.tensor(probs))
    if method in ("entropy", "perplexity", "enumerate_support"):
        return getattr(dist, method)()
    if method == "enumerate_support_unexpanded":
        return dist.enumerate_support(expand=False)
    return getattr(dist, method)


def _pair(s: Spec, requires_grad: bool = False) -> tuple[Any, Any, list[Any], list[Any]]:
    torch = require_torch()
    zs = [zgrad.tensor(p, requires_grad=requires_grad) for p in s.params]
    ts = [torch.tensor(p, requires_grad=requires_grad) for p in s.params]
    return s.build(zgrad.distributions, *zs), s.build(torch.distributions, *ts), zs, ts


def _assert_same(z: Any, t: Any, **tol: float) -> None:
    out, ref = z.detach().numpy(), t.detach().numpy()
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, ref.shape, out.dtype, ref.dtype)
    np.testing.assert_allclose(out, ref, equal_nan=True, **(tol or TOL))


@pytest.mark.torch
@pytest.mark.parametrize("s", SPECS)
def test_values_match_torch(s: Spec):
    """What torch computes, zgrad computes the same (to 1e-12); what torch does not implement, zgrad
    refuses with the same exception type."""
    torch = require_torch()
    zd, td, _, _ = _pair(s)
    value = s.value(*s.params)
    probs = unit(4, *td.batch_shape) if not td.event_shape else unit(1)
    compared = 0
    for method in METHODS:
        try:
            ref = _evaluate(td, torch, method, value, probs)
        except NotImplementedError:
            with pytest.raises(NotImplementedError):
                _evaluate(zd, zgrad, method, value, probs)
            continue
        _assert_same(_evaluate(zd, zgrad, method, value, probs), ref)
        compared += 1
    assert compared >= 3
    assert tuple(zd.batch_shape) == tuple(td.batch_shape) and tuple(zd.event_shape) == tuple(td.event_shape)
    assert (zd.has_rsample, zd.has_enumerate_support) == (td.has_rsample, td.has_enumerate_support)
    assert repr(zd.support).replace("dtype=", "dtype=torch.") == repr(td.support)
    assert repr(zd) == repr(td).replace("torch.Size", "zgrad.Size")


@pytest.mark.torch
@pytest.mark.parametrize("s", SPECS)
@pytest.mark.parametrize("method", ["log_prob", "cdf", "entropy", "mean", "variance"])
def test_gradients_match_torch(s: Spec, method: str):
    torch = require_torch()
    zd, td, zs, ts = _pair(s, requires_grad=True)
    value = s.value(*s.params)
    try:
        ref = _evaluate(td, torch, method, value, None)
    except NotImplementedError:
        pytest.skip(f"torch has no {method} for {s}")
    if not ref.requires_grad:
        pytest.skip(f"{s}.{method} does not depend on the parameters")
    upstream = np.random.default_rng(0).normal(size=tuple(ref.shape))
    out = _evaluate(zd, zgrad, method, value, None)
    try:
        (ref * torch.tensor(upstream)).sum().backward()
    except NotImplementedError:  # torch's gammainc has no derivative in its first argument; neither has zgrad's
        with pytest.raises(NotImplementedError):
            (out * zgrad.tensor(upstream)).sum().backward()
        return
    (out * zgrad.tensor(upstream)).sum().backward()
    tol = TRIGAMMA_TOL if s.digamma_entropy and method == "entropy" else dict(rtol=1e-10, atol=1e-12)
    for z, t in zip(zs, ts):
        assert (z.grad is None) == (t.grad is None)
        if t.grad is not None:
            np.testing.assert_allclose(z.grad.numpy(), t.grad.numpy(), **tol)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtypes_follow_the_parameters(dtype):
    torch = require_torch()
    cases = [lambda D, L: D.Normal(L.zeros(2, dtype=getattr(L, dtype)), 1.0),
             lambda D, L: D.Gamma(L.ones(2, dtype=getattr(L, dtype)), 2.0),
             lambda D, L: D.Bernoulli(logits=L.zeros(2, dtype=getattr(L, dtype)))]
    for build in cases:
        zd, td = build(zgrad.distributions, zgrad), build(torch.distributions, torch)
        assert str(zd.sample((3,)).dtype) == str(td.sample((3,)).dtype).replace("torch.", "")
        assert str(zd.entropy().dtype) == str(td.entropy().dtype).replace("torch.", "")
    assert str(zgrad.distributions.Normal(0.0, 1.0).mean.dtype) == "float32"


ERRORS = [
    lambda L: L.distributions.Normal(L.zeros(2), L.tensor([1.0, 0.0])),
    lambda L: L.distributions.Normal(L.tensor([math.nan, 0.0]), L.ones(2)),
    lambda L: L.distributions.Normal(0.0, -1.0),
    lambda L: L.distributions.Normal(L.zeros(2), L.ones(2)).log_prob(L.zeros(3)),
    lambda L: L.distributions.Normal(L.zeros(2), L.ones(2)).log_prob(0.5),
    lambda L: L.distributions.Gamma(L.ones(2), L.ones(2)).log_prob(L.tensor([-1.0, 1.0])),
    lambda L: L.distributions.Bernoulli(L.tensor([0.5, 1.5])),
    lambda L: L.distributions.Bernoulli(L.tensor([0.5, 0.5])).log_prob(L.tensor([0.5, 1.0])),
    lambda L: L.distributions.Bernoulli(),
    lambda L: L.distributions.Categorical(logits=L.zeros(3)).log_prob(L.tensor([3])),
    lambda L: L.distributions.Categorical(probs=L.tensor([0.5, -0.1])),
    lambda L: L.distributions.Uniform(L.tensor([0.0, 1.0]), L.tensor([1.0, 1.0])),
    lambda L: L.distributions.Uniform(0.0, 1.0).log_prob(L.tensor(2.0)),
    lambda L: L.distributions.Dirichlet(L.tensor([1.0, -1.0])),
    lambda L: L.distributions.Dirichlet(L.tensor(1.0)),
    lambda L: L.distributions.Dirichlet(L.ones(3)).log_prob(L.ones(3)),
    lambda L: L.distributions.Dirichlet(L.ones(3)).log_prob(L.ones(2)),
    lambda L: L.distributions.Beta(L.tensor([1.0, -1.0]), L.ones(2)),
    lambda L: L.distributions.Geometric(L.tensor([0.5, 0.0])),
    lambda L: L.distributions.Binomial(L.tensor([2.5]), L.tensor([0.5])),
    lambda L: L.distributions.Binomial(10, L.tensor([0.5])).log_prob(L.tensor([11.0])),
    lambda L: L.distributions.Binomial(L.tensor([2.0, 3.0]), L.tensor([0.5, 0.5])).entropy(),
    lambda L: L.distributions.Poisson(L.tensor([-1.0])),
    lambda L: L.distributions.MultivariateNormal(L.zeros(2), covariance_matrix=L.tensor([[1.0, 2.0], [2.0, 1.0]])),
    lambda L: L.distributions.MultivariateNormal(L.zeros(2), covariance_matrix=L.tensor([[1.0, 0.5], [0.4, 1.0]])),
    lambda L: L.distributions.MultivariateNormal(L.zeros(2), scale_tril=L.tensor([[1.0, 0.5], [0.0, 1.0]])),
    lambda L: L.distributions.MultivariateNormal(L.zeros(2)),
    lambda L: L.distributions.MultivariateNormal(L.tensor(0.0), covariance_matrix=L.eye(2)),
    lambda L: L.distributions.MultivariateNormal(L.zeros(2), scale_tril=L.zeros(2)),
    lambda L: L.distributions.Independent(L.distributions.Normal(L.zeros(2), L.ones(2)), 2),
    lambda L: L.distributions.Independent(L.distributions.Normal(L.zeros(2), L.ones(2)), 1).log_prob(L.zeros(3)),
    lambda L: L.distributions.Independent(L.distributions.Bernoulli(L.ones(2) / 2), 1).enumerate_support(),
    lambda L: L.distributions.kl_divergence(L.distributions.Normal(0.0, 1.0), L.distributions.Cauchy(0.0, 1.0)),
    lambda L: L.distributions.kl_divergence(L.distributions.Binomial(2, L.tensor([0.5])),
                                            L.distributions.Binomial(3, L.tensor([0.5]))),
    lambda L: L.distributions.StudentT(L.tensor([-1.0])),
    lambda L: L.distributions.TransformedDistribution(L.distributions.Normal(0.0, 1.0), 3),
    lambda L: L.distributions.transforms.Transform(cache_size=2),
    lambda L: L.distributions.constraints.dependent.check(L.ones(1)),
    lambda L: L.distributions.Normal(0.0, 1.0).expand((2,)).log_prob(L.zeros(3)),
    lambda L: L.distributions.Categorical(probs=L.ones(2)).expand((3,)).log_prob(L.tensor([2])),
    lambda L: L.distributions.LogNormal(0.0, 1.0).log_prob(L.tensor(-1.0)),
    lambda L: L.distributions.OneHotCategorical(L.ones(3)).log_prob(L.tensor([1.0, 1.0, 0.0])),
]


@pytest.mark.torch
@pytest.mark.parametrize("fn", ERRORS, ids=[f"error{i}" for i in range(len(ERRORS))])
def test_errors_match_torch(fn):
    torch = require_torch()
    expected = error_of(fn, torch)
    assert expected is not None
    assert error_of(fn, zgrad) == (expected[0], expected[1].replace("dtype=torch.", "dtype="))


@pytest.mark.torch
def test_standard_gamma_grad_matches_torch():
    torch = require_torch()
    from zgrad.distributions._standard_gamma import standard_gamma_grad
    gen = np.random.default_rng(5)
    alpha = np.concatenate([gen.uniform(0.01, 3, 300), gen.uniform(3, 30, 300), gen.uniform(30, 500, 300)])
    # draws of every regime: small x (series), alpha > 8 near and far from x = alpha (saddle point), the rest
    x = np.concatenate([gen.standard_gamma(alpha), alpha * gen.uniform(0.85, 1.15, alpha.size)])
    alpha = np.concatenate([alpha, alpha])
    for dtype in (np.float64, np.float32):
        out = standard_gamma_grad(zgrad.tensor(alpha.astype(dtype)), zgrad.tensor(x.astype(dtype))).numpy()
        ref = torch._standard_gamma_grad(torch.tensor(alpha.astype(dtype)), torch.tensor(x.astype(dtype))).numpy()
        assert out.dtype == dtype
        np.testing.assert_allclose(out, ref, rtol=1e-12 if dtype == np.float64 else 1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("family", ["gamma", "chi2"])
def test_gamma_rsample_gradient_is_torchs_implicit_gradient(family):
    torch = require_torch()
    zgrad.manual_seed(0)
    concentration = np.array([0.2, 1.5, 4.0, 30.0])
    rate = np.array([0.5, 1.0, 2.0, 3.0])
    conc = zgrad.tensor(concentration, requires_grad=True)
    if family == "gamma":
        rate_t = zgrad.tensor(rate, requires_grad=True)
        value = zgrad.distributions.Gamma(conc, rate_t).rsample((50,))
    else:
        rate = np.full(4, 0.5)
        value = zgrad.distributions.Chi2(conc).rsample((50,))
    value.sum().backward()
    standard = torch.tensor(value.detach().numpy() * rate)
    alpha = concentration if family == "gamma" else 0.5 * concentration
    implicit = torch._standard_gamma_grad(torch.tensor(alpha).expand_as(standard), standard).numpy()
    if family == "gamma":
        np.testing.assert_allclose(conc.grad.numpy(), (implicit / rate).sum(0), rtol=1e-10)
        np.testing.assert_allclose(rate_t.grad.numpy(), (-value.detach().numpy() / rate).sum(0), rtol=1e-12)
    else:  # Chi2(df) = Gamma(df / 2, 1 / 2): d value / d df = (1 / rate) implicit (1 / 2)
        np.testing.assert_allclose(conc.grad.numpy(), implicit.sum(0), rtol=1e-10)


NOISE_SPECS = [
    pytest.param("normal", lambda D, a, b: D.Normal(a, b), [real(3), positive(2, 3)], id="normal"),
    pytest.param("log_normal", lambda D, a, b: D.LogNormal(a, b), [real(3), positive(3)], id="log_normal"),
    pytest.param("multivariate_normal", lambda D, m, s: D.MultivariateNormal(m, scale_tril=s),
                 [real(2, 3), np.linalg.cholesky(COVARIANCE)], id="mvn_scale_tril"),
    pytest.param("multivariate_normal", lambda D, m, c: D.MultivariateNormal(m, covariance_matrix=c),
                 [real(3), COVARIANCE], id="mvn_covariance"),
]


@pytest.mark.torch
@pytest.mark.parametrize("module, build, params", NOISE_SPECS)
def test_rsample_matches_torch_given_the_same_noise(module, build, params, monkeypatch):
    torch = require_torch()
    import importlib
    noise = {}

    def fixed(lib: Any) -> Callable[..., Any]:
        def standard_normal(shape: Any, dtype: Any, device: Any) -> Any:
            key = tuple(shape)
            noise.setdefault(key, np.random.default_rng(7).normal(size=key))
            return lib.tensor(noise[key])
        return standard_normal

    target = "normal" if module == "log_normal" else module
    monkeypatch.setattr(importlib.import_module(f"zgrad.distributions.{target}"), "_standard_normal", fixed(zgrad))
    monkeypatch.setattr(importlib.import_module(f"torch.distributions.{target}"), "_standard_normal", fixed(torch))
    zs = [zgrad.tensor(p, requires_grad=True) for p in params]
    ts = [torch.tensor(p, requires_grad=True) for p in params]
    out = build(zgrad.distributions, *zs).rsample((5,))
    ref = build(torch.distributions, *ts).rsample((5,))
    _assert_same(out, ref)
    upstream = np.random.default_rng(3).normal(size=tuple(ref.shape))
    (out * zgrad.tensor(upstream)).sum().backward()
    (ref * torch.tensor(upstream)).sum().backward()
    for z, t in zip(zs, ts):
        np.testing.assert_allclose(z.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)

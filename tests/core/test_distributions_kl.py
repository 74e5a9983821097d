"""zgrad.distributions.kl: every registered closed form against a Monte Carlo estimate
E_p[log p(x) - log q(x)] (no torch), the infinite cases, ``register_kl``'s dispatch (closest
superclass pair, ambiguity warning, refusals), and, where torch is installed, every pair of
distributions against torch.distributions.kl_divergence to 1e-12."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from helpers import require_torch
from zgrad import distributions as D
from zgrad.distributions import kl_divergence, register_kl

N_DRAWS = 40000


def f64(values):
    return zgrad.tensor(np.asarray(values, dtype=np.float64))


def make(cls, *params):
    """A factory of ``cls`` with float64 tensors of ``params``."""
    return lambda: cls(*(f64(p) for p in params))


_L = np.array([[1.5, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.4, 0.2, 1.1]])

PAIRS = [
    pytest.param(make(D.Normal, [0.0, 1.0], [1.0, 0.5]), make(D.Normal, [0.5, 0.0], [2.0, 1.0]),
                 id="normal_normal"),
    pytest.param(make(D.Normal, [0.0, 1.0], [1.0, 0.5]), make(D.Laplace, [0.5, 0.0], [2.0, 1.0]),
                 id="normal_laplace"),
    pytest.param(make(D.Laplace, [0.0, 1.0], [1.0, 0.5]), make(D.Laplace, [0.5, 0.0], [2.0, 1.0]),
                 id="laplace_laplace"),
    pytest.param(make(D.Laplace, [0.0, 1.0], [1.0, 0.5]), make(D.Normal, [0.5, 0.0], [2.0, 1.0]),
                 id="laplace_normal"),
    pytest.param(make(D.Cauchy, [0.0, 1.0], [1.0, 0.5]), make(D.Cauchy, [0.5, 0.0], [2.0, 1.0]),
                 id="cauchy_cauchy"),
    pytest.param(make(D.Gamma, [0.8, 3.0], [1.0, 2.0]), make(D.Gamma, [2.0, 1.5], [0.5, 1.0]),
                 id="gamma_gamma"),
    pytest.param(make(D.Chi2, [3.0, 5.0]), make(D.Chi2, [4.0, 2.5]), id="chi2_chi2"),
    pytest.param(make(D.Gamma, [0.8, 3.0], [1.0, 2.0]), make(D.Exponential, [2.0, 0.5]),
                 id="gamma_exponential"),
    pytest.param(make(D.Gamma, [0.8, 3.0], [1.0, 2.0]), make(D.Normal, [0.5, 1.0], [2.0, 1.0]),
                 id="gamma_normal"),
    pytest.param(make(D.Exponential, [1.0, 2.0]), make(D.Exponential, [2.0, 0.5]),
                 id="exponential_exponential"),
    pytest.param(make(D.Exponential, [1.0, 2.0]), make(D.Gamma, [2.0, 1.5], [0.5, 1.0]),
                 id="exponential_gamma"),
    pytest.param(make(D.Exponential, [1.0, 2.0]), make(D.Normal, [0.5, 1.0], [2.0, 1.0]),
                 id="exponential_normal"),
    pytest.param(make(D.Beta, [0.8, 3.0], [1.5, 2.0]), make(D.Beta, [2.0, 1.5], [0.5, 1.0]),
                 id="beta_beta"),
    pytest.param(make(D.Beta, [0.8, 3.0], [1.5, 2.0]), make(D.Uniform, [-1.0, 0.0], [1.0, 2.0]),
                 id="beta_uniform"),
    pytest.param(make(D.Beta, [0.8, 3.0], [1.5, 2.0]), make(D.Normal, [0.5, 1.0], [2.0, 1.0]),
                 id="beta_normal"),
    pytest.param(make(D.Beta, [0.8, 3.0], [1.5, 2.0]), make(D.Gamma, [2.0, 1.5], [0.5, 1.0]),
                 id="beta_gamma"),
    pytest.param(make(D.Beta, [0.8, 3.0], [1.5, 2.0]), make(D.Exponential, [2.0, 0.5]),
                 id="beta_exponential"),
    pytest.param(make(D.Uniform, [0.0, 1.0], [1.0, 2.0]), make(D.Uniform, [-1.0, 0.5], [1.5, 4.0]),
                 id="uniform_uniform"),
    pytest.param(make(D.Uniform, [0.0, 1.0], [1.0, 2.0]), make(D.Normal, [0.5, 1.0], [2.0, 1.0]),
                 id="uniform_normal"),
    pytest.param(make(D.Uniform, [0.1, 0.2], [0.5, 0.9]), make(D.Beta, [2.0, 1.5], [0.5, 1.0]),
                 id="uniform_beta"),
    pytest.param(make(D.Uniform, [0.1, 1.0], [0.5, 3.0]), make(D.Gamma, [2.0, 1.5], [0.5, 1.0]),
                 id="uniform_gamma"),
    pytest.param(make(D.Uniform, [0.1, 1.0], [0.5, 3.0]), make(D.Exponential, [2.0, 0.5]),
                 id="uniform_exponential"),
    pytest.param(make(D.Bernoulli, [0.3, 0.8]), make(D.Bernoulli, [0.6, 0.1]), id="bernoulli_bernoulli"),
    pytest.param(make(D.Bernoulli, [0.3, 0.8]), make(D.Poisson, [0.6, 2.0]), id="bernoulli_poisson"),
    pytest.param(make(D.Poisson, [0.7, 4.0]), make(D.Poisson, [1.5, 3.0]), id="poisson_poisson"),
    pytest.param(lambda: D.Binomial(6, f64([0.3, 0.8])), lambda: D.Binomial(6, f64([0.5, 0.6])),
                 id="binomial_binomial"),
    pytest.param(make(D.Geometric, [0.3, 0.8]), make(D.Geometric, [0.5, 0.6]), id="geometric_geometric"),
    pytest.param(lambda: D.Categorical(f64([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])),
                 lambda: D.Categorical(logits=f64([[0.0, 1.0, -1.0], [0.5, 0.5, 0.0]])), id="categorical_categorical"),
    pytest.param(make(D.OneHotCategorical, [0.2, 0.3, 0.5]), make(D.OneHotCategorical, [0.4, 0.4, 0.2]),
                 id="one_hot_one_hot"),
    pytest.param(lambda: D.Dirichlet(f64([[0.8, 2.0, 3.0]])), lambda: D.Dirichlet(f64([[1.5, 1.0, 0.7]])),
                 id="dirichlet_dirichlet"),
    pytest.param(lambda: D.MultivariateNormal(f64([0.0, 1.0, -1.0]), scale_tril=f64(_L)),
                 lambda: D.MultivariateNormal(f64([[0.5, 0.0, 0.0]]), covariance_matrix=f64(np.eye(3) * 2)),
                 id="mvn_mvn"),
    pytest.param(lambda: D.Independent(D.Normal(f64([0.0, 1.0]), f64([1.0, 0.5])), 1),
                 lambda: D.Independent(D.Normal(f64([0.5, 0.0]), f64([2.0, 1.0])), 1), id="independent"),
    pytest.param(make(D.LogNormal, [0.0, 1.0], [1.0, 0.5]), make(D.LogNormal, [0.5, 0.0], [2.0, 1.0]),
                 id="log_normal_log_normal"),
    pytest.param(make(D.HalfNormal, [1.0, 0.5]), make(D.HalfNormal, [2.0, 1.0]), id="half_normal"),
]


@pytest.mark.parametrize("make_p, make_q", PAIRS)
def test_kl_matches_monte_carlo(make_p, make_q):
    zgrad.manual_seed(0)
    p, q = make_p(), make_q()
    kl = kl_divergence(p, q)
    assert kl.shape == zgrad.broadcast_shapes(p.batch_shape, q.batch_shape)
    x = p.sample((N_DRAWS,))
    log_ratio = (p.log_prob(x) - q.log_prob(x)).numpy()
    standard_error = log_ratio.std(0) / np.sqrt(N_DRAWS)
    np.testing.assert_array_less(np.abs(log_ratio.mean(0) - kl.numpy()), 5 * standard_error + 1e-9)


def test_kl_is_infinite_outside_the_support():
    assert np.isinf(kl_divergence(D.Normal(0.0, 1.0), D.Uniform(-1.0, 1.0)).item())
    assert np.isinf(kl_divergence(D.Exponential(1.0), D.Beta(1.0, 1.0)).item())
    narrower = kl_divergence(D.Uniform(f64([0.0, 0.0]), f64([1.0, 1.0])), D.Uniform(f64([0.0, 0.5]), f64([2.0, 2.0])))
    assert np.isfinite(narrower[0].item()) and np.isinf(narrower[1].item())
    assert np.isinf(kl_divergence(D.Bernoulli(f64([0.5])), D.Bernoulli(f64([0.0]))).item())
    assert kl_divergence(D.Bernoulli(f64([0.0])), D.Bernoulli(f64([0.0]))).item() == 0.0
    assert np.isinf(kl_divergence(D.Binomial(3, f64([0.5])), D.Binomial(2, f64([0.5]))).item())
    assert kl_divergence(D.Normal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 0.0


def test_kl_is_differentiable():
    loc = zgrad.tensor([0.5], dtype=zgrad.float64, requires_grad=True)
    kl_divergence(D.Normal(loc, 1.0), D.Normal(0.0, 1.0)).sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [0.5])  # d/dmu mu**2 / 2


def test_register_kl_dispatch():
    class MyNormal(D.Normal):
        pass

    class OtherNormal(D.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), D.Normal(1.0, 1.0)
    assert kl_divergence(p, q).item() == pytest.approx(0.5)  # the (Normal, Normal) form reaches subclasses
    try:
        @register_kl(MyNormal, D.Normal)
        def _mine(p, q):
            return zgrad.tensor(42.0)

        assert kl_divergence(p, q).item() == 42.0  # the closer pair wins
        assert kl_divergence(D.Normal(0.0, 1.0), q).item() == pytest.approx(0.5)

        @register_kl(D.Normal, OtherNormal)
        def _other(p, q):
            return zgrad.tensor(7.0)

        with pytest.warns(RuntimeWarning, match=r"Ambiguous kl_divergence\(MyNormal, OtherNormal\). Please "
                                                r"register_kl\(MyNormal, OtherNormal\)"):
            assert kl_divergence(p, OtherNormal(0.0, 1.0)).item() == 42.0
    finally:
        from zgrad.distributions import _kl_registry
        for pair in ((MyNormal, D.Normal), (D.Normal, OtherNormal)):
            _kl_registry._REGISTRY.pop(pair, None)
        _kl_registry._RESOLVED.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kl_divergence(p, q).item() == pytest.approx(0.5)


def test_register_kl_and_kl_divergence_refusals():
    with pytest.raises(TypeError, match="Expected type_p to be a Distribution subclass but got <class 'int'>"):
        register_kl(int, D.Normal)
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q type "
                                                  "Cauchy"):
        kl_divergence(D.Normal(0.0, 1.0), D.Cauchy(0.0, 1.0))
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        kl_divergence(D.Binomial(2, f64([0.5])), D.Binomial(3, f64([0.5])))
    with pytest.raises(NotImplementedError):
        kl_divergence(D.Independent(D.Normal(zgrad.zeros(2, 2), 1.0), 1),
                      D.Independent(D.Normal(zgrad.zeros(2, 2), 1.0), 2))
    with pytest.raises(ValueError, match="different event shapes"):
        kl_divergence(D.MultivariateNormal(zgrad.zeros(2), scale_tril=zgrad.eye(2)),
                      D.MultivariateNormal(zgrad.zeros(3), scale_tril=zgrad.eye(3)))


def _all_kinds(D, P, rng):
    def positive(*s):
        return P(rng.uniform(0.3, 2.5, s))

    def unit(*s):
        return P(rng.uniform(0.05, 0.95, s))

    a = rng.normal(size=(2, 3, 3))
    return {
        "Normal": lambda: D.Normal(P(rng.normal(size=3)), positive(3)),
        "Bernoulli": lambda: D.Bernoulli(unit(3)),
        "Uniform": lambda: D.Uniform(unit(3) * 0.4, 0.5 + unit(3) * 0.4),
        "UniformWide": lambda: D.Uniform(-unit(3), 1 + unit(3)),
        "Exponential": lambda: D.Exponential(positive(3)),
        "Laplace": lambda: D.Laplace(P(rng.normal(size=3)), positive(3)),
        "Cauchy": lambda: D.Cauchy(P(rng.normal(size=3)), positive(3)),
        "Beta": lambda: D.Beta(positive(3), positive(3)),
        "Gamma": lambda: D.Gamma(positive(3), positive(3)),
        "Chi2": lambda: D.Chi2(positive(3)),
        "Dirichlet": lambda: D.Dirichlet(positive(3)),
        "Poisson": lambda: D.Poisson(positive(3)),
        "Binomial": lambda: D.Binomial(P(np.array([5.0, 7.0, 7.0])), unit(3)),
        "Geometric": lambda: D.Geometric(unit(3)),
        "Categorical": lambda: D.Categorical(positive(3)),
        "OneHotCategorical": lambda: D.OneHotCategorical(positive(3)),
        "MVN": lambda: D.MultivariateNormal(P(rng.normal(size=(2, 3))),
                                            covariance_matrix=P(a @ a.transpose(0, 2, 1) + 3 * np.eye(3))),
        "Independent": lambda: D.Independent(D.Normal(P(rng.normal(size=3)), positive(3)), 1),
        "LogNormal": lambda: D.LogNormal(P(rng.normal(size=3)), positive(3)),
        "HalfNormal": lambda: D.HalfNormal(positive(3)),
    }


KINDS = list(_all_kinds(D, f64, np.random.default_rng(0)))


@pytest.mark.torch
@pytest.mark.parametrize("kind_p", KINDS)
def test_every_pair_matches_torch(kind_p):
    """For p of ``kind_p`` and q of every kind: zgrad's KL equals torch's (to 1e-12), or both refuse
    with the same exception type."""
    torch = require_torch()
    compared = 0
    for kind_q in KINDS:
        seed = 100 * KINDS.index(kind_p) + KINDS.index(kind_q)
        zgrad_kinds = _all_kinds(D, f64, np.random.default_rng(seed))
        torch_kinds = _all_kinds(torch.distributions, torch.tensor, np.random.default_rng(seed))
        zp, zq = zgrad_kinds[kind_p](), zgrad_kinds[kind_q]()
        tp, tq = torch_kinds[kind_p](), torch_kinds[kind_q]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's UserWarnings of ambiguous pairs it registers
            try:
                ref = torch.distributions.kl_divergence(tp, tq)
            except (NotImplementedError, ValueError) as error:
                with pytest.raises(type(error)):
                    kl_divergence(zp, zq)
                continue
        out = kl_divergence(zp, zq)
        assert tuple(out.shape) == tuple(ref.shape), (kind_p, kind_q)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-11, atol=1e-12,
                                   err_msg=f"KL({kind_p} || {kind_q})")
        compared += 1
    assert compared >= 1

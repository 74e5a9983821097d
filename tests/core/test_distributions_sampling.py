"""zgrad.distributions sampling, without torch: sample means and variances against each
distribution's moments, supports, dtypes and shapes, ``zgrad.manual_seed`` reproducibility, the
gradients of ``rsample`` (exact for the location-scale families; unbiased for the implicit Gamma,
Beta and Dirichlet gradients: the mean of d sample / d parameter over many draws equals
d mean / d parameter), and CUDA tensors (Numba's simulator here) against the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda
from zgrad import distributions as D

N_DRAWS = 40000


def f64(values):
    return zgrad.tensor(np.asarray(values, dtype=np.float64))


SAMPLERS = [
    pytest.param(lambda: D.Normal(f64([0.0, 1.0]), f64([1.0, 2.0])), id="normal"),
    pytest.param(lambda: D.Bernoulli(f64([0.3, 0.6])), id="bernoulli"),
    pytest.param(lambda: D.Bernoulli(logits=f64([-1.0, 2.0])), id="bernoulli_logits"),
    pytest.param(lambda: D.Uniform(f64([0.0, 1.0]), f64([1.0, 3.0])), id="uniform"),
    pytest.param(lambda: D.Exponential(f64([1.0, 2.0])), id="exponential"),
    pytest.param(lambda: D.Laplace(f64([0.0, 1.0]), f64([1.0, 2.0])), id="laplace"),
    pytest.param(lambda: D.Beta(f64([0.5, 2.0]), f64([2.0, 3.0])), id="beta"),
    pytest.param(lambda: D.Gamma(f64([0.3, 2.0, 50.0]), f64([2.0, 3.0, 1.0])), id="gamma"),
    pytest.param(lambda: D.Chi2(f64([3.0, 5.0])), id="chi2"),
    pytest.param(lambda: D.Dirichlet(f64([1.0, 2.0, 3.0])), id="dirichlet"),
    pytest.param(lambda: D.Poisson(f64([0.5, 7.0])), id="poisson"),
    pytest.param(lambda: D.Binomial(f64([3.0, 10.0]), f64([0.3, 0.6])), id="binomial"),
    pytest.param(lambda: D.Geometric(f64([0.3, 0.6])), id="geometric"),
    pytest.param(lambda: D.OneHotCategorical(f64([0.3, 0.6, 0.1])), id="one_hot_categorical"),
    pytest.param(lambda: D.MultivariateNormal(f64([0.0, 1.0]), covariance_matrix=f64([[2.0, 0.5], [0.5, 1.0]])),
                 id="multivariate_normal"),
    pytest.param(lambda: D.StudentT(f64([5.0, 8.0]), f64([1.0, 0.0]), f64([1.0, 2.0])), id="student_t"),
    pytest.param(lambda: D.LogNormal(f64([0.0, 0.5]), f64([0.5, 0.3])), id="log_normal"),
    pytest.param(lambda: D.HalfNormal(f64([1.0, 2.0])), id="half_normal"),
    pytest.param(lambda: D.Independent(D.Normal(f64([[0.0, 1.0]]), f64([[1.0, 2.0]])), 1), id="independent"),
]


@pytest.mark.parametrize("make", SAMPLERS)
def test_sample_moments_support_and_shape(make):
    zgrad.manual_seed(0)
    dist = make()
    draws = dist.sample((N_DRAWS,))
    assert draws.shape == (N_DRAWS, *dist.batch_shape, *dist.event_shape)
    assert draws.dtype == np.float64 and not draws.requires_grad
    assert bool(dist.support.check(draws).all())
    values = draws.numpy()
    mean, variance = dist.mean.numpy(), dist.variance.numpy()
    # within 5 standard errors; the variance of the sample variance needs the 4th moment, so a
    # relative bound wide enough for the heavy-tailed ones
    np.testing.assert_array_less(np.abs(values.mean(0) - mean), 5 * np.sqrt(variance / N_DRAWS) + 1e-12)
    np.testing.assert_allclose(values.var(0), variance, rtol=0.08)
    assert np.allclose(dist.stddev.numpy(), np.sqrt(variance))


def test_moments_are_the_closed_forms():
    gamma = D.Gamma(f64([2.0]), f64([4.0]))
    np.testing.assert_allclose([gamma.mean.item(), gamma.variance.item(), gamma.mode.item()], [0.5, 0.125, 0.25])
    beta = D.Beta(f64([2.0]), f64([3.0]))
    np.testing.assert_allclose([beta.mean.item(), beta.variance.item(), beta.mode.item()], [0.4, 0.04, 1 / 3])
    binomial = D.Binomial(10, f64([0.3]))
    np.testing.assert_allclose([binomial.mean.item(), binomial.variance.item(), binomial.mode.item()], [3, 2.1, 3])
    np.testing.assert_allclose(D.Geometric(f64([0.25])).mean.item(), 3.0)
    np.testing.assert_allclose(D.Laplace(0.0, 2.0).variance.item(), 8.0)
    np.testing.assert_allclose(D.StudentT(f64([1.5, 0.5, 4.0])).variance.numpy(), [np.inf, np.nan, 2.0])
    np.testing.assert_allclose(D.StudentT(f64([1.0, 3.0]), 2.0).mean.numpy(), [np.nan, 2.0])
    assert np.isnan(D.Cauchy(0.0, 1.0).mean.item()) and np.isinf(D.Cauchy(0.0, 1.0).variance.item())
    np.testing.assert_allclose(D.Dirichlet(f64([0.5, 0.3])).mode.numpy(), [1.0, 0.0])
    np.testing.assert_allclose(D.Dirichlet(f64([2.0, 3.0])).mode.numpy(), [1 / 3, 2 / 3])
    np.testing.assert_allclose(D.Bernoulli(f64([0.2, 0.5, 0.7])).mode.numpy(), [0.0, np.nan, 1.0])


@pytest.mark.parametrize("make", SAMPLERS[:8])
def test_manual_seed_reproduces_samples(make):
    dist = make()
    zgrad.manual_seed(11)
    first = dist.sample((5,)).numpy()
    zgrad.manual_seed(11)
    np.testing.assert_array_equal(dist.sample((5,)).numpy(), first)
    assert not np.array_equal(dist.sample((5,)).numpy(), first)


def test_categorical_and_discrete_samples_are_integers_in_their_support():
    zgrad.manual_seed(3)
    for dist in (D.Poisson(f64([3.0])), D.Binomial(7, f64([0.4])), D.Geometric(f64([0.2]))):
        values = dist.sample((1000,)).numpy()
        assert np.all(values == np.floor(values)) and values.min() >= 0
    assert D.Binomial(7, f64([0.4])).sample((1000,)).numpy().max() <= 7
    one_hot = D.OneHotCategorical(f64([[0.2, 0.8], [1.0, 0.0]])).sample((100,)).numpy()
    assert one_hot.shape == (100, 2, 2) and np.all(one_hot.sum(-1) == 1) and np.all(one_hot[:, 1, 0] == 1)


def test_sample_n_warns_and_samples():
    zgrad.manual_seed(0)
    with pytest.warns(FutureWarning, match=r"`sample_n\(n\)` will be deprecated. Use `sample\(\(n,\)\)` instead."):
        assert D.Normal(f64([0.0, 1.0]), 1.0).sample_n(4).shape == (4, 2)


@pytest.mark.parametrize("make, noise", [
    pytest.param(lambda p: D.Normal(p[0], p[1]), lambda x, p: (x - p[0]) / p[1], id="normal"),
    pytest.param(lambda p: D.Laplace(p[0], p[1]), lambda x, p: (x - p[0]) / p[1], id="laplace"),
    pytest.param(lambda p: D.Cauchy(p[0], p[1]), lambda x, p: (x - p[0]) / p[1], id="cauchy"),
])
def test_location_scale_rsample_gradients(make, noise):
    """d x / d loc = 1 and d x / d scale = the standardized draw."""
    zgrad.manual_seed(1)
    params = [zgrad.tensor([0.5, -1.0], dtype=zgrad.float64, requires_grad=True),
              zgrad.tensor([2.0, 0.5], dtype=zgrad.float64, requires_grad=True)]
    x = make(params).rsample((7,))
    x.sum().backward()
    eps = noise(x.detach().numpy(), [p.detach().numpy() for p in params])
    np.testing.assert_allclose(params[0].grad.numpy(), [7.0, 7.0])
    np.testing.assert_allclose(params[1].grad.numpy(), eps.sum(0), rtol=1e-12)


def test_uniform_and_exponential_rsample_gradients():
    zgrad.manual_seed(2)
    low = zgrad.tensor([0.0, 1.0], dtype=zgrad.float64, requires_grad=True)
    high = zgrad.tensor([1.0, 4.0], dtype=zgrad.float64, requires_grad=True)
    x = D.Uniform(low, high).rsample((6,))
    x.sum().backward()
    u = (x.detach().numpy() - [0.0, 1.0]) / [1.0, 3.0]
    np.testing.assert_allclose(low.grad.numpy(), (1 - u).sum(0), rtol=1e-12)
    np.testing.assert_allclose(high.grad.numpy(), u.sum(0), rtol=1e-12)
    rate = zgrad.tensor([0.5, 2.0], dtype=zgrad.float64, requires_grad=True)
    y = D.Exponential(rate).rsample((6,))
    y.sum().backward()
    np.testing.assert_allclose(rate.grad.numpy(), (-y.detach().numpy() / [0.5, 2.0]).sum(0), rtol=1e-12)


@pytest.mark.parametrize("build, mean_gradients", [
    # E[Gamma(a, b)] = a / b: d/da = 1 / b, d/db = -a / b**2
    pytest.param(lambda a, b: D.Gamma(a, b), lambda a, b: (1 / b, -a / b**2), id="gamma"),
    # E[Beta(a, b)] = a / (a + b): d/da = b / (a + b)**2, d/db = -a / (a + b)**2
    pytest.param(lambda a, b: D.Beta(a, b), lambda a, b: (b / (a + b) ** 2, -a / (a + b) ** 2), id="beta"),
])
def test_implicit_rsample_gradients_are_unbiased(build, mean_gradients):
    zgrad.manual_seed(4)
    a_values, b_values = np.array([0.4, 1.5, 12.0]), np.array([0.7, 2.0, 3.0])
    a = zgrad.tensor(a_values, requires_grad=True)
    b = zgrad.tensor(b_values, requires_grad=True)
    build(a, b).rsample((N_DRAWS,)).mean(0).sum().backward()
    expected_a, expected_b = mean_gradients(a_values, b_values)
    np.testing.assert_allclose(a.grad.numpy(), expected_a, rtol=0.05)
    np.testing.assert_allclose(b.grad.numpy(), expected_b, rtol=0.05)


def test_dirichlet_rsample_gradient_is_unbiased():
    """E[x_i] = a_i / sum(a): d E[x_0] / d a_j = (delta_0j sum(a) - a_0) / sum(a)**2."""
    zgrad.manual_seed(5)
    values = np.array([0.8, 2.0, 3.5])
    concentration = zgrad.tensor(values, requires_grad=True)
    draws = D.Dirichlet(concentration).rsample((N_DRAWS,))
    assert np.allclose(draws.detach().numpy().sum(-1), 1.0)
    draws[:, 0].mean().backward()
    total = values.sum()
    expected = (np.eye(3)[0] * total - values[0]) / total**2
    np.testing.assert_allclose(concentration.grad.numpy(), expected, rtol=0.05, atol=2e-3)


def test_student_t_rsample_reaches_every_parameter():
    zgrad.manual_seed(6)
    params = [zgrad.tensor([3.0], dtype=zgrad.float64, requires_grad=True) for _ in range(3)]
    D.StudentT(*params).rsample((10,)).sum().backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in params)


def test_sample_is_outside_the_graph_and_rsample_inside():
    loc = zgrad.tensor([0.0], requires_grad=True)
    for dist in (D.Normal(loc, 1.0), D.Gamma(loc.exp(), 1.0), D.Dirichlet(loc.exp().expand(3))):
        assert not dist.sample((2,)).requires_grad
        assert dist.rsample((2,)).requires_grad
    with pytest.raises(NotImplementedError):
        D.Poisson(f64([1.0])).rsample()


@requires_cuda
def test_cuda_samples_and_scores_on_the_device():
    zgrad.manual_seed(0)
    cases = [
        lambda dev: D.Normal(zgrad.tensor([0.0, 1.0], device=dev), zgrad.tensor([1.0, 2.0], device=dev)),
        lambda dev: D.Gamma(zgrad.tensor([0.5, 3.0], device=dev), zgrad.tensor([1.0, 2.0], device=dev)),
        lambda dev: D.Bernoulli(zgrad.tensor([0.3, 0.6], device=dev)),
        lambda dev: D.Categorical(zgrad.tensor([0.3, 0.6, 0.1], device=dev)),
        lambda dev: D.Poisson(zgrad.tensor([2.0, 5.0], device=dev)),
        lambda dev: D.Dirichlet(zgrad.tensor([1.0, 2.0, 3.0], device=dev)),
    ]
    for make in cases:
        on_cuda, on_cpu = make("cuda"), make("cpu")
        draws = on_cuda.sample((4,))
        assert draws.device.type == "cuda"
        np.testing.assert_allclose(on_cuda.log_prob(draws).cpu().numpy(), on_cpu.log_prob(draws.cpu()).numpy(),
                                   rtol=2e-5, atol=2e-6)
    concentration = zgrad.tensor([0.5, 3.0], device="cuda", requires_grad=True)
    D.Gamma(concentration, 1.0).rsample((3,)).sum().backward()
    assert concentration.grad.device.type == "cuda" and np.all(concentration.grad.cpu().numpy() > 0)

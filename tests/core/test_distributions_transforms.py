"""zgrad.distributions.transforms and TransformedDistribution: each transform's inverse, its
log |det Jacobian| against autograd's derivative, signs, domains, caching, composition and shape
inference (no torch); TransformedDistribution's change of variables, cdf/icdf and samples; and,
where torch is installed, every transform's values against torch's."""

from __future__ import annotations

import math

import numpy as np
import pytest

import zgrad
from helpers import require_torch
from zgrad import distributions as D
from zgrad.distributions import constraints
from zgrad.distributions.transforms import (
    AbsTransform, AffineTransform, ComposeTransform, ExpTransform, IndependentTransform, PowerTransform,
    ReshapeTransform, SigmoidTransform, SoftplusTransform, TanhTransform, Transform, identity_transform,
)


def f64(values):
    return zgrad.tensor(np.asarray(values, dtype=np.float64))


X = np.array([[-1.5, -0.2, 0.3], [0.9, 1.7, 2.5]])

BIJECTIONS = [  # (transform, inputs inside its domain)
    pytest.param(lambda lib: ExpTransform(), X, id="exp"),
    pytest.param(lambda lib: SigmoidTransform(), X, id="sigmoid"),
    pytest.param(lambda lib: SoftplusTransform(), X, id="softplus"),
    pytest.param(lambda lib: TanhTransform(), X, id="tanh"),
    pytest.param(lambda lib: AffineTransform(1.0, -2.5), X, id="affine_numbers"),
    pytest.param(lambda lib: AffineTransform(lib.tensor([0.5, 1.0, -1.0], dtype=lib.float64),
                                             lib.tensor([2.0, -0.5, 3.0], dtype=lib.float64)), X, id="affine_tensors"),
    pytest.param(lambda lib: PowerTransform(lib.tensor(2.5, dtype=lib.float64)), np.abs(X) + 0.1, id="power"),
    pytest.param(lambda lib: ComposeTransform([AffineTransform(0.5, 2.0), SigmoidTransform()]), X, id="compose"),
    pytest.param(lambda lib: ExpTransform().inv, np.abs(X) + 0.1, id="inverse_exp"),
]


def _derivative(transform: Transform, x: np.ndarray) -> np.ndarray:
    """dy/dx of an elementwise transform, by autograd."""
    inputs = zgrad.tensor(x, requires_grad=True)
    transform(inputs).sum().backward()
    return inputs.grad.numpy()


@pytest.mark.parametrize("make, x", BIJECTIONS)
def test_bijections(make, x):
    transform = make(zgrad)
    inputs = f64(x)
    y = transform(inputs)
    np.testing.assert_allclose(transform.inv(y).numpy(), x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(transform.log_abs_det_jacobian(inputs, y).numpy(),
                               np.log(np.abs(_derivative(transform, x))), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(transform.inv.log_abs_det_jacobian(y, inputs).numpy(),
                               -transform.log_abs_det_jacobian(inputs, y).numpy(), rtol=1e-12)
    assert transform.bijective and transform.inv.inv is transform
    assert bool(transform.domain.check(inputs).all()) and bool(transform.codomain.check(y).all())
    sign = transform.sign
    sign = sign.numpy() if isinstance(sign, zgrad.Tensor) else sign
    assert np.all(np.sign(_derivative(transform, x)) == sign)


def test_signs_domains_and_reprs():
    assert ExpTransform().sign == 1 and AffineTransform(0.0, -2.0).sign == -1 and AffineTransform(0.0, 0.0).sign == 0
    assert ComposeTransform([AffineTransform(0.0, -1.0), ExpTransform()]).sign == -1
    assert repr(ExpTransform()) == "ExpTransform()"
    assert repr(ExpTransform().inv) == "_InverseTransform(ExpTransform())"
    assert repr(ComposeTransform([ExpTransform(), TanhTransform()])) == \
        "ComposeTransform(\n    ExpTransform(),\n    TanhTransform()\n)"
    assert repr(IndependentTransform(ExpTransform(), 1)) == "IndependentTransform(ExpTransform(), 1)"
    assert repr(TanhTransform.codomain) == "Interval(lower_bound=-1.0, upper_bound=1.0)"
    assert ExpTransform().domain is constraints.real and ExpTransform().inv.domain is constraints.positive
    assert ExpTransform() == ExpTransform() and ExpTransform() != SigmoidTransform()
    assert ExpTransform().inv == ExpTransform().inv
    assert AffineTransform(1.0, 2.0) == AffineTransform(1.0, 2.0) != AffineTransform(1.0, 3.0)
    assert AffineTransform(f64([1.0]), 2.0) == AffineTransform(f64([1.0]), 2.0)
    assert PowerTransform(f64(2.0)) == PowerTransform(f64(2.0)) != PowerTransform(f64(3.0))
    assert not AbsTransform().bijective and AbsTransform().inv(f64([2.0])).item() == 2.0
    assert identity_transform(f64([1.0, 2.0])).numpy().tolist() == [1.0, 2.0]
    assert identity_transform.log_abs_det_jacobian(f64([1.0]), f64([1.0])).item() == 0.0
    assert ExpTransform().event_dim == 0 and AffineTransform(0.0, 1.0, event_dim=2).event_dim == 2


def test_caching_returns_the_same_tensor():
    x = f64([0.5, 1.0])
    cached = ExpTransform(cache_size=1)
    y = cached(x)
    assert cached(x) is y and cached.inv(y) is x
    plain = ExpTransform()
    assert plain.inv(plain(x)) is not x
    assert plain.with_cache(1)._cache_size == 1 and plain.with_cache(0) is plain
    assert AffineTransform(0.0, 2.0).with_cache(1)._cache_size == 1
    assert ComposeTransform([ExpTransform()], cache_size=1).parts[0]._cache_size == 1
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        ExpTransform(cache_size=2)


def test_event_dimensions_and_shapes():
    affine = AffineTransform(f64([1.0, 2.0, 3.0]), f64([2.0, 1.0, 0.5]), event_dim=1)
    x = f64(X)
    assert affine.log_abs_det_jacobian(x, affine(x)).shape == (2,)
    np.testing.assert_allclose(affine.log_abs_det_jacobian(x, affine(x)).numpy(), [0.0, 0.0], atol=1e-15)
    assert affine.domain.event_dim == 1 and affine.forward_shape((4, 3)) == (4, 3)
    independent = IndependentTransform(ExpTransform(), 1)
    np.testing.assert_allclose(independent.log_abs_det_jacobian(x, independent(x)).numpy(), X.sum(-1))
    assert independent.domain.event_dim == 1 and independent.codomain.event_dim == 1
    compose = ComposeTransform([ExpTransform(), IndependentTransform(AffineTransform(0.0, 3.0), 1)])
    assert compose.domain.event_dim == 1 and compose.codomain.event_dim == 1
    np.testing.assert_allclose(compose.log_abs_det_jacobian(x, compose(x)).numpy(), X.sum(-1) + 3 * math.log(3))
    reshape = ReshapeTransform((3,), (3, 1))
    assert reshape(x).shape == (2, 3, 1) and reshape.inv(reshape(x)).shape == (2, 3)
    assert reshape.forward_shape((5, 3)) == (5, 3, 1) and reshape.inverse_shape((5, 3, 1)) == (5, 3)
    assert reshape.log_abs_det_jacobian(x, reshape(x)).shape == (2,)
    with pytest.raises(ValueError, match="in_shape, out_shape have different numbers of elements"):
        ReshapeTransform((3,), (2,))
    with pytest.raises(ValueError, match="Shape mismatch: expected zgrad.Size\\(\\[4\\]\\) but got zgrad.Size"):
        reshape.forward_shape((4,))
    with pytest.raises(ValueError, match="Please use either .domain.event_dim or .codomain.event_dim"):
        _ = ComposeTransform([ReshapeTransform((3,), (3, 1))]).event_dim
    assert PowerTransform(f64([1.0, 2.0])).forward_shape((3, 1)) == (3, 2)


def test_transformed_distribution_is_the_change_of_variables():
    loc, scale = f64([0.2, -0.5]), f64([0.7, 1.3])
    exp_normal = D.TransformedDistribution(D.Normal(loc, scale), [ExpTransform()])
    y = f64([[0.5, 2.0], [1.5, 0.1]])
    np.testing.assert_allclose(exp_normal.log_prob(y).numpy(), D.LogNormal(loc, scale).log_prob(y).numpy(),
                               rtol=1e-14)
    # logistic: the density of x = logit(u), u ~ U(0, 1), is sigmoid(x) (1 - sigmoid(x))
    logistic = D.TransformedDistribution(D.Uniform(0.0, 1.0), [SigmoidTransform().inv])
    x = f64([-2.0, 0.0, 3.0])
    s = 1 / (1 + np.exp(-x.numpy()))
    np.testing.assert_allclose(logistic.log_prob(x).numpy(), np.log(s * (1 - s)), rtol=1e-6)
    np.testing.assert_allclose(logistic.cdf(x).numpy(), s, rtol=1e-6)
    np.testing.assert_allclose(logistic.icdf(logistic.cdf(x)).numpy(), x.numpy(), rtol=1e-5, atol=1e-6)
    flipped = D.TransformedDistribution(D.Normal(0.0, 1.0), [AffineTransform(0.0, -1.0)])
    np.testing.assert_allclose(flipped.cdf(f64([1.0])).numpy(), D.Normal(0.0, 1.0).cdf(f64([1.0])).numpy())
    assert repr(exp_normal.support) == "GreaterThan(lower_bound=0.0)"


def test_transformed_distribution_shapes_sampling_and_expand():
    zgrad.manual_seed(0)
    base = D.Normal(zgrad.zeros(3, dtype=zgrad.float64), 1.0)
    coupled = D.TransformedDistribution(base, [IndependentTransform(ExpTransform(), 1)])
    assert coupled.batch_shape == () and coupled.event_shape == (3,)
    assert isinstance(coupled.base_dist, D.Independent)
    assert repr(coupled.support) == "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"
    draws = coupled.sample((5,))
    assert draws.shape == (5, 3) and bool((draws > 0).all())
    np.testing.assert_allclose(coupled.log_prob(draws).numpy(),
                               D.LogNormal(zgrad.zeros(3, dtype=zgrad.float64), 1.0).log_prob(draws).sum(-1).numpy())
    expanded = coupled.expand((4,))
    assert expanded.batch_shape == (4,) and expanded.sample().shape == (4, 3)
    broadcast = D.TransformedDistribution(D.Normal(0.0, 1.0), [AffineTransform(f64([1.0, 2.0]), 1.0)])
    assert broadcast.batch_shape == (2,) and broadcast.base_dist.batch_shape == (2,)
    loc = zgrad.tensor([0.3], dtype=zgrad.float64, requires_grad=True)
    sample = D.LogNormal(loc, 1.0).rsample((4,))
    sample.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), sample.detach().numpy().sum(0))  # d exp(loc + eps) / d loc
    assert D.LogNormal(0.0, 1.0).has_rsample and not D.TransformedDistribution(D.Poisson(1.0), []).has_rsample
    with pytest.raises(ValueError, match="base_distribution needs to have shape with size at least 1"):
        D.TransformedDistribution(D.Normal(0.0, 1.0), [IndependentTransform(ExpTransform(), 1)])


@pytest.mark.torch
@pytest.mark.parametrize("make, x", BIJECTIONS + [pytest.param(lambda lib: AbsTransform(), X, id="abs")])
def test_transforms_match_torch(make, x):
    torch = require_torch()
    from torch.distributions import transforms as torch_transforms
    transform = make(zgrad)

    def torch_twin(lib_transform):
        """The same transform built from torch's classes."""
        if isinstance(lib_transform, type(ExpTransform().inv)):
            return torch_twin(lib_transform._inv).inv
        if isinstance(lib_transform, ComposeTransform):
            return torch_transforms.ComposeTransform([torch_twin(p) for p in lib_transform.parts])
        cls = getattr(torch_transforms, type(lib_transform).__name__)
        if isinstance(lib_transform, AffineTransform):
            convert = (lambda v: torch.tensor(v.numpy()) if isinstance(v, zgrad.Tensor) else v)
            return cls(convert(lib_transform.loc), convert(lib_transform.scale))
        if isinstance(lib_transform, PowerTransform):
            return cls(torch.tensor(lib_transform.exponent.numpy()))
        return cls()

    reference = torch_twin(transform)
    y, ref_y = transform(f64(x)), reference(torch.tensor(x))
    np.testing.assert_allclose(y.numpy(), ref_y.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(transform.inv(y).numpy(), reference.inv(ref_y).numpy(), rtol=1e-12, atol=1e-15)
    if transform.bijective:
        np.testing.assert_allclose(transform.log_abs_det_jacobian(f64(x), y).numpy(),
                                   reference.log_abs_det_jacobian(torch.tensor(x), ref_y).numpy(),
                                   rtol=1e-12, atol=1e-14)
    assert repr(transform.domain) == repr(reference.domain) and repr(transform.codomain) == repr(reference.codomain)

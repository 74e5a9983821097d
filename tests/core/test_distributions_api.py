"""zgrad.distributions' API, without torch: batch, event and sample shapes, ``expand``, parameter
and sample validation (PyTorch's messages), ``Distribution.set_default_validate_args``, the
constraints (``check`` and repr), lazily derived parameters, ``enumerate_support``, repr, and the
gradients of log_prob/entropy/cdf against float64 finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

import zgrad
from helpers import check_finite_differences
from zgrad import distributions as D
from zgrad.distributions import constraints


def f64(values):
    return zgrad.tensor(np.asarray(values, dtype=np.float64))


SHAPES = [  # (distribution, batch_shape, event_shape)
    pytest.param(lambda: D.Normal(zgrad.zeros(3), 1.0), (3,), (), id="normal"),
    pytest.param(lambda: D.Normal(0.0, 1.0), (), (), id="normal_scalar"),
    pytest.param(lambda: D.Gamma(zgrad.ones(2, 1), zgrad.ones(3)), (2, 3), (), id="gamma_broadcast"),
    pytest.param(lambda: D.Bernoulli(logits=zgrad.zeros(4)), (4,), (), id="bernoulli"),
    pytest.param(lambda: D.Categorical(logits=zgrad.zeros(2, 5)), (2,), (), id="categorical"),
    pytest.param(lambda: D.OneHotCategorical(zgrad.ones(2, 5)), (2,), (5,), id="one_hot"),
    pytest.param(lambda: D.Dirichlet(zgrad.ones(2, 3, 4)), (2, 3), (4,), id="dirichlet"),
    pytest.param(lambda: D.Beta(zgrad.ones(3), 2.0), (3,), (), id="beta"),
    pytest.param(lambda: D.Binomial(5, zgrad.ones(2) / 2), (2,), (), id="binomial"),
    pytest.param(lambda: D.MultivariateNormal(zgrad.zeros(4, 3), scale_tril=zgrad.eye(3)), (4,), (3,), id="mvn"),
    pytest.param(lambda: D.MultivariateNormal(zgrad.zeros(3), covariance_matrix=zgrad.eye(3).expand(2, 3, 3)),
                 (2,), (3,), id="mvn_matrix_batch"),
    pytest.param(lambda: D.Independent(D.Normal(zgrad.zeros(2, 3), 1.0), 1), (2,), (3,), id="independent"),
    pytest.param(lambda: D.Independent(D.Normal(zgrad.zeros(2, 3), 1.0), 2), (), (2, 3), id="independent2"),
    pytest.param(lambda: D.StudentT(zgrad.ones(3) * 4), (3,), (), id="student_t"),
    pytest.param(lambda: D.LogNormal(zgrad.zeros(3), 1.0), (3,), (), id="log_normal"),
    pytest.param(lambda: D.TransformedDistribution(D.Normal(zgrad.zeros(3), 1.0),
                                                   D.transforms.ReshapeTransform((3,), (3, 1))), (), (3, 1),
                 id="transformed_reshape"),
]


@pytest.mark.parametrize("make, batch_shape, event_shape", SHAPES)
def test_shapes_and_expand(make, batch_shape, event_shape):
    dist = make()
    assert dist.batch_shape == batch_shape and dist.event_shape == event_shape
    assert isinstance(dist.batch_shape, zgrad.Size) and isinstance(dist.event_shape, zgrad.Size)
    zgrad.manual_seed(0)
    assert dist.sample().shape == batch_shape + event_shape
    assert dist.sample((2, 5)).shape == (2, 5) + batch_shape + event_shape
    value = dist.sample((2,))
    assert dist.log_prob(value).shape == (2,) + batch_shape
    expanded = dist.expand((6,) + batch_shape)
    assert type(expanded) is type(dist)
    assert expanded.batch_shape == (6,) + batch_shape and expanded.event_shape == event_shape
    assert expanded.sample((2,)).shape == (2, 6) + batch_shape + event_shape
    np.testing.assert_allclose(expanded.log_prob(value[0]).numpy(),
                               np.broadcast_to(dist.log_prob(value[0]).numpy(), (6,) + batch_shape), rtol=1e-6)
    assert expanded._validate_args == dist._validate_args


def test_sample_shape_must_be_a_sequence():
    with pytest.raises(TypeError, match=r"sample_shape must be a tuple of ints \(e.g. \(5,\)\), got 5"):
        D.Normal(0.0, 1.0).sample(5)


def test_expand_shares_parameters_without_validating():
    loc = zgrad.zeros(3, requires_grad=True)
    expanded = D.Normal(loc, 1.0).expand((4, 3))
    expanded.log_prob(zgrad.ones(4, 3)).sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [4.0, 4.0, 4.0])  # (x - loc) / scale**2 over 4 rows


def test_custom_init_subclass_must_override_expand():
    class Shifted(D.Normal):
        def __init__(self, loc):
            super().__init__(loc, 1.0)

    with pytest.raises(NotImplementedError, match="Subclass Shifted of Normal that defines a custom __init__ method "
                                                  "must also define a custom .expand"):
        Shifted(zgrad.zeros(2)).expand((3, 2))


VALIDATION = [
    (lambda: D.Normal(f64([0.0, 0.0]), f64([1.0, 0.0])),
     "Expected parameter scale (Tensor of shape (2,)) of distribution Normal(loc: zgrad.Size([2]), scale: "
     "zgrad.Size([2])) to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values:\n"
     "tensor([1., 0.], dtype=float64)"),
    (lambda: D.Normal(0.0, -1.0),
     "Expected parameter scale (Tensor of shape ()) of distribution Normal(loc: 0.0, scale: -1.0) to satisfy the "
     "constraint GreaterThan(lower_bound=0.0), but found invalid values:\n-1.0"),
    (lambda: D.Bernoulli(f64([0.5, 1.5])), "constraint Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: D.Uniform(f64([0.0, 1.0]), f64([1.0, 1.0])), "Expected parameter low"),
    (lambda: D.Dirichlet(f64([1.0, -1.0])),
     "constraint IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"),
    (lambda: D.Binomial(f64([2.5]), f64([0.5])), "constraint IntegerGreaterThan(lower_bound=0)"),
    (lambda: D.Geometric(f64([0.5, 0.0])),
     "Expected parameter probs (Tensor of shape (2,)) of distribution Geometric(probs: zgrad.Size([2])) to be "
     "positive but found invalid values:\ntensor([0.], dtype=float64)"),
    (lambda: D.MultivariateNormal(zgrad.zeros(2), covariance_matrix=zgrad.tensor([[1.0, 2.0], [2.0, 1.0]])),
     "constraint PositiveDefinite()"),
    (lambda: D.MultivariateNormal(zgrad.zeros(2), covariance_matrix=zgrad.tensor([[1.0, 0.5], [0.4, 1.0]])),
     "constraint PositiveDefinite()"),
    (lambda: D.MultivariateNormal(zgrad.zeros(2), scale_tril=zgrad.tensor([[1.0, 0.5], [0.0, 1.0]])),
     "constraint LowerCholesky()"),
    (lambda: D.Normal(zgrad.zeros(2), zgrad.ones(2)).log_prob(0.5),
     "The value argument to log_prob must be a Tensor"),
    (lambda: D.Normal(zgrad.zeros(2), zgrad.ones(2)).log_prob(zgrad.zeros(3)),
     "Value is not broadcastable with batch_shape+event_shape: zgrad.Size([3]) vs zgrad.Size([2])."),
    (lambda: D.Dirichlet(zgrad.ones(3)).log_prob(zgrad.ones(2) / 2),
     "The right-most size of value must match event_shape: zgrad.Size([2]) vs zgrad.Size([3])."),
    (lambda: D.Gamma(zgrad.ones(2), zgrad.ones(2)).log_prob(zgrad.tensor([-1.0, 1.0])),
     "Expected value argument (Tensor of shape (2,)) to be within the support (GreaterThanEq(lower_bound=0.0)) of "
     "the distribution Gamma(concentration: zgrad.Size([2]), rate: zgrad.Size([2])), but found invalid values:\n"
     "tensor([-1.,  1.])"),
    (lambda: D.Categorical(logits=zgrad.zeros(3)).log_prob(zgrad.tensor([3])),
     "to be within the support (IntegerInterval(lower_bound=0, upper_bound=2))"),
    (lambda: D.Binomial(10, f64([0.5])).log_prob(f64([11.0])), "IntegerInterval(lower_bound=0, upper_bound=tensor"),
    (lambda: D.OneHotCategorical(zgrad.ones(3)).log_prob(zgrad.tensor([1.0, 1.0, 0.0])), "support (OneHot())"),
    (lambda: D.Dirichlet(zgrad.ones(3)).log_prob(zgrad.ones(3)), "support (Simplex())"),
    (lambda: D.LogNormal(0.0, 1.0).log_prob(zgrad.tensor(-1.0)), "support (GreaterThan(lower_bound=0.0))"),
]


@pytest.mark.parametrize("fn, message", VALIDATION, ids=[f"validation{i}" for i in range(len(VALIDATION))])
def test_validation_errors(fn, message):
    with pytest.raises(ValueError) as info:
        fn()
    assert message in str(info.value)


ARGUMENT_ERRORS = [
    (lambda: D.Bernoulli(), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Geometric(probs=0.5, logits=0.0), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Binomial(3), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Categorical(probs=zgrad.tensor(1.0)), "`probs` parameter must be at least one-dimensional."),
    (lambda: D.Dirichlet(zgrad.tensor(1.0)), "`concentration` parameter must be at least one-dimensional."),
    (lambda: D.MultivariateNormal(zgrad.tensor(0.0), covariance_matrix=zgrad.eye(2)),
     "loc must be at least one-dimensional."),
    (lambda: D.MultivariateNormal(zgrad.zeros(2)),
     "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."),
    (lambda: D.MultivariateNormal(zgrad.zeros(2), precision_matrix=zgrad.ones(2)),
     "precision_matrix must be at least two-dimensional, with optional leading batch dimensions"),
    (lambda: D.Independent(D.Normal(zgrad.zeros(2), 1.0), 2),
     "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual 2 vs 1"),
    (lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), 3), "transforms must be a Transform or list, but was 3"),
    (lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), [3]), "transforms must be a Transform or a list of"),
    (lambda: D.utils.broadcast_all("a", 1.0), "Input arguments must all be instances of Number or zgrad.Tensor."),
    (lambda: constraints.dependent.check(zgrad.ones(1)), "Cannot determine validity of dependent constraint"),
]


@pytest.mark.parametrize("fn, message", ARGUMENT_ERRORS, ids=[f"argument{i}" for i in range(len(ARGUMENT_ERRORS))])
def test_argument_errors(fn, message):
    with pytest.raises(ValueError) as info:
        fn()
    assert message in str(info.value)


def test_not_implemented_parts():
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count not supported by `entropy`."):
        D.Binomial(f64([2.0, 3.0]), f64([0.5, 0.5])).entropy()
    with pytest.raises(NotImplementedError, match="Enumeration over cartesian product is not implemented"):
        D.Independent(D.Bernoulli(f64([0.5, 0.5])), 1).enumerate_support()
    with pytest.raises(NotImplementedError, match="does not implement mode"):
        _ = D.TransformedDistribution(D.Normal(0.0, 1.0), D.transforms.ExpTransform()).mode
    with pytest.raises(NotImplementedError):
        D.Normal(0.0, 1.0).enumerate_support()


def test_validation_can_be_turned_off():
    assert D.Normal(f64([0.0]), f64([-1.0]), validate_args=False).scale.item() == -1.0
    lenient = D.Gamma(f64([1.0]), f64([1.0]), validate_args=False)
    assert lenient.log_prob(f64([-1.0])).item() == 1.0  # the formula, outside the support: nothing refused it
    D.Distribution.set_default_validate_args(False)
    try:
        assert D.Bernoulli(f64([2.0]))._validate_args is False
        assert D.Bernoulli(f64([0.5]), validate_args=True)._validate_args is True
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Bernoulli(f64([2.0]))
    with pytest.raises(ValueError, match="set_default_validate_args expects True or False, got 1.5"):
        D.Distribution.set_default_validate_args(1.5)


def test_a_distribution_without_arg_constraints_warns():
    class Bare(D.Distribution):
        pass

    with pytest.warns(UserWarning, match="does not define `arg_constraints`"):
        Bare()
    with pytest.warns(UserWarning, match="does not define `support`"):
        Bare(validate_args=False)._validate_sample(zgrad.zeros(1))


CONSTRAINTS = [  # (constraint, value, expected check, repr)
    (constraints.real, [0.0, math.nan, math.inf], [True, False, True], "Real()"),
    (constraints.positive, [0.0, 1.0], [False, True], "GreaterThan(lower_bound=0.0)"),
    (constraints.nonnegative, [0.0, -1.0], [True, False], "GreaterThanEq(lower_bound=0.0)"),
    (constraints.greater_than(2), [2.0, 3.0], [False, True], "GreaterThan(lower_bound=2)"),
    (constraints.greater_than_eq(2), [2.0, 1.0], [True, False], "GreaterThanEq(lower_bound=2)"),
    (constraints.less_than(1.0), [1.0, 0.0], [False, True], "LessThan(upper_bound=1.0)"),
    (constraints.unit_interval, [0.0, 1.0, 1.5], [True, True, False], "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (constraints.interval(-1, 1), [-1.0, 2.0], [True, False], "Interval(lower_bound=-1, upper_bound=1)"),
    (constraints.half_open_interval(0, 1), [0.0, 1.0], [True, False],
     "HalfOpenInterval(lower_bound=0, upper_bound=1)"),
    (constraints.boolean, [0.0, 1.0, 0.5], [True, True, False], "Boolean()"),
    (constraints.nonnegative_integer, [0.0, 2.0, 1.5, -1.0], [True, True, False, False],
     "IntegerGreaterThan(lower_bound=0)"),
    (constraints.positive_integer, [0.0, 2.0], [False, True], "IntegerGreaterThan(lower_bound=1)"),
    (constraints.integer_interval(0, 3), [0.0, 3.0, 4.0, 1.5], [True, True, False, False],
     "IntegerInterval(lower_bound=0, upper_bound=3)"),
    (constraints.simplex, [[0.25, 0.75], [0.5, 0.6], [-0.5, 1.5]], [True, False, False], "Simplex()"),
    (constraints.one_hot, [[0.0, 1.0], [1.0, 1.0]], [True, False], "OneHot()"),
    (constraints.multinomial(3), [[1.0, 2.0], [2.0, 2.0]], [True, False], "Multinomial()"),
    (constraints.real_vector, [[0.0, 1.0], [math.nan, 0.0]], [True, False], "IndependentConstraint(Real(), 1)"),
    (constraints.independent(constraints.positive, 2), [[[1.0, 2.0]], [[1.0, 0.0]]], [True, False],
     "IndependentConstraint(GreaterThan(lower_bound=0.0), 2)"),
    (constraints.lower_triangular, [[[1.0, 0.0], [2.0, -1.0]], [[1.0, 1.0], [0.0, 1.0]]], [True, False],
     "LowerTriangular()"),
    (constraints.lower_cholesky, [[[1.0, 0.0], [2.0, 1.0]], [[1.0, 0.0], [2.0, -1.0]]], [True, False],
     "LowerCholesky()"),
    (constraints.corr_cholesky, [[[1.0, 0.0], [0.6, 0.8]], [[1.0, 0.0], [0.6, 0.9]]], [True, False],
     "CorrCholesky()"),
    (constraints.symmetric, [[[1.0, 2.0], [2.0, 1.0]], [[1.0, 2.0], [0.0, 1.0]]], [True, False], "Symmetric()"),
    (constraints.positive_semidefinite, [[[1.0, 1.0], [1.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]]], [True, False],
     "PositiveSemidefinite()"),
    (constraints.positive_definite, [[[2.0, 1.0], [1.0, 2.0]], [[1.0, 1.0], [1.0, 1.0]]], [True, False],
     "PositiveDefinite()"),
    (constraints.square, [[[1.0, 2.0], [2.0, 1.0]]], [True], "Square()"),
    (constraints.cat([constraints.positive, constraints.real], 0, [1, 2]), [1.0, -1.0, -2.0], [True, True, True],
     "Cat()"),
    (constraints.stack([constraints.positive, constraints.real], 0), [-1.0, -2.0], [False, True], "Stack()"),
]


@pytest.mark.parametrize("constraint, value, expected, text", CONSTRAINTS, ids=[c[3] for c in CONSTRAINTS])
def test_constraints(constraint, value, expected, text):
    result = constraint.check(f64(value))
    assert result.dtype == np.bool_
    np.testing.assert_array_equal(result.numpy(), expected)
    assert repr(constraint) == text


def test_constraint_attributes():
    assert constraints.simplex.event_dim == 1 and constraints.lower_cholesky.event_dim == 2
    assert constraints.boolean.is_discrete and not constraints.real.is_discrete
    assert constraints.independent(constraints.nonnegative_integer, 2).event_dim == 2
    assert constraints.independent(constraints.nonnegative_integer, 2).is_discrete
    assert constraints.is_dependent(constraints.dependent) and not constraints.is_dependent(constraints.real)
    assert constraints.is_dependent(D.Uniform.support) and not constraints.is_dependent(D.Normal.support)
    assert D.Categorical.support.is_discrete and D.Categorical.support.event_dim == 0
    with pytest.raises(NotImplementedError, match=".event_dim cannot be determined statically"):
        _ = constraints.dependent.event_dim
    assert constraints.dependent(is_discrete=True, event_dim=1).event_dim == 1
    with pytest.raises(ValueError, match="Expected value.dim\\(\\) >= 2 but got 1"):
        constraints.independent(constraints.real, 2).check(zgrad.zeros(3))
    with pytest.raises(TypeError, match="base_constraint must be a Constraint"):
        constraints.independent(3, 1)


def test_lazy_parameters():
    logits = zgrad.tensor([0.0, 1.0, 2.0], requires_grad=True)
    dist = D.Categorical(logits=logits)
    assert "probs" not in dist.__dict__
    probs = dist.probs
    assert "probs" in dist.__dict__ and dist.probs is probs and probs.requires_grad
    np.testing.assert_allclose(probs.detach().numpy().sum(), 1.0, rtol=1e-6)
    bernoulli = D.Bernoulli(probs=f64([0.0, 1.0]))
    assert np.isfinite(bernoulli.logits.numpy()).all()  # clamped to [eps, 1 - eps] first
    assert isinstance(D.Categorical.__dict__["logits"], D.utils.lazy_property)


def test_enumerate_support():
    bernoulli = D.Bernoulli(f64([0.2, 0.7]))
    np.testing.assert_array_equal(bernoulli.enumerate_support().numpy(), [[0, 0], [1, 1]])
    assert bernoulli.enumerate_support(expand=False).shape == (2, 1)
    categorical = D.Categorical(zgrad.ones(2, 3))
    assert categorical.enumerate_support().shape == (3, 2) and categorical.enumerate_support().dtype == np.int64
    assert D.Binomial(3, f64([0.5])).enumerate_support().numpy().ravel().tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(D.OneHotCategorical(zgrad.ones(3)).enumerate_support().numpy(), np.eye(3))
    # probabilities over the support sum to 1
    for dist in (bernoulli, categorical, D.Binomial(4, f64([0.3])), D.OneHotCategorical(zgrad.ones(2, 3))):
        total = dist.log_prob(dist.enumerate_support()).exp().sum(0).numpy()
        np.testing.assert_allclose(total, 1.0, rtol=1e-6)


def test_reprs():
    assert repr(D.Normal(f64([0.0, 1.0]), 1.0)) == "Normal(loc: zgrad.Size([2]), scale: zgrad.Size([2]))"
    assert repr(D.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(D.Categorical(probs=zgrad.ones(2, 3))) == "Categorical(probs: zgrad.Size([2, 3]))"
    assert repr(D.Bernoulli(logits=zgrad.zeros(2))) == "Bernoulli(logits: zgrad.Size([2]))"
    assert repr(D.Independent(D.Normal(zgrad.zeros(2), 1.0), 1)) == \
        "Independent(Normal(loc: zgrad.Size([2]), scale: zgrad.Size([2])), 1)"
    assert repr(D.Beta(1.0, 2.0)) == "Beta()"


def test_perplexity_is_exp_entropy():
    dist = D.Categorical(logits=zgrad.zeros(4))
    np.testing.assert_allclose(dist.perplexity().item(), 4.0, rtol=1e-6)


def test_exponential_family_entropy_by_autograd_matches_closed_forms():
    """ExponentialFamily.entropy (the Bregman form through the log normalizer) agrees with each
    family's closed-form entropy."""
    for dist in (D.Normal(f64([0.5, -1.0]), f64([0.7, 2.0])), D.Exponential(f64([0.5, 3.0])),
                 D.Gamma(f64([0.8, 4.0]), f64([2.0, 0.5])), D.Bernoulli(f64([0.3, 0.9]))):
        bregman = D.ExponentialFamily.entropy(dist)
        np.testing.assert_allclose(bregman.detach().numpy(), dist.entropy().numpy(), rtol=1e-12, atol=1e-12)


FINITE_DIFFERENCES = [
    pytest.param(lambda lib, a, b, x: lib.distributions.Normal(a, b).cdf(x), [(3,), (3,), (2, 3)], (0.3, 2.0),
                 id="normal_cdf"),
    pytest.param(lambda lib, a, b, x: lib.distributions.Laplace(a, b).log_prob(x), [(3,), (3,), (2, 3)], (0.3, 2.0),
                 id="laplace_log_prob"),
    pytest.param(lambda lib, a, b, x: lib.distributions.Gamma(a, b).log_prob(x), [(3,), (3,), (2, 3)], (0.3, 2.0),
                 id="gamma_log_prob"),
    pytest.param(lambda lib, a, b: lib.distributions.Gamma(a, b).entropy(), [(3,), (3,)], (0.3, 2.0),
                 id="gamma_entropy"),
    pytest.param(lambda lib, a, b, x: lib.distributions.Beta(a, b).log_prob(x / 2.5), [(3,), (3,), (2, 3)],
                 (0.3, 2.0), id="beta_log_prob"),
    pytest.param(lambda lib, a: lib.distributions.Dirichlet(a).entropy(), [(2, 3)], (0.3, 2.0),
                 id="dirichlet_entropy"),
    pytest.param(lambda lib, p: lib.distributions.Bernoulli(p / 2.5).entropy(), [(3,)], (0.3, 2.0),
                 id="bernoulli_entropy"),
    pytest.param(lambda lib, r, x: lib.distributions.Poisson(r).log_prob(x.floor()), [(3,), (2, 3)], (0.3, 2.0),
                 id="poisson_log_prob"),
    pytest.param(lambda lib, k, a, b, x: lib.distributions.StudentT(k, a, b).log_prob(x), [(3,), (3,), (3,), (2, 3)],
                 (0.3, 2.0), id="student_t_log_prob"),
    pytest.param(lambda lib, m, c, x: lib.distributions.MultivariateNormal(
        m, covariance_matrix=c @ c.mT + lib.eye(3)).log_prob(x), [(3,), (3, 3), (2, 3)], (0.3, 2.0), id="mvn_log_prob"),
    pytest.param(lambda lib, a, b, x: lib.distributions.LogNormal(a, b).log_prob(x), [(3,), (3,), (2, 3)],
                 (0.3, 2.0), id="log_normal_log_prob"),
    pytest.param(lambda lib, a, b: lib.distributions.kl_divergence(lib.distributions.Gamma(a, b),
                                                                   lib.distributions.Gamma(b, a)), [(3,), (3,)],
                 (0.3, 2.0), id="kl_gamma"),
]


@pytest.mark.parametrize("fn, shapes, domain", FINITE_DIFFERENCES)
def test_gradients_match_finite_differences(fn, shapes, domain):
    check_finite_differences(fn, shapes, domain=domain)

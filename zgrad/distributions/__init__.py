"""``zgrad.distributions``: probability distributions with torch.distributions's API: the
``Distribution`` base class and ``constraints``, the distributions (sampling from zgrad's default
generators, differentiable ``log_prob``/``cdf``/``entropy``, reparameterized ``rsample`` where
PyTorch has one), ``kl_divergence``/``register_kl``, ``TransformedDistribution`` and its
``transforms``."""

from zgrad.distributions import constraints, transforms
from zgrad.distributions.bernoulli import Bernoulli
from zgrad.distributions.beta import Beta
from zgrad.distributions.binomial import Binomial
from zgrad.distributions.categorical import Categorical
from zgrad.distributions.cauchy import Cauchy
from zgrad.distributions.chi2 import Chi2
from zgrad.distributions.dirichlet import Dirichlet
from zgrad.distributions.distribution import Distribution
from zgrad.distributions.exp_family import ExponentialFamily
from zgrad.distributions.exponential import Exponential
from zgrad.distributions.gamma import Gamma
from zgrad.distributions.geometric import Geometric
from zgrad.distributions.half_normal import HalfNormal
from zgrad.distributions.independent import Independent
from zgrad.distributions.kl import kl_divergence, register_kl
from zgrad.distributions.laplace import Laplace
from zgrad.distributions.log_normal import LogNormal
from zgrad.distributions.multivariate_normal import MultivariateNormal
from zgrad.distributions.normal import Normal
from zgrad.distributions.one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from zgrad.distributions.poisson import Poisson
from zgrad.distributions.studentT import StudentT
from zgrad.distributions.transformed_distribution import TransformedDistribution
from zgrad.distributions.transforms import (
    AbsTransform, AffineTransform, ComposeTransform, ExpTransform, IndependentTransform, PowerTransform,
    ReshapeTransform, SigmoidTransform, SoftplusTransform, TanhTransform, Transform, identity_transform,
)
from zgrad.distributions.uniform import Uniform

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2",
    "ComposeTransform", "Dirichlet", "Distribution", "ExpTransform", "Exponential", "ExponentialFamily", "Gamma",
    "Geometric", "HalfNormal", "Independent", "IndependentTransform", "Laplace", "LogNormal", "MultivariateNormal",
    "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Poisson", "PowerTransform",
    "ReshapeTransform", "SigmoidTransform", "SoftplusTransform", "StudentT", "TanhTransform", "Transform",
    "TransformedDistribution", "Uniform", "constraints", "identity_transform", "kl_divergence", "register_kl",
    "transforms",
]

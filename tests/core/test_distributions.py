"""zgrad.distributions.Categorical and Normal: log_prob/entropy and their gradients against
torch.distributions (float32 and float64) and float64 finite differences; sampling frequencies
and reproducibility; errors."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import check, require_torch
from zgrad.distributions import Categorical, Normal

VALUES = np.array([[0, 3, 1], [2, 2, 0]], dtype=np.int64)  # sample shape (2,) over batch (3,)


def D(lib):
    return lib.distributions


CASES = [
    pytest.param(lambda lib, logits: D(lib).Categorical(logits=logits).log_prob(lib.tensor(VALUES)), [(3, 4)],
                 id="categorical_logits_log_prob"),
    pytest.param(lambda lib, logits: D(lib).Categorical(logits=logits).entropy(), [(3, 4)],
                 id="categorical_logits_entropy"),
    pytest.param(lambda lib, logits: D(lib).Categorical(logits=logits).probs, [(2, 5)], id="categorical_probs"),
    pytest.param(lambda lib, logits: D(lib).Categorical(logits=logits).logits, [(2, 5)], id="categorical_logits"),
    pytest.param(lambda lib, p: D(lib).Categorical(probs=p).log_prob(lib.tensor(VALUES)), [(3, 4)],
                 id="categorical_probs_log_prob"),
    pytest.param(lambda lib, p: D(lib).Categorical(probs=p).entropy(), [(3, 4)], id="categorical_probs_entropy"),
    pytest.param(lambda lib, p: D(lib).Categorical(probs=p).log_prob(lib.tensor(2)), [(4,)],
                 id="categorical_unbatched"),
    pytest.param(lambda lib, loc, scale, x: D(lib).Normal(loc, scale).log_prob(x), [(3,), (3,), (2, 3)],
                 id="normal_log_prob"),
    pytest.param(lambda lib, loc, scale: D(lib).Normal(loc, scale).entropy(), [(2, 3), (3,)], id="normal_entropy"),
    pytest.param(lambda lib, loc, scale: D(lib).Normal(loc, scale).variance + D(lib).Normal(loc, scale).stddev,
                 [(3,), (3,)], id="normal_moments"),
]


@pytest.mark.parametrize("fn, shapes", CASES)
def test_matches_torch_and_finite_differences(fn, shapes):
    check(fn, shapes, domain=(0.2, 2.0))  # positive: probs and scales


def test_normal_rsample_is_reparameterized():
    zgrad.manual_seed(0)
    loc = zgrad.tensor([1.0, -2.0], requires_grad=True)
    scale = zgrad.tensor([0.5, 3.0], requires_grad=True)
    sample = Normal(loc, scale).rsample((4,))
    assert sample.shape == (4, 2)
    sample.sum().backward()
    eps = (sample.detach().numpy() - loc.detach().numpy()) / scale.detach().numpy()
    np.testing.assert_allclose(loc.grad.numpy(), [4.0, 4.0])
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0), rtol=1e-5)
    assert not Normal(loc, scale).sample((3,)).requires_grad


def test_normal_sample_statistics_and_reproducibility():
    zgrad.manual_seed(1)
    dist = Normal(zgrad.tensor([0.0, 5.0]), 2.0)
    draws = dist.sample((20000,)).numpy()
    assert draws.dtype == np.float32 and draws.shape == (20000, 2)
    np.testing.assert_allclose(draws.mean(0), [0.0, 5.0], atol=0.06)
    np.testing.assert_allclose(draws.std(0), [2.0, 2.0], rtol=0.03)
    zgrad.manual_seed(1)
    np.testing.assert_array_equal(dist.sample((20000,)).numpy(), draws)
    assert Normal(0.0, 1.0).sample().shape == ()
    assert dist.mean is dist.loc and dist.batch_shape == (2,)


def test_categorical_sample_frequencies():
    zgrad.manual_seed(2)
    probs = np.array([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    dist = Categorical(probs=zgrad.tensor(probs * 7))  # unnormalized is fine
    draws = dist.sample((40000,)).numpy()
    assert draws.dtype == np.int64 and draws.shape == (40000, 2)
    for row in range(2):
        frequencies = np.bincount(draws[:, row], minlength=4) / draws.shape[0]
        np.testing.assert_allclose(frequencies, probs[row], atol=0.01)
    assert not np.any(draws[:, 0] == 1)  # a zero-probability category is never drawn
    zgrad.manual_seed(2)
    np.testing.assert_array_equal(dist.sample((40000,)).numpy(), draws)
    assert Categorical(logits=zgrad.zeros(3)).sample().shape == ()


@pytest.mark.torch
def test_reinforce_style_gradient():
    torch = require_torch()
    logits = np.array([[0.5, -1.0, 2.0], [0.0, 0.3, -0.2]], dtype=np.float32)
    actions, rewards = np.array([2, 0]), np.array([1.5, -0.5], dtype=np.float32)
    z = zgrad.tensor(logits, requires_grad=True)
    loss = -(Categorical(logits=z).log_prob(zgrad.tensor(actions)) * zgrad.tensor(rewards)).sum()
    loss.backward()
    t = torch.tensor(logits, requires_grad=True)
    ref = -(torch.distributions.Categorical(logits=t).log_prob(torch.tensor(actions)) * torch.tensor(rewards)).sum()
    ref.backward()
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-6)
    np.testing.assert_allclose(z.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        Categorical()
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        Categorical(probs=zgrad.ones(3), logits=zgrad.ones(3))
    with pytest.raises(ValueError, match="`logits` parameter must be at least one-dimensional."):
        Categorical(logits=zgrad.tensor(1.0))
    with pytest.raises(ValueError, match="to satisfy the constraint Simplex"):
        Categorical(probs=zgrad.tensor([0.5, -0.1]))
    with pytest.raises(ValueError, match="within the support"):
        Categorical(logits=zgrad.zeros(3)).log_prob(zgrad.tensor([3]))
    with pytest.raises(ValueError, match="scale .* to satisfy the constraint GreaterThan\\(lower_bound=0.0\\)"):
        Normal(zgrad.zeros(2), zgrad.tensor([1.0, 0.0]))
    with pytest.raises(TypeError, match="sample_shape must be a tuple"):
        Normal(0.0, 1.0).sample(5)
    assert repr(Categorical(probs=zgrad.ones(2, 3))) == "Categorical(probs: zgrad.Size([2, 3]))"  # torch's repr

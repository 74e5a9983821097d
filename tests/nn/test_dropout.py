"""Dropout and Dropout2d: the statistics of the masks (each element or channel kept
independently with probability 1-p), the exact 1/(1-p) scale of the kept values and of their
gradient (the same mask), float64 finite differences, p = 0 and 1, eval mode, reproducibility from
the seed, in-place, and PyTorch's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import zgrad
import zgrad.nn.functional as F
from helpers import check_finite_differences
from zgrad import nn


def _bound(probability: float, trials: int) -> float:
    """Six standard deviations of the fraction of ``trials`` Bernoulli(``probability``) draws."""
    return 6 * math.sqrt(probability * (1 - probability) / trials)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_keeps_elements_independently_with_probability_one_minus_p(p, dtype):
    zgrad.manual_seed(0)
    n = 200_000
    values = np.random.default_rng(1).uniform(0.5, 1.5, n).astype(dtype)  # no zeros: out != 0 where kept
    x = zgrad.tensor(values, requires_grad=True)
    out = F.dropout(x, p)
    kept = out.numpy() != 0
    q = 1 - p
    assert abs(kept.mean() - q) < _bound(q, n)
    for part in np.array_split(kept, 8):  # every stretch of the tensor, not just the whole
        assert abs(part.mean() - q) < _bound(q, part.size)
    both = (kept[1:] & kept[:-1]).mean()  # neighbours are independent: P(both kept) = q**2
    assert abs(both - q * q) < 2 * _bound(q * q, n - 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kept_values_and_their_gradient_are_scaled_by_exactly_one_over_one_minus_p(dtype):
    zgrad.manual_seed(4)
    p = 0.3
    rng = np.random.default_rng(2)
    values = rng.uniform(0.5, 1.5, (300, 200)).astype(dtype)
    x = zgrad.tensor(values, requires_grad=True)
    out = F.dropout(x, p)
    kept = out.numpy() != 0
    scale = dtype(1 / (1 - p))
    np.testing.assert_array_equal(out.numpy(), np.where(kept, values * scale, 0))
    np.testing.assert_allclose(out.numpy()[kept], values[kept] / (1 - p), rtol=2 * np.finfo(dtype).eps)
    upstream = rng.standard_normal(values.shape).astype(dtype)
    out.backward(zgrad.tensor(upstream))
    np.testing.assert_array_equal(x.grad.numpy(), np.where(kept, upstream * scale, 0))  # mask * scale
    assert x.grad.dtype == dtype


def test_dropout2d_keeps_channels_with_probability_one_minus_p():
    zgrad.manual_seed(6)
    out = F.dropout2d(zgrad.ones(400, 100, 2, 2), 0.25).numpy().reshape(400 * 100, -1)
    channel_kept = out[:, 0] != 0
    assert abs(channel_kept.mean() - 0.75) < _bound(0.75, channel_kept.size)
    np.testing.assert_array_equal(out, np.where(channel_kept[:, None], np.float32(1 / 0.75), np.float32(0)).repeat(4, 1))


def test_finite_differences_with_a_fixed_mask():
    def fn(lib, x):
        zgrad.manual_seed(7)
        return F.dropout(x, 0.4)
    check_finite_differences(fn, [(5, 6)])

    def fn2d(lib, x):
        zgrad.manual_seed(8)
        return F.dropout2d(x, 0.5)
    check_finite_differences(fn2d, [(3, 4, 2, 3)])


def test_masks_are_reproducible_from_manual_seed():
    x = zgrad.ones(100)
    zgrad.manual_seed(11)
    first = F.dropout(x, 0.5).numpy()
    zgrad.manual_seed(11)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), first)
    assert not np.array_equal(F.dropout(x, 0.5).numpy(), first)


def test_dropout2d_drops_whole_channels():
    zgrad.manual_seed(0)
    x = zgrad.ones(8, 16, 5, 5, dtype=zgrad.float64)
    out = F.dropout2d(x, 0.5).numpy()
    per_channel = out.reshape(8, 16, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert 0.3 < (per_channel[..., 0] == 0).mean() < 0.7


def _whole(out, groups):
    """Whether every group of ``out`` viewed as (groups, -1) is all dropped or all kept (at 1/(1-0.5))."""
    flat = out.numpy().reshape(groups, -1)
    return bool(np.all((flat == 0).all(-1) | (flat == 2.0).all(-1)))


@pytest.mark.parametrize("function, shape, groups, warned", [
    (F.dropout2d, (6, 4, 30), 24, ["Received a 3D input to dropout2d and assuming that channel-wise 1D"]),
    (F.dropout2d, (6, 40), 240, ["Received a 2-D input to dropout2d, which is deprecated"]),
    (F.dropout1d, (6, 4, 30), 24, []),
    (F.dropout1d, (6, 30), 6, []),
    (F.dropout3d, (2, 3, 2, 2, 5), 6, []),
    (F.dropout3d, (3, 2, 2, 5), 3, []),
    (F.dropout3d, (3, 20), 3, ["Received a 2-D input to dropout3d, which is deprecated"]),
], ids=["2d-of-3d", "2d-of-2d", "1d-batched", "1d-unbatched", "3d-batched", "3d-unbatched", "3d-of-2d"])
def test_channel_wise_dropout_draws_as_pytorch_2_13_does(function, shape, groups, warned, recwarn):
    """One draw per (N, C), with a batch of 1 in front of an unbatched input; dropout2d of a 2-D
    input so drops single elements, and of a 3-D one reads it as (N, C, L), with PyTorch's warnings."""
    zgrad.manual_seed(0)
    assert _whole(function(zgrad.ones(*shape, dtype=zgrad.float64), 0.5), groups)
    assert [str(w.message) for w in recwarn if any(text in str(w.message) for text in warned)] and len(recwarn) == len(warned) \
        if warned else not recwarn


def test_dropout1d_refuses_other_ranks_and_feature_dropout_needs_two_dims():
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but received a 4D input"):
        F.dropout1d(zgrad.ones(2, 2, 2, 2), 0.5)
    with pytest.warns(UserWarning, match="Received a 1-D input to dropout2d"), \
            pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions in the input"):
        F.dropout2d(zgrad.ones(5), 0.5)
    assert nn.Dropout1d(0.5)(zgrad.ones(3, 4)).shape == (3, 4) and repr(nn.Dropout3d(0.2)) == "Dropout3d(p=0.2, inplace=False)"


def test_empty_input():
    x = zgrad.zeros(0, 3, requires_grad=True)
    out = F.dropout(x, 0.5)
    assert out.shape == (0, 3)
    out.sum().backward()
    assert x.grad.shape == (0, 3)
    assert F.dropout2d(zgrad.zeros(2, 0, 4, 4), 0.5).shape == (2, 0, 4, 4)


def test_edge_probabilities_and_eval_mode():
    x = zgrad.randn(4, 5, requires_grad=True)
    same = F.dropout(x, 0.0)
    np.testing.assert_array_equal(same.numpy(), x.numpy())
    same.backward(zgrad.full((4, 5), 3.0))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((4, 5), 3.0, np.float32))  # p = 0: identity gradient
    x.grad = None
    zeros = F.dropout(x, 1.0)
    assert not np.any(zeros.numpy())
    zeros.sum().backward()
    assert not np.any(x.grad.numpy())
    assert F.dropout(x, 0.9, training=False) is x
    layer = nn.Dropout(0.5)
    assert layer.training
    layer.eval()
    assert layer(x) is x
    model = nn.Sequential(nn.Linear(5, 5), nn.Dropout(0.5), nn.Dropout2d(0.2))
    model.eval()
    np.testing.assert_array_equal(model(x).numpy(), model(x).numpy())
    assert repr(nn.Dropout(0.25)) == "Dropout(p=0.25, inplace=False)"


def test_inplace_dropout():
    zgrad.manual_seed(5)
    x = zgrad.ones(50, 40)
    same = F.dropout(x, 0.5, inplace=True)
    assert same is x and set(np.unique(x.numpy())) <= {0.0, 2.0}
    leaf = zgrad.randn(10, 10, requires_grad=True)
    hidden = leaf * 3
    nn.Dropout(0.5, inplace=True)(hidden)
    hidden.sum().backward()
    kept = hidden.numpy() != 0
    np.testing.assert_allclose(leaf.grad.numpy(), np.where(kept, 6.0, 0.0), rtol=1e-6)


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_probability_errors(p):
    message = "dropout probability has to be between 0 and 1, but got"
    with pytest.raises(ValueError, match=message):
        nn.Dropout(p)
    with pytest.raises(ValueError, match=message):
        F.dropout(zgrad.ones(3), p)
    with pytest.raises(ValueError, match=message):
        nn.Dropout2d(p)

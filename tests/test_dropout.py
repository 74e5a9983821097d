"""Dropout and Dropout2d: masks from zgrad's generator, scaling, gradients (the same mask times
1/(1-p), checked against float64 finite differences), eval mode, in-place, and PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
import zgrad.nn.functional as F
from helpers import check_finite_differences, require_torch
from zgrad import nn


def test_dropout_zeroes_and_scales_with_the_same_mask_in_backward():
    zgrad.manual_seed(0)
    x = zgrad.tensor(np.random.default_rng(0).uniform(0.5, 1.5, (200, 300)).astype(np.float32), requires_grad=True)
    out = F.dropout(x, 0.3)
    kept = out.numpy() != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(out.numpy()[kept], x.numpy()[kept] / np.float32(0.7), rtol=1e-6)
    upstream = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    out.backward(zgrad.tensor(upstream))
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, upstream / np.float32(0.7), 0), rtol=1e-6)
    assert x.grad.dtype == np.float32


def test_dropout_matches_torch_given_the_same_mask():
    torch = require_torch()
    x = np.random.default_rng(2).standard_normal((64, 33)).astype(np.float32)
    zgrad.manual_seed(3)
    out = F.dropout(zgrad.tensor(x), 0.25).numpy()
    mask = torch.tensor(out != 0)
    expected = torch.tensor(x) * mask / (1 - 0.25)  # PyTorch's dropout: input * bernoulli mask / (1 - p)
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-6)


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
    # 3-D input, PyTorch's rule: one draw per entry of the first dimension
    three_d = F.dropout2d(zgrad.ones(6, 4, 3), 0.5).numpy().reshape(6, -1)
    assert np.all((three_d == 0).all(-1) | (three_d == 2.0).all(-1))


def test_empty_input():
    x = zgrad.zeros(0, 3, requires_grad=True)
    out = F.dropout(x, 0.5)
    assert out.shape == (0, 3)
    out.sum().backward()
    assert x.grad.shape == (0, 3)
    assert F.dropout2d(zgrad.zeros(2, 0, 4, 4), 0.5).shape == (2, 0, 4, 4)


def test_edge_probabilities_and_eval_mode():
    x = zgrad.randn(4, 5, requires_grad=True)
    np.testing.assert_array_equal(F.dropout(x, 0.0).numpy(), x.numpy())
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

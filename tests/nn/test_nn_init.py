"""zgrad.nn.init against PyTorch's formulas: gains, fans, and the distributions each fills."""

from __future__ import annotations

import math

import numpy as np
import pytest

import zgrad
from zgrad import nn
from zgrad.nn import init
from helpers import torch

GAINS = [
    ("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
    ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 1), ("selu", None), ("conv_transpose3d", None),
]


@pytest.mark.torch
@pytest.mark.parametrize("nonlinearity, param", GAINS)
def test_calculate_gain(nonlinearity, param):
    expected = {"tanh": 5 / 3, "relu": math.sqrt(2), "selu": 0.75}.get(nonlinearity, 1.0)
    if nonlinearity == "leaky_relu":
        expected = math.sqrt(2 / (1 + (0.01 if param is None else param) ** 2))
    assert init.calculate_gain(nonlinearity, param) == pytest.approx(expected, rel=1e-15)
    if torch is not None:
        assert init.calculate_gain(nonlinearity, param) == pytest.approx(
            torch.nn.init.calculate_gain(nonlinearity, param), rel=1e-15)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity softplus"):
        init.calculate_gain("softplus")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


@pytest.mark.torch
@pytest.mark.parametrize("shape, fans", [((3, 4), (4, 3)), ((8, 3, 5, 5), (75, 200)), ((2, 3, 4), (12, 8))])
def test_fan_in_and_fan_out(shape, fans):
    assert init._calculate_fan_in_and_fan_out(zgrad.empty(shape)) == fans
    if torch is not None:
        assert torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape)) == fans


def test_fans_need_two_dimensions():
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"):
        init.xavier_uniform_(zgrad.empty(5))
    with pytest.raises(ValueError, match=r"Mode fan_avg not supported, please use one of \['fan_in', 'fan_out'\]"):
        init.kaiming_uniform_(zgrad.empty(3, 4), mode="fan_avg")


SHAPE = (256, 128, 3, 3)  # fan_in 1152, fan_out 2304; 294912 samples keep the statistics tight
FAN_IN, FAN_OUT = 128 * 9, 256 * 9

# (name, call, kind, bound or std): uniform fills check their bound, normal fills their std
FILLS = [
    ("uniform", lambda t: init.uniform_(t, -0.3, 0.7), "uniform", (-0.3, 0.7)),
    ("normal", lambda t: init.normal_(t, 0.5, 2.0), "normal", (0.5, 2.0)),
    ("xavier_uniform", lambda t: init.xavier_uniform_(t, gain=2.0), "uniform",
     (-2.0 * math.sqrt(6 / (FAN_IN + FAN_OUT)), 2.0 * math.sqrt(6 / (FAN_IN + FAN_OUT)))),
    ("xavier_normal", lambda t: init.xavier_normal_(t), "normal", (0.0, math.sqrt(2 / (FAN_IN + FAN_OUT)))),
    ("kaiming_uniform", lambda t: init.kaiming_uniform_(t, a=math.sqrt(5)), "uniform",
     (-1 / math.sqrt(FAN_IN), 1 / math.sqrt(FAN_IN))),
    ("kaiming_uniform_relu_fan_out", lambda t: init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"), "uniform",
     (-math.sqrt(6 / FAN_OUT), math.sqrt(6 / FAN_OUT))),
    ("kaiming_normal", lambda t: init.kaiming_normal_(t), "normal",
     (0.0, math.sqrt(2 / (1 + 0.01 ** 2)) / math.sqrt(FAN_IN))),
    ("kaiming_normal_fan_out", lambda t: init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"), "normal",
     (0.0, math.sqrt(2 / FAN_OUT))),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name, fill, kind, params", FILLS, ids=[f[0] for f in FILLS])
def test_fill_distributions(name, fill, kind, params, dtype):
    zgrad.manual_seed(0)
    weight = nn.Parameter(zgrad.empty(*SHAPE, dtype=dtype))
    out = fill(weight)
    assert out is weight and weight.dtype == dtype
    assert weight.requires_grad and weight.is_leaf and weight.grad_fn is None
    values = weight.numpy()
    if kind == "uniform":
        low, high = params
        assert values.min() >= low and values.max() < high
        assert values.min() < low + 0.01 * (high - low) and values.max() > high - 0.01 * (high - low)
        assert abs(values.mean() - (low + high) / 2) < 0.01 * (high - low)
        assert abs(values.std() - (high - low) / math.sqrt(12)) < 0.01 * (high - low)
    else:
        mean, std = params
        assert abs(values.mean() - mean) < 0.01 * std
        assert abs(values.std() - std) < 0.01 * std


@pytest.mark.torch
@pytest.mark.parametrize("name, fill", [(f[0], f[1]) for f in FILLS], ids=[f[0] for f in FILLS])
def test_fills_match_torch_statistics(name, fill):
    if torch is None:
        pytest.skip("torch is not installed")
    torch_fill = {
        "uniform": lambda t: torch.nn.init.uniform_(t, -0.3, 0.7),
        "normal": lambda t: torch.nn.init.normal_(t, 0.5, 2.0),
        "xavier_uniform": lambda t: torch.nn.init.xavier_uniform_(t, gain=2.0),
        "xavier_normal": lambda t: torch.nn.init.xavier_normal_(t),
        "kaiming_uniform": lambda t: torch.nn.init.kaiming_uniform_(t, a=math.sqrt(5)),
        "kaiming_uniform_relu_fan_out": lambda t: torch.nn.init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"),
        "kaiming_normal": lambda t: torch.nn.init.kaiming_normal_(t),
        "kaiming_normal_fan_out": lambda t: torch.nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
    }[name]
    mine = fill(zgrad.empty(*SHAPE)).numpy()
    ref = torch_fill(torch.empty(*SHAPE)).numpy()
    assert abs(mine.mean() - ref.mean()) < 0.02 * ref.std() + 1e-9
    assert abs(mine.std() - ref.std()) < 0.01 * ref.std()
    if "uniform" in name:  # the same support (a normal's extreme value is too noisy to compare)
        assert abs(np.abs(mine).max() - np.abs(ref).max()) < 0.01 * np.abs(ref).max()


def test_constant_ones_zeros():
    t = nn.Parameter(zgrad.empty(3, 4))
    assert init.constant_(t, 0.25) is t and np.all(t.numpy() == 0.25)
    init.ones_(t)
    assert np.all(t.numpy() == 1)
    init.zeros_(t)
    assert np.all(t.numpy() == 0) and t.requires_grad and t.is_leaf


def test_init_is_reproducible_with_manual_seed():
    zgrad.manual_seed(42)
    a = init.kaiming_normal_(zgrad.empty(10, 20)).numpy().copy()
    b = init.uniform_(zgrad.empty(5)).numpy().copy()
    zgrad.manual_seed(42)
    np.testing.assert_array_equal(a, init.kaiming_normal_(zgrad.empty(10, 20)).numpy())
    np.testing.assert_array_equal(b, init.uniform_(zgrad.empty(5)).numpy())


def test_zero_element_tensor_warns_and_is_left_alone():
    t = zgrad.empty(0, 3)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        assert init.kaiming_uniform_(t) is t
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        init.kaiming_normal_(t)


def test_init_inside_a_recorded_graph_stays_out_of_it():
    weight = nn.Parameter(zgrad.ones(4, 4))
    init.xavier_uniform_(weight)  # grad mode is on here: init runs under no_grad itself
    assert weight.grad_fn is None and zgrad.is_grad_enabled()


def test_default_layer_init_matches_linear():
    zgrad.manual_seed(3)
    layer = nn.Linear(64, 32)
    w, b = zgrad.empty(32, 64), zgrad.empty(32)
    zgrad.manual_seed(3)
    init.default_layer_init_(w, b)
    np.testing.assert_array_equal(layer.weight.numpy(), w.numpy())
    np.testing.assert_array_equal(layer.bias.numpy(), b.numpy())
    assert np.abs(w.numpy()).max() <= 1 / 8

"""GELU (exact and tanh), leaky ReLU and the Softmax/LogSoftmax modules against PyTorch and float64
finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import case, check, require_torch
from zgrad import nn


def F(lib):
    return lib.nn.functional


CASES = [
    case("gelu", lambda lib, x: F(lib).gelu(x), (4, 7), domain=(-4.0, 4.0)),
    case("gelu_tanh", lambda lib, x: F(lib).gelu(x, approximate="tanh"), (4, 7), domain=(-4.0, 4.0)),
    case("gelu_noncontiguous", lambda lib, x: F(lib).gelu(x.T), (3, 5)),
    case("leaky_relu", lambda lib, x: F(lib).leaky_relu(x), (6, 5)),
    case("leaky_relu_slope", lambda lib, x: F(lib).leaky_relu(x, 0.2), (2, 3, 4)),
    case("relu_inplace_on_a_graph_tensor", lambda lib, x: F(lib).relu(x * 2, inplace=True), (3, 4)),
    case("leaky_relu_inplace_on_a_graph_tensor", lambda lib, x: F(lib).leaky_relu(x * 2, 0.1, inplace=True), (3, 4)),
    case("dropout_inplace_eval", lambda lib, x: F(lib).dropout(x * 2, 0.5, training=False, inplace=True), (3, 4)),
    case("gelu_module", lambda lib, x: lib.nn.GELU(approximate="tanh")(x), (3, 4)),
    case("leaky_relu_module", lambda lib, x: lib.nn.LeakyReLU(0.3)(x), (3, 4)),
    case("softmax_module", lambda lib, x: lib.nn.Softmax(dim=0)(x), (3, 4)),
    case("log_softmax_module", lambda lib, x: lib.nn.LogSoftmax(dim=-1)(x), (2, 3, 4)),
]


@pytest.mark.parametrize("c", CASES)
def test_matches_torch_and_finite_differences(c):
    check(c.fn, c.shapes, domain=c.domain)


@pytest.mark.torch
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 3, 4, 5)])
def test_softmax_modules_default_dim_as_torch(shape):
    torch = require_torch()
    import warnings

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about the implicit dim
        expected = torch.nn.Softmax()(torch.tensor(x)).numpy()
        expected_log = torch.nn.LogSoftmax()(torch.tensor(x)).numpy()
    np.testing.assert_allclose(nn.Softmax()(zgrad.tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(nn.LogSoftmax()(zgrad.tensor(x)).numpy(), expected_log, rtol=1e-5, atol=1e-6)


def test_leaky_relu_inplace_and_integer_input():
    x = zgrad.tensor([-2.0, 0.0, 3.0])
    assert nn.LeakyReLU(0.5, inplace=True)(x) is x
    np.testing.assert_array_equal(x.numpy(), [-1.0, 0.0, 3.0])
    for activation in (nn.functional.gelu, nn.functional.leaky_relu):  # PyTorch refuses integers too
        with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
            activation(zgrad.tensor([1, 2]))


def test_gelu_errors():
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        nn.GELU("erf")
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        nn.functional.gelu(zgrad.ones(2), approximate="fast")
    assert repr(nn.GELU()) == "GELU(approximate='none')"


def test_functional_relu_takes_inplace_like_torch():
    x = zgrad.tensor([[-1.0, 2.0], [3.0, -4.0]])
    same = F(zgrad).relu(x, inplace=True)
    assert same is x
    np.testing.assert_array_equal(x.numpy(), [[0.0, 2.0], [3.0, 0.0]])
    y = zgrad.tensor([-1.0, 1.0])
    out = F(zgrad).relu(y)
    assert out is not y and y.numpy()[0] == -1.0
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        F(zgrad).relu(zgrad.ones(2, requires_grad=True), inplace=True)

"""GELU (exact and tanh), leaky ReLU, SiLU, Mish, Softplus, RMSNorm and the Softmax/LogSoftmax
modules against PyTorch and float64 finite differences."""

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
    case("silu", lambda lib, x: F(lib).silu(x), (4, 7), domain=(-6.0, 6.0)),
    case("silu_inplace_on_a_graph_tensor", lambda lib, x: F(lib).silu(x * 2, inplace=True), (3, 4)),
    case("silu_module", lambda lib, x: lib.nn.SiLU()(x.T), (3, 5)),
    case("mish", lambda lib, x: F(lib).mish(x), (4, 7), domain=(-6.0, 6.0)),
    case("mish_large", lambda lib, x: F(lib).mish(x), (2, 3), domain=(18.0, 30.0)),
    case("mish_inplace_module", lambda lib, x: lib.nn.Mish(inplace=True)(x * 1.5), (3, 4)),
    case("softplus", lambda lib, x: F(lib).softplus(x), (4, 7), domain=(-6.0, 6.0)),
    case("softplus_beta_threshold", lambda lib, x: F(lib).softplus(x, beta=2.0, threshold=3.0), (4, 7),
         domain=(-3.0, 3.0)),
    case("softplus_above_threshold", lambda lib, x: lib.nn.Softplus(0.5, 10.0)(x), (2, 5), domain=(15.0, 200.0)),
    case("rms_norm", lambda lib, x, w: F(lib).rms_norm(x, (4,), w), (3, 4), (4,)),
    case("rms_norm_two_dims_eps", lambda lib, x, w: F(lib).rms_norm(x, [3, 4], w, eps=1e-3), (2, 3, 4), (3, 4)),
    case("rms_norm_no_weight", lambda lib, x: F(lib).rms_norm(x, (5,)), (2, 3, 5)),
    case("rms_norm_module", lambda lib, x: lib.nn.RMSNorm([2, 3], dtype=x.dtype)(x), (4, 2, 3)),
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


def test_smooth_activation_modules_and_errors():
    assert repr(nn.SiLU()) == "SiLU()" and repr(nn.Mish(inplace=True)) == "Mish(inplace=True)"
    assert repr(nn.Softplus()) == "Softplus(beta=1.0, threshold=20.0)"
    x = zgrad.tensor([-1.0, 2.0])
    assert nn.SiLU(inplace=True)(x) is x
    np.testing.assert_allclose(x.numpy(), [-1.0 / (1.0 + np.e), 2.0 / (1.0 + np.exp(-2.0))], rtol=1e-6)
    for activation in (nn.functional.silu, nn.functional.mish, nn.functional.softplus):
        with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
            activation(zgrad.tensor([1, 2]))


def test_rms_norm_module_and_errors():
    module = nn.RMSNorm(4)
    assert repr(module) == "RMSNorm((4,), eps=None, elementwise_affine=True)"
    np.testing.assert_array_equal(module.weight.detach().numpy(), np.ones(4, dtype=np.float32))
    assert nn.RMSNorm(4, elementwise_affine=False).weight is None
    assert nn.RMSNorm(4, dtype=zgrad.float64).weight.dtype == zgrad.float64
    assert zgrad.nn.modules.normalization.RMSNorm is nn.RMSNorm
    x = zgrad.tensor([[1e-5, -1e-5, 1e-5, 1e-5]])  # eps None: the float32 epsilon, as torch
    expected = 1e-5 / np.sqrt(1e-10 + np.finfo(np.float32).eps)
    np.testing.assert_allclose(np.abs(module(x).detach().numpy()), expected, rtol=1e-5)
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[2, 4\], expected input with shape \[\*2, 4\], "
                                           r"but got input of size\[2, 3, 4\]"):
        nn.functional.rms_norm(zgrad.ones(2, 3, 4), [2, 4])
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape as normalized_shape, but got weight of "
                                           r"shape \[2\] and normalized_shape = \[3\]"):
        nn.functional.rms_norm(zgrad.ones(2, 3), [3], zgrad.ones(2))
    with pytest.raises(RuntimeError, match="Expected normalized_shape to be at least 1-dimensional"):
        nn.functional.rms_norm(zgrad.ones(2, 3), [])

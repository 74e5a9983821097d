"""Every differentiable op, forward and gradient, against PyTorch and against finite differences.

Each case is one line: a lambda written once against the API zgrad shares with torch, and the
shapes of its inputs (every input requires grad). Each case runs against torch in float32 and
float64 (skipped without torch) and against float64 central differences (always).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import zgrad
from helpers import case, check_finite_differences, check_torch, torch

POSITIVE = (0.5, 2.0)
INDEX = np.array([0, 2, 0, 3, 0], dtype=np.int64)  # repeats: gradients must add up
COLUMNS = np.array([1, 1, 0], dtype=np.int64)
TARGETS = np.array([0, 3, 1, 3, 2], dtype=np.int64)
MASK = np.array([True, False, True])


def F(lib):
    return lib.nn.functional


CASES = [
    # element-wise binary ops, operators and functions, with broadcasting
    case("add", lambda lib, a, b: a + b, (2, 3), (2, 3)),
    case("add_fn_broadcast", lambda lib, a, b: lib.add(a, b), (4, 1, 3), (2, 1)),
    case("add_scalar", lambda lib, a: a + 2.5, (3, 2)),
    case("radd_scalar", lambda lib, a: 2.5 + a, (3, 2)),
    case("sub", lambda lib, a, b: a - b, (2, 3), (3,)),
    case("sub_fn", lambda lib, a, b: lib.sub(a, b), (3, 1), (1, 4)),
    case("rsub_scalar", lambda lib, a: 2 - a, (3, 2)),
    case("mul", lambda lib, a, b: a * b, (2, 3, 4), (3, 1)),
    case("mul_fn", lambda lib, a, b: lib.mul(a, b), (5,), (5,)),
    case("mul_scalar", lambda lib, a: a * -1.5, (3,)),
    case("rmul_scalar", lambda lib, a: 3 * a, (2, 2)),
    case("mul_same_tensor", lambda lib, a: a * a, (3, 2)),
    case("div", lambda lib, a, b: a / b, (2, 3), (2, 3), domain=POSITIVE),
    case("div_fn_broadcast", lambda lib, a, b: lib.div(a, b), (2, 1, 3), (4, 1), domain=POSITIVE),
    case("div_scalar", lambda lib, a: a / 4.0, (3,)),
    case("rdiv_scalar", lambda lib, a: 2 / a, (2, 3), domain=POSITIVE),
    case("neg", lambda lib, a: -a, (2, 3)),
    case("neg_fn", lambda lib, a: lib.neg(a), (4,)),
    case("pow_scalar", lambda lib, a: a ** 3, (2, 3)),
    case("pow_fractional", lambda lib, a: a ** 0.5, (2, 3), domain=POSITIVE),
    case("rpow_scalar", lambda lib, a: 2 ** a, (2, 3)),
    case("pow_tensor", lambda lib, a, b: a ** b, (2, 3), (2, 3), domain=POSITIVE),
    case("pow_fn_broadcast", lambda lib, a, b: lib.pow(a, b), (2, 3), (3,), domain=POSITIVE),
    # matrix products
    case("matmul_1d_1d", lambda lib, a, b: a @ b, (4,), (4,)),
    case("matmul_1d_2d", lambda lib, a, b: a @ b, (4,), (4, 3)),
    case("matmul_2d_1d", lambda lib, a, b: a @ b, (3, 4), (4,)),
    case("matmul_2d_2d", lambda lib, a, b: lib.matmul(a, b), (3, 4), (4, 2)),
    case("matmul_3d_3d", lambda lib, a, b: lib.matmul(a, b), (2, 3, 4), (2, 4, 5)),
    case("matmul_3d_2d", lambda lib, a, b: lib.matmul(a, b), (2, 3, 4), (4, 5)),
    case("matmul_2d_3d", lambda lib, a, b: a @ b, (3, 4), (2, 4, 5)),
    case("matmul_4d_3d", lambda lib, a, b: a @ b, (2, 3, 2, 4), (3, 4, 2)),
    case("matmul_broadcast_batch", lambda lib, a, b: a @ b, (2, 1, 3, 4), (3, 4, 2)),
    case("matmul_1d_3d", lambda lib, a, b: a @ b, (4,), (2, 4, 3)),
    case("matmul_3d_1d", lambda lib, a, b: a @ b, (2, 3, 4), (4,)),
    # element-wise unary
    case("exp", lambda lib, a: lib.exp(a), (2, 3)),
    case("exp_method", lambda lib, a: a.exp(), (7,)),
    case("log", lambda lib, a: lib.log(a), (2, 3), domain=POSITIVE),
    case("log_method", lambda lib, a: a.log(), (4, 1), domain=POSITIVE),
    case("tanh", lambda lib, a: lib.tanh(a), (3, 4)),
    case("tanh_method", lambda lib, a: a.tanh(), (5,)),
    case("sigmoid", lambda lib, a: lib.sigmoid(a), (3, 4)),
    case("sigmoid_method", lambda lib, a: a.sigmoid(), (2, 2, 2)),
    case("relu", lambda lib, a: lib.relu(a), (3, 4)),
    case("relu_method", lambda lib, a: a.relu(), (6,)),
    case("relu_functional", lambda lib, a: F(lib).relu(a), (2, 5)),
    case("tanh_functional", lambda lib, a: F(lib).tanh(a), (2, 5)),
    case("sigmoid_functional", lambda lib, a: F(lib).sigmoid(a), (2, 5)),
    case("activations_noncontiguous", lambda lib, a: a.T.exp() * a.T.tanh() + a.T.sigmoid(), (3, 4)),
    # reductions
    case("sum_all", lambda lib, a: lib.sum(a), (2, 3, 4)),
    case("sum_method_all", lambda lib, a: a.sum(), (2, 3)),
    case("sum_dim", lambda lib, a: lib.sum(a, dim=1), (2, 3, 4)),
    case("sum_dim_negative", lambda lib, a: a.sum(dim=-1), (2, 3, 4)),
    case("sum_dim_tuple", lambda lib, a: a.sum(dim=(0, 2)), (2, 3, 4)),
    case("sum_dim_keepdim", lambda lib, a: a.sum(dim=1, keepdim=True), (2, 3, 4)),
    case("sum_tuple_negative_keepdim", lambda lib, a: lib.sum(a, dim=(-1, 0), keepdim=True), (2, 3, 4)),
    case("sum_none_keepdim", lambda lib, a: lib.sum(a, dim=None, keepdim=True), (2, 3)),
    case("mean_all", lambda lib, a: lib.mean(a), (2, 3, 4)),
    case("mean_dim", lambda lib, a: a.mean(dim=0), (2, 3, 4)),
    case("mean_dim_negative_keepdim", lambda lib, a: a.mean(dim=-2, keepdim=True), (2, 3, 4)),
    case("mean_dim_tuple", lambda lib, a: lib.mean(a, dim=(1, 2)), (2, 3, 4)),
    case("mean_none_keepdim", lambda lib, a: a.mean(dim=None, keepdim=True), (3, 2)),
    case("mean_dtype_float64", lambda lib, a: lib.mean(a, 1, dtype=lib.float64), (2, 3)),
    case("sum_dtype_float64", lambda lib, a: a.sum(dtype=lib.float64), (2, 3)),
    case("prod_all", lambda lib, a: lib.prod(a), (2, 3)),
    case("prod_dim", lambda lib, a: a.prod(1), (2, 3, 4)),
    case("prod_dim_negative_keepdim", lambda lib, a: lib.prod(a, -1, keepdim=True), (3, 4)),
    case("nansum_dim_tuple_keepdim", lambda lib, a: lib.nansum(a, dim=(0, 2), keepdim=True), (2, 3, 4)),
    case("nansum_method_all", lambda lib, a: a.nansum(), (3, 2)),
    case("cumsum_dim", lambda lib, a: lib.cumsum(a, 1), (2, 3, 4)),
    case("cumsum_method_last", lambda lib, a: a.cumsum(-1), (3, 5)),
    case("cumsum_dtype_float64", lambda lib, a: a.cumsum(0, dtype=lib.float64), (4, 2)),
    # layout
    case("reshape", lambda lib, a: lib.reshape(a, (4, 6)), (2, 3, 4)),
    case("reshape_method_infer", lambda lib, a: a.reshape(3, -1) * a.reshape(3, -1), (2, 3, 2)),
    case("view", lambda lib, a: a.view(-1), (2, 3)),
    case("transpose", lambda lib, a: lib.transpose(a, 0, 2), (2, 3, 4)),
    case("transpose_method_negative", lambda lib, a: a.transpose(-1, 0) * 2, (2, 3)),
    case("T", lambda lib, a, b: a.T @ b, (3, 2), (3, 4)),
    case("permute", lambda lib, a: a.permute(2, 0, 1), (2, 3, 4)),
    case("permute_tuple", lambda lib, a: a.permute((1, 0, 2)).reshape(3, 8), (2, 3, 4)),
    # indexing
    case("slice_rows", lambda lib, a: a[1:3], (4, 3)),
    case("index_int", lambda lib, a: a[1], (4, 3)),
    case("index_int_to_scalar", lambda lib, a: a[2] * 3, (4,)),
    case("slice_columns", lambda lib, a: a[:, 1:3], (4, 5)),
    case("slice_step_ellipsis", lambda lib, a: a[..., ::2], (2, 3, 5)),
    case("index_int_slice", lambda lib, a: a[1, :2], (3, 4)),
    case("slices_overlap", lambda lib, a: a[:3] * a[1:], (4, 2)),
    case("index_array_repeats", lambda lib, a: a[lib.tensor(INDEX)], (4, 3)),
    case("index_list_repeats", lambda lib, a: a[[1, 1, 0]], (3, 2)),
    case("index_columns_repeats", lambda lib, a: a[:, lib.tensor(COLUMNS)], (2, 3)),
    case("index_bool_mask", lambda lib, a: a[lib.tensor(MASK)], (3, 2)),
    # joining
    case("stack", lambda lib, a, b: lib.stack([a, b]), (2, 3), (2, 3)),
    case("stack_dim_last", lambda lib, a, b: lib.stack([a, b, a], dim=-1), (2, 3), (2, 3)),
    case("stack_dim_1", lambda lib, a, b: lib.stack((a, b), dim=1), (2, 3), (2, 3)),
    case("cat", lambda lib, a, b: lib.cat([a, b]), (2, 3), (4, 3)),
    case("cat_dim_1_repeat", lambda lib, a, b: lib.cat([a, b, a], dim=1), (2, 3), (2, 1)),
    case("cat_dim_negative", lambda lib, a, b: lib.cat((a, b), dim=-1), (2, 2, 3), (2, 2, 1)),
    # softmax family
    case("softmax_last", lambda lib, a: F(lib).softmax(a, dim=-1), (3, 5)),
    case("softmax_dim0", lambda lib, a: F(lib).softmax(a, dim=0), (3, 5)),
    case("softmax_3d_dim0", lambda lib, a: F(lib).softmax(a, dim=0), (3, 2, 4)),
    case("softmax_3d_dim1", lambda lib, a: F(lib).softmax(a, dim=1), (3, 2, 4)),
    case("softmax_method", lambda lib, a: a.softmax(-1), (4,)),
    case("log_softmax_last", lambda lib, a: F(lib).log_softmax(a, dim=-1), (3, 5)),
    case("log_softmax_dim0", lambda lib, a: F(lib).log_softmax(a, dim=0), (3, 5)),
    case("log_softmax_3d_dim0", lambda lib, a: F(lib).log_softmax(a, dim=0), (3, 2, 4)),
    case("log_softmax_3d_dim1", lambda lib, a: F(lib).log_softmax(a, dim=1), (2, 3, 4)),
    case("log_softmax_method", lambda lib, a: a.log_softmax(dim=1), (2, 6)),
    # layers and losses
    case("linear", lambda lib, x, w, b: F(lib).linear(x, w, b), (4, 3), (5, 3), (5,)),
    case("linear_no_bias", lambda lib, x, w: F(lib).linear(x, w), (4, 3), (5, 3)),
    case("linear_3d_input", lambda lib, x, w, b: F(lib).linear(x, w, b), (2, 4, 3), (5, 3), (5,)),
    case("linear_1d_input", lambda lib, x, w, b: F(lib).linear(x, w, b), (3,), (2, 3), (2,)),
    case("mse_loss", lambda lib, a, b: F(lib).mse_loss(a, b), (4, 3), (4, 3)),
    case("mse_loss_1d", lambda lib, a, b: F(lib).mse_loss(a, b), (7,), (7,)),
    case("cross_entropy", lambda lib, a: F(lib).cross_entropy(a, lib.tensor(TARGETS)), (5, 4)),
    case("cross_entropy_scaled", lambda lib, a: F(lib).cross_entropy(a * 3, lib.tensor(TARGETS)) * 2, (5, 4)),
    # compositions: several ops, a tensor reused along several paths
    case("mlp_layer", lambda lib, x, w, b: lib.tanh(x @ w + b).sum(dim=0), (4, 3), (3, 5), (5,)),
    case("diamond", lambda lib, a: lib.exp(a) * lib.sigmoid(a) - a / 3, (3, 3)),
    case("softmax_cross_entropy_chain", lambda lib, x, w: F(lib).cross_entropy(F(lib).relu(x @ w), lib.tensor(TARGETS)), (5, 3), (3, 4)),
]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", CASES)
def test_matches_torch(op, dtype):
    check_torch(op.fn, op.shapes, dtype=dtype, domain=op.domain)


@pytest.mark.parametrize("op", CASES)
def test_matches_finite_differences(op):
    check_finite_differences(op.fn, op.shapes, domain=op.domain)


BINARY = {
    "add": lambda lib, a, b: a + b,
    "sub": lambda lib, a, b: lib.sub(a, b),
    "mul": lambda lib, a, b: a * b,
    "div": lambda lib, a, b: a / b,
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=15, deadline=None)
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3))
def test_random_broadcast_shapes(name, shapes):
    fn, (a, b) = BINARY[name], shapes.input_shapes
    check_finite_differences(fn, [a, b], domain=POSITIVE)
    if torch is not None:
        check_torch(fn, [a, b], dtype=np.float32, domain=POSITIVE)


# (name, fn); products refuse mixed dtypes, as torch's (tests/core/test_linalg_products.py)
MIXED = [
    ("add", lambda lib, a, b: a + b),
    ("mul", lambda lib, a, b: lib.mul(a, b)),
    ("div", lambda lib, a, b: a / b),
    ("mse_loss", lambda lib, a, b: lib.nn.functional.mse_loss(a, b)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, fn", MIXED, ids=[m[0] for m in MIXED])
def test_mixed_precision_promotes_and_keeps_input_grad_dtypes(name, fn):
    rng = np.random.default_rng(3)
    a32 = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
    b64 = rng.uniform(0.5, 2, (3, 4))
    a, b = zgrad.tensor(a32, requires_grad=True), zgrad.tensor(b64, requires_grad=True)
    out = fn(zgrad, a, b)
    assert out.dtype == np.result_type(a32, b64) == np.float64
    out.sum().backward()
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.float64
    # the same computation all in float64 gives the same gradients, up to float32 rounding of a's
    a2, b2 = zgrad.tensor(a32.astype(np.float64), requires_grad=True), zgrad.tensor(b64, requires_grad=True)
    expected = fn(zgrad, a2, b2)
    expected.sum().backward()
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), a2.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), b2.grad.numpy(), rtol=1e-12)
    if torch is not None:
        ta, tb = torch.tensor(a32, requires_grad=True), torch.tensor(b64, requires_grad=True)
        ref = fn(torch, ta, tb)
        assert ref.dtype == torch.float64
        ref.sum().backward()
        assert ta.grad.dtype == torch.float32 and tb.grad.dtype == torch.float64
        np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)
        np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-10)


def test_python_and_numpy_scalars_keep_the_tensor_dtype():
    t = zgrad.ones(3)
    for out in (t + 1, 2.5 * t, t / 3, 1 - t, t ** 2, 2 ** t, -t):
        assert out.dtype == np.float32
    for out in (np.float64(2.0) * t, t - np.float64(1.0), zgrad.add(t, np.int64(1)), t / np.float32(2)):
        assert out.dtype == np.float32, "numpy scalars count as Python scalars, as in torch"
    d = zgrad.ones(3, dtype=np.float64)
    assert (d * 2).dtype == np.float64


def test_ops_on_numpy_operands():
    a = zgrad.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    const = np.full((2, 3), 2.0)
    out = zgrad.mul(a, const) + zgrad.add(np.float64(1.0), a)
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 3), 3.0))


def test_cross_entropy_matches_numpy_formula():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((5, 4))
    t = zgrad.tensor(logits, requires_grad=True)
    loss = zgrad.nn.functional.cross_entropy(t, TARGETS)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    assert loss.shape == ()
    np.testing.assert_allclose(loss.item(), -log_probs[np.arange(5), TARGETS].mean(), rtol=1e-12)
    loss.backward()
    onehot = np.eye(4)[TARGETS]
    np.testing.assert_allclose(t.grad.numpy(), (np.exp(log_probs) - onehot) / 5, rtol=1e-10, atol=1e-14)


def test_softmax_is_stable_for_large_logits():
    x = zgrad.tensor([[1000.0, 1000.0, -1000.0], [0.0, 1e4, 0.0]])
    np.testing.assert_allclose(zgrad.nn.functional.softmax(x, dim=-1).numpy(), [[0.5, 0.5, 0.0], [0.0, 1.0, 0.0]])
    log_p = zgrad.nn.functional.log_softmax(x, dim=-1).numpy()
    assert np.all(np.isfinite(log_p[0, :2])) and np.isclose(log_p[0, 0], np.log(0.5))


def test_integer_targets_as_list_and_int32():
    logits = zgrad.randn(5, 4, requires_grad=True)
    a = zgrad.nn.functional.cross_entropy(logits, TARGETS.tolist())
    b = zgrad.nn.functional.cross_entropy(logits, zgrad.tensor(TARGETS.astype(np.int32)))
    assert a.item() == pytest.approx(b.item())


TOLERANCE_EXTREME = {np.dtype(np.float32): dict(rtol=2e-6, atol=0), np.dtype(np.float64): dict(rtol=1e-14, atol=0)}
EXTREMES = np.array([-1000.0, -100.0, -50.0, -20.0, -1e-8, 0.0, 1e-8, 20.0, 50.0, 88.0, 100.0, 700.0, 1000.0])


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


ACTIVATIONS = {  # name: (forward, derivative from input and output), numpy in float64
    "exp": (np.exp, lambda x, y: y),
    "tanh": (np.tanh, lambda x, y: 1 - y * y),
    "sigmoid": (_sigmoid, lambda x, y: y * (1 - y)),
    "relu": (lambda x: np.maximum(x, 0), lambda x, y: (x > 0).astype(x.dtype)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_at_extreme_values(name, dtype):
    forward, derivative = ACTIVATIONS[name]
    x = zgrad.tensor(EXTREMES.astype(dtype), requires_grad=True)
    y = getattr(zgrad, name)(x)
    y.sum().backward()
    with np.errstate(over="ignore"):
        expected = forward(EXTREMES).astype(dtype)
        expected_grad = derivative(EXTREMES.astype(dtype), expected)
    tol = TOLERANCE_EXTREME[np.dtype(dtype)]
    np.testing.assert_allclose(y.numpy(), expected, **tol)
    np.testing.assert_allclose(x.grad.numpy(), expected_grad, **tol)
    assert not np.any(np.isnan(x.grad.numpy()))



def test_log_at_extreme_values():
    x = np.array([1e-300, 1e-5, 1.0, 1e5, 1e300, np.inf, 0.0, -1.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_allclose(zgrad.log(zgrad.tensor(x)).numpy(), np.log(x), rtol=1e-14)
    x32 = np.array([1e-38, 1e-5, 1.0, 1e5, 1e38, np.inf], dtype=np.float32)
    np.testing.assert_allclose(zgrad.log(zgrad.tensor(x32)).numpy(), np.log(x32), rtol=2e-6)

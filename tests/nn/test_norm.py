"""batch_norm, layer_norm, group_norm and their modules: forward and every gradient against PyTorch
(float32, float64) and float64 finite differences; BatchNorm's running statistics against torch
over several steps, train and eval; state_dict; error texts."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import case, check_finite_differences, check_torch, require_torch, torch
from zgrad import nn

RUNNING_MEAN = np.array([0.3, -0.2, 0.5])
RUNNING_VAR = np.array([0.7, 1.6, 0.9])


def F(lib):
    return lib.nn.functional


def _running(lib, x):
    """Running statistics as constants (no gradient) in x's dtype."""
    return lib.tensor(RUNNING_MEAN, dtype=x.dtype), lib.tensor(RUNNING_VAR, dtype=x.dtype)


CASES = [
    # runs of S >= 32 elements per (sample, channel) take the channel-per-task kernels, shorter runs
    # the row-sweeping ones
    case("batch_norm_train_2d", lambda lib, x, w, b: F(lib).batch_norm(x, None, None, w, b, training=True),
         (3, 3, 6, 7), (3,), (3,)),
    case("batch_norm_train_short_runs", lambda lib, x, w, b: F(lib).batch_norm(x, None, None, w, b, training=True),
         (4, 3, 5, 6), (3,), (3,)),
    case("batch_norm_transposed_input", lambda lib, x: F(lib).batch_norm(x.transpose(2, 3), None, None, training=True),
         (2, 3, 6, 7)),
    case("batch_norm_train_nc", lambda lib, x, w, b: F(lib).batch_norm(x, None, None, w, b, training=True),
         (6, 3), (3,), (3,)),
    case("batch_norm_train_ncl", lambda lib, x: F(lib).batch_norm(x, None, None, training=True, eps=1e-3), (3, 3, 7)),
    case("batch_norm_eval", lambda lib, x, w, b: F(lib).batch_norm(x, *_running(lib, x), w, b, training=False),
         (2, 3, 6, 6), (3,), (3,)),
    case("batch_norm_eval_short_runs", lambda lib, x, w, b: F(lib).batch_norm(x, *_running(lib, x), w, b),
         (4, 3, 5, 2), (3,), (3,)),
    case("batch_norm_eval_no_affine", lambda lib, x: F(lib).batch_norm(x, *_running(lib, x)), (5, 3)),
    case("batch_norm_train_weight_only", lambda lib, x, w: F(lib).batch_norm(x, None, None, w, training=True),
         (3, 3, 4, 4), (3,)),
    case("layer_norm_last", lambda lib, x, w, b: F(lib).layer_norm(x, (6,), w, b), (4, 5, 6), (6,), (6,)),
    case("layer_norm_two_dims", lambda lib, x, w, b: F(lib).layer_norm(x, (5, 6), w, b), (3, 5, 6), (5, 6), (5, 6)),
    case("layer_norm_no_affine", lambda lib, x: F(lib).layer_norm(x, (7,), eps=1e-3), (4, 7)),
    case("layer_norm_weight_only", lambda lib, x, w: F(lib).layer_norm(x, (6,), w), (2, 3, 6), (6,)),
    case("layer_norm_1d_input", lambda lib, x, w, b: F(lib).layer_norm(x, (8,), w, b), (8,), (8,), (8,)),
    case("group_norm_4d", lambda lib, x, w, b: F(lib).group_norm(x, 3, w, b), (2, 6, 4, 3), (6,), (6,)),
    case("group_norm_one_group", lambda lib, x, w, b: F(lib).group_norm(x, 1, w, b), (3, 4, 5), (4,), (4,)),
    case("group_norm_instance", lambda lib, x, w, b: F(lib).group_norm(x, 4, w, b), (2, 4, 3, 3), (4,), (4,)),
    case("group_norm_2d", lambda lib, x, w, b: F(lib).group_norm(x, 2, w, b), (5, 8), (8,), (8,)),
    case("group_norm_no_affine", lambda lib, x: F(lib).group_norm(x, 2, eps=1e-3), (2, 6, 5)),
]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("c", CASES)
def test_norm_matches_torch(c, dtype):
    # float32: gradients sum over up to 120 elements in another order than PyTorch
    check_torch(c.fn, c.shapes, dtype=dtype, domain=c.domain, atol=1e-5 if dtype == np.float32 else None)


@pytest.mark.parametrize("c", CASES)
def test_norm_finite_differences(c):
    check_finite_differences(c.fn, c.shapes, domain=c.domain)


@pytest.mark.torch
def test_batch_norm_large_mean_float32():
    """Statistics stay accurate when |mean| >> std (shifted sums, no E[x^2] - E[x]^2 cancellation)."""
    require_torch()
    x = (1000 + np.random.default_rng(0).standard_normal((16, 4, 8, 8))).astype(np.float32)
    out = F(zgrad).batch_norm(zgrad.tensor(x), None, None, training=True)
    ref = F(torch).batch_norm(torch.tensor(x), None, None, training=True)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=2e-3)
    np.testing.assert_allclose(out.numpy().std(axis=(0, 2, 3)), 1, rtol=1e-3)


def _pair(module_cls, reference_cls, *args, **kwargs):
    zgrad.manual_seed(0)
    module, reference = module_cls(*args, **kwargs), reference_cls(*args, **kwargs)
    with torch.no_grad(), zgrad.no_grad():
        for p, q in zip(reference.parameters(), module.parameters()):
            p.copy_(torch.from_numpy(np.random.default_rng(p.numel()).uniform(0.5, 1.5, p.shape).astype(np.float32)))
            q.copy_(zgrad.tensor(p.numpy()))
    return module, reference


def _step(module, reference, x, check_grads=True):
    zx, tx = zgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = module(zx), reference(tx)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=2e-5)
    if check_grads:
        upstream = np.random.default_rng(x.size).standard_normal(x.shape).astype(np.float32)
        out.backward(zgrad.tensor(upstream))
        ref.backward(torch.tensor(upstream))
        np.testing.assert_allclose(zx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=2e-5)
        for p, q in zip(module.parameters(), reference.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=2e-5)
            p.grad, q.grad = None, None


def _assert_same_buffers(module, reference):
    ours, theirs = dict(module.named_buffers()), dict(reference.named_buffers())
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        np.testing.assert_allclose(ours[name].numpy(), value.numpy(), rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.torch
@pytest.mark.parametrize("momentum", [0.1, 0.5, None], ids=["momentum0.1", "momentum0.5", "cumulative"])
@pytest.mark.parametrize("cls, shape", [("BatchNorm2d", (4, 3, 8, 8)), ("BatchNorm2d", (4, 3, 5, 5)),
                                        ("BatchNorm1d", (8, 3)), ("BatchNorm1d", (4, 3, 6))],
                         ids=["2d", "2d_short_runs", "1d_nc", "1d_ncl"])
def test_batch_norm_running_stats_match_torch(cls, shape, momentum):
    """Several training steps, then evaluation: outputs, gradients and buffers as PyTorch's."""
    require_torch()
    module, reference = _pair(getattr(nn, cls), getattr(torch.nn, cls), 3, momentum=momentum)
    rng = np.random.default_rng(1)
    for step in range(4):
        x = (rng.standard_normal(shape) * (1 + step) + step).astype(np.float32)
        _step(module, reference, x)
        _assert_same_buffers(module, reference)
    assert int(module.num_batches_tracked.item()) == 4
    module.eval()
    reference.eval()
    x = rng.standard_normal(shape).astype(np.float32)
    _step(module, reference, x)
    _assert_same_buffers(module, reference)  # evaluation leaves the running statistics alone
    assert list(module.state_dict()) == list(reference.state_dict())


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [dict(track_running_stats=False), dict(affine=False), dict(bias=False)])
def test_batch_norm_options_match_torch(kwargs):
    require_torch()
    module, reference = _pair(nn.BatchNorm2d, torch.nn.BatchNorm2d, 3, **kwargs)
    x = np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype(np.float32) + 1
    for train in (True, False):
        module.train(train)
        reference.train(train)
        _step(module, reference, x)
    _assert_same_buffers(module, reference)
    assert list(module.state_dict()) == list(reference.state_dict())
    assert repr(module) == repr(reference)


def test_batch_norm_eval_without_gradients():
    """Evaluation under no_grad (inference) records nothing and uses the running statistics."""
    module = nn.BatchNorm1d(3)
    module.running_mean.copy_(zgrad.tensor(RUNNING_MEAN, dtype=np.float32))
    module.running_var.copy_(zgrad.tensor(RUNNING_VAR, dtype=np.float32))
    module.eval()
    x = np.random.default_rng(3).standard_normal((1, 3)).astype(np.float32)  # one sample is fine in eval
    with zgrad.no_grad():
        out = module(zgrad.tensor(x))
    expected = (x - RUNNING_MEAN) / np.sqrt(RUNNING_VAR + module.eps)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5)
    assert not out.requires_grad


@pytest.mark.torch
@pytest.mark.parametrize("module_cls, reference_args", [
    ("LayerNorm", ((5, 6),)), ("GroupNorm", (3, 6)), ("GroupNorm", (2, 6, 1e-3, True, None, None)),
])
def test_layer_and_group_norm_modules_match_torch(module_cls, reference_args):
    require_torch()
    module, reference = _pair(getattr(nn, module_cls), getattr(torch.nn, module_cls), *reference_args)
    x = np.random.default_rng(4).standard_normal((2, 6, 5, 6)).astype(np.float32)
    _step(module, reference, x)
    assert repr(module) == repr(reference)
    assert list(module.state_dict()) == list(reference.state_dict())


@pytest.mark.torch
def test_layer_norm_without_bias_matches_torch():
    require_torch()
    module, reference = _pair(nn.LayerNorm, torch.nn.LayerNorm, 6, bias=False)
    assert module.bias is None and len(list(module.parameters())) == 1
    _step(module, reference, np.random.default_rng(5).standard_normal((3, 4, 6)).astype(np.float32))


def test_norm_module_defaults():
    bn = nn.BatchNorm2d(4)
    np.testing.assert_array_equal(bn.weight.numpy(), np.ones(4))
    np.testing.assert_array_equal(bn.bias.numpy(), np.zeros(4))
    np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(4))
    np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(4))
    assert bn.num_batches_tracked.dtype == np.int64 and bn.running_mean.dtype == np.float32
    assert [name for name, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    assert nn.BatchNorm1d(4, affine=False, track_running_stats=False).running_mean is None
    assert nn.GroupNorm(2, 4, affine=False).weight is None
    assert nn.LayerNorm((2, 3), elementwise_affine=False).weight is None
    assert nn.LayerNorm(3, dtype=np.float64).weight.dtype == np.float64


def _raises(error, match, fn, *args, **kwargs):
    with pytest.raises(error, match=match):
        fn(*args, **kwargs)


def test_norm_errors():
    bn2 = r"BatchNorm2d\(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True\)"
    _raises(RuntimeError, bn2 + r": expected input with 4 channels in dimension 1, but got input of size "
            r"\[2, 3, 5, 5\] \(3 channels\)", nn.BatchNorm2d(4), zgrad.randn(2, 3, 5, 5))
    _raises(ValueError, bn2 + r": expected 4D input \(got 3D input of size \[2, 4, 5\]\)", nn.BatchNorm2d(4),
            zgrad.randn(2, 4, 5))
    _raises(ValueError, r"BatchNorm1d\(.*\): expected 2D or 3D input \(got 4D input", nn.BatchNorm1d(4),
            zgrad.randn(2, 4, 3, 3))
    _raises(ValueError, r"BatchNorm1d\(4, .*\): Expected more than 1 value per channel when training, got input "
            r"size \[1, 4\]", nn.BatchNorm1d(4), zgrad.randn(1, 4))
    _raises(ValueError, r"Expected more than 1 value per channel when training, got input size \[1, 4, 1, 1\]",
            nn.BatchNorm2d(4), zgrad.randn(1, 4, 1, 1))
    module = nn.BatchNorm1d(4)
    with pytest.raises(ValueError):
        module(zgrad.randn(1, 4))
    assert int(module.num_batches_tracked.item()) == 0  # a rejected batch is not counted
    _raises(RuntimeError, r"batch_norm: running_mean should contain 4 elements not 3 \(input of size \[2, 4\]",
            F(zgrad).batch_norm, zgrad.randn(2, 4), zgrad.zeros(3), zgrad.ones(3), training=True)
    _raises(RuntimeError, "batch_norm: weight should contain 4 elements not 5", F(zgrad).batch_norm,
            zgrad.randn(2, 4), None, None, zgrad.ones(5), training=True)
    _raises(RuntimeError, "running_mean and running_var must be defined in evaluation mode", F(zgrad).batch_norm,
            zgrad.randn(2, 4), None, None)
    _raises(RuntimeError, r"LayerNorm\(\(4,\), .*\): Given normalized_shape=\[4\], expected input with shape "
            r"\[\*, 4\], but got input of size\[2, 3\]", nn.LayerNorm(4), zgrad.randn(2, 3))
    _raises(RuntimeError, r"layer_norm: Expected weight to be of same shape as normalized_shape", F(zgrad).layer_norm,
            zgrad.randn(2, 3), (3,), zgrad.ones(4))
    _raises(ValueError, r"num_channels \(4\) must be divisible by num_groups \(3\)", nn.GroupNorm, 3, 4)
    _raises(RuntimeError, r"GroupNorm\(2, 4, .*\): Expected number of channels in input to be divisible by num_groups, "
            r"but got input of shape \[2, 3, 5\] and num_groups=2", nn.GroupNorm(2, 4), zgrad.randn(2, 3, 5))
    _raises(RuntimeError, "Expected at least 2 dimensions for input tensor but received 1", F(zgrad).group_norm,
            zgrad.randn(4), 2)
    _raises(RuntimeError, r"Input type \(float64\) and weight type \(float32\) should be the same",
            F(zgrad).layer_norm, zgrad.randn(2, 3, dtype=np.float64), (3,), zgrad.ones(3))

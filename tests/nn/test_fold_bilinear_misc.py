"""``unfold``/``fold``, ``bilinear``, ``local_response_norm``, LP pooling, max unpooling, alpha
dropout, RReLU and the multi-class margin losses (functions and modules) against PyTorch: forward
and gradients in float64, error messages, module reprs; the random layers by their statistics and
invariants (their noise is zgrad's generator's, not PyTorch's)."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import check_torch, error_of, require_torch


def F(lib):
    return lib.nn.functional


FOLD_CONFIGS = [
    dict(kernel_size=2),
    dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 1)),
    dict(kernel_size=3, dilation=2, padding=1, stride=3),
    dict(kernel_size=(1, 2), stride=(1, 2)),
]
FOLD_SHAPES = [(2, 3, 5, 6), (3, 7, 7)]


@pytest.mark.torch
@pytest.mark.parametrize("config", FOLD_CONFIGS, ids=str)
@pytest.mark.parametrize("shape", FOLD_SHAPES, ids=str)
def test_unfold_and_fold_match_torch(shape, config):
    torch = require_torch()
    check_torch(lambda lib, x: F(lib).unfold(x, **config), [shape], dtype=np.float64)
    columns = tuple(F(torch).unfold(torch.zeros(shape, dtype=torch.float64), **config).shape)
    check_torch(lambda lib, c: F(lib).fold(c, shape[-2:], **config), [columns], dtype=np.float64)
    check_torch(lambda lib, x: lib.nn.Unfold(**config)(x), [shape])
    check_torch(lambda lib, c: lib.nn.Fold(shape[-2:], **config)(c), [columns])


@pytest.mark.torch
def test_unfold_fold_empty_batch_and_bool():
    torch = require_torch()
    for lib in (zgrad, torch):
        assert tuple(F(lib).unfold(lib.zeros(0, 2, 3, 3), 2).shape) == (0, 8, 4)
        assert tuple(F(lib).fold(lib.zeros(0, 8, 4), 3, 2).shape) == (0, 2, 3, 3)
    x = np.random.default_rng(0).random((1, 2, 4, 4)) > 0.5
    np.testing.assert_array_equal(F(zgrad).unfold(zgrad.tensor(x), 2, stride=2).numpy(),
                                  F(torch).unfold(torch.tensor(x), 2, stride=2).numpy())


def _unfold_errors():
    x = (2, 3, 5, 6)
    return [
        (lambda lib: F(lib).unfold(lib.zeros(*x), 7), x),
        (lambda lib: F(lib).unfold(lib.zeros(*x), 0), x),
        (lambda lib: F(lib).unfold(lib.zeros(*x), 2, stride=0, dilation=0, padding=-1), x),
        (lambda lib: F(lib).unfold(lib.zeros(*x), 2, padding=-1, stride=0), x),
        (lambda lib: F(lib).unfold(lib.zeros(*x), 2, stride=(1, 2), dilation=(0, 1)), x),
        (lambda lib: F(lib).unfold(lib.zeros(*x), (2, 3, 4), padding=(1, 2, 3)), x),
        (lambda lib: F(lib).unfold(lib.zeros(*x), 2, padding=(1, 2, 3), stride=(1, 2, 3)), x),
        (lambda lib: F(lib).unfold(lib.zeros(*x), 2.0), x),
        (lambda lib: F(lib).unfold(lib.zeros(*x), 3, dilation=3), x),
        (lambda lib: F(lib).unfold(lib.zeros(5, 6), 2), x),
        (lambda lib: F(lib).unfold(lib.zeros(6), 2), x),
        (lambda lib: F(lib).unfold(lib.zeros(()), 2), x),
        (lambda lib: F(lib).unfold(lib.zeros(1, 2, 3, 5, 6), 2), x),
        (lambda lib: F(lib).unfold(lib.zeros(2, 0, 5, 6), 2), x),
        (lambda lib: F(lib).unfold(lib.zeros(3, 0, 6), 2), x),
        (lambda lib: F(lib).fold(lib.zeros(2, 12, 20), (5, 6), 3), x),
        (lambda lib: F(lib).fold(lib.zeros(2, 12, 20), (5, 7), 2), x),
        (lambda lib: F(lib).fold(lib.zeros(2, 12, 20), 5, 2, stride=2), x),
        (lambda lib: F(lib).fold(lib.zeros(1, 2, 12, 20), (5, 6), 2), x),
        (lambda lib: F(lib).fold(lib.zeros(20), (5, 6), 2), x),
        (lambda lib: F(lib).fold(lib.zeros(12, 0), (5, 6), 2), x),
        (lambda lib: F(lib).fold(lib.zeros(0, 20), (5, 6), 2), x),
        (lambda lib: F(lib).fold(lib.zeros(12, 20), (5, 6), 0, stride=0, padding=-1, dilation=0), x),
        (lambda lib: F(lib).fold(lib.zeros(12, 20), (5, 6), 2, stride=0, padding=-1, dilation=0), x),
        (lambda lib: F(lib).fold(lib.zeros(12, 20), (5, 6), 2, padding=-1, dilation=0), x),
        (lambda lib: F(lib).fold(lib.zeros(12, 20), (5, 6, 1), (2, 2, 1), stride=(1, 1, 1)), x),
        (lambda lib: F(lib).fold(lib.zeros(12, 20), (5, 6), 2, stride=(1, 1, 1), dilation=(1, 1, 1)), x),
        (lambda lib: F(lib).fold(lib.zeros(12, 20), (5.0, 6), 2), x),
        (lambda lib: F(lib).fold(lib.zeros(16, 4), (1, 1), 4), x),
        (lambda lib: F(lib).fold(lib.zeros(16, 4), (1, 1), 4, stride=2), x),
    ]


@pytest.mark.torch
@pytest.mark.parametrize("index", range(len(_unfold_errors())))
def test_unfold_fold_errors_match_torch(index):
    torch = require_torch()
    fn, _ = _unfold_errors()[index]
    expected = error_of(fn, torch)
    assert expected is not None
    assert error_of(fn, zgrad) == expected


@pytest.mark.torch
@pytest.mark.parametrize("name", ["unfold", "fold"])
def test_unfold_fold_integer_input_message(name):
    torch = require_torch()
    if name == "unfold":
        fn = lambda lib: F(lib).unfold(lib.zeros(1, 2, 3, 3, dtype=lib.int64), 2)  # noqa: E731
    else:
        fn = lambda lib: F(lib).fold(lib.zeros(8, 4, dtype=lib.int64), 3, 2)  # noqa: E731
    assert error_of(fn, zgrad)[1] == error_of(fn, torch)[1]


@pytest.mark.torch
@pytest.mark.parametrize("shapes", [[(2, 3), (2, 5), (4, 3, 5), (4,)], [(2, 2, 3), (2, 2, 5), (4, 3, 5)],
                                    [(3,), (5,), (4, 3, 5), (4,)], [(0, 3), (0, 5), (4, 3, 5), (4,)]], ids=str)
def test_bilinear_matches_torch(shapes):
    check_torch(lambda lib, *args: F(lib).bilinear(*args), shapes, dtype=np.float64)


@pytest.mark.torch
@pytest.mark.parametrize("shapes", [[(2, 3), (3, 5), (4, 3, 5)], [(2, 4), (2, 5), (4, 3, 5)],
                                    [(2, 3), (2, 6), (4, 3, 5)], [(2, 3), (2, 5), (4, 3, 5), (3,)],
                                    [(2, 3), (2, 2, 5), (4, 3, 5)], [(2, 3), (2, 5), (3, 5)],
                                    [(2, 3), (2, 5), (4, 3, 5), (1, 4)]], ids=str)
def test_bilinear_errors_match_torch(shapes):
    torch = require_torch()
    fn = lambda lib: F(lib).bilinear(*(lib.zeros(*s) for s in shapes))  # noqa: E731
    assert error_of(fn, zgrad) == error_of(fn, torch) is not None


@pytest.mark.torch
def test_bilinear_module_init_and_forward():
    torch = require_torch()
    zgrad.manual_seed(0)
    layer = zgrad.nn.Bilinear(16, 3, 40, dtype=zgrad.float64)
    weight, bias = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    assert weight.shape == (40, 16, 3) and bias.shape == (40,)
    assert np.abs(weight).max() <= 0.25 and np.abs(bias).max() <= 0.25 and np.abs(weight).max() > 0.2
    assert abs(weight.std() - 0.25 / np.sqrt(3)) < 0.02
    reference = torch.nn.Bilinear(16, 3, 40, dtype=torch.float64)
    with torch.no_grad():
        reference.weight.copy_(torch.tensor(weight))
        reference.bias.copy_(torch.tensor(bias))
    rng = np.random.default_rng(0)
    x1, x2 = rng.standard_normal((5, 16)), rng.standard_normal((5, 3))
    np.testing.assert_allclose(layer(zgrad.tensor(x1), zgrad.tensor(x2)).detach().numpy(),
                               reference(torch.tensor(x1), torch.tensor(x2)).detach().numpy(), rtol=1e-12)
    assert zgrad.nn.Bilinear(2, 3, 4, bias=False).bias is None


@pytest.mark.torch
@pytest.mark.parametrize("shape, args", [((2, 5, 3), (1,)), ((2, 5, 3), (2, 0.3, 0.6, 1.5)), ((2, 5, 3), (4,)),
                                         ((2, 5, 3), (7, 1.0, 0.5, 2.0)), ((2, 5, 3, 4), (3,)),
                                         ((2, 5, 3, 2, 2), (2, 1.0, 0.5))], ids=str)
def test_local_response_norm_matches_torch(shape, args):
    check_torch(lambda lib, x: F(lib).local_response_norm(x, *args), [shape], dtype=np.float64)
    check_torch(lambda lib, x: lib.nn.LocalResponseNorm(*args)(x), [shape])


@pytest.mark.torch
def test_local_response_norm_errors_and_empty():
    torch = require_torch()
    fn = lambda lib: F(lib).local_response_norm(lib.zeros(2, 3), 2)  # noqa: E731
    assert error_of(fn, zgrad) == error_of(fn, torch) is not None
    assert tuple(F(zgrad).local_response_norm(zgrad.zeros(0, 3, 4), 2).shape) == (0, 3, 4)


LP_CASES = [
    ("lp_pool2d", (2, 3, 4, 5), (2, 2)), ("lp_pool2d", (3, 4, 5), (1.5, (2, 3), 1, True)),
    ("lp_pool2d", (2, 3, 5, 5), (3, 2, (2, 1))), ("lp_pool1d", (2, 3, 5), (3, 2)),
    ("lp_pool1d", (3, 6), (2, 3, 2, True)), ("lp_pool1d", (2, 3, 7), (1, 2)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, shape, args", LP_CASES, ids=str)
def test_lp_pool_matches_torch(name, shape, args):
    check_torch(lambda lib, x: getattr(F(lib), name)(x, *args), [shape], dtype=np.float64, domain=(0.1, 2.0))
    module = {"lp_pool1d": "LPPool1d", "lp_pool2d": "LPPool2d"}[name]
    check_torch(lambda lib, x: getattr(lib.nn, module)(*args)(x), [shape], domain=(0.1, 2.0))


UNPOOL_CASES = [
    ("2d", (2, 3, 5, 6), dict(kernel_size=2), None),
    ("2d", (2, 3, 5, 6), dict(kernel_size=2), (5, 7)),
    ("2d", (3, 5, 6), dict(kernel_size=3, stride=2, padding=1), (2, 3, 5, 6)),
    ("2d", (1, 2, 6, 6), dict(kernel_size=(2, 3), stride=(2, 1)), None),
    ("1d", (2, 3, 7), dict(kernel_size=2), [7]),
    ("1d", (3, 8), dict(kernel_size=3, stride=2, padding=1), (1, 3, 8)),
    ("1d", (3, 7), dict(kernel_size=3, stride=2, padding=1), None),
]


@pytest.mark.torch
@pytest.mark.parametrize("rank, shape, window, output_size", UNPOOL_CASES, ids=str)
def test_max_unpool_matches_torch(rank, shape, window, output_size):
    torch = require_torch()
    source = torch.tensor(np.random.default_rng(1).standard_normal(shape))
    pooled, indices = getattr(F(torch), f"max_pool{rank}")(source, return_indices=True, **window)
    # Overlapping windows can pick one position twice, and which value a repeated index keeps is
    # unspecified (torch's differs run to run): each plane's positions are made distinct.
    index = indices.numpy().copy()
    planes = index.reshape(-1, index.shape[-1] if rank == "1d" else index.shape[-2] * index.shape[-1])
    for row in planes:
        taken = set()
        for k, position in enumerate(row):
            while position in taken:
                position = (position + 1) % int(np.prod(source.shape[-1 if rank == "1d" else -2:]))
            taken.add(position)
            row[k] = position
    index = planes.reshape(index.shape)

    def fn(lib, x):
        return getattr(F(lib), f"max_unpool{rank}")(x, lib.tensor(index), output_size=output_size, **window)

    def module(lib, x):
        return getattr(lib.nn, f"MaxUnpool{rank}")(**window)(x, lib.tensor(index), output_size)

    check_torch(fn, [tuple(pooled.shape)], dtype=np.float64)
    check_torch(module, [tuple(pooled.shape)], dtype=np.float64)


def _unpool_errors():
    ones = (1, 1, 2, 2)
    return [
        lambda lib: F(lib).max_unpool2d(lib.zeros(*ones), lib.tensor([[[[0, 1], [2, 30]]]]), 2),
        lambda lib: F(lib).max_unpool2d(lib.zeros(*ones), lib.tensor([[[[0, 1], [2, 3]]]]), 2, output_size=(5,)),
        lambda lib: F(lib).max_unpool2d(lib.zeros(*ones), lib.tensor([[[[0, 1], [2, 3]]]]), 2, output_size=(9, 9)),
        lambda lib: F(lib).max_unpool2d(lib.zeros(*ones), lib.tensor([[[[0, 1], [2, 3]]]], dtype=lib.int32), 2),
        lambda lib: F(lib).max_unpool2d(lib.zeros(*ones), lib.tensor([[[0, 1], [2, 3]]]), 2),
        lambda lib: F(lib).max_unpool2d(lib.zeros(2, 2), lib.tensor([[0, 1], [2, 3]]), 2),
        lambda lib: F(lib).max_unpool1d(lib.zeros(1, 1, 2), lib.tensor([[[0, 9]]]), 2),
        lambda lib: F(lib).max_unpool1d(lib.zeros(2), lib.tensor([0, 3]), 2),
        lambda lib: F(lib).max_unpool1d(lib.zeros(1, 1, 2), lib.tensor([[[0, 3]]]), 2, output_size=[1, 1, 6]),
    ]


@pytest.mark.torch
@pytest.mark.parametrize("index", range(len(_unpool_errors())))
def test_max_unpool_errors_match_torch(index):
    torch = require_torch()
    fn = _unpool_errors()[index]
    assert error_of(fn, zgrad) == error_of(fn, torch) is not None


@pytest.mark.torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_multi_margin_loss_matches_torch(reduction, p, weighted):
    torch = require_torch()
    target = np.random.default_rng(2).integers(0, 5, 4)
    weight = np.random.default_rng(3).uniform(0.5, 2.0, 5) if weighted else None

    def fn(lib, x):
        w = None if weight is None else lib.tensor(weight)
        return F(lib).multi_margin_loss(x, lib.tensor(target), p=p, margin=0.7, weight=w, reduction=reduction)

    def module(lib, x):
        w = None if weight is None else lib.tensor(weight)
        return lib.nn.MultiMarginLoss(p=p, margin=0.7, weight=w, reduction=reduction)(x, lib.tensor(target))

    check_torch(fn, [(4, 5)], dtype=np.float64)
    check_torch(module, [(4, 5)], dtype=np.float64)
    check_torch(lambda lib, x: F(lib).multi_margin_loss(x, lib.tensor(2), p=p, reduction=reduction), [(5,)],
                dtype=np.float64)
    assert torch is not None


MULTILABEL_TARGET = [[3, 0, -1, 1, 2], [1, 1, 4, -1, -1], [-1, 2, 3, 0, 0], [0, 1, 2, 3, 4]]


@pytest.mark.torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_matches_torch(reduction):
    def fn(lib, x):
        return F(lib).multilabel_margin_loss(x, lib.tensor(MULTILABEL_TARGET), reduction=reduction)

    check_torch(fn, [(4, 5)], dtype=np.float64)
    check_torch(lambda lib, x: lib.nn.MultiLabelMarginLoss(reduction=reduction)(x, lib.tensor(MULTILABEL_TARGET)),
                [(4, 5)], dtype=np.float64)
    check_torch(lambda lib, x: F(lib).multilabel_margin_loss(x, lib.tensor([2, 0, -1, 4, 1]), reduction=reduction),
                [(5,)], dtype=np.float64)


def _loss_errors():
    x, t = (2, 3), [0, 1]
    return [
        lambda lib: F(lib).multi_margin_loss(lib.zeros(*x), lib.tensor(t), p=3),
        lambda lib: F(lib).multi_margin_loss(lib.zeros(*x), lib.tensor([0, 3])),
        lambda lib: F(lib).multi_margin_loss(lib.zeros(*x), lib.tensor([0, 1, 1])),
        lambda lib: F(lib).multi_margin_loss(lib.zeros(*x), lib.tensor([t])),
        lambda lib: F(lib).multi_margin_loss(lib.zeros(2, 3, 4), lib.tensor(t)),
        lambda lib: F(lib).multi_margin_loss(lib.zeros(2, 0), lib.tensor(t)),
        lambda lib: F(lib).multi_margin_loss(lib.zeros(*x), lib.tensor(t), weight=lib.ones(2, 3)),
        lambda lib: F(lib).multi_margin_loss(lib.zeros(*x), lib.tensor(t), weight=lib.ones(2)),
        lambda lib: F(lib).multi_margin_loss(lib.zeros(*x), lib.tensor(t), reduction="x"),
        lambda lib: F(lib).multi_margin_loss(lib.zeros(*x), lib.tensor([0.0, 1.0])),
        lambda lib: lib.nn.MultiMarginLoss(p=3),
        lambda lib: F(lib).multilabel_margin_loss(lib.zeros(*x), lib.tensor([[0, 1], [2, -1]])),
        lambda lib: F(lib).multilabel_margin_loss(lib.zeros(*x), lib.tensor([[0, 3, -1], [2, -1, 0]])),
        lambda lib: F(lib).multilabel_margin_loss(lib.zeros(*x), lib.tensor([[1, -5, 0], [0, 1, 2]])),
        lambda lib: F(lib).multilabel_margin_loss(lib.zeros(*x), lib.tensor([[1, -1, 7], [0, 1, 2]])),
        lambda lib: F(lib).multilabel_margin_loss(lib.zeros(2, 3, 4), lib.tensor([[0, 1, -1], [2, -1, 0]])),
        lambda lib: F(lib).multilabel_margin_loss(lib.zeros(3), lib.tensor([[0, 1, -1]])),
        lambda lib: F(lib).multilabel_margin_loss(lib.zeros(2, 0), lib.zeros(2, 0, dtype=lib.int64)),
        lambda lib: F(lib).multilabel_margin_loss(lib.zeros(*x), lib.tensor([[0.0, 1, -1], [2, -1, 0]])),
    ]


@pytest.mark.torch
@pytest.mark.parametrize("index", range(len(_loss_errors())))
def test_margin_loss_errors_match_torch(index):
    torch = require_torch()
    fn = _loss_errors()[index]
    assert error_of(fn, zgrad) == error_of(fn, torch) is not None


@pytest.mark.torch
@pytest.mark.parametrize("lower, upper", [(1 / 8, 1 / 3), (0.1, 0.3), (0.2, 0.2)])
def test_rrelu_eval_is_leaky_relu_of_the_mean_slope(lower, upper):
    check_torch(lambda lib, x: F(lib).rrelu(x, lower, upper), [(3, 4)], dtype=np.float64)
    check_torch(lambda lib, x: lib.nn.RReLU(lower, upper).eval()(x), [(3, 4)], dtype=np.float64)
    x = zgrad.tensor(np.linspace(-2, 2, 9))
    np.testing.assert_allclose(F(zgrad).rrelu(x, lower, upper).numpy(),
                               F(zgrad).leaky_relu(x, (lower + upper) / 2).numpy())


def test_rrelu_training_draws_slopes_in_range():
    lower, upper = 0.1, 0.3
    values = np.concatenate([-np.linspace(0.5, 2, 2000), np.linspace(0.5, 2, 2000)])
    x = zgrad.tensor(values, requires_grad=True)
    zgrad.manual_seed(3)
    y = F(zgrad).rrelu(x, lower, upper, training=True)
    y.sum().backward()
    out, grad = y.detach().numpy(), x.grad.numpy()
    negative = values < 0
    slopes = out[negative] / values[negative]
    assert slopes.min() >= lower and slopes.max() < upper and slopes.std() > 0.04
    assert abs(slopes.mean() - (lower + upper) / 2) < 0.01
    np.testing.assert_allclose(grad[negative], slopes)
    np.testing.assert_array_equal(out[~negative], values[~negative])
    np.testing.assert_array_equal(grad[~negative], 1.0)
    zgrad.manual_seed(3)
    np.testing.assert_array_equal(F(zgrad).rrelu(x.detach(), lower, upper, training=True).numpy(), out)
    module = zgrad.nn.RReLU(lower, upper)
    assert module.training and not np.array_equal(module(x.detach()).numpy(), F(zgrad).rrelu(x.detach()).numpy())


def test_rrelu_inplace_and_errors():
    x = zgrad.tensor([-1.0, 2.0])
    assert F(zgrad).rrelu(x, 0.2, 0.4, inplace=True) is x
    np.testing.assert_allclose(x.numpy(), [-0.3, 2.0])
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal to the upper bound"):
        F(zgrad).rrelu(x, 0.5, 0.1)
    with pytest.raises(RuntimeError, match='"rrelu_with_noise_out_cpu" not implemented for \'Long\''):
        F(zgrad).rrelu(zgrad.tensor([1, -2]), training=True)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_alpha_dropout_keeps_mean_and_variance(p):
    zgrad.manual_seed(0)
    x = zgrad.randn(200, 500, dtype=zgrad.float64)
    y = F(zgrad).alpha_dropout(x, p, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.var() - 1) < 0.03
    alpha = 1.7580993408473766
    a = ((alpha * alpha * p + 1) * (1 - p)) ** -0.5
    dropped = np.isclose(y, -alpha * a * (1 - p))
    assert abs(dropped.mean() - p) < 0.01
    np.testing.assert_allclose(y[~dropped], a * x.numpy()[~dropped] + alpha * a * p)
    features = F(zgrad).feature_alpha_dropout(x.reshape(100, 1000, 1), p, training=True).numpy()
    assert abs(features.mean()) < 0.02 and abs(features.var() - 1) < 0.03
    per_channel = np.isclose(features, -alpha * a * (1 - p))
    assert np.all(per_channel.all(axis=2) == per_channel.any(axis=2))


def test_alpha_dropout_gradient_seed_and_identities():
    x = zgrad.randn(50, 40, dtype=zgrad.float64, requires_grad=True)
    zgrad.manual_seed(5)
    y = F(zgrad).alpha_dropout(x, 0.3, training=True)
    y.sum().backward()
    a = ((1.7580993408473766 ** 2 * 0.3 + 1) * 0.7) ** -0.5
    assert set(np.round(np.unique(x.grad.numpy()), 12)) == {0.0, round(a, 12)}
    zgrad.manual_seed(5)
    np.testing.assert_array_equal(F(zgrad).alpha_dropout(x.detach(), 0.3, training=True).numpy(), y.detach().numpy())
    assert F(zgrad).alpha_dropout(x, 0.3) is x and F(zgrad).feature_alpha_dropout(x, 0.0, training=True) is x
    np.testing.assert_array_equal(F(zgrad).alpha_dropout(x, 1.0, training=True).detach().numpy(), 0.0)
    layer = zgrad.nn.AlphaDropout(0.2).eval()
    assert layer(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        zgrad.nn.FeatureAlphaDropout(1.5)
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions in the input"):
        F(zgrad).feature_alpha_dropout(zgrad.ones(3), 0.5, training=True)
    inplace = zgrad.ones(4, 3)
    assert F(zgrad).alpha_dropout(inplace, 0.5, training=True, inplace=True) is inplace


@pytest.mark.torch
def test_module_reprs_match_torch():
    torch = require_torch()

    def build(lib):
        nn = lib.nn
        return nn.Sequential(
            nn.Unfold(2), nn.Unfold((2, 3), dilation=2, padding=1, stride=(1, 2)), nn.Fold((4, 5), 2),
            nn.Fold(output_size=4, kernel_size=(2, 3), dilation=2, padding=1, stride=(1, 2)),
            nn.Bilinear(3, 5, 4), nn.Bilinear(3, 5, 4, bias=False), nn.LocalResponseNorm(2),
            nn.LocalResponseNorm(3, alpha=0.1, beta=0.5, k=2.0), nn.LPPool1d(2, 3),
            nn.LPPool2d(1.5, (2, 3), stride=1, ceil_mode=True), nn.LPPool2d(2, 2), nn.MaxUnpool1d(2),
            nn.MaxUnpool2d((2, 3), stride=1, padding=1), nn.MaxUnpool2d(2), nn.AlphaDropout(),
            nn.FeatureAlphaDropout(0.2, inplace=True), nn.RReLU(), nn.RReLU(0.1, 0.3, inplace=True),
            nn.MultiMarginLoss(), nn.MultiMarginLoss(p=2, margin=0.5, weight=lib.ones(3)), nn.MultiLabelMarginLoss())

    assert str(build(zgrad)) == str(build(torch)).replace("torch", "zgrad")


@pytest.mark.torch
@pytest.mark.parametrize("norm_type", [float("inf"), float("-inf")])
def test_lp_pool_infinite_norm_is_the_extreme_magnitude(norm_type):
    import torch

    data = np.array([[[0.5, 2.0, 0.3, 0.9, -1.5, 0.2]]])
    ours = zgrad.tensor(data, requires_grad=True)
    theirs = torch.tensor(data, requires_grad=True)
    out, expected = zgrad.nn.functional.lp_pool1d(ours, norm_type, 2), torch.nn.functional.lp_pool1d(theirs, norm_type, 2)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy())
    out.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy())
    square = data.reshape(1, 2, 3)[:, :, :2].reshape(1, 1, 2, 2)
    np.testing.assert_allclose(zgrad.nn.functional.lp_pool2d(zgrad.tensor(square), norm_type, 2).numpy(),
                               torch.nn.functional.lp_pool2d(torch.tensor(square), norm_type, 2).numpy())


@pytest.mark.torch
def test_margin_losses_pass_no_gradient_at_the_hinge_and_shape_a_one_element_target():
    import torch

    for ours_fn, their_fn, x, t in ((zgrad.nn.functional.multi_margin_loss, torch.nn.functional.multi_margin_loss, [[1.0, 0.0, 0.0]],
                                     [0]),
                                    (zgrad.nn.functional.multilabel_margin_loss, torch.nn.functional.multilabel_margin_loss,
                                     [[1.0, 0.0, 2.0]], [[2, -1, 0]])):
        ours, theirs = zgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ours_fn(ours, zgrad.tensor(t)).backward()
        their_fn(theirs, torch.tensor(t)).backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy())
    for target in ([1], 1):
        ours = zgrad.nn.functional.multi_margin_loss(zgrad.tensor([0.1, 0.5, -0.2]), zgrad.tensor(target), reduction="none")
        theirs = torch.nn.functional.multi_margin_loss(torch.tensor([0.1, 0.5, -0.2]), torch.tensor(target),
                                                       reduction="none")
        assert tuple(ours.shape) == tuple(theirs.shape)

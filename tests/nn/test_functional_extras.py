"""The functions and layers PyTorch programs reach for that are thin over existing ops: ``pdist``,
``channel_shuffle`` / ``ChannelShuffle``, ``triplet_margin_with_distance_loss`` /
``TripletMarginWithDistanceLoss``, ``lp_pool3d`` / ``LPPool3d``, ``max_unpool3d`` /
``MaxUnpool3d``, ``gumbel_softmax``, the in-place and ``*_with_indices`` spellings, the deprecated
``upsample`` family and ``NLLLoss2d``, and a few Tensor methods, against torch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from helpers import require_torch


RNG = np.random.default_rng(7)


def _both(torch, array, requires_grad=True):
    return (zgrad.tensor(array, requires_grad=requires_grad), torch.tensor(array, requires_grad=requires_grad))


def _same(ours, theirs, rtol=1e-12):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=1e-14)


@pytest.mark.torch
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
@pytest.mark.parametrize("rows", [1, 2, 5])
def test_pdist_values_and_gradients(p, rows):
    torch = require_torch()
    data = RNG.standard_normal((rows, 4))
    if rows == 5:
        data[3] = data[1]  # a zero distance: gradient 0 there, as PyTorch's
    x, tx = _both(torch, data)
    out, expected = zgrad.nn.functional.pdist(x, p), torch.nn.functional.pdist(tx, p)
    _same(out, expected)
    if rows > 1:
        weights = RNG.standard_normal(expected.shape)
        (out * zgrad.tensor(weights)).sum().backward()
        (expected * torch.tensor(weights)).sum().backward()
        _same(x.grad, tx.grad, rtol=1e-10)


@pytest.mark.torch
@pytest.mark.parametrize("call", ["pdist(x3d)", "pdist(x, -1)", "channel_shuffle(y2d, 2)", "channel_shuffle(y, 0)",
                                  "channel_shuffle(y, 4)"])
def test_errors_are_torchs(call):
    torch = require_torch()
    results = []
    for lib in (zgrad, torch):
        namespace = {"pdist": lib.nn.functional.pdist, "channel_shuffle": lib.nn.functional.channel_shuffle,
                     "x": lib.ones(3, 2), "x3d": lib.ones(2, 3, 2), "y2d": lib.ones(1, 6), "y": lib.ones(1, 6, 2)}
        with pytest.raises(RuntimeError) as caught:
            eval(call, namespace)  # noqa: S307 - the test's own expressions
        results.append(str(caught.value))
    assert results[0] == results[1]


@pytest.mark.torch
@pytest.mark.parametrize("groups", [1, 2, 3, 6])
def test_channel_shuffle_and_its_module(groups):
    torch = require_torch()
    x, tx = _both(torch, RNG.standard_normal((2, 6, 3, 2)))
    _same(zgrad.nn.ChannelShuffle(groups)(x), torch.nn.ChannelShuffle(groups)(tx))
    _same(zgrad.channel_shuffle(x, groups), torch.channel_shuffle(tx, groups))
    assert repr(zgrad.nn.ChannelShuffle(groups)) == repr(torch.nn.ChannelShuffle(groups))


@pytest.mark.torch
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("distance", ["default", "l1", "cosine"])
def test_triplet_margin_with_distance_loss(swap, reduction, distance):
    torch = require_torch()
    arrays = [RNG.standard_normal((5, 3)) for _ in range(3)]
    ours, theirs = zip(*(_both(torch, a) for a in arrays))

    def function(lib):
        return {"default": None, "l1": lambda a, b: (a - b).abs().sum(-1),
                "cosine": lambda a, b: 1 - lib.nn.functional.cosine_similarity(a, b)}[distance]

    loss = zgrad.nn.TripletMarginWithDistanceLoss(distance_function=function(zgrad), margin=1.5, swap=swap,
                                                  reduction=reduction)(*ours)
    expected = torch.nn.TripletMarginWithDistanceLoss(distance_function=function(torch), margin=1.5, swap=swap,
                                                      reduction=reduction)(*theirs)
    _same(loss, expected)
    loss.sum().backward()
    expected.sum().backward()
    for o, t in zip(ours, theirs):
        _same(o.grad, t.grad, rtol=1e-10)
    assert repr(zgrad.nn.TripletMarginWithDistanceLoss()) == repr(torch.nn.TripletMarginWithDistanceLoss())
    with pytest.raises(ValueError, match="expected margin to be greater than 0, got 0 instead"):
        zgrad.nn.TripletMarginWithDistanceLoss(margin=0)


@pytest.mark.torch
@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
@pytest.mark.parametrize("kernel, stride", [(2, None), ((2, 1, 3), (1, 2, 1))])
def test_lp_pool3d(norm_type, kernel, stride):
    torch = require_torch()
    x, tx = _both(torch, RNG.uniform(0.1, 2.0, (2, 2, 4, 5, 6)))
    out = zgrad.nn.LPPool3d(norm_type, kernel, stride)(x)
    expected = torch.nn.LPPool3d(norm_type, kernel, stride)(tx)
    _same(out, expected)
    out.sum().backward()
    expected.sum().backward()
    _same(x.grad, tx.grad, rtol=1e-10)
    assert repr(zgrad.nn.LPPool3d(norm_type, kernel, stride)) == repr(torch.nn.LPPool3d(norm_type, kernel, stride))


@pytest.mark.torch
@pytest.mark.parametrize("batched", [True, False])
def test_max_unpool3d_inverts_max_pool3d_as_torchs(batched):
    torch = require_torch()
    shape = (2, 3, 4, 4, 6) if batched else (3, 4, 4, 6)
    data = RNG.permutation(np.prod(shape)).reshape(shape).astype(np.float64)  # distinct values: one max a window
    x, tx = _both(torch, data, requires_grad=False)
    pooled, indices = zgrad.nn.functional.max_pool3d(x, 2, return_indices=True)
    t_pooled, t_indices = torch.nn.functional.max_pool3d(tx, 2, return_indices=True)
    pooled.requires_grad_()
    t_pooled.requires_grad_()
    out = zgrad.nn.MaxUnpool3d(2)(pooled, indices)
    expected = torch.nn.MaxUnpool3d(2)(t_pooled, t_indices)
    _same(out, expected)
    weights = RNG.standard_normal(tuple(expected.shape))
    (out * zgrad.tensor(weights)).sum().backward()
    (expected * torch.tensor(weights)).sum().backward()
    _same(pooled.grad, t_pooled.grad)
    assert repr(zgrad.nn.MaxUnpool3d(2)) == repr(torch.nn.MaxUnpool3d(2))
    bad = zgrad.full(tuple(indices.shape), 1000, dtype=zgrad.int64)
    with pytest.raises(RuntimeError, match=r"Found an invalid max index: 1000 \(output volumes are of size 4x4x6\)"):
        zgrad.nn.functional.max_unpool3d(pooled, bad, 2)
    with pytest.raises(RuntimeError, match="Input to max_unpooling3d should be a 4d or 5d Tensor"):
        zgrad.nn.functional.max_unpool3d(zgrad.ones(2, 2, 2), zgrad.zeros(2, 2, 2, dtype=zgrad.int64), 2)


def test_gumbel_softmax_samples_the_softmax_and_differentiates_softly():
    zgrad.manual_seed(0)
    logits = zgrad.tensor([1.0, 2.0, 0.5], dtype=zgrad.float64)
    hard = zgrad.nn.functional.gumbel_softmax(logits.expand(40000, 3), hard=True)
    assert set(np.unique(hard.numpy())) == {0.0, 1.0} and np.all(hard.numpy().sum(1) == 1)
    frequencies = hard.numpy().mean(0)
    np.testing.assert_allclose(frequencies, zgrad.softmax(logits, 0).numpy(), atol=0.01)
    soft = zgrad.nn.functional.gumbel_softmax(logits.expand(5, 3), tau=0.5)
    np.testing.assert_allclose(soft.numpy().sum(1), 1.0, rtol=1e-12)
    x = logits.clone().requires_grad_()
    zgrad.manual_seed(3)
    out = zgrad.nn.functional.gumbel_softmax(x, tau=0.7, hard=True)
    (out * zgrad.tensor([1.0, 2.0, 3.0], dtype=zgrad.float64)).sum().backward()
    zgrad.manual_seed(3)
    y = x.detach().clone().requires_grad_()
    soft = zgrad.nn.functional.gumbel_softmax(y, tau=0.7)  # the same noise: the hard sample's gradient is the soft's
    (soft * zgrad.tensor([1.0, 2.0, 3.0], dtype=zgrad.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated and has no effect."):
        zgrad.nn.functional.gumbel_softmax(logits, eps=1e-5)


@pytest.mark.torch
@pytest.mark.parametrize("name, args", [("relu_", ()), ("elu_", (0.5,)), ("celu_", (0.7,)), ("selu_", ()),
                                        ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.5)), ("threshold_", (0.1, 9.0)),
                                        ("rrelu_", (0.1, 0.3, False))])
def test_in_place_spellings(name, args):
    torch = require_torch()
    data = RNG.standard_normal(7)
    x, tx = zgrad.tensor(data), torch.tensor(data)
    assert getattr(zgrad.nn.functional, name)(x, *args) is x
    getattr(torch.nn.functional, name)(tx, *args)
    _same(x, tx)


@pytest.mark.torch
@pytest.mark.parametrize("name, args", [("max_pool1d_with_indices", (2,)), ("max_pool2d_with_indices", (2,)),
                                        ("max_pool3d_with_indices", (2,)), ("adaptive_max_pool1d_with_indices", (3,)),
                                        ("adaptive_max_pool2d_with_indices", (3,)),
                                        ("adaptive_max_pool3d_with_indices", (3,))])
def test_with_indices_spellings(name, args):
    torch = require_torch()
    rank = int(name[name.index("pool") + 4])
    data = RNG.permutation(2 * 6 ** rank).reshape((2,) + (6,) * rank).astype(np.float64)
    (out, indices), (t_out, t_indices) = (getattr(lib.nn.functional, name)(lib.tensor(data), *args)
                                          for lib in (zgrad, torch))
    _same(out, t_out)
    assert indices.tolist() == t_indices.tolist()


@pytest.mark.torch
@pytest.mark.parametrize("name, kwargs", [("upsample", {"scale_factor": 2, "mode": "bilinear"}),
                                          ("upsample_nearest", {"size": (5, 3)}),
                                          ("upsample_bilinear", {"scale_factor": 3})])
def test_deprecated_upsample_warns_and_interpolates(name, kwargs):
    torch = require_torch()
    data = RNG.standard_normal((1, 2, 3, 2))
    with pytest.warns(UserWarning, match=f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate`"):
        out = getattr(zgrad.nn.functional, name)(zgrad.tensor(data), **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = getattr(torch.nn.functional, name)(torch.tensor(data), **kwargs)
    _same(out, expected)


def test_nll_loss_2d_is_a_deprecated_nll_loss():
    with pytest.warns(UserWarning, match="`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead"):
        loss = zgrad.nn.NLLLoss2d(reduction="sum")
    assert isinstance(loss, zgrad.nn.NLLLoss)
    assert loss(zgrad.tensor([[-1.0, -2.0]]), zgrad.tensor([1])).item() == 2.0


def test_tensor_methods_and_base_classes():
    x = zgrad.tensor([-0.3, 2.0], requires_grad=True)
    y = x * 2
    assert x.get_device() == -1 and y.output_nr == 0 and x.output_nr == 0
    assert x.isreal().tolist() == [True, True] and zgrad.isreal(x).dtype == zgrad.bool
    assert x.hardshrink(0.5).tolist() == [0.0, 2.0]
    z = zgrad.tensor([3.0, -2.0])
    assert z.square_() is z and z.tolist() == [9.0, 4.0]
    assert isinstance(zgrad.nn.LSTM(2, 3), zgrad.nn.RNNBase) and isinstance(zgrad.nn.RNN(2, 3), zgrad.nn.RNNBase)
    assert isinstance(zgrad.nn.GRUCell(2, 3), zgrad.nn.RNNCellBase)

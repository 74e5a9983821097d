"""The ``zgrad.<name>`` forms PyTorch gives its nn ops and older linear algebra (``torch.conv2d``,
``torch.dropout(input, p, train)``, ``torch.embedding(weight, indices)``, ``torch.batch_norm``,
the losses with an int reduction, ``torch.lstm_cell``, ``torch.qr``, ``torch.range``...): values
and gradients equal PyTorch's (float64), and without PyTorch each equals the ``zgrad.nn``
function or module it maps onto."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
import zgrad.nn.functional as F
from cuda_helpers import requires_cuda
from helpers import require_torch, torch

RNG = np.random.default_rng(7)


def _arrays(*shapes):
    return [RNG.standard_normal(shape) for shape in shapes]


class Fixed(np.ndarray):
    """An input array that does not require grad (running statistics, weights PyTorch does not
    differentiate)."""


def fixed(array):
    return np.asarray(array).view(Fixed)


def _run(lib, call, arrays, differentiable):
    tensors = [lib.tensor(np.asarray(a), requires_grad=differentiable and a.dtype.kind == "f"
                          and not isinstance(a, Fixed)) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = call(lib, *tensors)
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if lib.is_tensor(o)]
    floating = [o for o in outs if o.is_floating_point() and o.requires_grad]
    if floating:
        sum(((o * lib.tensor(np.linspace(0.5, 1.5, o.numel()).reshape(tuple(o.shape)))).sum() for o in floating)
            ).backward()
    grads = [t.grad.numpy() if lib.is_tensor(t) and t.grad is not None else None for t in tensors]
    return [o.detach().numpy() for o in outs], grads


def _assert_like_torch(call, *arrays, differentiable=True, rtol=1e-10, atol=1e-12):
    require_torch()
    ours, theirs = _run(zgrad, call, arrays, differentiable), _run(torch, call, arrays, differentiable)
    assert len(ours[0]) == len(theirs[0])
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    for a, b in zip(ours[1], theirs[1]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


X4 = RNG.standard_normal((2, 3, 5, 6))
W4 = RNG.standard_normal((4, 3, 3, 2))
IDX = np.array([[0, 2, 4], [4, 1, 1]])
NN_CASES = {
    "conv1d": (lambda L, x, w, b: L.conv1d(x, w, b, 2, 1, 1, 1), _arrays((2, 3, 9), (4, 3, 3), (4,))),
    "conv2d": (lambda L, x, w: L.conv2d(x, w, None, (1, 2), (1, 0), (2, 1)), [X4, W4]),
    "conv2d_groups": (lambda L, x, w: L.conv2d(x, w, None, 1, "same", 1, 2), _arrays((2, 4, 5, 5), (6, 2, 3, 3))),
    "conv3d": (lambda L, x, w: L.conv3d(x, w), _arrays((1, 2, 4, 4, 4), (3, 2, 2, 2, 2))),
    "conv_transpose1d": (lambda L, x, w, b: L.conv_transpose1d(x, w, b, 2, 1, 1), _arrays((2, 3, 5), (3, 2, 3), (2,))),
    "conv_transpose3d": (lambda L, x, w: L.conv_transpose3d(x, w, None, 2), _arrays((1, 2, 2, 3, 2), (2, 3, 2, 2, 2))),
    "convolution": (lambda L, x, w, b: L.convolution(x, w, b, [1, 2], [1, 1], [1, 1], False, [0, 0], 1),
                    [X4, W4, RNG.standard_normal(4)]),
    "convolution_transposed": (lambda L, x, w: L.convolution(x, w, None, [2, 2], [1, 0], [1, 1], True, [1, 0], 1),
                               _arrays((2, 3, 4, 4), (3, 2, 3, 3))),
    "bilinear": (lambda L, a, b, w, c: L.bilinear(a, b, w, c), _arrays((3, 2), (3, 4), (5, 2, 4), (5,))),
    "hardshrink": (lambda L, x: L.hardshrink(x, 0.3), [X4]),
    "celu": (lambda L, x: L.celu(x, 0.5), [X4]),
    "selu": (lambda L, x: L.selu(x), [X4]),
    "threshold": (lambda L, x: L.threshold(x, 0.1, 20.0), [X4]),
    "rrelu_eval": (lambda L, x: L.rrelu(x, 0.1, 0.3, False), [X4]),
    "embedding": (lambda L, w, i: L.embedding(w, i), [RNG.standard_normal((5, 3)), IDX]),
    "embedding_padding": (lambda L, w, i: L.embedding(w, i, 1, True), [RNG.standard_normal((5, 3)), IDX]),
    "batch_norm_train": (lambda L, x, w, b: L.batch_norm(x, w, b, L.zeros(3, dtype=L.float64),
                                                         L.ones(3, dtype=L.float64), True, 0.1, 1e-5, False),
                         [X4, RNG.standard_normal(3), RNG.standard_normal(3)]),
    "batch_norm_eval": (lambda L, x, m, v: L.batch_norm(x, None, None, m, v, False, 0.1, 1e-3, True),
                        [X4, fixed([0.1, 0.2, -0.3]), fixed([1.0, 2.0, 0.5])]),
    "instance_norm": (lambda L, x, w, b: L.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
                      [X4, RNG.standard_normal(3), RNG.standard_normal(3)]),
    "layer_norm": (lambda L, x, w, b: L.layer_norm(x, [5, 6], w, b, 1e-6), [X4, *_arrays((5, 6), (5, 6))]),
    "group_norm": (lambda L, x, w, b: L.group_norm(x, 2, w, b, 1e-5),
                   [RNG.standard_normal((2, 4, 3)), *_arrays((4,), (4,))]),
    "rms_norm": (lambda L, x, w: L.rms_norm(x, [6], w, 1e-6), [X4, RNG.standard_normal(6)]),
    "norm_except_dim": (lambda L, v: L.norm_except_dim(v, 2, 0), [W4]),
    "norm_except_dim_all": (lambda L, v: L.norm_except_dim(v, 3, -1), [W4]),
    "norm_except_dim_last": (lambda L, v: L.norm_except_dim(v, 2, 3), [W4]),
    "max_pool1d": (lambda L, x: L.max_pool1d(x, 2), [RNG.standard_normal((2, 3, 9))]),
    "max_pool1d_options": (lambda L, x: L.max_pool1d(x, 3, 2, 1, 2, True), [RNG.standard_normal((2, 3, 9))]),
    "max_pool1d_with_indices": (lambda L, x: L.max_pool1d_with_indices(x, 3, [], 1),
                                [RNG.standard_normal((2, 3, 9))]),
    "max_pool2d": (lambda L, x: L.max_pool2d(x, 2, [], 1), [X4]),
    "max_pool3d": (lambda L, x: L.max_pool3d(x, (2, 2, 1), 1), [RNG.standard_normal((1, 2, 4, 3, 3))]),
    "avg_pool1d": (lambda L, x: L.avg_pool1d(x, 3, 2, 1, True, False), [RNG.standard_normal((2, 3, 8))]),
    "adaptive_avg_pool1d": (lambda L, x: L.adaptive_avg_pool1d(x, 3), [RNG.standard_normal((2, 3, 8))]),
    "adaptive_max_pool1d": (lambda L, x: L.adaptive_max_pool1d(x, 3), [RNG.standard_normal((2, 3, 8))]),
    "constant_pad_nd": (lambda L, x: L.constant_pad_nd(x, [1, 2, -1, 0], 0.5), [X4]),
    "grid_sampler": (lambda L, x, g: L.grid_sampler(x, g, 0, 1, False), [X4, RNG.uniform(-1.1, 1.1, (2, 4, 3, 2))]),
    "grid_sampler_bicubic": (lambda L, x, g: L.grid_sampler(x, g, 2, 2, True),
                             [X4, RNG.uniform(-1.1, 1.1, (2, 4, 3, 2))]),
    "affine_grid_generator": (lambda L, t: L.affine_grid_generator(t, [2, 3, 4, 5], False),
                              [RNG.standard_normal((2, 2, 3))]),
}
LOSS_CASES = {
    "kl_div_default": (lambda L, x, t: L.kl_div(x, t), [RNG.standard_normal((3, 4)), RNG.uniform(0, 1, (3, 4))]),
    "kl_div_mean": (lambda L, x, t: L.kl_div(x, t, 1), [RNG.standard_normal((3, 4)), RNG.uniform(0, 1, (3, 4))]),
    "kl_div_sum_log": (lambda L, x, t: L.kl_div(x, t, 2, log_target=True), _arrays((3, 4), (3, 4))),
    "kl_div_none": (lambda L, x, t: L.kl_div(x, t, 0), [RNG.standard_normal((3, 4)), RNG.uniform(0, 1, (3, 4))]),
    "kl_div_other_int": (lambda L, x, t: L.kl_div(x, t, 7), [RNG.standard_normal((3, 4)), RNG.uniform(0, 1, (3, 4))]),
    "bce_with_logits": (lambda L, x, t, w, p: L.binary_cross_entropy_with_logits(x, t, w, p, 2),
                        [RNG.standard_normal((3, 4)), RNG.uniform(0, 1, (3, 4)), fixed(RNG.uniform(0, 2, 4)),
                         fixed(RNG.uniform(0, 2, 4))]),
    "bce_with_logits_default": (lambda L, x, t: L.binary_cross_entropy_with_logits(x, t),
                                [RNG.standard_normal((3, 4)), RNG.uniform(0, 1, (3, 4))]),
    "cosine_embedding": (lambda L, a, b, y: L.cosine_embedding_loss(a, b, y, 0.1, 1),
                         [*_arrays((4, 3), (4, 3)), np.array([1.0, -1.0, -1.0, 1.0])]),
    "hinge_embedding": (lambda L, x, y: L.hinge_embedding_loss(x, y, 1.0, 0),
                        [RNG.standard_normal((3, 4)), np.sign(RNG.standard_normal((3, 4)))]),
    "margin_ranking": (lambda L, a, b, y: L.margin_ranking_loss(a, b, y, 0.2, 2),
                       [*_arrays((5,), (5,)), np.sign(RNG.standard_normal(5))]),
    "triplet_margin": (lambda L, a, p, n: L.triplet_margin_loss(a, p, n, 1.0, 2.0, 1e-6, True, 1),
                       _arrays((4, 3), (4, 3), (4, 3))),
    "poisson_nll": (lambda L, x, t: L.poisson_nll_loss(x, t, True, True, 1e-8, 1),
                    [RNG.standard_normal((3, 4)), RNG.uniform(0, 4, (3, 4))]),
    "ctc": (lambda L, x: L.ctc_loss(x.log_softmax(2), L.tensor([[1, 2, 2], [3, 1, 0]]), [6, 5], [3, 2], 0, 1, False),
            [RNG.standard_normal((6, 2, 4))]),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(NN_CASES))
def test_nn_op_matches_torch(name):
    call, arrays = NN_CASES[name]
    _assert_like_torch(call, *arrays)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_loss_with_an_int_reduction_matches_torch(name):
    call, arrays = LOSS_CASES[name]
    _assert_like_torch(call, *arrays)


def _cell_arrays(gates, bias=True):
    arrays = _arrays((3, 4), (3, 5), (gates * 5, 4), (gates * 5, 5))
    return arrays + (_arrays((gates * 5,), (gates * 5,)) if bias else [])


CELL_CASES = {
    "lstm_cell": (lambda L, x, h, w_ih, w_hh, b_ih, b_hh: L.lstm_cell(x, (h, h * 0.5), w_ih, w_hh, b_ih, b_hh),
                  _cell_arrays(4)),
    "lstm_cell_no_bias": (lambda L, x, h, w_ih, w_hh: L.lstm_cell(x, [h, h], w_ih, w_hh), _cell_arrays(4, False)),
    "gru_cell": (lambda L, x, h, w_ih, w_hh, b_ih, b_hh: L.gru_cell(x, h, w_ih, w_hh, b_ih, b_hh), _cell_arrays(3)),
    "gru_cell_no_bias": (lambda L, x, h, w_ih, w_hh: L.gru_cell(x, h, w_ih, w_hh), _cell_arrays(3, False)),
    "rnn_tanh_cell": (lambda L, x, h, w_ih, w_hh, b_ih, b_hh: L.rnn_tanh_cell(x, h, w_ih, w_hh, b_ih, b_hh),
                      _cell_arrays(1)),
    "rnn_relu_cell": (lambda L, x, h, w_ih, w_hh: L.rnn_relu_cell(x, h, w_ih, w_hh), _cell_arrays(1, False)),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CELL_CASES))
def test_recurrent_cell_matches_torch(name):
    call, arrays = CELL_CASES[name]
    _assert_like_torch(call, *arrays)


SPD = (lambda a: a @ a.T + 4 * np.eye(4))(RNG.standard_normal((4, 4)))
LOWER = np.tril(RNG.standard_normal((4, 4))) + 3 * np.eye(4)
LINALG_CASES = {
    "cholesky": (lambda L, a: L.cholesky(a), [SPD]),
    "cholesky_upper": (lambda L, a: L.cholesky(a, True), [SPD]),
    "cholesky_method": (lambda L, a: a.cholesky(upper=True), [SPD]),
    # through tril/triu: torch's gradient for the factor is the full matrix, zgrad's the triangle read
    "cholesky_inverse": (lambda L, f: L.cholesky_inverse(L.tril(f)), [LOWER]),
    "cholesky_inverse_upper_batch": (lambda L, f: L.cholesky_inverse(L.triu(f), True),
                                     [np.stack([LOWER.T, LOWER.T * 2])]),
    "qr": (lambda L, a: L.qr(a), [RNG.standard_normal((5, 3))]),
    "qr_complete": (lambda L, a: L.qr(a, False), [fixed(RNG.standard_normal((2, 5, 3)))]),
    "qr_method": (lambda L, a: a.qr(), [RNG.standard_normal((5, 3))]),
    "triangular_solve": (lambda L, b, a: L.triangular_solve(b, a), [RNG.standard_normal((4, 2)), LOWER.T]),
    "triangular_solve_lower_t": (lambda L, b, a: L.triangular_solve(b, a, False, True),
                                 [RNG.standard_normal((4, 2)), LOWER]),
    "triangular_solve_unit_batch": (lambda L, b, a: b.triangular_solve(a, upper=False, unitriangular=True),
                                    [RNG.standard_normal((3, 4, 2)), LOWER]),
    "pinverse": (lambda L, a: L.pinverse(a), [RNG.standard_normal((3, 5))]),
    "pinverse_method": (lambda L, a: a.pinverse(1e-3), [RNG.standard_normal((2, 5, 3))]),
    "nuclear_norm": (lambda L, a: L.nuclear_norm(a), [RNG.standard_normal((2, 3, 4))]),
    "nuclear_norm_dims_keepdim": (lambda L, a: L.nuclear_norm(a, (0, 2), True), [RNG.standard_normal((2, 3, 4))]),
    "nuclear_norm_bool_keepdim": (lambda L, a: L.nuclear_norm(a, True), [RNG.standard_normal((3, 4))]),
    "frobenius_norm": (lambda L, a: L.frobenius_norm(a, (0, 2)), [RNG.standard_normal((2, 3, 4))]),
    "frobenius_norm_one_dim": (lambda L, a: L.frobenius_norm(a, 1, True), [RNG.standard_normal((2, 3, 4))]),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(LINALG_CASES))
def test_legacy_linear_algebra_matches_torch(name):
    call, arrays = LINALG_CASES[name]
    _assert_like_torch(call, *arrays, rtol=1e-9, atol=1e-11)


@pytest.mark.torch
@pytest.mark.parametrize("args, kwargs", [((0, 1, 0.25), {}), ((1, 0, -0.5), {}), ((0, 0), {}), ((0, 10, 3), {}),
                                          ((0.5, 2.5), {"dtype": "int64"}), ((1, 4), {"dtype": "float64"})])
def test_range_matches_torch(args, kwargs):
    require_torch()
    for lib in (zgrad, torch):
        with pytest.warns(UserWarning, match="torch.range is deprecated"):
            values = lib.range(*args, **{k: getattr(lib, v) for k, v in kwargs.items()})
        if lib is zgrad:
            ours = values
    assert str(ours.dtype).split(".")[-1] == str(values.dtype).split(".")[-1]
    np.testing.assert_array_equal(ours.numpy(), values.numpy())


@pytest.mark.torch
def test_errors_match_torch():
    require_torch()
    calls = [
        lambda L: L.kl_div(L.zeros(2), L.zeros(2), reduction="mean"),
        lambda L: L.lstm_cell(L.zeros(1, 3), [L.zeros(1, 2)], L.zeros(8, 3), L.zeros(8, 2)),
        lambda L: L.feature_dropout(L.zeros(3), 0.5, True),
        lambda L: L.frobenius_norm(L.zeros(2, 2, 2), (0, 1, 2)),
        lambda L: L.range(0, 1, 0),
        lambda L: L.range(1, 0),
    ]
    for call in calls:
        errors = []
        for lib in (zgrad, torch):
            with warnings.catch_warnings(), pytest.raises(Exception) as raised:
                warnings.simplefilter("ignore")
                call(lib)
            errors.append(raised.value)
        assert str(errors[0]) == str(errors[1]), errors


# --- without torch: each form is the zgrad.nn function or module it maps onto -----------------------------

def test_each_form_is_the_functional_op_with_its_arguments_mapped():
    x, w = zgrad.tensor(X4), zgrad.tensor(W4)
    running = [zgrad.tensor([0.1, 0.2, -0.3], dtype=zgrad.float64), zgrad.tensor([1.0, 2.0, 0.5], dtype=zgrad.float64)]
    weight = zgrad.tensor([1.0, 2.0, 3.0], dtype=zgrad.float64)
    bias = zgrad.tensor([0.0, 1.0, -1.0], dtype=zgrad.float64)
    pairs = [
        (zgrad.conv2d(x, w, None, 1, 1), F.conv2d(x, w, padding=1)),
        (zgrad.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), F.conv2d(x, w, padding=1)),
        (zgrad.batch_norm(x, weight, bias, *running, False, 0.1, 1e-5, True),
         F.batch_norm(x, *running, weight, bias, False, 0.1, 1e-5)),
        (zgrad.max_pool2d(x, 2), F.max_pool2d(x, 2, 2)),
        (zgrad.constant_pad_nd(x, [1, 1], 2.0), F.pad(x, [1, 1], value=2.0)),
        (zgrad.kl_div(x, x.exp(), 2), F.kl_div(x, x.exp(), reduction="sum")),
        (zgrad.kl_div(x, x.exp()), F.kl_div(x, x.exp(), reduction="none")),  # PyTorch's binding: unreduced
        (zgrad.hinge_embedding_loss(x, x.sign(), 1.0, 0), F.hinge_embedding_loss(x, x.sign(), reduction="none")),
        (zgrad.embedding(w.flatten(1), zgrad.tensor([[0, 3]]), 3),
         F.embedding(zgrad.tensor([[0, 3]]), w.flatten(1), 3)),
        (zgrad.norm_except_dim(w, 2, 0), w.flatten(1).norm(dim=1).reshape(4, 1, 1, 1)),
    ]
    for ours, functional in pairs:
        np.testing.assert_array_equal(ours.numpy(), functional.numpy())
    assert zgrad.kl_div(x, x.exp(), 7).shape == x.shape  # an int other than 1 and 2 leaves the loss unreduced


def test_cells_step_as_the_cell_modules_do():
    zgrad.manual_seed(3)
    x = zgrad.randn(3, 4, dtype=zgrad.float64)
    for module, function in ((zgrad.nn.LSTMCell(4, 5), zgrad.lstm_cell), (zgrad.nn.GRUCell(4, 5), zgrad.gru_cell),
                             (zgrad.nn.RNNCell(4, 5), zgrad.rnn_tanh_cell),
                             (zgrad.nn.RNNCell(4, 5, nonlinearity="relu"), zgrad.rnn_relu_cell)):
        module = module.double()
        h = zgrad.randn(3, 5, dtype=zgrad.float64)
        state = (h, h * 2) if function is zgrad.lstm_cell else h
        expected = module(x, state)
        got = function(x, state, module.weight_ih, module.weight_hh, module.bias_ih, module.bias_hh)
        pairs = zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,))
        for a, b in pairs:
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-13)


def test_one_bias_of_a_pair_counts_the_other_as_zeros():
    zgrad.manual_seed(4)
    x, h = zgrad.randn(2, 3, dtype=zgrad.float64), zgrad.randn(2, 4, dtype=zgrad.float64)
    w_ih, w_hh, b = (zgrad.randn(12, 3, dtype=zgrad.float64), zgrad.randn(12, 4, dtype=zgrad.float64),
                     zgrad.randn(12, dtype=zgrad.float64))
    np.testing.assert_allclose(zgrad.gru_cell(x, h, w_ih, w_hh, b, None).numpy(),
                               zgrad.gru_cell(x, h, w_ih, w_hh, b, zgrad.zeros_like(b)).numpy(), rtol=1e-14)


def test_dropout_forms_take_train_and_drop_whole_channels():
    x = zgrad.ones(4, 6, 5, dtype=zgrad.float64)
    assert zgrad.dropout(x, 0.5, False) is x
    assert zgrad.dropout(x, 1.0, True).abs().sum().item() == 0
    zgrad.manual_seed(0)
    dropped = zgrad.feature_dropout(x, 0.5, True)
    per_channel = dropped.numpy()
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(axis=2) == per_channel.max(axis=2)).all()  # a (sample, channel) row is kept or not
    assert 0 < (per_channel[:, :, 0] == 0).sum() < 24
    y = zgrad.ones(4, 6, 5, 2, 2, 2, dtype=zgrad.float64)  # any rank from 2
    assert zgrad.feature_dropout_(y, 0.5, True) is y
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions in the input"):
        zgrad.feature_dropout(zgrad.ones(3), 0.5, True)
    with pytest.raises(TypeError, match="argument 'reduction' must be int, not str"):
        zgrad.kl_div(x, x, reduction="mean")


def test_legacy_linear_algebra_solves_and_factorizes():
    a = zgrad.tensor(SPD, requires_grad=True)
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        lower = zgrad.cholesky(a)
    np.testing.assert_allclose((lower @ lower.mT).detach().numpy(), SPD, rtol=1e-12)
    np.testing.assert_allclose(zgrad.cholesky_inverse(lower).detach().numpy(), np.linalg.inv(SPD), rtol=1e-10)
    b = zgrad.tensor(RNG.standard_normal((4, 2)))
    with pytest.warns(UserWarning, match="triangular_solve is deprecated"):
        solution, copy = zgrad.triangular_solve(b, zgrad.tensor(LOWER), upper=False)
    np.testing.assert_allclose(LOWER @ solution.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(copy.numpy(), LOWER)
    with pytest.warns(UserWarning, match="torch.qr is deprecated"):
        q, r = zgrad.qr(zgrad.tensor(SPD[:, :3]), some=False)
    assert q.shape == (4, 4) and r.shape == (4, 3)
    np.testing.assert_allclose((q @ r).numpy(), SPD[:, :3], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(zgrad.pinverse(zgrad.tensor(SPD)).numpy(), np.linalg.inv(SPD), rtol=1e-10)
    lower.sum().backward()
    assert a.grad is not None and a.grad.shape == (4, 4)


def test_range_includes_its_end_and_queries_answer():
    with pytest.warns(UserWarning, match="use torch.arange"):
        values = zgrad.range(1, 0, -0.25)
    np.testing.assert_array_equal(values.numpy(), np.array([1.0, 0.75, 0.5, 0.25, 0.0], np.float32))
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="inconsistent with step sign"):
        zgrad.range(0, 1, -1)
    a, b = zgrad.zeros(2, 3), zgrad.zeros(3, 2)
    assert zgrad.is_same_size(a, a) and not zgrad.is_same_size(a, b)
    assert zgrad.is_signed(a) and not zgrad.is_signed(zgrad.zeros(2, dtype=zgrad.uint8))
    assert not zgrad.is_neg(a) and not zgrad.is_inference(a)
    with zgrad.inference_mode():  # zgrad makes no inference tensors (Tensor.is_inference)
        assert not zgrad.is_inference(zgrad.zeros(1))
    assert zgrad.vmap is zgrad.func.vmap


def test_poisson_and_binomial_draw_with_their_means_and_zero_gradients():
    zgrad.manual_seed(5)
    rates = zgrad.tensor([0.0, 0.5, 3.0, 40.0], dtype=zgrad.float64, requires_grad=True)
    draws = zgrad.poisson(rates.expand(20000, 4))
    assert draws.dtype == zgrad.float64 and draws.requires_grad
    np.testing.assert_allclose(draws.mean(0).detach().numpy(), [0.0, 0.5, 3.0, 40.0], rtol=0.05, atol=0.02)
    draws.sum().backward()
    np.testing.assert_array_equal(rates.grad.numpy(), 0)
    count, prob = zgrad.tensor([10.0, 3.0, -2.0, 4.0]), zgrad.tensor([0.3, 1.5, 0.5, -0.1])
    successes = zgrad.binomial(count.expand(20000, 4), prob.expand(20000, 4)).numpy()
    np.testing.assert_allclose(successes.mean(0), [3.0, 3.0, 0.0, 0.0], atol=0.05)  # p clamped, counts < 0 draw 0
    assert successes.dtype == np.float32 and (successes == np.floor(successes)).all()
    first, second = (zgrad.poisson(rates.detach(), generator=zgrad.Generator().manual_seed(9)) for _ in range(2))
    np.testing.assert_array_equal(first.numpy(), second.numpy())


@pytest.mark.torch
def test_poisson_and_binomial_refuse_as_torch_does():
    require_torch()
    calls = [lambda L: L.poisson(L.tensor([-1.0])), lambda L: L.poisson(L.tensor([1])),
             lambda L: L.binomial(L.tensor([5]), L.tensor([0.5]))]
    for call in calls:
        errors = []
        for lib in (zgrad, torch):
            with pytest.raises((RuntimeError, ValueError, NotImplementedError)) as raised:
                call(lib)
            errors.append(raised.value)
        assert str(errors[0]) == str(errors[1]) and isinstance(errors[0], type(errors[1])), errors


@requires_cuda
def test_new_ops_run_on_cuda_as_on_the_cpu():
    """feature_dropout, poisson, binomial and the cells run on the CUDA backend; the LU family,
    CPU-only as every factorization, names the fix there."""
    zgrad.manual_seed(1)
    x = zgrad.ones(2, 3, 4, device="cuda")
    dropped = zgrad.feature_dropout(x, 0.5, True).cpu().numpy()
    assert set(np.unique(dropped)) <= {0.0, 2.0} and (dropped.min(axis=2) == dropped.max(axis=2)).all()
    rates = zgrad.tensor([0.0, 2.0, 5.0], device="cuda")
    assert zgrad.poisson(rates).device.type == "cuda"
    assert zgrad.binomial(rates, zgrad.full((3,), 0.5, device="cuda")).device.type == "cuda"
    arrays = _cell_arrays(4)
    cpu = zgrad.lstm_cell(*(zgrad.tensor(a) for a in arrays[:1]), [zgrad.tensor(arrays[1])] * 2,
                          *(zgrad.tensor(a) for a in arrays[2:]))
    cuda = zgrad.lstm_cell(zgrad.tensor(arrays[0], device="cuda"), [zgrad.tensor(arrays[1], device="cuda")] * 2,
                           *(zgrad.tensor(a, device="cuda") for a in arrays[2:]))
    for a, b in zip(cpu, cuda):
        np.testing.assert_allclose(b.cpu().numpy(), a.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(zgrad.ZgradError, match="runs on the CPU only"):
        zgrad.linalg.lu_factor(zgrad.eye(3, device="cuda"))

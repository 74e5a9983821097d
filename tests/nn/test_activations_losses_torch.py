"""The piecewise and composed activations (hardtanh, relu6, hardsigmoid, hardswish, threshold,
softshrink, hardshrink, selu, celu, glu, logsigmoid, softsign, tanhshrink, softmin, Softmax2d) and
the margin and likelihood losses against PyTorch: float64 values and input gradients on inputs
that hit the kinks exactly, every reduction, module reprs and bad-input errors."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import require_torch

RTOL = 1e-12
REDUCTIONS = ("none", "mean", "sum")
KINKS = [-6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 20.0, -20.0, 0.25]


def F(lib):
    return lib.nn.functional


def _activation_input() -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.concatenate([KINKS, rng.normal(0.0, 4.0, 12)]).reshape(4, 6)


def _compare(torch, fn, arrays, grads=None, seed=1, grad_rtol=RTOL):
    """fn(lib, *tensors) in both libraries on float64 copies of ``arrays``: values and the
    gradients of the tensors whose index is in ``grads`` (all by default) must agree; gradients
    to rounding of their largest entry too (softmax's backward cancels)."""
    grads = range(len(arrays)) if grads is None else grads
    ours = [zgrad.tensor(a, dtype=zgrad.float64, requires_grad=i in grads) for i, a in enumerate(arrays)]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=i in grads) for i, a in enumerate(arrays)]
    out, expected = fn(zgrad, *ours), fn(torch, *theirs)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=RTOL, atol=0)
    assert tuple(out.shape) == tuple(expected.shape)
    weights = np.random.default_rng(seed).uniform(0.5, 1.5, tuple(expected.shape))
    (out * zgrad.tensor(weights)).sum().backward()
    (expected * torch.tensor(weights)).sum().backward()
    for i in grads:
        expected_grad = theirs[i].grad.numpy()
        np.testing.assert_allclose(ours[i].grad.numpy(), expected_grad, rtol=grad_rtol,
                                   atol=1e-14 * np.abs(expected_grad).max(), err_msg=f"gradient of argument {i}")


ACTIVATIONS = {
    "relu6": lambda lib, x: F(lib).relu6(x),
    "hardtanh": lambda lib, x: F(lib).hardtanh(x),
    "hardtanh_bounds": lambda lib, x: F(lib).hardtanh(x, -0.5, 3.0),
    "hardsigmoid": lambda lib, x: F(lib).hardsigmoid(x),
    "hardswish": lambda lib, x: F(lib).hardswish(x),
    "selu": lambda lib, x: F(lib).selu(x),
    "celu": lambda lib, x: F(lib).celu(x),
    "celu_alpha": lambda lib, x: F(lib).celu(x, 0.5),
    "glu": lambda lib, x: F(lib).glu(x),
    "glu_dim0": lambda lib, x: F(lib).glu(x, 0),
    "logsigmoid": lambda lib, x: F(lib).logsigmoid(x),
    "softsign": lambda lib, x: F(lib).softsign(x),
    "tanhshrink": lambda lib, x: F(lib).tanhshrink(x),
    "softmin": lambda lib, x: F(lib).softmin(x, 1),
    "softmin_dim0": lambda lib, x: F(lib).softmin(x, dim=0, dtype=lib.float64),
    "softshrink": lambda lib, x: F(lib).softshrink(x),
    "softshrink_1": lambda lib, x: F(lib).softshrink(x, 1.0),
    "hardshrink": lambda lib, x: F(lib).hardshrink(x),
    "hardshrink_3": lambda lib, x: F(lib).hardshrink(x, 3.0),
    "threshold": lambda lib, x: F(lib).threshold(x, 0.5, 20.0),
    "threshold_0": lambda lib, x: F(lib).threshold(x, 0.0, -1.0),
    # in place on a tensor of the graph: recorded, with the gradient of the out-of-place op
    "relu6_inplace": lambda lib, x: F(lib).relu6(x * 1, inplace=True),
    "hardtanh_inplace": lambda lib, x: F(lib).hardtanh(x * 1, -3.0, 1.0, inplace=True),
    "hardsigmoid_inplace": lambda lib, x: F(lib).hardsigmoid(x * 1, inplace=True),
    "hardswish_inplace": lambda lib, x: F(lib).hardswish(x * 1, inplace=True),
    "selu_inplace": lambda lib, x: F(lib).selu(x * 1, inplace=True),
    "celu_inplace": lambda lib, x: F(lib).celu(x * 1, 2.0, inplace=True),
    "threshold_inplace": lambda lib, x: F(lib).threshold(x * 1, 1.0, 0.0, inplace=True),
    # the modules
    "ReLU6": lambda lib, x: lib.nn.ReLU6()(x),
    "Hardtanh": lambda lib, x: lib.nn.Hardtanh(-3.0, 6.0)(x),
    "Hardsigmoid": lambda lib, x: lib.nn.Hardsigmoid()(x),
    "Hardswish": lambda lib, x: lib.nn.Hardswish()(x),
    "SELU": lambda lib, x: lib.nn.SELU()(x),
    "CELU": lambda lib, x: lib.nn.CELU(3.0)(x),
    "GLU": lambda lib, x: lib.nn.GLU(1)(x),
    "LogSigmoid": lambda lib, x: lib.nn.LogSigmoid()(x),
    "Softsign": lambda lib, x: lib.nn.Softsign()(x),
    "Tanhshrink": lambda lib, x: lib.nn.Tanhshrink()(x),
    "Softmin": lambda lib, x: lib.nn.Softmin(dim=-1)(x),
    "Softshrink": lambda lib, x: lib.nn.Softshrink(0.25)(x),
    "Hardshrink": lambda lib, x: lib.nn.Hardshrink()(x),
    "Threshold": lambda lib, x: lib.nn.Threshold(-1.0, 7.0)(x),
    "Softmax2d": lambda lib, x: lib.nn.Softmax2d()(x.reshape(1, 4, 2, 3)),
    "Softmax2d_3d": lambda lib, x: lib.nn.Softmax2d()(x.reshape(4, 3, 2)),
}


# PyTorch's hardsigmoid backward multiplies by 1/6 rounded to float32 (``1.0f / 6.0f``), also for
# float64; zgrad's gradient is the exact 1/6.
GRAD_RTOL = {"hardsigmoid": 1e-7, "hardsigmoid_inplace": 1e-7, "Hardsigmoid": 1e-7}


@pytest.mark.torch
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_matches_torch(name):
    torch = require_torch()
    _compare(torch, ACTIVATIONS[name], [_activation_input()], grad_rtol=GRAD_RTOL.get(name, RTOL))


@pytest.mark.torch
def test_hardsigmoid_gradient_is_one_sixth_inside_and_zero_on_the_kinks():
    torch = require_torch()
    x = zgrad.tensor(_activation_input(), requires_grad=True)
    F(zgrad).hardsigmoid(x).sum().backward()
    inside = (np.abs(_activation_input()) < 3)
    np.testing.assert_array_equal(x.grad.numpy(), np.where(inside, 1 / 6, 0.0))
    t = torch.tensor(_activation_input(), requires_grad=True)
    F(torch).hardsigmoid(t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy() != 0, inside)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["relu6", "hardtanh", "hardsigmoid", "hardswish", "selu", "celu", "threshold"])
def test_inplace_writes_into_the_input_and_refuses_a_leaf(name):
    torch = require_torch()
    call = {"threshold": lambda lib, x: F(lib).threshold(x, 0.5, 2.0, inplace=True)}.get(
        name, lambda lib, x: getattr(F(lib), name)(x, inplace=True))
    ours, theirs = zgrad.tensor(_activation_input()), torch.tensor(_activation_input())
    assert call(zgrad, ours) is ours
    call(torch, theirs)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=RTOL)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        call(zgrad, zgrad.tensor(_activation_input(), requires_grad=True))


@pytest.mark.torch
@pytest.mark.parametrize("name", ["relu6", "hardtanh", "threshold"])
def test_integer_inputs_keep_their_dtype(name):
    torch = require_torch()
    call = {"threshold": lambda lib, x: F(lib).threshold(x, 2, 9)}.get(name, lambda lib, x: getattr(F(lib), name)(x))
    values = np.array([-8, -1, 0, 1, 2, 6, 7])
    out, expected = call(zgrad, zgrad.tensor(values)), call(torch, torch.tensor(values))
    assert str(out.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _signs(n: int) -> np.ndarray:
    return np.where(np.arange(n) % 2 == 0, 1.0, -1.0)


# (function of lib, *tensors and reduction; arrays; indices of the arrays to differentiate)
LOSSES = {
    "cosine_embedding": (lambda lib, a, b, t, r: F(lib).cosine_embedding_loss(a, b, t, reduction=r),
                         [_rng(1).normal(size=(4, 5)), np.vstack([_rng(2).normal(size=(3, 5)), np.zeros((1, 5))]),
                          _signs(4)], (0, 1)),
    "cosine_embedding_margin": (lambda lib, a, b, t, r: F(lib).cosine_embedding_loss(a, b, t, 0.2, reduction=r),
                                [_rng(3).normal(size=(6, 3)), _rng(4).normal(size=(6, 3)), _signs(6)], (0, 1)),
    "cosine_embedding_unbatched": (lambda lib, a, b, t, r: F(lib).cosine_embedding_loss(a, b, t, -0.5, reduction=r),
                                   [_rng(5).normal(size=5), _rng(6).normal(size=5), np.array(-1.0)], (0, 1)),
    "margin_ranking": (lambda lib, a, b, t, r: F(lib).margin_ranking_loss(a, b, t, reduction=r),
                       [np.array([1.0, 0.5, -2.0, 3.0, 0.0]), np.array([0.5, 0.5, 1.0, -1.0, 0.0]), _signs(5)],
                       (0, 1)),
    "margin_ranking_kink": (lambda lib, a, b, t, r: F(lib).margin_ranking_loss(a, b, t, margin=0.5, reduction=r),
                            [np.array([1.0, 0.5, -2.0, 3.0]), np.array([0.5, 1.0, 1.0, -1.0]),
                             np.array([1.0, -1.0, -1.0, 1.0])], (0, 1)),
    "hinge_embedding": (lambda lib, x, t, r: F(lib).hinge_embedding_loss(x, t, reduction=r),
                        [np.array([[1.0, -0.5, 2.0], [0.0, 1.0, 0.25]]), np.array([[1.0, -1.0, -1.0], [-1.0, -1.0, 0.0]])],
                        (0,)),
    "hinge_embedding_margin": (lambda lib, x, t, r: F(lib).hinge_embedding_loss(x, t, margin=2.0, reduction=r),
                               [np.array([2.0, -0.5, 1.0, 3.0]), np.array([-1.0, -1.0, 1.0, -1.0])], (0,)),
    "triplet": (lambda lib, a, p, n, r: F(lib).triplet_margin_loss(a, p, n, reduction=r),
                [_rng(7).normal(size=(4, 5)), _rng(8).normal(size=(4, 5)), _rng(9).normal(size=(4, 5))], None),
    "triplet_swap_p1": (lambda lib, a, p, n, r: F(lib).triplet_margin_loss(a, p, n, 0.5, 1, swap=True, reduction=r),
                        [_rng(10).normal(size=(6, 3)), _rng(11).normal(size=(6, 3)), _rng(12).normal(size=(6, 3))],
                        None),
    "triplet_p3_eps": (lambda lib, a, p, n, r: F(lib).triplet_margin_loss(a, p, n, 2.0, 3.0, eps=1e-3, reduction=r),
                       [_rng(13).normal(size=(3, 4)), _rng(13).normal(size=(3, 4)), _rng(14).normal(size=(3, 4))],
                       None),
    "triplet_unbatched": (lambda lib, a, p, n, r: F(lib).triplet_margin_loss(a, p, n, swap=True, reduction=r),
                          [_rng(15).normal(size=4), _rng(16).normal(size=4), _rng(17).normal(size=4)], None),
    "soft_margin": (lambda lib, x, t, r: F(lib).soft_margin_loss(x, t, reduction=r),
                    [np.array([[0.0, 1.0, -2.0], [30.0, -0.5, 4.0]]), np.array([[1.0, -1.0, 1.0], [-1.0, 1.0, -1.0]])],
                    (0,)),
    "multilabel_soft_margin": (lambda lib, x, t, r: F(lib).multilabel_soft_margin_loss(x, t, reduction=r),
                               [np.array([[0.0, 1.0, -2.0, 40.0], [-40.0, 0.5, 3.0, -1.0]]),
                                np.array([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])], None),
    "multilabel_soft_margin_weight": (lambda lib, x, t, w, r: F(lib).multilabel_soft_margin_loss(x, t, w, reduction=r),
                                      [_rng(18).normal(size=(3, 4)), (_rng(19).uniform(size=(3, 4)) > 0.5) * 1.0,
                                       np.array([0.5, 1.0, 2.0, 0.0])], None),
    "poisson_nll": (lambda lib, x, t, r: F(lib).poisson_nll_loss(x, t, reduction=r),
                    [np.array([[0.0, 1.0, -2.0], [0.5, 2.0, -0.5]]), np.array([[0.0, 1.0, 2.0], [3.0, 0.5, 4.0]])],
                    None),
    "poisson_nll_rate_full": (lambda lib, x, t, r: F(lib).poisson_nll_loss(x, t, False, True, reduction=r),
                              [np.array([[0.5, 1.0, 2.0], [0.0, 3.0, 1e-9]]), np.array([[0.0, 1.0, 2.0], [3.0, 0.5, 4.0]])],
                              (0,)),
    "poisson_nll_full_eps": (lambda lib, x, t, r: F(lib).poisson_nll_loss(x, t, full=True, eps=0.1, reduction=r),
                             [np.array([0.0, 1.0, -2.0, 0.5]), np.array([1.5, 1.0, 2.0, 7.0])], (0,)),
    "gaussian_nll": (lambda lib, x, t, v, r: F(lib).gaussian_nll_loss(x, t, v, reduction=r),
                     [_rng(20).normal(size=(3, 4)), _rng(21).normal(size=(3, 4)),
                      np.array([[1.0, 1e-6, 0.0, 2.0], [1e-7, 0.5, 3.0, 1e-6], [0.1, 0.2, 0.3, 0.4]])], None),
    "gaussian_nll_full_eps": (lambda lib, x, t, v, r: F(lib).gaussian_nll_loss(x, t, v, True, 0.5, reduction=r),
                              [_rng(22).normal(size=(2, 3)), _rng(23).normal(size=(2, 3)),
                               np.array([[0.5, 0.25, 2.0], [1.0, 0.5, 0.0]])], None),
    "gaussian_nll_one_short": (lambda lib, x, t, v, r: F(lib).gaussian_nll_loss(x, t, v, reduction=r),
                               [_rng(24).normal(size=(3, 2)), _rng(25).normal(size=(3, 2)), np.array([0.5, 1e-9, 2.0])],
                               None),
    "gaussian_nll_size_one": (lambda lib, x, t, v, r: F(lib).gaussian_nll_loss(x, t, v, full=True, reduction=r),
                              [_rng(26).normal(size=(2, 3, 2)), _rng(27).normal(size=(2, 3, 2)),
                               np.array([[[0.5], [2.0], [1.0]], [[0.3], [0.0], [4.0]]])], None),
    "gaussian_nll_number": (lambda lib, x, t, r: F(lib).gaussian_nll_loss(x, t, 0.5, reduction=r),
                            [_rng(28).normal(size=(2, 3)), _rng(29).normal(size=(2, 3))], None),
    # the modules
    "CosineEmbeddingLoss": (lambda lib, a, b, t, r: lib.nn.CosineEmbeddingLoss(0.1, reduction=r)(a, b, t),
                            [_rng(30).normal(size=(4, 3)), _rng(31).normal(size=(4, 3)), _signs(4)], (0, 1)),
    "MarginRankingLoss": (lambda lib, a, b, t, r: lib.nn.MarginRankingLoss(0.5, reduction=r)(a, b, t),
                          [np.array([1.0, 0.5, -2.0]), np.array([0.5, 1.0, 1.0]), np.array([1.0, -1.0, 1.0])], (0, 1)),
    "HingeEmbeddingLoss": (lambda lib, x, t, r: lib.nn.HingeEmbeddingLoss(0.5, reduction=r)(x, t),
                           [np.array([0.5, -0.5, 1.0]), np.array([-1.0, -1.0, 1.0])], (0,)),
    "TripletMarginLoss": (lambda lib, a, p, n, r: lib.nn.TripletMarginLoss(1.5, 1.0, swap=True, reduction=r)(a, p, n),
                          [_rng(32).normal(size=(3, 2)), _rng(33).normal(size=(3, 2)), _rng(34).normal(size=(3, 2))],
                          None),
    "SoftMarginLoss": (lambda lib, x, t, r: lib.nn.SoftMarginLoss(reduction=r)(x, t),
                       [np.array([0.0, 1.0, -2.0]), np.array([1.0, -1.0, -1.0])], (0,)),
    "MultiLabelSoftMarginLoss": (lambda lib, x, t, w, r: lib.nn.MultiLabelSoftMarginLoss(w, reduction=r)(x, t),
                                 [_rng(35).normal(size=(2, 3)), np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),
                                  np.array([1.0, 2.0, 0.5])], (0,)),
    "PoissonNLLLoss": (lambda lib, x, t, r: lib.nn.PoissonNLLLoss(full=True, reduction=r)(x, t),
                       [np.array([0.0, 1.0, -2.0]), np.array([2.0, 1.0, 5.0])], (0,)),
    "GaussianNLLLoss": (lambda lib, x, t, v, r: lib.nn.GaussianNLLLoss(full=True, eps=0.1, reduction=r)(x, t, v),
                        [_rng(36).normal(size=(2, 3)), _rng(37).normal(size=(2, 3)), np.array([[0.05], [2.0]])], None),
}


@pytest.mark.torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", LOSSES)
def test_loss_matches_torch(name, reduction):
    torch = require_torch()
    fn, arrays, grads = LOSSES[name]
    _compare(torch, lambda lib, *tensors: fn(lib, *tensors, reduction), arrays, grads)


def _weights(lib):
    return lib.ones(3)


REPRS = [
    lambda lib: lib.nn.ReLU6(), lambda lib: lib.nn.ReLU6(inplace=True), lambda lib: lib.nn.Hardtanh(),
    lambda lib: lib.nn.Hardtanh(-2.5, 3, inplace=True), lambda lib: lib.nn.Hardsigmoid(),
    lambda lib: lib.nn.Hardsigmoid(True), lambda lib: lib.nn.Hardswish(inplace=True), lambda lib: lib.nn.SELU(),
    lambda lib: lib.nn.SELU(True), lambda lib: lib.nn.CELU(), lambda lib: lib.nn.CELU(0.5, inplace=True),
    lambda lib: lib.nn.GLU(), lambda lib: lib.nn.GLU(dim=1), lambda lib: lib.nn.LogSigmoid(),
    lambda lib: lib.nn.Softsign(), lambda lib: lib.nn.Tanhshrink(), lambda lib: lib.nn.Softmin(),
    lambda lib: lib.nn.Softmin(1), lambda lib: lib.nn.Softshrink(), lambda lib: lib.nn.Softshrink(2),
    lambda lib: lib.nn.Hardshrink(1.5), lambda lib: lib.nn.Threshold(0.1, 20),
    lambda lib: lib.nn.Threshold(0, -1.5, True), lambda lib: lib.nn.Softmax2d(),
    lambda lib: lib.nn.CosineEmbeddingLoss(0.5), lambda lib: lib.nn.MarginRankingLoss(),
    lambda lib: lib.nn.HingeEmbeddingLoss(), lambda lib: lib.nn.TripletMarginLoss(swap=True),
    lambda lib: lib.nn.SoftMarginLoss(), lambda lib: lib.nn.MultiLabelSoftMarginLoss(_weights(lib)),
    lambda lib: lib.nn.PoissonNLLLoss(log_input=False), lambda lib: lib.nn.GaussianNLLLoss(full=True),
    lambda lib: lib.nn.modules.activation.Hardswish(), lambda lib: lib.nn.modules.loss.SoftMarginLoss(),
]


@pytest.mark.torch
@pytest.mark.parametrize("index", range(len(REPRS)))
def test_module_repr_matches_torch(index):
    torch = require_torch()
    assert repr(REPRS[index](zgrad)) == repr(REPRS[index](torch)).replace("torch.", "zgrad.")


def _t(lib, values, **kwargs):
    return lib.tensor(values, **kwargs)


X = np.arange(15.0).reshape(3, 5) / 7 - 1
# (call of lib, the error both raise); the messages must agree too
ERRORS = {
    "hardtanh_bounds": (lambda lib: F(lib).hardtanh(_t(lib, X), 1.0, 0.0), ValueError),
    "Hardtanh_bounds": (lambda lib: lib.nn.Hardtanh(1.0, 1.0), AssertionError),
    "glu_odd": (lambda lib: F(lib).glu(_t(lib, X)), RuntimeError),
    "glu_scalar": (lambda lib: F(lib).glu(_t(lib, 1.0)), RuntimeError),
    "glu_dim": (lambda lib: F(lib).glu(_t(lib, X), 2), IndexError),
    "celu_alpha": (lambda lib: F(lib).celu(_t(lib, X), 0.0), RuntimeError),
    "softshrink_lambd": (lambda lib: F(lib).softshrink(_t(lib, X, dtype=lib.float32), -0.5), RuntimeError),
    "softshrink_lambd_double": (lambda lib: F(lib).softshrink(_t(lib, X), -2.0), RuntimeError),
    "Softmax2d_dims": (lambda lib: lib.nn.Softmax2d()(_t(lib, X)), ValueError),
    "cosine_target_2d": (lambda lib: F(lib).cosine_embedding_loss(_t(lib, X), _t(lib, X), lib.ones(3, 1)),
                         RuntimeError),
    "cosine_target_0d": (lambda lib: F(lib).cosine_embedding_loss(_t(lib, X), _t(lib, X), lib.ones(())),
                         RuntimeError),
    "cosine_target_1d": (lambda lib: F(lib).cosine_embedding_loss(_t(lib, X[0]), _t(lib, X[0]), lib.ones(3)),
                         RuntimeError),
    "cosine_reduction": (lambda lib: F(lib).cosine_embedding_loss(_t(lib, X), _t(lib, X), lib.ones(3),
                                                                  reduction="max"), ValueError),
    "margin_ranking_dims": (lambda lib: F(lib).margin_ranking_loss(_t(lib, X), _t(lib, X), lib.ones(3)),
                            RuntimeError),
    "margin_ranking_reduction": (lambda lib: F(lib).margin_ranking_loss(_t(lib, X), _t(lib, X), _t(lib, X),
                                                                        reduction="avg"), ValueError),
    "hinge_reduction": (lambda lib: F(lib).hinge_embedding_loss(_t(lib, X), _t(lib, X), reduction="x"), ValueError),
    "triplet_dims": (lambda lib: F(lib).triplet_margin_loss(_t(lib, X), _t(lib, X), _t(lib, X[0])), RuntimeError),
    "triplet_margin": (lambda lib: F(lib).triplet_margin_loss(_t(lib, X), _t(lib, X), _t(lib, X), margin=0),
                       ValueError),
    "TripletMarginLoss_margin": (lambda lib: lib.nn.TripletMarginLoss(margin=-1), ValueError),
    "soft_margin_reduction": (lambda lib: F(lib).soft_margin_loss(_t(lib, X), _t(lib, X), reduction="x"), ValueError),
    "multilabel_reduction": (lambda lib: F(lib).multilabel_soft_margin_loss(_t(lib, X), _t(lib, X), reduction="x"),
                             ValueError),
    "poisson_reduction": (lambda lib: F(lib).poisson_nll_loss(_t(lib, X), _t(lib, X), reduction="x"), ValueError),
    "gaussian_negative_number": (lambda lib: F(lib).gaussian_nll_loss(_t(lib, X), _t(lib, X), -1.0), ValueError),
    "gaussian_negative_var": (lambda lib: F(lib).gaussian_nll_loss(_t(lib, X), _t(lib, X), -lib.ones(3, 5)),
                              ValueError),
    "gaussian_var_size": (lambda lib: F(lib).gaussian_nll_loss(_t(lib, X), _t(lib, X), lib.ones(2, 2)), ValueError),
    "gaussian_reduction": (lambda lib: F(lib).gaussian_nll_loss(_t(lib, X), _t(lib, X), 1.0, reduction="x"),
                           ValueError),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", ERRORS)
def test_bad_input_errors_match_torch(name):
    torch = require_torch()
    call, error = ERRORS[name]
    with pytest.raises(error) as theirs:
        call(torch)
    with pytest.raises(error) as ours:
        call(zgrad)
    assert str(ours.value) == str(theirs.value).replace("torch.", "zgrad.")


@pytest.mark.torch
@pytest.mark.parametrize("name", ["hardsigmoid", "hardswish", "selu", "celu", "glu", "logsigmoid", "softshrink",
                                  "hardshrink"])
def test_integer_inputs_are_refused_where_torch_refuses_them(name):
    torch = require_torch()
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        getattr(F(torch), name)(torch.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        getattr(F(zgrad), name)(zgrad.tensor([1, 2]))


@pytest.mark.torch
def test_softmin_without_dim_warns_and_picks_torchs_dim():
    torch = require_torch()
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        out = F(zgrad).softmin(zgrad.tensor(X))
    with pytest.warns(UserWarning):
        expected = F(torch).softmin(torch.tensor(X))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=RTOL)


def test_legacy_size_average_and_reduce_are_refused():
    x = zgrad.tensor(X)
    with pytest.raises(NotImplementedError, match="size_average and reduce"):
        F(zgrad).soft_margin_loss(x, x, size_average=False)
    with pytest.raises(NotImplementedError, match="size_average and reduce"):
        zgrad.nn.TripletMarginLoss(reduce=False)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["hardswish", "softshrink", "hardtanh", "relu6", "hardsigmoid"])
def test_infinities_and_nan_keep_torchs_values(name):
    torch = require_torch()
    values = [float("inf"), -float("inf"), float("nan"), 4.0, 3.0, -3.0, 0.5, -0.5, 0.0]
    got = getattr(zgrad.nn.functional, name)(zgrad.tensor(values, dtype=zgrad.float64)).numpy()
    expected = getattr(torch.nn.functional, name)(torch.tensor(values, dtype=torch.float64)).numpy()
    np.testing.assert_array_equal(got, expected)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["relu", "leaky_relu", "gelu", "mish", "tanh"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_gradients_at_infinities_nan_and_zero_are_torchs(name, create_graph):
    """Where PyTorch's backward deliberately passes a NaN input's gradient (relu tests ``x <= 0``,
    not ``x > 0``), and its values at the kinks and infinities. (Not hardtanh: PyTorch's own
    gradient at NaN is 0 in its vectorized loop and 1 in the scalar tail; zgrad's is 0.)"""
    torch = require_torch()
    values = [float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 2.0, -2.0]

    def gradient(lib):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        out = getattr(lib.nn.functional, name)(x)
        (grad,) = lib.autograd.grad(out, x, lib.full((len(values),), 3.0, dtype=lib.float64),
                                    create_graph=create_graph)
        return grad.detach().numpy()

    np.testing.assert_array_equal(gradient(zgrad), gradient(torch))

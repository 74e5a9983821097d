"""cross_entropy, nll_loss, mse_loss, l1_loss and their modules: every reduction, class weights,
ignore_index, label smoothing, (N, C, d1, ...) and unbatched inputs, probability targets; against
PyTorch (float32 and float64) and float64 finite differences, and PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import case, check
from zgrad import nn

TARGETS = np.array([0, 3, 1, 3, 2, 4], dtype=np.int64)
IGNORED = np.array([0, -100, 1, 3, -100, 4], dtype=np.int64)
IGNORED_7 = np.array([7, 3, 7, 3, 2, 4], dtype=np.int64)
SPATIAL = np.array([[[0, 2, 1], [4, 4, 3]], [[1, 1, 0], [2, -100, 3]]], dtype=np.int64)  # (N=2, d1=2, d2=3)
CLASS_WEIGHT = np.array([0.5, 2.0, 1.0, 0.25, 3.0])


def F(lib):
    return lib.nn.functional


def weight(lib, dtype):
    return lib.tensor(CLASS_WEIGHT.astype(dtype))


def ce(targets, **kwargs):
    def run(lib, x):
        extra = dict(kwargs)
        if extra.pop("weighted", False):
            extra["weight"] = weight(lib, x.detach().cpu().numpy().dtype)
        return F(lib).cross_entropy(x, lib.tensor(targets), **extra)
    return run


def nll(targets, **kwargs):
    def run(lib, x):
        extra = dict(kwargs)
        if extra.pop("weighted", False):
            extra["weight"] = weight(lib, x.detach().cpu().numpy().dtype)
        return F(lib).nll_loss(F(lib).log_softmax(x, 1 if x.ndim > 1 else 0), lib.tensor(targets), **extra)
    return run


CLASS_CASES = [
    case("ce_mean_fast_path", ce(TARGETS), (6, 5)),
    case("ce_sum", ce(TARGETS, reduction="sum"), (6, 5)),
    case("ce_none", ce(TARGETS, reduction="none"), (6, 5)),
    case("ce_weight_mean", ce(TARGETS, weighted=True), (6, 5)),
    case("ce_weight_none", ce(TARGETS, weighted=True, reduction="none"), (6, 5)),
    case("ce_ignore_index", ce(IGNORED), (6, 5)),
    case("ce_ignore_index_7_weight_sum", ce(IGNORED_7, ignore_index=7, weighted=True, reduction="sum"), (6, 5)),
    case("ce_label_smoothing", ce(TARGETS, label_smoothing=0.2), (6, 5)),
    case("ce_label_smoothing_weight_ignore", ce(IGNORED, label_smoothing=0.3, weighted=True), (6, 5)),
    case("ce_label_smoothing_none", ce(IGNORED, label_smoothing=0.1, reduction="none"), (6, 5)),
    case("ce_spatial", ce(SPATIAL), (2, 5, 2, 3)),
    case("ce_spatial_weight_smoothing_none", ce(SPATIAL, weighted=True, label_smoothing=0.1, reduction="none"),
         (2, 5, 2, 3)),
    case("ce_unbatched", ce(np.array(3)), (5,)),
    case("ce_unbatched_none", ce(np.array(2), reduction="none"), (5,)),
    case("nll_mean", nll(TARGETS), (6, 5)),
    case("nll_weight_ignore", nll(IGNORED, weighted=True), (6, 5)),
    case("nll_sum", nll(IGNORED, reduction="sum"), (6, 5)),
    case("nll_none_spatial", nll(SPATIAL, reduction="none"), (2, 5, 2, 3)),
    case("nll_weight_spatial", nll(SPATIAL, weighted=True), (2, 5, 2, 3)),
    case("nll_unbatched", nll(np.array(1)), (5,)),
]


@pytest.mark.parametrize("c", CLASS_CASES)
def test_class_losses(c):
    check(c.fn, c.shapes)


def probability_ce(**kwargs):
    def run(lib, x, target):
        extra = dict(kwargs)
        if extra.pop("weighted", False):
            extra["weight"] = weight(lib, x.detach().cpu().numpy().dtype)
        return F(lib).cross_entropy(x, F(lib).softmax(target, 1 if x.ndim > 1 else 0), **extra)
    return run


PROBABILITY_CASES = [
    case("mean", probability_ce(), (4, 5), (4, 5)),
    case("sum_smoothing", probability_ce(reduction="sum", label_smoothing=0.2), (4, 5), (4, 5)),
    case("none_weight", probability_ce(reduction="none", weighted=True), (4, 5), (4, 5)),
    case("spatial_weight_smoothing", probability_ce(weighted=True, label_smoothing=0.1), (2, 5, 3), (2, 5, 3)),
    case("unbatched", probability_ce(), (5,), (5,)),
]


@pytest.mark.parametrize("c", PROBABILITY_CASES)
def test_cross_entropy_with_class_probabilities(c):
    check(c.fn, c.shapes)


POINTWISE_CASES = [
    case("mse_mean", lambda lib, a, b: F(lib).mse_loss(a, b), (3, 4), (3, 4)),
    case("mse_sum", lambda lib, a, b: F(lib).mse_loss(a, b, reduction="sum"), (3, 4), (3, 4)),
    case("mse_none", lambda lib, a, b: F(lib).mse_loss(a, b, reduction="none"), (3, 4), (3, 4)),
    case("l1_mean", lambda lib, a, b: F(lib).l1_loss(a, b), (3, 4), (3, 4)),
    case("l1_sum", lambda lib, a, b: F(lib).l1_loss(a, b, reduction="sum"), (5,), (5,)),
    case("l1_none", lambda lib, a, b: F(lib).l1_loss(a, b, reduction="none"), (2, 3, 2), (2, 3, 2)),
    case("mse_module_sum", lambda lib, a, b: lib.nn.MSELoss(reduction="sum")(a, b), (3, 4), (3, 4)),
    case("l1_module", lambda lib, a, b: lib.nn.L1Loss()(a, b), (3, 4), (3, 4)),
]


@pytest.mark.parametrize("c", POINTWISE_CASES)
def test_pointwise_losses(c):
    check(c.fn, c.shapes)


@pytest.mark.filterwarnings("ignore:Using a target size")
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
def test_pointwise_losses_broadcast(name):
    check(lambda lib, a, b: getattr(F(lib), name)(a, b), [(3, 4), (4,)])
    check(lambda lib, a, b: getattr(F(lib), name)(a, b, reduction="none"), [(3, 1), (1, 4)])


def test_loss_modules_match_functions():
    rng = np.random.default_rng(0)
    x = zgrad.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    targets = zgrad.tensor(IGNORED)
    w = zgrad.tensor(CLASS_WEIGHT.astype(np.float32))
    module = nn.CrossEntropyLoss(weight=w, reduction="sum", label_smoothing=0.1)
    np.testing.assert_allclose(module(x, targets).numpy(),
                               nn.functional.cross_entropy(x, targets, w, reduction="sum",
                                                           label_smoothing=0.1).numpy())
    assert [name for name, _ in module.named_buffers()] == ["weight"]
    log_probs = nn.functional.log_softmax(x, 1)
    plain = zgrad.tensor(TARGETS)
    np.testing.assert_allclose(nn.NLLLoss(ignore_index=4)(log_probs, plain).numpy(),
                               nn.functional.nll_loss(log_probs, plain, ignore_index=4).numpy())
    assert repr(nn.MSELoss(reduction="none")) == "MSELoss()"  # PyTorch's losses print no arguments


def test_all_targets_ignored_gives_nan_mean_and_zero_gradient():
    x = zgrad.randn(3, 4, requires_grad=True)
    loss = nn.functional.cross_entropy(x, zgrad.tensor([-100, -100, -100]))
    assert np.isnan(loss.item())
    loss.backward()
    assert not np.any(x.grad.numpy())


# ignore_index on every path of cross_entropy: the fused kernel ('mean' and 'sum' without weights
# or smoothing) and the general one, on (N, C) and (N, C, d1) input, with the ignored class in
# [0, C) (the case the fused kernel once missed) and outside it, present in the targets or not.
IGNORE_0 = np.array([0, 1, 0, 3, 2, 0], dtype=np.int64)
SPATIAL_IGNORE_2 = np.array([[2, 0, 1], [4, 2, 2]], dtype=np.int64)  # (N=2, d1=3)
IGNORE_CASES = [
    case("fused_mean_ignore_0", ce(IGNORE_0, ignore_index=0), (6, 5)),
    case("fused_sum_ignore_0", ce(IGNORE_0, ignore_index=0, reduction="sum"), (6, 5)),
    case("fused_mean_ignore_absent", ce(np.array([0, 3, 1, 3, 1, 4]), ignore_index=2), (6, 5)),
    case("fused_mean_ignore_negative", ce(np.array([0, -1, 1, -1, 2, 4]), ignore_index=-1), (6, 5)),
    case("fused_spatial_mean_ignore_2", ce(SPATIAL_IGNORE_2, ignore_index=2), (2, 5, 3)),
    case("fused_spatial_sum_ignore_2", ce(SPATIAL_IGNORE_2, ignore_index=2, reduction="sum"), (2, 5, 3)),
    case("general_none_ignore_0", ce(IGNORE_0, ignore_index=0, reduction="none"), (6, 5)),
    case("general_weight_ignore_0", ce(IGNORE_0, ignore_index=0, weighted=True), (6, 5)),
    case("general_smoothing_ignore_0", ce(IGNORE_0, ignore_index=0, label_smoothing=0.2), (6, 5)),
    case("general_spatial_none_ignore_2", ce(SPATIAL_IGNORE_2, ignore_index=2, reduction="none"), (2, 5, 3)),
    case("general_spatial_weight_ignore_2", ce(SPATIAL_IGNORE_2, ignore_index=2, weighted=True), (2, 5, 3)),
    case("module_mean_ignore_0", lambda lib, x: lib.nn.CrossEntropyLoss(ignore_index=0)(x, lib.tensor(IGNORE_0)),
         (6, 5)),
    case("nll_mean_ignore_0", nll(IGNORE_0, ignore_index=0), (6, 5)),
]


@pytest.mark.parametrize("c", IGNORE_CASES)
def test_ignore_index_on_every_path(c):
    check(c.fn, c.shapes)


def test_ignore_index_in_range_is_ignored_by_the_fused_kernel():
    """The review's repro, without torch: an ignored class in [0, C) counts for nothing."""
    x = zgrad.tensor(np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32), requires_grad=True)
    targets = np.array([0, 1, 0, 3, 2])
    loss = nn.functional.cross_entropy(x, zgrad.tensor(targets), ignore_index=0)
    kept = targets != 0
    log_probs = nn.functional.log_softmax(x, 1).numpy().astype(np.float64)
    assert loss.item() == pytest.approx(-log_probs[kept.nonzero()[0], targets[kept]].mean(), rel=1e-6)
    loss.backward()
    assert not np.any(x.grad.numpy()[~kept]), "ignored rows get no gradient"


def test_modules_name_themselves_in_target_errors():
    x = zgrad.zeros(4, 5)
    with pytest.raises(IndexError, match=r"^CrossEntropyLoss\(\): Target 7 is out of bounds\. "
                                         r"Expected class indices in \[0, 4\] or ignore_index \(-100\)\.$"):
        nn.CrossEntropyLoss(reduction="sum")(x, zgrad.tensor([0, 7, 1, 2]))
    with pytest.raises(IndexError, match=r"^NLLLoss\(\): Target -3 is out of bounds\."):
        nn.NLLLoss()(x, zgrad.tensor([0, -3, 1, 2]))


def test_errors():
    ce_fn, nll_fn = nn.functional.cross_entropy, nn.functional.nll_loss
    x = zgrad.zeros(4, 5)
    with pytest.raises(IndexError, match=r"^Target 7 is out of bounds. Expected class indices in \[0, 4\]"):
        ce_fn(x, zgrad.tensor([0, 7, 1, 2]))
    with pytest.raises(IndexError, match="^Target -3 is out of bounds."):
        nll_fn(x, zgrad.tensor([0, -3, 1, 2]))
    with pytest.raises(IndexError, match="^Target 5 is out of bounds."):
        ce_fn(zgrad.zeros(2, 5, 3), zgrad.tensor([[0, 1, 5], [0, 0, 0]]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(4\) to match target batch_size \(3\)\."):
        ce_fn(x, zgrad.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(2\) to match target batch_size \(3\)\."):
        nll_fn(zgrad.zeros(2, 5, 3), zgrad.tensor(np.zeros((3, 3), dtype=np.int64)))
    with pytest.raises(RuntimeError, match=r"Expected target size \[2, 3\], got \[2, 4\]"):
        nll_fn(zgrad.zeros(2, 5, 3), zgrad.tensor(np.zeros((2, 4), dtype=np.int64)))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 5 classes or no classes "
                                           r"but got weight tensor of shape: \[3\]"):
        ce_fn(x, zgrad.tensor([0, 1, 2, 3]), weight=zgrad.ones(3))
    with pytest.raises(ValueError, match="elementwise_mean is not a valid value for reduction"):
        ce_fn(x, zgrad.tensor([0, 1, 2, 3]), reduction="elementwise_mean")
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        nn.L1Loss(reduction="avg")(x, x)
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0. Got: 1.5"):
        ce_fn(x, zgrad.tensor([0, 1, 2, 3]), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point target"):
        ce_fn(x, zgrad.zeros(4, 5), ignore_index=1)
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got float32"):
        nll_fn(x, zgrad.zeros(4))
    with pytest.raises(ValueError, match="Expected input to have at least 1 dimension"):
        ce_fn(zgrad.tensor(1.0), zgrad.tensor(0))
    with pytest.raises(NotImplementedError, match="cross_entropy: not implemented for int64 input; expected a floating"):
        ce_fn(zgrad.tensor([[1, 2]]), zgrad.tensor([0]))
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\)"):
        nn.functional.l1_loss(zgrad.ones(2, 3), zgrad.ones(4))
    with pytest.raises(NotImplementedError, match="size_average and reduce are deprecated"):
        nn.MSELoss(size_average=True)

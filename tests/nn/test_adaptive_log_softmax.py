"""``nn.AdaptiveLogSoftmaxWithLoss``: PyTorch's submodules and state_dict keys; with PyTorch's weights loaded,
its output, loss, gradients, ``log_prob`` and ``predict`` (every path) in float64; its error messages."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import error_of, torch
from zgrad import nn

IN_FEATURES, N_CLASSES, CUTOFFS, DIV_VALUE = 32, 20, [4, 9, 14], 2.0  # tail widths 16, 8, 4
SHORTLIST = CUTOFFS[0]
BATCH_TARGETS = [0, 3, 4, 8, 9, 13, 14, 19, 2, 17, 2]  # every cluster, each boundary, repeats
ONE_PER_CLUSTER = [2, 6, 11, 17]


def _pair(head_bias: bool = True, head_bias_values: np.ndarray | None = None):
    """(ours, theirs): PyTorch's module in float64 and ours with its state dict loaded."""
    torch.manual_seed(0)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(IN_FEATURES, N_CLASSES, CUTOFFS, div_value=DIV_VALUE,
                                                 head_bias=head_bias).double()
    if head_bias_values is not None:
        with torch.no_grad():
            theirs.head.bias.copy_(torch.tensor(head_bias_values))
    ours = nn.AdaptiveLogSoftmaxWithLoss(IN_FEATURES, N_CLASSES, CUTOFFS, div_value=DIV_VALUE, head_bias=head_bias,
                                         dtype=zgrad.float64)
    ours.load_state_dict({key: zgrad.tensor(value.numpy()) for key, value in theirs.state_dict().items()})
    return ours, theirs


def _inputs(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, IN_FEATURES))


def _assert_close(ours, theirs) -> None:
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("head_bias", [False, True])
def test_submodules_and_state_dict_are_torchs(head_bias):
    ours, theirs = _pair(head_bias)
    assert [(key, tuple(value.shape)) for key, value in ours.state_dict().items()] == \
        [(key, tuple(value.shape)) for key, value in theirs.state_dict().items()]
    assert repr(ours) == repr(theirs)
    for name in ("in_features", "n_classes", "cutoffs", "div_value", "head_bias", "shortlist_size", "n_clusters",
                 "head_size"):
        assert getattr(ours, name) == getattr(theirs, name), name


@pytest.mark.torch
@pytest.mark.parametrize("targets", [BATCH_TARGETS, [1, 18, 0, 19], [15]], ids=["every-cluster", "clusters-skipped",
                                                                              "one-row"])
@pytest.mark.parametrize("head_bias", [False, True])
def test_batched_output_loss_and_gradients_are_torchs(head_bias, targets):
    ours, theirs = _pair(head_bias)
    x = _inputs(len(targets))
    x_ours, x_theirs = zgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    result_ours = ours(x_ours, zgrad.tensor(targets))
    result_theirs = theirs(x_theirs, torch.tensor(targets))
    assert type(result_ours).__name__ == "_ASMoutput" and result_ours._fields == ("output", "loss")
    _assert_close(result_ours.output, result_theirs.output)
    _assert_close(result_ours.loss, result_theirs.loss)
    result_ours.loss.backward()
    result_theirs.loss.backward()
    _assert_close(x_ours.grad, x_theirs.grad)
    for (name, mine), (_, reference) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        assert (mine.grad is None) == (reference.grad is None), name  # a cluster no target is in is not run
        if reference.grad is not None:
            _assert_close(mine.grad, reference.grad)


@pytest.mark.torch
@pytest.mark.parametrize("target", ONE_PER_CLUSTER)
def test_one_example_as_torchs(target):
    ours, theirs = _pair()
    x = _inputs(1)[0]
    x_ours, x_theirs = zgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    result_ours, result_theirs = ours(x_ours, zgrad.tensor(target)), theirs(x_theirs, torch.tensor(target))
    assert result_ours.output.shape == () and result_ours.loss.shape == ()
    _assert_close(result_ours.output, result_theirs.output)
    _assert_close(result_ours.loss, result_theirs.loss)
    result_ours.output.backward()
    result_theirs.output.backward()
    _assert_close(x_ours.grad, x_theirs.grad)
    for mine, reference in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert (mine.grad is None) == (reference.grad is None)
        if reference.grad is not None:
            _assert_close(mine.grad, reference.grad)


def _head_bias_favouring(columns: slice) -> np.ndarray:
    bias = np.zeros(SHORTLIST + len(CUTOFFS))
    bias[columns] = 50.0
    return bias


@pytest.mark.torch
@pytest.mark.parametrize("favoured, expected_path", [
    (slice(0, SHORTLIST), "shortlist"),  # every row's head argmax is a class: the tail is never run
    (slice(SHORTLIST, None), "every row's tail"),
    (None, "some rows' tails"),
])
def test_log_prob_and_predict_are_torchs(favoured, expected_path):
    bias = None if favoured is None else _head_bias_favouring(favoured)
    ours, theirs = _pair(head_bias=True, head_bias_values=bias)
    x = _inputs(40, seed=3)
    head_argmax = theirs.head(torch.tensor(x)).argmax(dim=1)
    needs_tail = int((head_argmax >= SHORTLIST).sum())
    assert {0: "shortlist", len(x): "every row's tail"}.get(needs_tail, "some rows' tails") == expected_path
    _assert_close(ours.log_prob(zgrad.tensor(x)), theirs.log_prob(torch.tensor(x)))
    prediction = ours.predict(zgrad.tensor(x))
    assert prediction.dtype == zgrad.int64
    assert prediction.tolist() == theirs.predict(torch.tensor(x)).tolist()


def _build(lib, cutoffs, n_classes=N_CLASSES):
    return lib.nn.AdaptiveLogSoftmaxWithLoss(IN_FEATURES, n_classes, cutoffs, div_value=DIV_VALUE)


@pytest.mark.torch
@pytest.mark.parametrize("cutoffs", [[], [9, 4], [0, 4], [-2, 4], [4, 20], [4, 4, 9], [4.5, 9], (), 7, [4, "9"]],
                         ids=repr)
def test_bad_cutoffs_raise_torchs_errors(cutoffs):
    expected = error_of(lambda lib: _build(lib, cutoffs), torch)
    assert expected is not None
    assert error_of(lambda lib: _build(lib, cutoffs), zgrad) == expected


FORWARD_ERRORS = {
    "target-too-large": ((3, IN_FEATURES), [0, 20, 5]),
    "target-negative": ((3, IN_FEATURES), [-1, 5, 19]),
    "target-batch-mismatch": ((3, IN_FEATURES), [0, 1]),
    "1d-target-3d-input": ((3, 2, IN_FEATURES), [0, 1, 2]),
    "1d-target-1d-input": ((3,), [0, 1, 2]),
    "0d-target-2d-input": ((3, IN_FEATURES), 1),
    "2d-target": ((3, IN_FEATURES), [[0], [1], [2]]),
    "0d-target-too-large": ((IN_FEATURES,), 25),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", FORWARD_ERRORS)
def test_forward_errors_are_torchs(case):
    shape, target = FORWARD_ERRORS[case]

    def call(lib):
        module = _build(lib, CUTOFFS).double()
        return module(lib.tensor(np.ones(shape)), lib.tensor(target))

    expected = error_of(call, torch)
    assert expected is not None
    assert error_of(call, zgrad) == expected


def test_log_prob_is_a_distribution_and_forward_reads_it():
    zgrad.manual_seed(0)
    module = nn.AdaptiveLogSoftmaxWithLoss(IN_FEATURES, N_CLASSES, CUTOFFS, div_value=DIV_VALUE, head_bias=True,
                                           dtype=zgrad.float64)
    x = zgrad.tensor(_inputs(len(BATCH_TARGETS)))
    log_prob = module.log_prob(x)
    assert log_prob.shape == (len(BATCH_TARGETS), N_CLASSES)
    np.testing.assert_allclose(log_prob.exp().sum(dim=1).detach().numpy(), 1.0, rtol=1e-12)
    output, loss = module(x, zgrad.tensor(BATCH_TARGETS))
    picked = log_prob.detach().numpy()[np.arange(len(BATCH_TARGETS)), BATCH_TARGETS]
    np.testing.assert_allclose(output.detach().numpy(), picked, rtol=1e-12)
    np.testing.assert_allclose(loss.item(), -picked.mean(), rtol=1e-12)
    assert module.predict(x).tolist() == log_prob.argmax(dim=1).tolist()
    one = module(x[0], zgrad.tensor(BATCH_TARGETS[0]))
    assert one.output.shape == () and one.output.item() == pytest.approx(picked[0], rel=1e-12)


def test_module_paths_parameter_shapes_and_reset_parameters_redraws_in_init_order():
    from zgrad.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss, _ASMoutput
    assert AdaptiveLogSoftmaxWithLoss is nn.AdaptiveLogSoftmaxWithLoss is nn.modules.AdaptiveLogSoftmaxWithLoss
    assert _ASMoutput._fields == ("output", "loss")
    zgrad.manual_seed(1)
    module = nn.AdaptiveLogSoftmaxWithLoss(IN_FEATURES, N_CLASSES, [4, 9], head_bias=True)  # div_value 4: 8, 2
    assert [(name, tuple(p.shape)) for name, p in module.named_parameters()] == [
        ("head.weight", (6, 32)), ("head.bias", (6,)), ("tail.0.0.weight", (8, 32)), ("tail.0.1.weight", (5, 8)),
        ("tail.1.0.weight", (2, 32)), ("tail.1.1.weight", (11, 2))]
    drawn = [p.detach().numpy().copy() for p in module.parameters()]
    zgrad.manual_seed(1)
    module.reset_parameters()
    for before, after in zip(drawn, module.parameters(), strict=True):
        np.testing.assert_array_equal(before, after.detach().numpy())


def test_a_few_adam_steps_lower_the_loss():
    zgrad.manual_seed(0)
    module = nn.AdaptiveLogSoftmaxWithLoss(IN_FEATURES, N_CLASSES, CUTOFFS, div_value=DIV_VALUE)
    rng = np.random.default_rng(0)
    x = zgrad.tensor(rng.standard_normal((64, IN_FEATURES)).astype(np.float32))
    targets = zgrad.tensor(rng.integers(0, N_CLASSES, size=64))
    optimizer = zgrad.optim.Adam(module.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        optimizer.zero_grad()
        loss = module(x, targets).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


@pytest.mark.torch
def test_a_cluster_of_zero_width_as_torchs():
    """16 // 4**3 == 0: the third cluster's projection is empty, so its classes' scores are its bias-free zeros."""
    def run(lib):
        lib.manual_seed(0)
        module = lib.nn.AdaptiveLogSoftmaxWithLoss(16, 40, [5, 10, 20]).double()
        return module, lib.ones(3, 16, dtype=lib.float64), lib.tensor([1, 12, 30])

    ours, x_ours, t_ours = run(zgrad)
    theirs, x_theirs, t_theirs = run(torch)
    shapes = [[tuple(v.shape) for v in module.state_dict().values()] for module in (ours, theirs)]
    assert shapes[0] == shapes[1]
    ours.load_state_dict({key: zgrad.tensor(value.numpy()) for key, value in theirs.state_dict().items()})
    _assert_close(ours(x_ours, t_ours).output, theirs(x_theirs, t_theirs).output)
    _assert_close(ours.log_prob(x_ours), theirs.log_prob(x_theirs))

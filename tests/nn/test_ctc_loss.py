"""``nn.functional.ctc_loss`` and ``nn.CTCLoss`` against PyTorch: float64 values and gradients with
respect to log_probs for every reduction, padded and concatenated targets, unbatched input,
impossible alignments with and without ``zero_infinity``, repeated labels, empty targets and
inputs, short input lengths, a blank other than 0 and float32; the errors PyTorch raises (same
type, same text); a short CTC training run step by step; and the op on the CUDA backend (Numba's
simulator) against the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import require_torch

RTOL = 1e-10  # rounding of T recursion steps and of the sums over states (torch adds them in log space)
REDUCTIONS = ("none", "mean", "sum")


def F(lib):
    return lib.nn.functional


def _log_probs(shape: tuple[int, ...], seed: int = 0, normalized: bool = True) -> np.ndarray:
    x = np.random.default_rng(seed).normal(0.0, 1.5, shape)
    return x - np.log(np.exp(x).sum(-1, keepdims=True)) if normalized and shape[-1] else x


# (T, N, C) batch of four: sample 1 has repeated labels (needs a blank between them), sample 2 a
# target its input length cannot fit (an impossible alignment: inf loss), sample 3 an empty
# target, and inputs shorter than T.
TARGETS = np.array([[1, 2, 3, 1], [2, 2, 4, 4], [1, 3, 1, 0], [3, 0, 0, 0]])
INPUT_LENGTHS = np.array([8, 7, 2, 5])
TARGET_LENGTHS = np.array([4, 4, 3, 0])
IMPOSSIBLE = 2


def _lengths(lib, form: str, values: np.ndarray):
    if form == "tensor":
        return lib.tensor(values)
    return tuple(int(v) for v in values) if form == "tuple" else [int(v) for v in values]


def _concatenated(targets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([row[:n] for row, n in zip(targets, lengths)])


def _compare(torch, log_probs: np.ndarray, call, dtype: str = "float64", rtol: float = RTOL, atol: float = 0.0,
             seed: int = 1) -> None:
    """call(lib, log_probs tensor) in both libraries: values, and the gradients of log_probs
    under random weights of the output, must agree (NaN where torch has NaN)."""
    ours = zgrad.tensor(log_probs, dtype=getattr(zgrad, dtype), requires_grad=True)
    theirs = torch.tensor(log_probs, dtype=getattr(torch, dtype), requires_grad=True)
    out, expected = call(zgrad, ours), call(torch, theirs)
    assert tuple(out.shape) == tuple(expected.shape) and out.dtype == getattr(zgrad, dtype)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=rtol, atol=atol)
    weights = np.random.default_rng(seed).uniform(0.5, 1.5, tuple(expected.shape))
    (out * zgrad.tensor(weights, dtype=out.dtype)).sum().backward()
    (expected * torch.tensor(weights, dtype=expected.dtype)).sum().backward()
    assert ours.grad.dtype == getattr(zgrad, dtype)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.torch
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
def test_values_and_gradients_match_torch(layout, reduction, zero_infinity):
    torch = require_torch()
    targets = TARGETS if layout == "padded" else _concatenated(TARGETS, TARGET_LENGTHS)

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor(targets), lib.tensor(INPUT_LENGTHS), lib.tensor(TARGET_LENGTHS),
                               reduction=reduction, zero_infinity=zero_infinity)

    _compare(torch, _log_probs((8, 4, 5)), call)


def test_impossible_alignment_is_inf_with_nan_gradient_or_zero_with_zero_infinity():
    for zero_infinity in (False, True):
        lp = zgrad.tensor(_log_probs((8, 4, 5)), requires_grad=True)
        loss = F(zgrad).ctc_loss(lp, zgrad.tensor(TARGETS), zgrad.tensor(INPUT_LENGTHS),
                                 zgrad.tensor(TARGET_LENGTHS), reduction="none", zero_infinity=zero_infinity)
        assert (loss[IMPOSSIBLE].item() == 0.0) if zero_infinity else np.isposinf(loss[IMPOSSIBLE].item())
        loss.sum().backward()
        grad = lp.grad.numpy()[:, IMPOSSIBLE]
        inside = grad[:INPUT_LENGTHS[IMPOSSIBLE]]
        assert (inside == 0).all() if zero_infinity else np.isnan(inside).all()
        assert (grad[INPUT_LENGTHS[IMPOSSIBLE]:] == 0).all()
        assert np.isfinite(lp.grad.numpy()[:, [0, 1, 3]]).all()


@pytest.mark.torch
@pytest.mark.parametrize("form", ["tuple", "list"])
def test_lengths_as_sequences_of_ints(form):
    torch = require_torch()

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor(TARGETS), _lengths(lib, form, INPUT_LENGTHS),
                               _lengths(lib, form, TARGET_LENGTHS), reduction="none")

    _compare(torch, _log_probs((8, 4, 5), seed=2), call)


@pytest.mark.torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("targets", ["concatenated", "padded"])
def test_unbatched(targets, reduction):
    torch = require_torch()
    target = np.array([1, 3, 3]) if targets == "concatenated" else np.array([[1, 3, 3, 0]])

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor(target), lib.tensor(7), lib.tensor([3]), reduction=reduction)

    _compare(torch, _log_probs((9, 5), seed=3), call)


@pytest.mark.torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_repeated_labels_need_a_blank_between_them(reduction):
    torch = require_torch()
    # [1, 1] fits 3 frames (1, blank, 1) and not 2; [2, 2, 2] fits 5; [1, 2, 2] fits 4
    targets = np.array([[1, 1, 0], [1, 1, 0], [2, 2, 2], [1, 2, 2]])

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor(targets), lib.tensor([3, 2, 5, 4]), lib.tensor([2, 2, 3, 3]),
                               reduction=reduction)

    _compare(torch, _log_probs((5, 4, 3), seed=4), call)


@pytest.mark.torch
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_empty_targets_and_empty_inputs(zero_infinity):
    torch = require_torch()
    # empty targets (all blank), an empty input with an empty target (loss 0) and with a target (inf)
    targets = np.array([[0, 0], [0, 0], [0, 0], [2, 1]]) + 1

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor(targets), lib.tensor([6, 3, 0, 0]), lib.tensor([0, 0, 0, 2]),
                               reduction="none", zero_infinity=zero_infinity)

    _compare(torch, _log_probs((6, 4, 4), seed=5), call)


@pytest.mark.torch
def test_all_input_lengths_zero():
    torch = require_torch()

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor([[1], [1]]), (0, 0), (0, 1), reduction="sum", zero_infinity=True)

    _compare(torch, _log_probs((3, 2, 3), seed=6), call)


@pytest.mark.torch
@pytest.mark.parametrize("blank", [2, 4])
def test_blank_other_than_zero(blank):
    torch = require_torch()
    targets = np.array([[0, 1, 3], [3, 3, 0], [1, 0, 1]])  # 0 is a label like any other

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor(targets), lib.tensor([7, 6, 4]), lib.tensor([3, 2, 3]), blank=blank)

    _compare(torch, _log_probs((7, 3, 5), seed=7), call)


@pytest.mark.torch
def test_gradient_is_torchs_for_unnormalized_log_probs():
    torch = require_torch()  # PyTorch's gradient assumes a log_softmax made log_probs: exp(lp) - occupancy

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor(TARGETS), lib.tensor(INPUT_LENGTHS), lib.tensor(TARGET_LENGTHS),
                               reduction="sum", zero_infinity=True)

    _compare(torch, _log_probs((8, 4, 5), seed=8, normalized=False), call)


@pytest.mark.torch
def test_batch_first_log_probs_transposed():
    torch = require_torch()

    def call(lib, lp):  # a (N, T, C) tensor transposed: a strided view
        return F(lib).ctc_loss(lp.transpose(0, 1), lib.tensor(TARGETS), lib.tensor(INPUT_LENGTHS),
                               lib.tensor(TARGET_LENGTHS), reduction="mean")

    _compare(torch, _log_probs((4, 8, 5), seed=9), call)


@pytest.mark.torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_float32(reduction):
    torch = require_torch()

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor(TARGETS), lib.tensor(INPUT_LENGTHS), lib.tensor(TARGET_LENGTHS),
                               reduction=reduction, zero_infinity=True)

    _compare(torch, _log_probs((8, 4, 5), seed=10), call, dtype="float32", rtol=1e-5, atol=1e-6)


@pytest.mark.torch
def test_longer_sequences():
    torch = require_torch()
    rng = np.random.default_rng(11)
    targets = rng.integers(1, 20, (16, 10))
    target_lengths = rng.integers(0, 11, 16)
    input_lengths = rng.integers(25, 51, 16)

    def call(lib, lp):
        return F(lib).ctc_loss(lp, lib.tensor(targets), lib.tensor(input_lengths), lib.tensor(target_lengths))

    _compare(torch, _log_probs((50, 16, 20), seed=12), call)


@pytest.mark.torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_module_matches_torch(reduction):
    torch = require_torch()

    def call(lib, lp):
        loss = lib.nn.CTCLoss(blank=4, reduction=reduction, zero_infinity=True)
        return loss(lp, lib.tensor(TARGETS - 1 + (TARGETS == 0)), lib.tensor(INPUT_LENGTHS),
                    lib.tensor(TARGET_LENGTHS))

    _compare(torch, _log_probs((8, 4, 5), seed=13), call)


@pytest.mark.torch
def test_module_repr_and_attributes():
    torch = require_torch()
    for kwargs in ({}, {"blank": 3, "reduction": "sum", "zero_infinity": True}):
        ours, theirs = zgrad.nn.CTCLoss(**kwargs), torch.nn.CTCLoss(**kwargs)
        assert repr(ours) == repr(theirs) == "CTCLoss()"
        assert (ours.blank, ours.reduction, ours.zero_infinity) == (theirs.blank, theirs.reduction,
                                                                    theirs.zero_infinity)


def _call(lib, lp_shape=(5, 3, 4), targets=((1, 1, 2), (3, 1, 1), (1, 2, 3)), input_lengths=(5, 4, 5),
          target_lengths=(2, 1, 3), lengths_as="tensor", **kwargs):
    lp = lib.tensor(_log_probs(lp_shape))
    return lambda: F(lib).ctc_loss(lp, lib.tensor(np.array(targets)),
                                   _lengths(lib, lengths_as, np.array(input_lengths)),
                                   _lengths(lib, lengths_as, np.array(target_lengths)), **kwargs)


# (arguments of _call, the error both raise): the messages must agree too
ERRORS = {
    "reduction": (dict(reduction="avg"), ValueError),
    "log_probs_4d": (dict(lp_shape=(1, 5, 3, 4)), RuntimeError),
    "log_probs_1d": (dict(lp_shape=(5,)), RuntimeError),
    "log_probs_empty": (dict(lp_shape=(0, 3, 4)), RuntimeError),
    "no_classes": (dict(lp_shape=(5, 3, 0)), RuntimeError),
    "blank_too_large": (dict(blank=4), RuntimeError),
    "blank_negative": (dict(blank=-1), RuntimeError),
    "targets_3d": (dict(targets=[[[1, 2]] * 3]), RuntimeError),
    "targets_rows": (dict(targets=((1, 2, 3), (1, 2, 3))), RuntimeError),
    "target_length_over_targets": (dict(target_lengths=(2, 1, 4)), RuntimeError),
    "concatenated_too_short": (dict(targets=(1, 1, 3, 1, 2)), RuntimeError),
    "concatenated_too_long": (dict(targets=(1, 1, 3, 1, 2, 3, 1)), RuntimeError),
    "input_length_over_T": (dict(input_lengths=(5, 6, 5)), RuntimeError),
    "input_length_negative": (dict(input_lengths=(5, -1, 5)), RuntimeError),
    "target_length_negative": (dict(target_lengths=(2, -1, 3)), RuntimeError),
    "input_lengths_size": (dict(input_lengths=(5, 4)), RuntimeError),
    "target_lengths_size": (dict(target_lengths=(2, 1)), RuntimeError),
    "tuple_input_length_over_T": (dict(input_lengths=(5, 9, 5), lengths_as="tuple"), RuntimeError),
    "tuple_target_length_over_targets": (dict(target_lengths=(2, 1, 4), lengths_as="list"), RuntimeError),
    "tuple_lengths_size": (dict(input_lengths=(5, 4), lengths_as="tuple"), RuntimeError),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", ERRORS)
def test_bad_input_errors_match_torch(name):
    torch = require_torch()
    kwargs, error = ERRORS[name]
    with pytest.raises(error) as theirs:
        _call(torch, **dict(kwargs))()
    with pytest.raises(error) as ours:
        _call(zgrad, **dict(kwargs))()
    assert str(ours.value) == str(theirs.value)


@pytest.mark.torch
def test_dtype_errors_match_torch():
    torch = require_torch()
    for lib in (torch, zgrad):
        lp = lib.tensor(_log_probs((5, 3, 4)))
        targets, lengths = lib.tensor([[1, 2], [1, 2], [1, 2]]), lib.tensor([5, 5, 5])
        with pytest.raises(NotImplementedError, match="\"ctc_loss_cpu\" not implemented for 'Long'"):
            F(lib).ctc_loss(lp.long(), targets, lengths, lengths - 3)
        with pytest.raises(RuntimeError, match="^input_lengths must be integral$"):
            F(lib).ctc_loss(lp, targets, lengths.double(), lengths - 3)
        with pytest.raises(RuntimeError, match="^target_lengths must be integral$"):
            F(lib).ctc_loss(lp, targets, lengths, (lengths - 3).double())
        with pytest.raises(TypeError):  # lengths must be both tensors or both sequences of ints
            F(lib).ctc_loss(lp, targets, (5, 5, 5), lengths - 3)
        with pytest.raises(TypeError):
            F(lib).ctc_loss(lp, targets, 5, 2)
        with pytest.raises(TypeError):
            F(lib).ctc_loss(lp, targets, (5.0, 5, 5), (2, 2, 2))
        # integer lengths of other widths, and targets of any integer or floating dtype, are read as int64
        expected = F(lib).ctc_loss(lp, targets, lengths, lengths - 3).item()
        for other in (F(lib).ctc_loss(lp, targets.int(), lengths.int(), (lengths - 3).short()),
                      F(lib).ctc_loss(lp, targets.double(), lengths, lengths - 3)):
            assert other.item() == pytest.approx(expected, rel=1e-14)


def test_target_labels_out_of_range_are_refused():
    lp = zgrad.tensor(_log_probs((5, 2, 4)))
    for bad in (4, -1):
        with pytest.raises(RuntimeError, match=f"target label {bad} is out of range for log_probs of 4 classes"):
            F(zgrad).ctc_loss(lp, zgrad.tensor([[1, bad], [1, 2]]), (5, 5), (2, 2))
    # entries past a target's length are not read: any padding value is fine
    F(zgrad).ctc_loss(lp, zgrad.tensor([[1, -1, -1], [1, 2, 99]]), (5, 5), (1, 2))


def test_double_backward_is_refused():
    lp = zgrad.tensor(_log_probs((5, 2, 4)), requires_grad=True)
    loss = F(zgrad).ctc_loss(lp, zgrad.tensor([[1, 2], [3, 3]]), (5, 5), (2, 2))
    with pytest.raises(RuntimeError, match="double backward"):
        zgrad.autograd.grad(loss, lp, create_graph=True)


@pytest.mark.torch
def test_training_run_matches_torch_step_by_step():
    """Linear + log_softmax trained with SGD on a fixed toy task: frames of one-hot-ish features
    whose label sequence is the target; zgrad's and torch's losses agree at every step."""
    torch = require_torch()
    rng = np.random.default_rng(14)
    frames, batch, features, classes = 12, 6, 5, 4
    targets = rng.integers(1, classes, (batch, 4))
    target_lengths = rng.integers(1, 5, batch)
    input_lengths = rng.integers(9, frames + 1, batch)
    inputs = rng.normal(0.0, 1.0, (frames, batch, features))
    weight, bias = rng.normal(0.0, 0.5, (classes, features)), rng.normal(0.0, 0.1, classes)

    def run(lib) -> list[float]:
        model = lib.nn.Linear(features, classes, dtype=lib.float64)
        with lib.no_grad():
            model.weight.copy_(lib.tensor(weight))
            model.bias.copy_(lib.tensor(bias))
        criterion = lib.nn.CTCLoss()
        optimizer = lib.optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
        x, y = lib.tensor(inputs), lib.tensor(targets)
        il, tl = lib.tensor(input_lengths), lib.tensor(target_lengths)
        losses = []
        for _ in range(40):
            optimizer.zero_grad()
            loss = criterion(model(x).log_softmax(2), y, il, tl)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    ours, theirs = run(zgrad), run(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    assert ours[-1] < 0.5 * ours[0]  # it learned


@requires_cuda
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_on_cuda_matches_cpu(dtype):
    arrays = [_log_probs((6, 3, 5), seed=15).astype(dtype), np.array([[1, 1, 2], [3, 4, 0], [2, 0, 0]]),
              np.array([6, 5, 1]), np.array([3, 2, 1])]

    def call(lib, lp, targets, input_lengths, target_lengths):
        return F(lib).ctc_loss(lp, targets, input_lengths, target_lengths, reduction="none", zero_infinity=True)

    check_device(call, [], arrays=arrays, dtype=dtype)


@pytest.mark.torch
def test_ctc_loss_runs_in_float32_under_autocast_as_torchs():
    torch = require_torch()
    data = np.log(np.random.default_rng(5).dirichlet(np.ones(5), (10, 2)))
    results = []
    for lib in (zgrad, torch):
        log_probs = lib.tensor(data, dtype=lib.float32).to(lib.bfloat16)
        args = (lib.tensor([[1, 2], [3, 4]]), lib.tensor([10, 10]), lib.tensor([2, 2]))
        with lib.autocast("cpu", dtype=lib.bfloat16):
            loss = lib.nn.functional.ctc_loss(log_probs, *args)
        results.append((str(loss.dtype).replace("torch.", ""), float(loss)))
    assert results[0][0] == results[1][0] == "float32"
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5)

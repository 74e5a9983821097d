"""A training step on CUDA never waits for the device unless the program asks for a value.

Every wait of the host for the device goes through ``runtime.synchronize`` and is counted by
``runtime.host_waits()``, in the simulator as on a GPU, so the count is checked here without one.
Input checks that need the device's values (embedding indices, class targets) run on the device
and report at the next wait instead, as CUDA's device-side asserts do.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda
from zgrad.kernels import dispatch

pytestmark = requires_cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from mingpt import GPTConfig, create_optimizer, gpt_classes  # noqa: E402


def _rt():
    return dispatch.backend("cuda").rt


def _waits_in(step) -> int:
    before = _rt().host_waits()
    step()
    return _rt().host_waits() - before


def _mlp_step():
    zgrad.manual_seed(0)
    model = zgrad.nn.Sequential(zgrad.nn.Linear(6, 16), zgrad.nn.ReLU(), zgrad.nn.Linear(16, 5)).cuda()
    optimizer = zgrad.optim.Adam(model.parameters(), lr=1e-3)
    x, y = zgrad.randn(4, 6, device="cuda"), zgrad.tensor([0, 4, 2, 1], device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = zgrad.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        zgrad.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        return loss

    return step


def _regression_step():
    zgrad.manual_seed(0)
    model = zgrad.nn.Linear(4, 2).cuda()
    optimizer = zgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = zgrad.randn(8, 4, device="cuda"), zgrad.randn(8, 2, device="cuda")

    def step():
        optimizer.zero_grad()
        loss = zgrad.nn.functional.mse_loss(model(x), y) + zgrad.nn.functional.l1_loss(model(x), y, reduction="sum")
        loss.backward()
        optimizer.step()
        return loss

    return step


def _gpt_step():
    zgrad.manual_seed(0)
    config = GPTConfig(n_layer=1, n_head=2, n_embd=8, vocab_size=11, block_size=4)
    model = gpt_classes(zgrad).GPT(config, zgrad.float32).cuda()
    optimizer = create_optimizer(zgrad, model)
    tokens = np.random.default_rng(0).integers(0, config.vocab_size, size=(2, config.block_size + 1))
    inputs, targets = zgrad.tensor(tokens[:, :-1], device="cuda"), zgrad.tensor(tokens[:, 1:], device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        loss.backward()
        zgrad.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    return step


@pytest.mark.parametrize("make_step", [_mlp_step, _regression_step, pytest.param(_gpt_step, marks=pytest.mark.full)],
                         ids=["mlp", "regression", "mingpt"])  # minGPT: ~300 launches a step, a minute in the simulator
def test_a_training_step_never_waits_for_the_device(make_step):
    step = make_step()
    step()  # the first step creates the optimizer's state
    losses = []
    assert _waits_in(lambda: losses.append(step())) == 0
    assert _waits_in(losses[0].item) == 1, "asking for the loss is the one wait"


def test_a_host_array_goes_up_without_a_wait_and_comes_back_with_one():
    host = np.arange(6, dtype=np.float32)
    assert _waits_in(lambda: zgrad.tensor(host, device="cuda")) == 0
    device = zgrad.tensor(host, device="cuda")
    assert _waits_in(lambda: device.cpu()) == 1


def test_a_bad_embedding_index_is_reported_at_the_next_wait():
    table = zgrad.nn.Embedding(10, 3).cuda()
    out = table(zgrad.tensor([[1, 12], [3, 0]], device="cuda"))  # no wait, no error yet
    with pytest.raises(IndexError, match=r"^index out of range in self: got index 12, valid indices are 0\.\.9$"):
        out.cpu()
    out.cpu()  # reported once
    np.testing.assert_array_equal(out.detach().cpu().numpy()[0, 1], 0.0), "nothing was read outside the table"


def test_a_bad_class_target_is_reported_at_the_next_wait_and_ignored_rows_pass():
    logits = zgrad.randn(3, 5, device="cuda", requires_grad=True)
    loss = zgrad.nn.functional.cross_entropy(logits, zgrad.tensor([1, -100, 4], device="cuda"))
    assert np.isfinite(loss.item())
    loss = zgrad.nn.functional.cross_entropy(logits, zgrad.tensor([1, 7, 4], device="cuda"))
    with pytest.raises(IndexError, match=r"^Target 7 is out of bounds\. Expected class indices in \[0, 4\] "
                                         r"or ignore_index \(-100\)\.$"):
        loss.item()


def test_a_mean_over_ignored_rows_only_is_nan_with_a_zero_gradient_as_in_torch():
    logits = zgrad.randn(2, 3, device="cuda", requires_grad=True)
    loss = zgrad.nn.functional.cross_entropy(logits, zgrad.tensor([-100, -100], device="cuda"))
    loss.backward()
    assert np.isnan(loss.item())
    np.testing.assert_array_equal(logits.grad.cpu().numpy(), 0.0)

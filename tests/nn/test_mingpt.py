"""The minGPT of pytorch/examples (``distributed/minGPT-ddp``, ported in ``support/mingpt.py``)
trained 20 steps with AdamW and ``clip_grad_norm_`` on zgrad and on torch from the same initial
weights, in float64 with dropout 0: the same loss and gradient norm at every step, and the same
weights at the end. Trained with the AMP recipe under bfloat16 and float16 autocast, it ends
within 2% of the float32 run's loss."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import require_torch
from mingpt import GPTConfig, create_optimizer, gpt_classes
from module_reference import copy_state

STEPS, BATCH = 20, 4


def _batches(config: GPTConfig) -> list[tuple[np.ndarray, np.ndarray]]:
    """Windows of a learnable sequence (each token the previous plus a per-row stride) and their
    next tokens; a few targets -1 (ignored by the loss)."""
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(STEPS):
        starts = rng.integers(0, config.vocab_size, size=(BATCH, 1))
        strides = rng.integers(1, 3, size=(BATCH, 1))
        tokens = (starts + strides * np.arange(config.block_size + 1)) % config.vocab_size
        targets = tokens[:, 1:].copy()
        targets[rng.random(targets.shape) < 0.05] = -1
        batches.append((tokens[:, :-1], targets))
    return batches


def _train(lib, model, batches):
    optimizer = create_optimizer(lib, model, learning_rate=3e-3)
    losses, norms = [], []
    for inputs, targets in batches:
        optimizer.zero_grad()
        _, loss = model(lib.tensor(inputs), lib.tensor(targets))
        loss.backward()
        norms.append(float(lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
        optimizer.step()
        losses.append(float(loss.detach()))
    return np.array(losses), np.array(norms)


@pytest.mark.torch
def test_mingpt_trains_as_torch():
    torch = require_torch()
    config = GPTConfig(n_layer=2, n_head=2, n_embd=64, block_size=32)
    torch.manual_seed(0)
    reference = gpt_classes(torch).GPT(config, torch.float64)
    model = gpt_classes(zgrad).GPT(config, zgrad.float64)
    assert list(model.state_dict()) == list(reference.state_dict())
    copy_state(reference, model)
    batches = _batches(config)
    expected_losses, expected_norms = _train(torch, reference, batches)
    losses, norms = _train(zgrad, model, batches)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-9)
    np.testing.assert_allclose(norms, expected_norms, rtol=1e-8)
    assert (expected_norms > 1.0).any(), "clipping never acted: the test would not check it"
    assert losses[-1] < losses[0] - 0.5, f"the model did not learn: {losses}"
    final = reference.state_dict()
    for name, value in model.state_dict().items():
        np.testing.assert_allclose(value.numpy(), final[name].numpy(), rtol=1e-7, atol=1e-10, err_msg=name)


def test_block_size_error():
    model = gpt_classes(zgrad).GPT(GPTConfig(n_layer=1, n_embd=8, block_size=4), zgrad.float32)
    with pytest.raises(ValueError, match="Cannot forward sequence of length 5, block size is only 4"):
        model(zgrad.zeros(1, 5, dtype=zgrad.int64))


def _train_mixed(model, batches, dtype):
    """The AMP recipe (none for dtype None): the forward under autocast, the loss scaled, the gradients unscaled before
    clipping, the step skipped on infs (float16) and the scale updated."""
    optimizer = create_optimizer(zgrad, model, learning_rate=3e-3)
    scaler = zgrad.amp.GradScaler("cpu", enabled=dtype is not None)
    for inputs, targets in batches:
        optimizer.zero_grad()
        with zgrad.autocast("cpu", dtype=dtype or zgrad.bfloat16, enabled=dtype is not None):
            logits, loss = model(zgrad.tensor(inputs), zgrad.tensor(targets))
        assert logits.dtype == (dtype or zgrad.float32)  # the head's linear ran in the autocast dtype
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        zgrad.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_ends_within_two_percent_of_float32(dtype):
    config = GPTConfig(n_layer=2, n_head=2, n_embd=64, block_size=32)
    classes = gpt_classes(zgrad)
    zgrad.manual_seed(0)
    full = classes.GPT(config, zgrad.float32)
    mixed = classes.GPT(config, zgrad.float32)
    mixed.load_state_dict(full.state_dict())
    batches = _batches(config)
    _train_mixed(full, batches, None)
    _train_mixed(mixed, batches, getattr(zgrad, dtype))
    inputs, targets = _batches(config)[0]  # the final loss, in float32, on data the runs saw first
    with zgrad.no_grad():
        final = [float(m(zgrad.tensor(inputs), zgrad.tensor(targets))[1]) for m in (full, mixed)]
    assert final[0] < 2.5 and abs(final[1] / final[0] - 1) < 0.02, final

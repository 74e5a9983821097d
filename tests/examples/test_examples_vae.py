"""pytorch/examples ``vae/main.py`` (ported in ``tests/support/examples_vae/``: ``torch`` renamed to
``zgrad``, MNIST from the torchvision stand-in) runs its two epochs to the end as a user runs it,
and trains as the same program does on torch: from the same initial weights, on the same images
and the same reparameterization noise, in float64, the summed binary cross-entropy plus KL loss
agrees at every step, the test losses it prints agree, and so do the samples it decodes at the end."""

from __future__ import annotations

import re

import numpy as np
import pytest

import zgrad
from example_ports import comparable, run_program, run_script
from helpers import require_torch
from paths import SUPPORT

pytestmark = pytest.mark.timeout(300)

PROGRAM = SUPPORT / "examples_vae" / "main.py"
# 64 training images in batches of 16: four steps an epoch; 32 test images. On the CPU: in this test
# session zgrad's CUDA backend runs in Numba's simulator, and the program takes an accelerator it finds
ARGS = ["--batch-size", "16", "--epochs", "2", "--log-interval", "1", "--no-accel"]
STEP = re.compile(r"^Train Epoch: (\d) \[(\d+)/64 \(\d+%\)\]\tLoss: ([0-9.]+)$", re.MULTILINE)
TEST_LOSS = re.compile(r"^====> Test set loss: ([0-9.]+)$", re.MULTILINE)


def test_vae_runs_to_its_end(tmp_path):
    (tmp_path / "results").mkdir()
    out = run_script(PROGRAM, ARGS, tmp_path)
    assert [(int(e), int(n)) for e, n, _ in STEP.findall(out)] == [(e, n) for e in (1, 2) for n in (0, 16, 32, 48)], out
    assert len(TEST_LOSS.findall(out)) == 2 and out.count("====> Epoch: ") == 2, out
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [
        "reconstruction_1.png", "reconstruction_2.png", "sample_1.png", "sample_2.png"]
    assert zgrad.load(tmp_path / "results" / "sample_2.png").shape == (64, 1, 28, 28)


@pytest.mark.torch
def test_vae_trains_as_on_torch(tmp_path, monkeypatch):
    torch = require_torch()
    for lib in ("torch", "zgrad"):
        (tmp_path / lib / "results").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "torch")
    with comparable(torch) as expected:
        expected_out = run_program(PROGRAM, ARGS, torch)
    monkeypatch.chdir(tmp_path / "zgrad")
    with comparable(zgrad, expected.states) as got:
        out = run_program(PROGRAM, ARGS, zgrad)
    assert len(got.losses) == len(expected.losses) == 8
    np.testing.assert_allclose(got.losses, expected.losses, rtol=1e-10)
    assert TEST_LOSS.findall(out) == TEST_LOSS.findall(expected_out)
    for image in ("reconstruction_2.png", "sample_2.png"):
        np.testing.assert_allclose(zgrad.load(tmp_path / "zgrad" / "results" / image).numpy(),
                                   torch.load(tmp_path / "torch" / "results" / image).numpy(), rtol=1e-9, atol=1e-12)

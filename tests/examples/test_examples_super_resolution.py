"""pytorch/examples ``super_resolution`` (ported in ``tests/support/examples_super_resolution/``:
``torch`` renamed to ``zgrad``, its ``data.py`` replaced by synthetic images) trains and tests as
the same program does on torch: from the same orthogonal initial weights, on the same images, in
float64, the loss agrees at every step and the test PSNR it prints agrees.

The program does not reach its end on zgrad: its ``checkpoint`` saves the whole module
(``torch.save(model, path)``, a pickle), and ``zgrad.save`` stores no pickles; it raises the error
that says to save the ``state_dict()`` instead, which these tests expect."""

from __future__ import annotations

import re

import numpy as np
import pytest

import zgrad
from example_ports import comparable, run_program
from helpers import require_torch
from paths import SUPPORT

pytestmark = pytest.mark.timeout(300)

PROGRAM = SUPPORT / "examples_super_resolution" / "main.py"
# 16 training images in batches of 2: eight steps
ARGS = ["--upscale_factor", "3", "--batchSize", "2", "--testBatchSize", "2", "--nEpochs", "1", "--lr", "0.001",
        "--threads", "0"]
NO_MODULE_SAVE = "zgrad.save cannot store a Net object at obj: .* save its state_dict\\(\\) instead"
STEP = re.compile(r"^===> Epoch\[1\]\((\d)/8\): Loss: ([0-9.]+)$", re.MULTILINE)
PSNR = re.compile(r"^===> Avg. PSNR: ([0-9.]+) dB$", re.MULTILINE)


def printed(error: pytest.ExceptionInfo) -> str:
    return "\n".join(error.value.__notes__)


def test_super_resolution_trains_and_tests_then_cannot_save_the_module(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match=NO_MODULE_SAVE) as error:
        run_program(PROGRAM, ARGS, zgrad)
    out = printed(error)
    losses = [float(loss) for _, loss in STEP.findall(out)]
    assert [int(i) for i, _ in STEP.findall(out)] == list(range(1, 9)), out
    assert losses[-1] < losses[0], out
    assert "===> Epoch 1 Complete: Avg. Loss:" in out and len(PSNR.findall(out)) == 1, out


@pytest.mark.torch
def test_super_resolution_trains_as_on_torch(tmp_path, monkeypatch):
    torch = require_torch()
    monkeypatch.chdir(tmp_path)
    with comparable(torch) as expected:
        out = run_program(PROGRAM, ARGS, torch)
    with comparable(zgrad, expected.states) as got, pytest.raises(TypeError, match=NO_MODULE_SAVE) as error:
        run_program(PROGRAM, ARGS, zgrad)
    assert len(got.losses) == len(expected.losses) == 8
    np.testing.assert_allclose(got.losses, expected.losses, rtol=1e-10)
    assert PSNR.findall(printed(error)) == PSNR.findall(out)

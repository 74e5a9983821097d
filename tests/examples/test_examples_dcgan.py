"""pytorch/examples ``dcgan/main.py`` (ported in ``tests/support/examples_dcgan/``: ``torch`` renamed
to ``zgrad``, torchvision's ``FakeData`` and ``save_image`` replaced by stand-ins) runs to its end
as a user runs it, and trains as the same program does on torch: from the same initial weights, on
the same images and noise, in float64, the discriminator's and the generator's losses agree at
every step and the checkpoints it saves agree at the end."""

from __future__ import annotations

import re

import numpy as np
import pytest

import zgrad
from example_ports import comparable, run_program, run_script
from helpers import require_torch
from paths import SUPPORT

pytestmark = pytest.mark.timeout(300)

PROGRAM = SUPPORT / "examples_dcgan" / "main.py"
# 12 fake images in batches of 4: three iterations an epoch
ARGS = ["--dataset", "fake", "--workers", "0", "--batchSize", "4", "--nz", "8", "--ngf", "4", "--ndf", "4",
        "--niter", "2", "--manualSeed", "1"]
PROGRESS = re.compile(r"^\[(\d)/2\]\[(\d)/3\] Loss_D: [0-9.]+ Loss_G: [0-9.]+ "
                      r"D\(x\): [0-9.]+ D\(G\(z\)\): [0-9.]+ / [0-9.]+$", re.MULTILINE)


def test_dcgan_runs_to_its_end(tmp_path):
    out = run_script(PROGRAM, ARGS, tmp_path)
    assert [(int(e), int(i)) for e, i in PROGRESS.findall(out)] == [(e, i) for e in range(2) for i in range(3)], out
    saved = {p.name for p in tmp_path.iterdir()}
    assert saved == {"real_samples.png", "fake_samples_epoch_000.png", "fake_samples_epoch_001.png",
                     "netG_epoch_0.pth", "netD_epoch_0.pth", "netG_epoch_1.pth", "netD_epoch_1.pth"}
    state = zgrad.load(tmp_path / "netG_epoch_1.pth")
    assert state["main.0.weight"].shape == (8, 32, 4, 4) and "main.1.running_mean" in state


@pytest.mark.torch
def test_dcgan_trains_as_on_torch(tmp_path, monkeypatch):
    torch = require_torch()
    for lib in ("torch", "zgrad"):
        (tmp_path / lib).mkdir()
    monkeypatch.chdir(tmp_path / "torch")
    with comparable(torch) as expected:
        run_program(PROGRAM, ARGS, torch)
    monkeypatch.chdir(tmp_path / "zgrad")
    with comparable(zgrad, expected.states) as got:
        run_program(PROGRAM, ARGS, zgrad)
    # per iteration: D on real images, D on fakes, G through D
    assert len(got.losses) == len(expected.losses) == 3 * 6
    np.testing.assert_allclose(got.losses, expected.losses, rtol=1e-10)
    for net in ("netG", "netD"):
        final = torch.load(tmp_path / "torch" / f"{net}_epoch_1.pth")
        for name, value in zgrad.load(tmp_path / "zgrad" / f"{net}_epoch_1.pth").items():
            np.testing.assert_allclose(value.numpy(), final[name].numpy(), rtol=1e-8, atol=1e-12, err_msg=name)

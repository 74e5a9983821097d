"""pytorch/examples ``time_sequence_prediction`` (ported in
``tests/support/examples_time_sequence_prediction/``: ``torch`` renamed to ``zgrad``, 6 waves of 40
points, 20 predicted points instead of 1000, matplotlib from the stand-in) writes its sine waves
with ``zgrad.save``, trains its two LSTM cells with ``optim.LBFGS`` and predicts, as a user runs
it; and trains as the same program does on torch: from the same initial weights, in float64, the
loss of every one of LBFGS's closure evaluations agrees, the test losses it prints agree, and so do
the predictions it plots."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import zgrad
from example_ports import comparable, run_program, run_script
from helpers import require_torch
from paths import SUPPORT

pytestmark = pytest.mark.timeout(300)

PORT = SUPPORT / "examples_time_sequence_prediction"
GENERATE, TRAIN = PORT / "generate_sine_wave.py", PORT / "train.py"
STEPS = 2
ARGS = ["--steps", str(STEPS)]
# LBFGS's defaults without line search: 20 iterations a step, the loss evaluated before each
EVALUATIONS_PER_STEP = 20
LOSS = re.compile(r"^loss: ([0-9.e-]+)$", re.MULTILINE)
TEST_LOSS = re.compile(r"^test loss: ([0-9.e-]+)$", re.MULTILINE)
PLOTTED = ["line0_x", "line0_y", "line1_x", "line1_y", "line2_x", "line2_y", "line3_x", "line3_y", "line4_x",
           "line4_y", "line5_x", "line5_y"]


def predictions(path):
    """The three waves the program plotted into ``path`` (the stand-in's ``savefig``), 39 points
    given and 20 predicted each."""
    with np.load(path) as plotted:
        assert sorted(plotted.files) == sorted(PLOTTED)
        return np.stack([np.concatenate([plotted[f"line{2 * i}_y"], plotted[f"line{2 * i + 1}_y"]]) for i in range(3)])


def test_time_sequence_prediction_runs_to_its_end(tmp_path):
    run_script(GENERATE, [], tmp_path)
    data = zgrad.load(tmp_path / "traindata.pt")
    assert isinstance(data, np.ndarray) and data.shape == (6, 40) and data.dtype == np.float64
    out = run_script(TRAIN, ARGS, tmp_path)
    losses = [float(loss) for loss in LOSS.findall(out)]
    assert out.count("STEP: ") == STEPS and len(losses) == STEPS * EVALUATIONS_PER_STEP, out
    assert len(TEST_LOSS.findall(out)) == STEPS and losses[-1] < losses[0] / 10, out
    assert sorted(p.name for p in tmp_path.glob("predict*")) == ["predict0.pdf", "predict1.pdf"]
    assert predictions(tmp_path / "predict1.pdf").shape == (3, 59)


@pytest.fixture
def torch_on_one_thread():
    """torch, computing on one thread: the program's ops are many and tiny, and torch's OpenMP
    threads would only wait for one another (minutes, on a loaded machine)."""
    torch = require_torch()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(threads)


@pytest.mark.torch
def test_time_sequence_prediction_trains_as_on_torch(tmp_path, monkeypatch, torch_on_one_thread):
    torch = torch_on_one_thread
    for lib in ("torch", "zgrad"):
        (tmp_path / lib).mkdir()
    # torch.load reads numpy arrays only with weights_only=False since PyTorch 2.6 (the example
    # predates it); zgrad.load reads them as they are
    monkeypatch.setattr(torch, "load", functools.partial(torch.load, weights_only=False))
    monkeypatch.chdir(tmp_path / "torch")
    run_program(GENERATE, [], torch)
    with comparable(torch) as expected:
        expected_out = run_program(TRAIN, ARGS, torch)
    monkeypatch.chdir(tmp_path / "zgrad")
    run_program(GENERATE, [], zgrad)
    with comparable(zgrad, expected.states) as got:
        out = run_program(TRAIN, ARGS, zgrad)
    np.testing.assert_array_equal(zgrad.load(tmp_path / "zgrad" / "traindata.pt"),
                                  torch.load(tmp_path / "torch" / "traindata.pt"))
    assert len(got.losses) == len(expected.losses) == STEPS * EVALUATIONS_PER_STEP
    np.testing.assert_allclose(got.losses, expected.losses, rtol=1e-9)
    np.testing.assert_allclose([float(x) for x in TEST_LOSS.findall(out)],
                               [float(x) for x in TEST_LOSS.findall(expected_out)], rtol=1e-9)
    for step in range(STEPS):
        np.testing.assert_allclose(predictions(tmp_path / "zgrad" / f"predict{step}.pdf"),
                                   predictions(tmp_path / "torch" / f"predict{step}.pdf"), rtol=1e-9, atol=1e-12)

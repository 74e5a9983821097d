"""pytorch/examples ``gcn`` and ``gat`` (ported in ``tests/support/examples_gcn/`` and
``examples_gat/``: ``torch`` renamed to ``zgrad``; Cora from the ``requests`` stand-in, a synthetic
graph in Cora's format). Both build their adjacency matrix from a sparse COO tensor; gcn also
normalizes it and its features as sparse tensors and trains with ``zgrad.spmm``, gat masks dense
attention with it. Each program runs to its end as a user runs it, and trains as the same program
does on torch: from the same initial weights and split, in float64, every loss agrees and so does
every figure it prints."""

from __future__ import annotations

import re

import numpy as np
import pytest

import zgrad
from example_ports import comparable, run_program, run_script
from helpers import require_torch
from paths import SUPPORT

pytestmark = [pytest.mark.timeout(300), pytest.mark.filterwarnings("ignore:Sparse invariant checks")]

EPOCHS = 20
PROGRAMS = {
    "gcn": ["--epochs", str(EPOCHS), "--val-every", "5", "--no-accel"],
    # gat's attention is dense (heads x nodes x nodes): two small heads
    "gat": ["--epochs", str(EPOCHS), "--val-every", "5", "--no-accel", "--hidden-dim", "8", "--num-heads", "2"],
}
PROGRESS = re.compile(r"^Epoch: (\d+) \([0-9.]+s\) (loss_train: .*)$", re.MULTILINE)
RESULT = re.compile(r"^Test set results: loss ([0-9.]+) accuracy ([0-9.]+)$", re.MULTILINE)


def program(name):
    return SUPPORT / f"examples_{name}" / "main.py"


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_graph_network_trains_to_its_end(name, tmp_path):
    out = run_script(program(name), PROGRAMS[name], tmp_path)
    assert [int(epoch) for epoch, _ in PROGRESS.findall(out)] == [5, 10, 15, 20], out
    (loss, accuracy), = RESULT.findall(out)
    assert float(accuracy) > 0.3, out  # 7 classes: chance is 0.14


@pytest.mark.torch
@pytest.mark.parametrize("name", PROGRAMS)
def test_the_graph_network_trains_as_on_torch(name, tmp_path, monkeypatch):
    torch = require_torch()
    outputs, traces = {}, {}
    for lib in (torch, zgrad):
        # the programs make their features with FloatTensor; in float64 they must meet float64 weights
        monkeypatch.setattr(lib, "FloatTensor", lambda data, lib=lib: lib.tensor(data, dtype=lib.float64))
        (tmp_path / lib.__name__).mkdir()
        monkeypatch.chdir(tmp_path / lib.__name__)
        with comparable(lib, traces[torch].states if lib is zgrad else None) as trace:
            outputs[lib] = run_program(program(name), PROGRAMS[name], lib)
        traces[lib] = trace
    assert len(traces[zgrad].losses) == len(traces[torch].losses) == EPOCHS
    np.testing.assert_allclose(traces[zgrad].losses, traces[torch].losses, rtol=1e-10)
    got, expected = (PROGRESS.findall(outputs[lib]) + RESULT.findall(outputs[lib]) for lib in (zgrad, torch))
    assert got == expected and len(got) == EPOCHS // 5 + 1

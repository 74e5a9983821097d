"""The checkpoint section of ``bench/data.py``: ``zgrad.save``/``zgrad.load`` against
``torch.save``/``torch.load`` in one run, on a state dict of about 100 MB.

The state dict is a model's: 24 float32 weights of 1024 x 1024 and their biases (100.8 MB), the
same values for both frameworks. Each round saves to, then loads from, a file in one temporary
directory on the same disk, zgrad and torch alternating (this machine is shared and noisy); the
table gives the median of the rounds. ``zgrad.save`` fsyncs the file and its directory before it
returns (its writes are atomic and durable); ``torch.save`` does neither, so its data may still be
in the page cache only: the ``zgrad save, no fsync`` row saves the same checkpoint into an open
file object (no temporary file, no fsync), to show what durability costs here, and the ``torch save
+ fsync`` row is torch.save followed by the fsync a durable save needs (no rename). Every case
starts with the disk's write queue empty (``os.sync()`` before it, not timed), as a checkpoint
does an epoch after the last. Loads read from the page cache in both.

Target (issue 30): zgrad's time <= torch's for save and for load.

Prints a table of ratios measured in this run and writes ``bench/results/checkpoint.json``.

    python bench/data.py --section checkpoint [--quick]
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import _procs  # noqa: E402

LAYERS = 24
WIDTH = 1024


def state_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = {}
    for i in range(LAYERS):
        arrays[f"layers.{i}.weight"] = rng.standard_normal((WIDTH, WIDTH), dtype=np.float32)
        arrays[f"layers.{i}.bias"] = rng.standard_normal(WIDTH, dtype=np.float32)
    return arrays


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(quick: bool) -> None:
    """Run the checkpoint benchmark (3 rounds when ``quick``, else 9), print its table and write
    ``bench/results/checkpoint.json``."""
    rounds = 3 if quick else 9

    import zgrad
    arrays = state_arrays()
    nbytes = sum(a.nbytes for a in arrays.values())
    zg_state = {name: zgrad.from_numpy(a) for name, a in arrays.items()}
    cases: dict[str, Callable[[], Any]] = {}
    results = ROOT / "results"
    results.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=results) as tmp:  # on the disk, where checkpoints go (not a tmpfs)
        zg_path, torch_path, plain_path = (os.path.join(tmp, n) for n in ("zgrad.ckpt", "torch.pt", "plain.ckpt"))

        def save_without_fsync() -> None:
            with open(plain_path, "wb") as f:
                zgrad.save(zg_state, f)

        cases["zgrad save"] = lambda: zgrad.save(zg_state, zg_path)
        cases["zgrad load"] = lambda: zgrad.load(zg_path)
        cases["zgrad save, no fsync"] = save_without_fsync
        with_torch = _procs.have_torch()
        if with_torch:
            import torch
            torch.set_num_threads(1)
            torch_state = {name: torch.from_numpy(a) for name, a in arrays.items()}
            cases["torch save"] = lambda: torch.save(torch_state, torch_path)

            def torch_save_durably() -> None:  # torch.save, then what zgrad.save does for durability
                with open(torch_path, "wb") as f:
                    torch.save(torch_state, f)
                    f.flush()
                    os.fsync(f.fileno())

            cases["torch save + fsync"] = torch_save_durably
            cases["torch load"] = lambda: torch.load(torch_path, weights_only=True)
        print(f"checkpoint benchmark ({'quick' if quick else 'full'}): a {nbytes / 1e6:.1f} MB state dict "
              f"({2 * LAYERS} float32 tensors), {rounds} alternating rounds, median", flush=True)
        for fn in cases.values():  # warm-up: imports, first-touch of the page cache
            fn()
        times: dict[str, list[float]] = {name: [] for name in cases}
        order = list(cases)
        for _ in range(rounds):
            for name in order:
                # Each case starts with nothing left to write back, as a checkpoint does an epoch
                # after the last: otherwise a durable save's fsync waits behind the writeback of
                # the plain saves made just before it.
                os.sync()
                times[name].append(timed(cases[name]))
            order.reverse()
        loaded = zgrad.load(zg_path)
        assert all(np.array_equal(loaded[n].numpy(), a) for n, a in arrays.items()), "zgrad.load changed the values"

    median = {name: statistics.median(t) for name, t in times.items()}
    header = ["operation", "ms", "GB/s"] + (["vs torch"] if with_torch else [])
    rows = []
    for name, seconds in median.items():
        row = [name, f"{seconds * 1e3:.1f}", f"{nbytes / seconds / 1e9:.2f}"]
        if with_torch:
            reference = median["torch load" if "load" in name else "torch save"]
            row.append(f"{seconds / reference:.2f}x")
        rows.append(row)
    _procs.print_table(header, rows)
    targets = {}
    if with_torch:
        targets["save time <= torch"] = median["zgrad save"] <= median["torch save"]
        targets["load time <= torch"] = median["zgrad load"] <= median["torch load"]
        print()
        for name, ok in targets.items():
            print(f"  target {name}: {'MET' if ok else 'MISSED'}")
    out = results / "checkpoint.json"
    out.write_text(json.dumps({"quick": quick, "bytes": nbytes, "rounds": rounds, "python": platform.python_version(),
                               "times_s": times, "median_s": median, "targets": targets}, indent=2) + "\n")
    print(f"\nwrote {out}")

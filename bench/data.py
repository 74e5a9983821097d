"""Data benchmarks: zgrad's DataLoader against torch's (batches per second), and ``zgrad.save`` /
``zgrad.load`` against ``torch.save`` / ``torch.load`` (``--section checkpoint``, in
``bench/_checkpoint.py``), in one run.

The dataset: ``N`` images of 32x32x3 float32 and int labels, batch 64, shuffled. Two
``__getitem__``:

* ``cheap``: a tensor slice, ``images[i]``, and the label (a Python int);
* ``numpy``: a numpy transform of the image (normalize, mirror every other image, a 3x3 box
  blur, clip), handed over with ``from_numpy``: the CPU work a real augmentation does.

Each with 0 workers (the calling thread loads) and 2 workers (default start method, ``fork``;
a fresh pool each epoch, as without ``persistent_workers``). A measure is one whole epoch; the
frameworks alternate epoch by epoch (this machine is shared and noisy), each in its own
interpreter, and the table shows medians. The loop only touches each batch (its shape), so what
is timed is the loading. Target (issue 30): zgrad >= torch's batches/s in every row.

Prints the table and writes ``bench/results/data.json`` (the checkpoint section:
``bench/results/checkpoint.json``).

    python bench/data.py [--quick] [--section loader|checkpoint]   # both sections by default
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import _procs  # noqa: E402

BATCH = 64
CASES = [("cheap", 0), ("cheap", 2), ("numpy", 0), ("numpy", 2)]


def _settings(quick: bool) -> dict:
    if quick:
        return {"samples": 2048, "rounds": 3}
    return {"samples": 8192, "rounds": 7}


def _dataset(lib, images_np, labels, transform: str):
    """The benchmark's map-style dataset, written once against the API both frameworks share."""
    import numpy as np

    images = lib.from_numpy(images_np)
    mean, std = np.float32(0.5), np.float32(0.25)

    class Images(lib.utils.data.Dataset):
        def __len__(self):
            return len(labels)

        def __getitem__(self, i):
            if transform == "cheap":
                return images[i], labels[i]
            img = (images_np[i] - mean) / std
            if i % 2:
                img = img[:, ::-1]
            blurred = np.empty_like(img)
            blurred[1:-1, 1:-1] = (img[:-2, :-2] + img[:-2, 1:-1] + img[:-2, 2:] + img[1:-1, :-2] + img[1:-1, 1:-1]
                                   + img[1:-1, 2:] + img[2:, :-2] + img[2:, 1:-1] + img[2:, 2:]) / np.float32(9)
            blurred[0], blurred[-1], blurred[:, 0], blurred[:, -1] = img[0], img[-1], img[:, 0], img[:, -1]
            return lib.from_numpy(np.clip(blurred, -3, 3)), labels[i]

    return Images()


def _child(framework: str, spec: dict) -> None:
    """One epoch of one case in this interpreter; prints ``RESULT <json>``."""
    import numpy as np

    if framework == "torch":
        import torch as lib

        lib.set_num_threads(1)
        lib.manual_seed(spec["epoch"])
    else:
        import zgrad as lib

        lib.manual_seed(spec["epoch"])
    rng = np.random.default_rng(0)
    images = rng.random((spec["samples"], 32, 32, 3), dtype=np.float32)
    labels = rng.integers(0, 10, size=spec["samples"]).tolist()
    loader = lib.utils.data.DataLoader(_dataset(lib, images, labels, spec["transform"]), batch_size=BATCH,
                                       shuffle=True, num_workers=spec["workers"])
    for x, y in loader:  # warm-up epoch: first-call costs (imports, caches) stay out of the measure
        pass
    start = time.perf_counter()
    batches = 0
    for x, y in loader:
        assert x.shape[1:] == (32, 32, 3)
        batches += 1
    elapsed = time.perf_counter() - start
    print("RESULT " + json.dumps({"batches_per_s": batches / elapsed}), flush=True)


def _run(framework: str, spec: dict) -> float:
    done = subprocess.run([sys.executable, __file__, "--child", framework, "--spec", json.dumps(spec)],
                          capture_output=True, text=True, env=_procs.worker_env(), timeout=600)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])["batches_per_s"]
    raise RuntimeError(f"{framework} {spec} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--section", choices=("loader", "checkpoint"), help="run one section (default: both)")
    parser.add_argument("--child")
    parser.add_argument("--spec")
    args = parser.parse_args()
    if args.child:
        _child(args.child, json.loads(args.spec))
        return
    if args.section in (None, "loader"):
        run_loader(args.quick)
    if args.section in (None, "checkpoint"):
        import _checkpoint

        print()
        _checkpoint.run(args.quick)


def run_loader(quick: bool) -> None:
    """The DataLoader section: print its table and write ``bench/results/data.json``."""
    settings = _settings(quick)
    frameworks = ["zgrad", "torch"] if _procs.have_torch() else ["zgrad"]
    results: dict = {f"{t}/{w}": {f: [] for f in frameworks} for t, w in CASES}
    for round_ in range(settings["rounds"]):
        for transform, workers in CASES:
            spec = {"samples": settings["samples"], "transform": transform, "workers": workers, "epoch": round_}
            for framework in (frameworks if round_ % 2 == 0 else frameworks[::-1]):
                results[f"{transform}/{workers}"][framework].append(_run(framework, spec))
    rows = []
    print(f"{'case':<24}{'zgrad batches/s':>18}{'torch batches/s':>18}{'zgrad/torch':>14}")
    for transform, workers in CASES:
        runs = results[f"{transform}/{workers}"]
        zg = statistics.median(runs["zgrad"])
        th = statistics.median(runs["torch"]) if "torch" in runs else None
        ratio = zg / th if th else None
        rows.append({"getitem": transform, "num_workers": workers, "zgrad_batches_per_s": zg,
                     "torch_batches_per_s": th, "ratio": ratio, "runs": runs})
        label = f"{transform}, {workers} workers"
        print(f"{label:<24}{zg:>18.1f}{(th or float('nan')):>18.1f}{(ratio or float('nan')):>13.2f}x")
    out = ROOT / "results" / "data.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"settings": settings, "batch": BATCH, "machine": platform.node(), "rows": rows},
                              indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

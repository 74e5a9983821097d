"""Launcher benchmark: zgrad-run against torchrun (``python -m torch.distributed.run``).

Two figures, each measured for both launchers in the same run, alternating which goes first,
medians over ``--rounds``:

* start: from the command to every worker's first line of user code (a script whose first
  statement prints the time), 2 and 8 workers on one node (``--standalone``);
* restart: from the moment a worker dies (it prints the time, then exits 1) to every worker of
  the next round at its first line (``--max-restarts 1``).

The raw limit beside them: the same script started directly with ``python`` (the cost of an
interpreter, no launcher). Prints the table and writes ``bench/results/launch.json``.

    python bench/launch.py [--rounds 5] [--workers 2 8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
LAUNCHERS = {"zgrad-run": "zgrad.distributed.run", "torchrun": "torch.distributed.run"}
# One write(2) per line: torchrun's workers share its stdout, and print()'s pieces interleave.
WORKER = """import os, time
os.write(1, f"FIRST {time.time()}\\n".encode())
import sys
if sys.argv[1:] == ["fail"] and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0" and os.environ["LOCAL_RANK"] == "1":
    os.write(1, f"DYING {time.time()}\\n".encode())
    sys.exit(1)
"""


def stamps(output: str, tag: str) -> list[float]:
    return [float(line.split()[1]) for line in output.splitlines() if line.startswith(tag + " ")]


def launch(module: str, script: Path, workers: int, fail: bool) -> str:
    args = ["--standalone", "--nproc-per-node", str(workers), "--monitor-interval", "0.1"]
    if fail:
        args += ["--max-restarts", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-m", module, *args, str(script), *(["fail"] if fail else [])], env=env,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{module} exited with {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def start_time(module: str, script: Path, workers: int) -> float:
    began = time.time()
    firsts = stamps(launch(module, script, workers, fail=False), "FIRST")
    assert len(firsts) == workers, firsts
    return max(firsts) - began


def restart_time(module: str, script: Path, workers: int) -> float:
    output = launch(module, script, workers, fail=True)
    died, firsts = stamps(output, "DYING")[0], sorted(stamps(output, "FIRST"))
    assert len(firsts) == 2 * workers, firsts
    return firsts[-1] - died


def direct_time(script: Path) -> float:
    began = time.time()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LOCAL_RANK": "0"})
    return stamps(done.stdout, "FIRST")[0] - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 8])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "worker.py"
        script.write_text(WORKER)
        cases = [("start", n) for n in args.workers] + [("restart", 2)]
        times: dict[tuple[str, int, str], list[float]] = {}
        for round_ in range(args.rounds):
            for figure, workers in cases:
                order = list(LAUNCHERS) if round_ % 2 == 0 else list(reversed(LAUNCHERS))
                for name in order:
                    measure = start_time if figure == "start" else restart_time
                    times.setdefault((figure, workers, name), []).append(measure(LAUNCHERS[name], script, workers))
            times.setdefault(("python", 1, "direct"), []).append(direct_time(script))
    rows = []
    print(f"{'figure':<22}{'zgrad-run ms':>14}{'torchrun ms':>14}{'ratio':>8}")
    for figure, workers in cases:
        ours = statistics.median(times[(figure, workers, "zgrad-run")]) * 1000
        theirs = statistics.median(times[(figure, workers, "torchrun")]) * 1000
        label = f"{figure}, {workers} workers"
        print(f"{label:<22}{ours:>14.0f}{theirs:>14.0f}{ours / theirs:>7.2f}x")
        rows.append({"figure": figure, "workers": workers, "zgrad_ms": ours, "torchrun_ms": theirs,
                     "ratio": ours / theirs})
    direct = statistics.median(times[("python", 1, "direct")]) * 1000
    print(f"raw limit: one interpreter started directly, to its first line: {direct:.0f} ms")
    out = ROOT / "results" / "launch.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"rounds": args.rounds, "machine": platform.node(), "rows": rows, "direct_ms": direct,
                               "samples": {"|".join(map(str, k)): v for k, v in times.items()}}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

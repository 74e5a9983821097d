"""Collectives benchmark: zgrad's all_reduce against torch.distributed's gloo, in one run.

Two rank processes per framework on this machine (zgrad over loopback tcp, with the same-host
single copy its mesh uses where it can; gloo over loopback TCP), float32 all_reduce (SUM) of
4 KiB ... 64 MiB. Bus bandwidth is ``size * 2 (n - 1) / n / time`` (NCCL's convention; with two
ranks, size / time). Frameworks alternate for ``rounds`` rounds (this machine is shared and
noisy); each size keeps its best round's median time.

Targets (issue 14): bus bandwidth >= 2x gloo's at 16 MiB, time <= 1x gloo's at 4 KiB.

Prints a table of ratios measured in this run and writes ``bench/results/collectives.json``.

    python bench/collectives.py            # full run (a few minutes)
    python bench/collectives.py --quick    # smoke run
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import _procs  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20
SIZES = (("4 KiB", 4 * KIB), ("64 KiB", 64 * KIB), ("1 MiB", MIB), ("16 MiB", 16 * MIB), ("64 MiB", 64 * MIB))


def _settings(quick: bool) -> dict:
    if quick:
        return {"bytes_per_size": 64 * MIB, "min_iters": 5, "max_iters": 300, "rounds": 1}
    return {"bytes_per_size": 1024 * MIB, "min_iters": 20, "max_iters": 3000, "rounds": 3}


def _iterations(nbytes: int, settings: dict) -> int:
    """The same on both ranks: collectives run in lockstep."""
    return max(settings["min_iters"], min(settings["max_iters"], settings["bytes_per_size"] // nbytes))


def _measure(all_reduce, make, settings: dict) -> dict:
    out = {}
    for label, nbytes in SIZES:
        tensor = make(nbytes // 4)
        for _ in range(5):
            all_reduce(tensor)
        times = []
        for _ in range(_iterations(nbytes, settings)):
            start = time.perf_counter()
            all_reduce(tensor)
            times.append(time.perf_counter() - start)
        out[label] = statistics.median(times)
    return out


def _worker(framework: str, rank: int, spec: dict) -> None:
    init = f"tcp://127.0.0.1:{spec['port']}"
    if framework == "zgrad":
        import numpy as np

        import zgrad
        import zgrad.distributed as dist
        dist.init_process_group("zmq", init_method=init, rank=rank, world_size=2)
        make = lambda n: zgrad.from_numpy(np.ones(n, np.float32))  # noqa: E731
    else:
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
        make = lambda n: torch.ones(n, dtype=torch.float32)  # noqa: E731
    try:
        result = _measure(dist.all_reduce, make, spec["settings"])
        if rank == 0:
            if framework == "zgrad":
                from zgrad.distributed.collectives.state import current_world
                stats = current_world().comm.mesh.stats()
                result["transport"] = {k: v for k, v in stats.items() if k.startswith("cma")}
            _procs.emit(result)
    finally:
        dist.destroy_process_group()


def main() -> None:
    args = _procs.bench_args(__doc__).parse_args()
    if args.worker:
        return _worker(args.worker, args.rank, json.loads(args.spec))

    settings = _settings(args.quick)
    with_torch = _procs.have_torch()
    print(f"collectives benchmark ({'quick' if args.quick else 'full'}): all_reduce float32 SUM, 2 rank processes, "
          f"loopback; NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1; {settings['rounds']} alternating round(s)", flush=True)
    frameworks = ["zgrad", "gloo"] if with_torch else ["zgrad"]
    rounds: dict[str, list[dict]] = {f: [] for f in frameworks}
    for _ in range(settings["rounds"]):
        for framework in frameworks:
            rounds[framework].append(_procs.run_pair(__file__, framework, {"settings": settings}, 900))
    best = {f: {label: min(r[label] for r in rounds[f]) for label, _ in SIZES} for f in frameworks}

    header = ["size"] + [f"{f} µs" for f in frameworks] + [f"{f} busbw GB/s" for f in frameworks]
    header += ["zgrad/gloo busbw"] if with_torch else []
    rows = []
    for label, nbytes in SIZES:
        row = [label] + [f"{best[f][label] * 1e6:.0f}" for f in frameworks]
        row += [f"{nbytes / best[f][label] / 1e9:.2f}" for f in frameworks]
        if with_torch:
            row.append(f"{best['gloo'][label] / best['zgrad'][label]:.2f}x")
        rows.append(row)
    _procs.print_table(header, rows)
    cma = rounds["zgrad"][-1].get("transport", {})
    print(f"\n  zgrad same-host single copy (transport.cma): "
          + (f"on, {cma['cma_sent']} buffers sent by ticket" if cma.get("cma_sent") else "off / not used"))
    targets = {}
    if with_torch:
        z, g = best["zgrad"], best["gloo"]
        targets["16 MiB bus bandwidth >= 2x gloo"] = g["16 MiB"] >= 2 * z["16 MiB"]
        targets["4 KiB time <= 1x gloo"] = z["4 KiB"] <= g["4 KiB"]
        print()
        for name, ok in targets.items():
            print(f"  target {name}: {'MET' if ok else 'MISSED'}")
    out = ROOT / "results" / "collectives.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"quick": args.quick, "settings": settings, "thread_env": _procs.THREAD_ENV,
                               "python": platform.python_version(), "rounds": rounds, "best_s": best,
                               "targets": targets}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()

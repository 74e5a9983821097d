"""Where one backward pass of the design note's example spends its time, on both workers' threads.

A diagnostic built on ``zgrad.distributed.autograd.trace``, not a benchmark: two zgrad workers
(loopback tcp, as in ``bench/dist_autograd.py``) run ``t3 = rpc_sync(worker1, add, (t1, t2));
loss = (t3 * t4).sum(); backward`` many times inside one trace. Every pass's events (node runs,
tasks, messages sent and received, the root's waits, on the aligned clocks) are taken relative
to the start of its ``backward`` call; the timeline printed is the median time of every event
over the passes whose event sequence is the most common one. Recording costs a few microseconds
per event, so the times are a little longer than in ``bench/dist_autograd.py``.

    python bench/timeline.py                          # 3x3, FAST
    python bench/timeline.py --mode smart --size 1024 --trace pass.json   # and keep the trace
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import _procs  # noqa: E402


def _thread_roles(trace: dict) -> dict[tuple[int, int], str]:
    """``(pid, tid) -> "w<rank> caller|io|pool"``."""
    roles = {}
    callers = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "backward"}
    for event in trace["traceEvents"]:
        if event["ph"] == "M" and event["name"] == "thread_name":
            key = (event["pid"], event["tid"])
            role = "caller" if key in callers else "io" if "mesh-io" in event["args"]["name"] else "pool"
            roles[key] = f"w{event['pid']} {role}"
    return roles


def typical_timeline(trace: dict) -> dict:
    """The median timeline (µs from each pass's ``backward`` call) of the passes with the most
    common event sequence."""
    roles = _thread_roles(trace)
    passes = collections.defaultdict(list)
    for event in trace["traceEvents"]:
        if event["ph"] == "X":
            passes[event["args"]["pass"]].append(event)
    runs = []
    for events in passes.values():
        start = next(e["ts"] for e in events if e["cat"] == "backward")
        runs.append(sorted((e["ts"] - start, e["dur"], roles[(e["pid"], e["tid"])], e["name"]) for e in events
                           if e["cat"] != "backward"))
    shapes = collections.Counter(tuple((thread, name) for _, _, thread, name in run) for run in runs)
    shape, count = shapes.most_common(1)[0]
    chosen = [run for run in runs if tuple((thread, name) for _, _, thread, name in run) == shape]
    timeline = [[statistics.median(run[i][0] for run in chosen), statistics.median(run[i][1] for run in chosen),
                 thread, name] for i, (thread, name) in enumerate(shape)]
    total = statistics.median(next(e["dur"] for e in events if e["cat"] == "backward") for events in passes.values())
    return {"runs": len(runs), "typical": count, "timeline": timeline, "backward_us": total}


def _worker(rank: int, spec: dict) -> None:
    rpc = _procs.init_worker("zgrad", rank, spec)
    try:
        if rank != 0:
            return
        import zgrad
        import zgrad.distributed.autograd as dist_autograd
        import _zg_targets as T

        n, mode = spec["size"], spec["mode"]
        zgrad.manual_seed(0)
        t1, t2, t4 = (zgrad.randn(n, n, requires_grad=True) for _ in range(3))

        def step() -> None:
            with dist_autograd.context() as cid:
                loss = (rpc.rpc_sync("worker1", T.add, args=(t1, t2)) * t4).sum()
                dist_autograd.backward(cid, [loss], mode=mode)

        for _ in range(spec["warmup"]):
            step()
        with dist_autograd.trace(spec["trace"]):
            for _ in range(spec["runs"]):
                step()
        _procs.emit(typical_timeline(json.loads(Path(spec["trace"]).read_text())))
    finally:
        rpc.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["fast", "smart"], default="fast")
    parser.add_argument("--size", type=int, default=3, help="side of the square tensors")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--trace", help="keep the trace of the runs in this file (Chrome trace JSON)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return _worker(args.rank, json.loads(args.spec))
    with tempfile.TemporaryDirectory() as scratch:
        trace = str(Path(args.trace).resolve()) if args.trace else str(Path(scratch) / "timeline.json")
        spec = {"mode": args.mode, "size": args.size, "runs": args.runs, "warmup": 50, "trace": trace}
        result = _procs.run_pair(__file__, "zgrad", spec, 600)
    print(f"backward of the {args.size}x{args.size} example ({args.mode}): median µs from the backward call over the "
          f"{result['typical']} of {result['runs']} passes with the most common event order "
          f"(backward returned after {result['backward_us']:.0f} µs)")
    for at, took, thread, name in result["timeline"]:
        duration = f"  ({took:.0f} µs)" if took >= 1 else ""
        print(f"{at:8.0f}  {thread:10s} {name}{duration}")


if __name__ == "__main__":
    main()

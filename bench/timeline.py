"""Where one step of the design note's example spends its time, across both workers' threads.

A diagnostic for the distributed-autograd benchmark, not a benchmark: two zgrad workers (loopback
tcp, as in ``bench/dist_autograd.py``) run ``t3 = rpc_sync(worker1, add, (t1, t2)); loss = (t3 *
t4).sum(); backward`` and record enter/exit times of a fixed list of internal functions on every
thread of both processes. ``time.perf_counter`` is the system-wide monotonic clock on Linux, so
the two processes' events merge into one timeline. The forward call and the backward pass are
recorded in separate steps; each is run many times and the timeline printed is the median time
of every event over the runs whose event sequence is the most common one.

The probes wrap private functions by name (see ``PROBES``): when they move, update the list.
Spans between probes are thread hand-offs and network hops; spans inside are Python work.

    python bench/timeline.py                 # 3x3, backward
    python bench/timeline.py --phase forward --size 1024
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import _procs  # noqa: E402

# (module, class or None, function, label)
PROBES = [
    ("zgrad.transport.io_loop", "IoLoop", "_on_inbound", "io: receive one message"),
    ("zgrad.transport.io_loop", "IoLoop", "_send", "io: send one message"),
    ("zgrad.transport.frames", None, "decode", "io: check and split frames"),
    ("zgrad.distributed.rpc.agent", "RpcAgent", "_run_handler", "rpc: handle a message"),
    ("zgrad.distributed.rpc.agent", "RpcAgent", "send", "rpc: queue a message"),
    ("zgrad.distributed.rpc.agent", None, "decode_value", "rpc: decode a value"),
    ("zgrad.distributed.rpc.agent", None, "encode_value", "rpc: encode a value"),
    ("zgrad.distributed.autograd.worker", "RpcMessenger", "send", "engine: encode and queue a message"),
    ("zgrad.distributed.autograd.worker", "DistAutogradWorker", "_on_message", "engine: check and decode a message"),
    ("zgrad.engine.dist_engine", "DistEngine", "receive", "engine: dispatch a message"),
    ("zgrad.engine.dist_engine", "DistEngine", "run_activation", "engine: run a task"),
]

_events: list[tuple[float, str, str]] = []


def _probe(owner: object, name: str, label: str) -> None:
    original = getattr(owner, name)

    def probed(*args, **kwargs):
        thread = threading.current_thread().name
        _events.append((time.perf_counter(), thread, label + " >"))
        try:
            return original(*args, **kwargs)
        finally:
            _events.append((time.perf_counter(), thread, label + " <"))

    setattr(owner, name, probed)


def install_probes() -> None:
    for module_name, class_name, name, label in PROBES:
        module = importlib.import_module(module_name)
        _probe(getattr(module, class_name) if class_name else module, name, label)


def take_events() -> list:
    """The events recorded here since the last call (a remote target of worker0)."""
    events = list(_events)
    _events.clear()
    return events


def _thread_label(rank: int, thread: str) -> str:
    if thread == "MainThread":
        return f"w{rank} caller"
    if "mesh-io" in thread:
        return f"w{rank} io"
    return f"w{rank} pool"


def _mark(label: str) -> None:
    _events.append((time.perf_counter(), "MainThread", label))


def _clear_both(rpc) -> None:
    import __main__

    rpc.rpc_sync("worker1", __main__.take_events)
    take_events()


def _worker(rank: int, spec: dict) -> None:
    install_probes()
    rpc = _procs.init_worker("zgrad", rank, spec)
    try:
        if rank != 0:
            return
        import __main__
        import zgrad
        import zgrad.distributed.autograd as dist_autograd
        import _zg_targets as T

        n, phase = spec["size"], spec["phase"]
        zgrad.manual_seed(0)
        t1, t2, t4 = (zgrad.randn(n, n, requires_grad=True) for _ in range(3))

        def step(record: bool) -> list:
            with dist_autograd.context() as cid:
                if record and phase == "forward":
                    _clear_both(rpc)
                    _mark("start")
                t3 = rpc.rpc_sync("worker1", T.add, args=(t1, t2))
                if record and phase == "forward":
                    _mark("end")
                loss = (t3 * t4).sum()
                if record and phase == "backward":
                    _clear_both(rpc)
                    _mark("start")
                dist_autograd.backward(cid, [loss])
                if record and phase == "backward":
                    _mark("end")
            if not record:
                return []
            mine = take_events()
            time.sleep(0.005)  # worker1's last events of the step are recorded by now
            theirs = rpc.rpc_sync("worker1", __main__.take_events)
            merged = [(t, _thread_label(0, th), e) for t, th, e in mine] + [(t, _thread_label(1, th), e) for t, th, e in theirs]
            t0 = next(t for t, _, e in merged if e == "start")
            t1_ = next(t for t, _, e in merged if e == "end")
            return sorted(((t - t0) * 1e6, th, e) for t, th, e in merged if t0 <= t <= t1_ and e not in ("start", "end")) \
                + [((t1_ - t0) * 1e6, "w0 caller", "returned")]

        for _ in range(spec["warmup"]):
            step(False)
        runs = [step(True) for _ in range(spec["runs"])]
        shapes = collections.Counter(tuple((th, e) for _, th, e in run) for run in runs)
        shape, count = shapes.most_common(1)[0]
        chosen = [run for run in runs if tuple((th, e) for _, th, e in run) == shape]
        timeline = [[statistics.median(run[i][0] for run in chosen), th, e] for i, (th, e) in enumerate(shape)]
        _procs.emit({"runs": len(runs), "typical": count, "timeline": timeline})
    finally:
        rpc.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", choices=["forward", "backward"], default="backward")
    parser.add_argument("--size", type=int, default=3, help="side of the square tensors")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return _worker(args.rank, json.loads(args.spec))
    spec = {"phase": args.phase, "size": args.size, "runs": args.runs, "warmup": 50}
    result = _procs.run_pair(__file__, "zgrad", spec, 600)
    print(f"{args.phase} of the {args.size}x{args.size} example: median µs from its start over the "
          f"{result['typical']} of {result['runs']} runs with the most common event order")
    previous = {}
    for t, thread, event in result["timeline"]:
        label, _, edge = event.rpartition(" ")
        took = f"  ({t - previous.pop((thread, label)):.0f} µs)" if edge == "<" and (thread, label) in previous else ""
        if edge == ">":
            previous[(thread, label)] = t
        print(f"{t:8.0f}  {thread:10s} {event}{took}")


if __name__ == "__main__":
    main()

"""Distributed-autograd benchmark: zgrad against torch.distributed.autograd, in one run.

Workloads (two worker processes per framework, loopback tcp), each timed per iteration with the
autograd context's enter/exit included:
  * ``example 3x3`` / ``example 1024x1024``: the design note's example: t1, t2 on worker0;
    t3 = rpc_sync(worker1, add, (t1, t2)); t5 = t3 * t4; loss = t5.sum(); backward;
  * ``mlp step``: model-parallel training step: Linear 1024->1024 + ReLU on worker1 behind an RRef,
    Linear 1024->10 + cross-entropy on worker0, batch 64, backward, DistributedOptimizer(SGD).step.
  * ``chain 1 hop`` / ``2 hops`` / ``3 hops`` (four worker processes per framework): the same
    example at 3x3 through a nested call chain, worker0 -> worker1 [-> worker2 [-> worker3]], the
    addition at the far end; the result and then the gradients travel back through every hop.

Targets (issue 17): zgrad FAST at most 0.7x torch's time for the 3x3 example, 0.9x for the MLP
step, 0.8x for every chain. Both frameworks' worker processes are up at the same time and each
workload runs in blocks that alternate between them (zgrad FAST, zgrad SMART, torch; the order
reversed every other block), so that the machine's slow minutes hit both alike; the world that
waits is stopped (SIGSTOP: an idle torch RPC process polls a core busy);
messages per pass are the dist-engine counters of ``get_debug_info()`` (messages_sent summed over
both workers, and discovery_messages) differenced over a block and divided by its passes. Workers
run with NUMBA_NUM_THREADS=1, OMP_NUM_THREADS=1 (torch: torch.set_num_threads(1) as well).

Prints a table of ratios measured in this run and writes ``bench/results/dist_autograd.json``.

    python bench/dist_autograd.py            # full run
    python bench/dist_autograd.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import _procs  # noqa: E402

WORKLOADS = ("example 3x3", "example 1024x1024", "mlp step")
CHAINS = ("chain 1 hop", "chain 2 hops", "chain 3 hops")
MODES = ("fast", "smart")
CHAIN_WORKERS = 4
# The targets: zgrad's median time per pass at most this many times torch's.
TORCH_TARGETS = {"example 3x3": 0.7, "example 1024x1024": 1.0, "mlp step": 0.9,
                 "chain 1 hop": 0.8, "chain 2 hops": 0.8, "chain 3 hops": 0.8}


def _settings(quick: bool) -> dict:
    if quick:
        iters = {"example 3x3": 50, "example 1024x1024": 5, "mlp step": 5}
        iters.update({name: 50 for name in CHAINS})
        return {"blocks": 2, "iters": iters, "warmup": 3}
    iters = {"example 3x3": 200, "example 1024x1024": 15, "mlp step": 20}
    iters.update({name: 150 for name in CHAINS})
    return {"blocks": 10, "iters": iters, "warmup": 10}


# ------------------------------------------------------------------------------- workloads


def _zgrad_workloads(rpc):
    import numpy as np
    import zgrad
    import zgrad.nn.functional as F
    from zgrad import nn
    import zgrad.distributed.autograd as dist_autograd
    from zgrad.distributed.optim import DistributedOptimizer
    import _zg_targets as T

    def example(n):
        zgrad.manual_seed(0)
        t1, t2, t4 = (zgrad.randn(n, n, requires_grad=True) for _ in range(3))

        def step(mode):
            with dist_autograd.context() as cid:
                t3 = rpc.rpc_sync("worker1", T.add, args=(t1, t2))
                loss = (t3 * t4).sum()
                dist_autograd.backward(cid, [loss], mode=mode)
        return step

    stage = rpc.remote("worker1", T.Stage, args=(1024, 1024, 0))
    zgrad.manual_seed(1)
    head = nn.Linear(1024, 10)
    params = stage.rpc_sync().parameter_rrefs() + [rpc.RRef(p) for p in head.parameters()]
    opt = DistributedOptimizer(zgrad.optim.SGD, params, lr=0.01)
    x = zgrad.randn(64, 1024)
    y = zgrad.tensor(np.arange(64) % 10)

    def mlp(mode):
        with dist_autograd.context() as cid:
            h = rpc.rpc_sync("worker1", T.forward_stage, args=(stage, x))
            loss = F.cross_entropy(head(h), y)
            dist_autograd.backward(cid, [loss], mode=mode)
            opt.step(cid)

    return {"example 3x3": example(3), "example 1024x1024": example(1024), "mlp step": mlp}


def _chains(rpc, dist_autograd, T, randn, backward):
    """The nested call chains: worker0 -> worker1 -> ... -> worker<hops> computes t1 + t2 (3x3)
    at the far end; the result comes back hop by hop, and so does the backward pass."""
    t1, t2, t4 = (randn() for _ in range(3))

    def chain(hops):
        names = [f"worker{i}" for i in range(1, hops + 1)]

        def step(mode):
            with dist_autograd.context() as cid:
                t3 = rpc.rpc_sync(names[0], T.chain_add, args=(names[1:], t1, t2))
                backward(cid, (t3 * t4).sum(), mode)
        return step

    return {name: chain(hops) for hops, name in enumerate(CHAINS, 1)}


def _zgrad_chains(rpc):
    import zgrad
    import zgrad.distributed.autograd as dist_autograd
    import _zg_targets as T

    zgrad.manual_seed(0)
    return _chains(rpc, dist_autograd, T, lambda: zgrad.randn(3, 3, requires_grad=True),
                   lambda cid, loss, mode: dist_autograd.backward(cid, [loss], mode=mode))


def _torch_chains(rpc):
    import torch
    import torch.distributed.autograd as dist_autograd
    import _torch_targets as T

    torch.manual_seed(0)
    return _chains(rpc, dist_autograd, T, lambda: torch.randn(3, 3, requires_grad=True),
                   lambda cid, loss, mode: dist_autograd.backward(cid, [loss]))


def _torch_workloads(rpc):
    import torch
    import torch.nn.functional as F
    import torch.distributed.autograd as dist_autograd
    from torch.distributed.optim import DistributedOptimizer
    import _torch_targets as T

    def example(n):
        torch.manual_seed(0)
        t1, t2, t4 = (torch.randn(n, n, requires_grad=True) for _ in range(3))

        def step(mode):
            with dist_autograd.context() as cid:
                t3 = rpc.rpc_sync("worker1", T.add, args=(t1, t2))
                loss = (t3 * t4).sum()
                dist_autograd.backward(cid, [loss])
        return step

    stage = rpc.remote("worker1", T.Stage, args=(1024, 1024, 0))
    torch.manual_seed(1)
    head = torch.nn.Linear(1024, 10)
    params = stage.rpc_sync().parameter_rrefs() + [rpc.RRef(p) for p in head.parameters()]
    opt = DistributedOptimizer(torch.optim.SGD, params, lr=0.01)
    x = torch.randn(64, 1024)
    y = torch.arange(64) % 10

    def mlp(mode):
        with dist_autograd.context() as cid:
            h = rpc.rpc_sync("worker1", T.forward_stage, args=(stage, x))
            loss = F.cross_entropy(head(h), y)
            dist_autograd.backward(cid, [loss])
            opt.step(cid)

    return {"example 3x3": example(3), "example 1024x1024": example(1024), "mlp step": mlp}


# ------------------------------------------------------------------------------- workers


def _counters(rpc):
    """dist-engine messages sent (by kind, both workers summed) and discovery messages."""
    import zgrad.distributed.autograd as dist_autograd
    import _zg_targets as T
    infos = [dist_autograd.get_debug_info(), rpc.rpc_sync("worker1", T.debug_counters)]
    sent: collections.Counter = collections.Counter()
    discovery = 0
    for info in infos:
        sent.update({key.split(".", 1)[1]: n for key, n in info.items() if key.startswith("messages_sent.")})
        discovery += info["discovery_messages"]
    return sent, discovery


def _run_block(step, mode, iters):
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        step(mode)
        times.append(time.perf_counter() - t)
    return times


def _worker(framework: str, rank: int, spec: dict) -> None:
    """A worker of a served world: rank 0 builds the workloads and runs the blocks it is asked for."""
    rpc = _procs.init_worker(framework, rank, spec)
    try:
        if rank != 0:
            return
        chains = spec.get("only") == "chains"
        if chains:
            workloads = (_zgrad_chains if framework == "zgrad" else _torch_chains)(rpc)
        else:
            workloads = (_zgrad_workloads if framework == "zgrad" else _torch_workloads)(rpc)
        counted = framework == "zgrad" and not chains

        def handle(command: dict) -> dict:
            step = workloads[command["run"]]
            if counted:
                before, d0 = _counters(rpc)
            times = _run_block(step, command["mode"], command["iters"])
            answer = {"times": times}
            if counted:
                after, d1 = _counters(rpc)
                after.subtract(before)
                answer.update(msgs=dict(after), discovery=d1 - d0)
            return answer

        _procs.serve(handle)
    finally:
        rpc.shutdown()


def _alternate(worlds: dict, names: tuple, settings: dict) -> dict:
    """Run each workload in blocks that alternate between the frameworks (and zgrad's modes),
    whose worlds are all up: framework -> workload -> mode -> medians and messages per pass."""
    modes = {framework: MODES if framework == "zgrad" else ("torch",) for framework in worlds}
    out: dict = {framework: {} for framework in worlds}
    for name in names:
        iters = settings["iters"][name]
        for framework, world in worlds.items():
            _procs.activate(worlds, framework)
            for mode in modes[framework]:
                world.ask({"run": name, "mode": mode, "iters": settings["warmup"]}, 600)
        times = {f: {m: [] for m in modes[f]} for f in worlds}
        msgs = {f: {m: collections.Counter() for m in modes[f]} for f in worlds}
        disc = {f: {m: 0 for m in modes[f]} for f in worlds}
        order = list(worlds)
        for block in range(settings["blocks"]):
            for framework in (order if block % 2 == 0 else order[::-1]):
                _procs.activate(worlds, framework)
                for mode in modes[framework]:
                    answer = worlds[framework].ask({"run": name, "mode": mode, "iters": iters}, 600)
                    times[framework][mode] += answer["times"]
                    msgs[framework][mode].update(answer.get("msgs", {}))
                    disc[framework][mode] += answer.get("discovery", 0)
        passes = settings["blocks"] * iters
        for framework in worlds:
            out[framework][name] = {m: {
                "ms_median": statistics.median(times[framework][m]) * 1e3,
                "ms_mean": statistics.fmean(times[framework][m]) * 1e3,
                "messages_per_pass": {k: v / passes for k, v in msgs[framework][m].items() if v},
                "messages_per_pass_total": sum(msgs[framework][m].values()) / passes,
                "discovery_per_pass": disc[framework][m] / passes} for m in modes[framework]}
    return out


def _served(frameworks: list, extra: dict, world_size: int, names: tuple, settings: dict) -> dict:
    worlds = {}
    try:
        for framework in frameworks:
            worlds[framework] = _procs.ServedWorld(__file__, framework, extra, world_size)
        return _alternate(worlds, names, settings)
    finally:
        for world in worlds.values():
            world.close()


# ------------------------------------------------------------------------------- report


def _fmt_msgs(per_kind: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(per_kind.items())) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return _worker(args.worker, args.rank, json.loads(args.spec))

    settings = _settings(args.quick)
    with_torch = _procs.have_torch()
    print(f"dist_autograd benchmark ({'quick' if args.quick else 'full'}); 2 worker processes per framework, "
          "loopback tcp; workers run with NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1; ms per iteration (median), "
          "context enter/exit included", flush=True)
    frameworks = ["zgrad", "torch"] if with_torch else ["zgrad"]
    results = _served(frameworks, {}, 2, WORKLOADS, settings)
    for framework, chains in _served(frameworks, {"only": "chains"}, CHAIN_WORKERS, CHAINS, settings).items():
        results[framework].update(chains)

    z = results["zgrad"]
    header = ["workload", "zgrad fast ms"] + (["torch ms", "fast/torch"] if with_torch else []) \
        + ["zgrad smart ms", "smart/fast", "msgs/pass fast", "msgs/pass smart", "extra msgs", "discovery/pass"]
    rows = []
    targets = {}
    for name in WORKLOADS + CHAINS:
        f, sm = z[name]["fast"], z[name]["smart"]
        row = [name, f"{f['ms_median']:.3f}"]
        if with_torch:
            t = results["torch"][name]["torch"]
            row += [f"{t['ms_median']:.3f}", f"{f['ms_median'] / t['ms_median']:.2f}x"]
            bound = TORCH_TARGETS[name]
            targets[f"{name}: zgrad <= {bound}x torch"] = f["ms_median"] <= bound * t["ms_median"]
        row += [f"{sm['ms_median']:.3f}", f"{sm['ms_median'] / f['ms_median']:.2f}x"]
        if name in WORKLOADS:
            row += [f"{f['messages_per_pass_total']:g}", f"{sm['messages_per_pass_total']:g}",
                    f"{sm['messages_per_pass_total'] - f['messages_per_pass_total']:+g}", f"{sm['discovery_per_pass']:g}"]
            targets[f"{name}: smart <= 1.3x fast"] = sm["ms_median"] <= 1.3 * f["ms_median"]
        else:
            row += ["-"] * 4
        rows.append(row)
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print()
    for r in [header] + rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print("\nmessages per pass by kind (dist-engine messages_sent, both workers):")
    for name in WORKLOADS:
        for m in MODES:
            print(f"  {name:18s} {m:5s}: {_fmt_msgs(z[name][m]['messages_per_pass'])}")
    print()
    for name, ok in targets.items():
        print(f"  target {name}: {'MET' if ok else 'MISSED'}")
    out = ROOT / "results" / "dist_autograd.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"quick": args.quick, "settings": settings, "thread_env": _procs.THREAD_ENV,
                               "python": platform.python_version(), "results": results, "targets": targets},
                              indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()

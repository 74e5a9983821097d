"""DDP benchmark: a training step under zgrad's DistributedDataParallel against torch's (gloo),
in one run.

Each framework, two rank processes: an MLP 1024 -> 1024 -> 1024 -> 1024 -> 10 (float32, 3.2 M
parameters, 12.6 MB of gradients), batch 64 per rank, cross-entropy, SGD. The frameworks
alternate for ``rounds`` rounds (this machine is shared and noisy); within a round the three
measures alternate in blocks; medians:

* ``local``: the same step without DDP (no communication), both ranks at once;
* ``ddp``: the step under DDP;
* ``allreduce``: all-reducing buffers of DDP's bucket sizes alone (launched together, waited):
  what the step would pay on top if none of it overlapped backward.

DDP overhead = ddp - local; the share of the all-reduce hidden behind backward is
``1 - overhead / allreduce`` (clamped to 0..1). Target (issue 14): zgrad's overhead <= 0.7x
torch's.

``--link tbf``: the two ranks run in two network namespaces joined by a veth pair limited with
``tc qdisc ... tbf rate 1gbit`` (cross-memory attach off, so the gradients cross the link): the
effect of the overlap on a slower link. Needs root (``ip netns``); this kernel has no netem, so
there is no added delay.

Prints a table of ratios measured in this run and writes ``bench/results/ddp.json`` (``ddp_tbf.json``).

    python bench/ddp.py [--quick] [--link tbf]
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import _procs  # noqa: E402

WIDTHS = (1024, 1024, 1024, 1024, 10)
BATCH = 64
LR = 0.01


def _settings(quick: bool) -> dict:
    if quick:
        return {"warmup": 3, "steps": 8, "blocks": 2, "rounds": 1}
    return {"warmup": 5, "steps": 20, "blocks": 4, "rounds": 3}


def _zgrad_rank(rank: int, spec: dict) -> dict:
    import numpy as np

    import zgrad
    import zgrad.distributed as dist
    import zgrad.nn.functional as F
    from zgrad import nn
    from zgrad.nn.parallel import DistributedDataParallel as DDP

    config = {"transport": {"kind": "tcp", "bind_address": spec.get("bind", "127.0.0.1"), "cma": spec.get("cma", "auto"),
                            "advertise_address": spec["addresses"][rank] if "addresses" in spec else ""}}
    dist.init_process_group("zmq", init_method=f"tcp://{spec['master']}:{spec['port']}", rank=rank, world_size=2,
                            config=config)

    def model():
        zgrad.manual_seed(0)
        layers = []
        for i, (a, b) in enumerate(zip(WIDTHS, WIDTHS[1:])):
            layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(WIDTHS) - 2 else [])
        return nn.Sequential(*layers)

    rng = np.random.default_rng(rank)
    x = zgrad.from_numpy(rng.standard_normal((BATCH, WIDTHS[0])).astype(np.float32))
    y = zgrad.from_numpy(rng.integers(0, WIDTHS[-1], BATCH))

    def stepper(m):
        opt = zgrad.optim.SGD(m.parameters(), lr=LR)

        def step():
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()
        return step

    ddp = DDP(model())
    local = model()
    buffers = [np.ones(b.buffer.size, np.float32) for b in ddp.reducer.buckets]

    def allreduce():
        for work in [dist.all_reduce(zgrad.from_numpy(b), async_op=True) for b in buffers]:
            work.wait()

    result = _measure(stepper(ddp), stepper(local), allreduce, dist.barrier, spec["settings"])
    result["bucket_elems"] = [b.buffer.size for b in ddp.reducer.buckets]
    dist.destroy_process_group()
    return result


def _torch_rank(rank: int, spec: dict) -> dict:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{spec['master']}:{spec['port']}", rank=rank, world_size=2)

    def model():
        torch.manual_seed(0)
        layers = []
        for i, (a, b) in enumerate(zip(WIDTHS, WIDTHS[1:])):
            layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(WIDTHS) - 2 else [])
        return nn.Sequential(*layers)

    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(BATCH, WIDTHS[0], generator=gen)
    y = torch.randint(0, WIDTHS[-1], (BATCH,), generator=gen)

    def stepper(m):
        opt = torch.optim.SGD(m.parameters(), lr=LR)

        def step():
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()
        return step

    ddp = DDP(model())
    local = model()
    buffers = [torch.ones(n) for n in spec["bucket_elems"]]

    def allreduce():
        for work in [dist.all_reduce(b, async_op=True) for b in buffers]:
            work.wait()

    result = _measure(stepper(ddp), stepper(local), allreduce, dist.barrier, spec["settings"])
    dist.destroy_process_group()
    return result


def _measure(ddp_step, local_step, allreduce, barrier, settings: dict) -> dict:
    for _ in range(settings["warmup"]):
        ddp_step()
        local_step()
        allreduce()
    times: dict[str, list[float]] = {"ddp": [], "local": [], "allreduce": []}
    for _ in range(settings["blocks"]):
        for name, fn in (("ddp", ddp_step), ("local", local_step), ("allreduce", allreduce)):
            barrier()
            times[name] += _procs.timed_calls(fn, settings["steps"])
    return {name: statistics.median(ts) for name, ts in times.items()}


# --- processes: this machine, or two network namespaces with a slow link ---------------------------


@contextlib.contextmanager
def _slow_link(rate: str = "1gbit"):
    """Two network namespaces joined by a veth pair shaped with tbf; yields (names, addresses, devices)."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        raise SystemExit("--link tbf needs the ip and tc commands")
    tag = uuid.uuid4().hex[:6]
    names, veth, addresses = [f"zb{tag}a", f"zb{tag}b"], [f"w{tag}a", f"w{tag}b"], ["10.215.7.1", "10.215.7.2"]

    def run(*cmd):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        if done.returncode:
            raise SystemExit(f"--link tbf: {' '.join(cmd)} failed: {done.stderr.strip()} (needs root)")

    made = []
    try:
        for name in names:
            run("ip", "netns", "add", name)
            made.append(name)
            run("ip", "-n", name, "link", "set", "lo", "up")
        run("ip", "link", "add", veth[0], "netns", names[0], "type", "veth", "peer", "name", veth[1], "netns", names[1])
        for name, dev, address in zip(names, veth, addresses):
            run("ip", "-n", name, "addr", "add", f"{address}/24", "dev", dev)
            run("ip", "-n", name, "link", "set", dev, "up")
            run("ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
                "burst", "256kb", "latency", "50ms")
        yield names, addresses, veth
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


def _run_pair(framework: str, spec: dict, link: tuple | None, timeout_s: float) -> dict:
    spec = {**spec, "port": _procs.free_port()}
    procs = []
    try:
        for rank in (0, 1):
            prefix, env = [], _procs.worker_env()
            if link is not None:  # run in the rank's namespace; gloo on its veth end, not on lo
                namespaces, _, devices = link
                prefix = ["ip", "netns", "exec", namespaces[rank]]
                env["GLOO_SOCKET_IFNAME"] = env["TP_SOCKET_IFNAME"] = devices[rank]
            procs.append(subprocess.Popen(
                [*prefix, sys.executable, __file__, "--worker", framework, "--rank", str(rank), "--spec", json.dumps(spec)],
                stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL, text=True, env=env))
        out, _ = procs[0].communicate(timeout=timeout_s)
        procs[1].wait(timeout=60)
        if procs[0].returncode != 0:
            raise RuntimeError(f"{framework} rank 0 failed (rc {procs[0].returncode})")
        return json.loads(next(line[7:] for line in out.splitlines() if line.startswith("RESULT ")))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)


def main() -> None:
    parser = _procs.bench_args(__doc__)
    parser.add_argument("--link", choices=["local", "tbf"], default="local", help="tbf: two namespaces, 1 Gbit/s link")
    args = parser.parse_args()
    if args.worker:
        spec = json.loads(args.spec)
        result = (_zgrad_rank if args.worker == "zgrad" else _torch_rank)(args.rank, spec)
        if args.rank == 0:
            _procs.emit(result)
        return

    settings = _settings(args.quick)
    with_torch = _procs.have_torch()
    print(f"ddp benchmark ({'quick' if args.quick else 'full'}): MLP {'->'.join(map(str, WIDTHS))}, batch {BATCH} per rank, "
          f"SGD, 2 rank processes, {'1 Gbit/s veth link (tbf), cma off' if args.link == 'tbf' else 'loopback'}; "
          "NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1; ms per step (median)", flush=True)
    with contextlib.ExitStack() as stack:
        link, spec = None, {"settings": settings, "master": "127.0.0.1"}
        if args.link == "tbf":
            link = stack.enter_context(_slow_link())
            spec.update(master=link[1][0], addresses=link[1], bind="0.0.0.0", cma="off")
        rounds: dict[str, list[dict]] = {"zgrad": [], "torch": []} if with_torch else {"zgrad": []}
        for _ in range(settings["rounds"]):  # alternating: background load hits both alike
            rounds["zgrad"].append(_run_pair("zgrad", spec, link, 900))
            if with_torch:
                buckets = rounds["zgrad"][0]["bucket_elems"]
                rounds["torch"].append(_run_pair("torch", {**spec, "bucket_elems": buckets}, link, 900))

    frameworks = list(rounds)
    for runs in rounds.values():
        for r in runs:
            r["overhead"] = r["ddp"] - r["local"]
            r["hidden_share"] = min(1.0, max(0.0, 1.0 - r["overhead"] / r["allreduce"]))
    results = {f: {k: statistics.median(r[k] for r in runs) for k in ("local", "ddp", "overhead", "allreduce", "hidden_share")}
               for f, runs in rounds.items()}
    results["zgrad"]["bucket_elems"] = rounds["zgrad"][0]["bucket_elems"]
    header = ["measure"] + frameworks + (["zgrad/torch"] if with_torch else [])
    rows = []
    for key, label in (("local", "local step (ms)"), ("ddp", "DDP step (ms)"), ("overhead", "DDP overhead (ms)"),
                       ("allreduce", "all-reduce of the buckets alone (ms)")):
        row = [label] + [f"{results[f][key] * 1e3:.2f}" for f in frameworks]
        if with_torch:
            row.append(f"{results['zgrad'][key] / results['torch'][key]:.2f}x")
        rows.append(row)
    rows.append(["all-reduce hidden behind backward"] + [f"{results[f]['hidden_share']:.0%}" for f in frameworks]
                + (["-"] if with_torch else []))
    _procs.print_table(header, rows)
    print(f"\n  zgrad buckets: {len(results['zgrad']['bucket_elems'])} "
          f"({', '.join(f'{n * 4 / 2**20:.2f}' for n in results['zgrad']['bucket_elems'])} MiB)")
    targets = {}
    if with_torch:
        per_round = [z["overhead"] / t["overhead"] for z, t in zip(rounds["zgrad"], rounds["torch"])]
        print(f"  zgrad/torch DDP overhead per round: {', '.join(f'{r:.2f}x' for r in per_round)} "
              "(the table: medians over the rounds)")
        targets["DDP overhead <= 0.7x torch's"] = results["zgrad"]["overhead"] <= 0.7 * results["torch"]["overhead"]
        print()
        for name, ok in targets.items():
            print(f"  target {name}: {'MET' if ok else 'MISSED'}")
    out = ROOT / "results" / ("ddp.json" if args.link == "local" else "ddp_tbf.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"quick": args.quick, "link": args.link, "settings": settings,
                               "thread_env": _procs.THREAD_ENV, "python": platform.python_version(),
                               "machine": os.cpu_count(), "rounds": rounds, "results": results, "targets": targets},
                              indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()

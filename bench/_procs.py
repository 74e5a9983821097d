"""Worker-process plumbing shared by the benchmarks that run two worker processes.

Every worker is a fresh interpreter (subprocess, never fork: numba may be loaded). Rank 0 prints
one ``RESULT <json>`` line; every wait is bounded and every process is killed at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
THREAD_ENV = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1", "TP_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"}
THREAD_POOLS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def have_torch() -> bool:
    try:
        import importlib.util
        return importlib.util.find_spec("torch") is not None
    except Exception:  # noqa: BLE001
        return False


def zgrad_config(world_size: int = 2) -> dict:
    return {
        "transport": {"kind": "tcp", "connect_timeout_s": 30.0},
        "rpc": {"allowed_modules": ["_zg_targets"], "default_timeout_s": 120.0},
        "workers": [{"name": f"worker{r}", "host": "127.0.0.1", "port": free_port()} for r in range(world_size)],
    }


def worker_env(threads: int = 1) -> dict:
    """This process's environment with every thread pool of a worker sized to ``threads`` and this
    directory on the import path."""
    env = dict(os.environ)
    env.update(THREAD_ENV)
    env.update({name: str(threads) for name in THREAD_POOLS})
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def run_pair(script: str, framework: str, extra: dict, timeout_s: float) -> dict:
    """Start ranks 0 and 1 of ``script --worker framework``; return rank 0's RESULT json."""
    return run_world(script, framework, extra, timeout_s, 2)


def _world_spec(framework: str, extra: dict, world_size: int) -> dict:
    """The ``--spec`` of every rank of a world: ``extra`` with a rendezvous port, the world size
    and, for zgrad, its config (``extra["transport"]`` merged into ``[transport]``)."""
    spec = dict(extra)
    spec["port"] = free_port()
    spec["world_size"] = world_size
    if framework == "zgrad":
        spec["config"] = zgrad_config(world_size)
        spec["config"]["transport"].update(spec.pop("transport", {}))  # e.g. {"direct_streams": False}
    return spec


def _start_world(script: str, framework: str, spec: dict, commanded_ranks: int,
                 env: dict | None = None) -> list[subprocess.Popen]:
    """Start every rank of ``script --worker framework`` (environment ``env``, else
    :func:`worker_env`); rank 0's stdout is a pipe, and so is the stdin of the first
    ``commanded_ranks`` ranks. Kills what it started if a start fails."""
    procs: list[subprocess.Popen] = []
    try:
        for rank in range(spec["world_size"]):
            procs.append(subprocess.Popen(
                [sys.executable, script, "--worker", framework, "--rank", str(rank), "--spec", json.dumps(spec)],
                stdin=subprocess.PIPE if rank < commanded_ranks else subprocess.DEVNULL,
                stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL, text=True, env=env or worker_env()))
    except BaseException:
        _kill(procs)
        raise
    return procs


def _kill(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(5)


def run_world(script: str, framework: str, extra: dict, timeout_s: float, world_size: int) -> dict:
    """Start ranks 0 .. world_size-1 of ``script --worker framework``; return rank 0's RESULT json."""
    procs = _start_world(script, framework, _world_spec(framework, extra, world_size), 0)
    try:
        out, _ = procs[0].communicate(timeout=timeout_s)
        for proc in procs[1:]:
            proc.wait(timeout=30)
        if procs[0].returncode != 0:
            raise RuntimeError(f"{framework} rank 0 failed (rc {procs[0].returncode})")
        for line in out.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[7:])
        raise RuntimeError(f"{framework} rank 0 printed no RESULT")
    finally:
        _kill(procs)


class ServedWorld:
    """Worker processes ``script --worker framework`` kept alive while rank 0 serves commands:
    :meth:`ask` writes one JSON line to its stdin and returns the JSON of the ``RESULT`` line it
    answers with (see :func:`serve`). Lets a benchmark alternate short blocks of two frameworks
    whose worlds are up at the same time, so that the machine's slow minutes hit both alike;
    the world that waits is stopped (:meth:`pause`, SIGSTOP): an idle TensorPipe process keeps a
    core busy polling, which would slow the other framework's block. Every wait is bounded;
    :meth:`close` ends the processes (killing what does not exit).

    With ``every_rank`` each command goes to every rank's stdin (each rank serves it, as the
    ranks of a DDP world must all step); only rank 0's answer is read. ``env`` replaces
    :func:`worker_env`'s environment (e.g. ``worker_env(threads)``)."""

    def __init__(self, script: str, framework: str, extra: dict, world_size: int, every_rank: bool = False,
                 env: dict | None = None) -> None:
        self.framework = framework
        self.procs = _start_world(script, framework, _world_spec(framework, extra, world_size),
                                  world_size if every_rank else 1, env)
        self._commanded = self.procs if every_rank else self.procs[:1]

    def _send(self, command: dict) -> None:
        for p in self._commanded:
            if p.poll() is None:
                p.stdin.write(json.dumps(command) + "\n")
                p.stdin.flush()

    def ask(self, command: dict, timeout_s: float) -> dict:
        """Send ``command`` to rank 0 and return its answer; raise if none comes in ``timeout_s``."""
        import select

        rank0 = self.procs[0]
        self._send(command)
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([rank0.stdout], [], [], left)[0]:
                raise RuntimeError(f"{self.framework} rank 0 did not answer {command} within {timeout_s} s")
            line = rank0.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.framework} rank 0 exited (rc {rank0.wait(5)}) while answering {command}")
            if line.startswith("RESULT "):
                return json.loads(line[7:])

    def pause(self) -> None:
        """Stop every process of this world (SIGSTOP) until :meth:`resume`."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Continue every process of this world (SIGCONT)."""
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signum)

    def close(self, timeout_s: float = 60.0) -> None:
        """Ask rank 0 to stop, wait for every process (bounded), kill what is left."""
        self.resume()
        try:
            self._send({"exit": True})
            deadline = time.monotonic() + timeout_s
            for p in self.procs:
                p.wait(max(0.1, deadline - time.monotonic()))
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            _kill(self.procs)


def activate(worlds: dict[str, ServedWorld], framework: str) -> None:
    """Let ``framework``'s world run and stop the others (:meth:`ServedWorld.pause`)."""
    for other, world in worlds.items():
        if other != framework:
            world.pause()
    worlds[framework].resume()


def alternating_rounds(worlds: dict[str, ServedWorld], commands: dict[str, dict], repeats: int,
                       min_sampling_s: float, per_round: int, timeout_s: float) -> dict[str, list[float]]:
    """Times of ``commands[name]`` served by ``worlds[name]`` (see :func:`serve_timed`), sampled in
    alternating rounds of ``per_round`` timed calls, the other worlds stopped during each round
    (:func:`activate`): at least ``repeats`` calls each, and more until the rounds took
    ``min_sampling_s`` per world. Each library alone in its process: neither one's idle threads
    (torch's spinning OpenMP workers) take a core from the other."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    while (min(map(len, times.values())) < repeats
           or sum(map(sum, times.values())) < len(times) * min_sampling_s):
        for name, command in commands.items():
            activate(worlds, name)
            times[name] += worlds[name].ask({**command, "calls": per_round}, timeout_s)["times"]
    return times


def serve_timed(calls: dict[str, object], warmup: int, description: dict | None = None) -> None:
    """Serve :func:`alternating_rounds`' commands ``{"call": key, "calls": n}`` with the times of
    ``n`` calls of ``calls[key]``, after ``warmup`` untimed calls the first time a key is asked
    and one untimed call every time (the first call after a stop pays for waking the threads);
    answer ``{"describe": true}`` with ``description``."""
    warm: set[str] = set()

    def handle(command: dict) -> dict:
        if command.get("describe"):
            return description or {}
        fn = calls[command["call"]]
        for _ in range(0 if command["call"] in warm else warmup):
            fn()
        warm.add(command["call"])
        fn()
        return {"times": timed_calls(fn, command["calls"])}

    serve(handle)


def serve(handle) -> None:
    """A commanded rank of a :class:`ServedWorld` (rank 0, or each with ``every_rank``): answer each
    JSON command read from stdin with one ``RESULT`` line (``handle(command)``), until
    ``{"exit": true}`` or the end of stdin."""
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("exit"):
            return
        emit(handle(command))


def init_worker(framework: str, rank: int, spec: dict):
    """init_rpc for this worker; returns the framework's rpc module."""
    sys.path.insert(0, str(ROOT))
    if framework == "zgrad":
        from zgrad.distributed import rpc
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=spec.get("world_size", 2), config=spec["config"])
        return rpc
    import torch
    from torch.distributed import rpc
    torch.set_num_threads(1)
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{spec['port']}", rpc_timeout=120)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=spec.get("world_size", 2), rpc_backend_options=opts)
    return rpc


def timed_calls(fn, n: int) -> list[float]:
    """Wall seconds of each of ``n`` calls of ``fn``."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def emit(result: dict) -> None:
    print("RESULT " + json.dumps(result), flush=True)


def bench_args(doc: str):
    """The command line every two-process benchmark takes: ``--quick``, and the hidden worker
    arguments (``--worker FRAMEWORK --rank R --spec JSON``) it starts its ranks with."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    return parser


def print_table(header: list[str], rows: list[list[str]]) -> None:
    """Right-aligned columns (the first left-aligned), one line per row."""
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print()
    for r in [header] + rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))

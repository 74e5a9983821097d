"""RPC benchmark: zgrad's rpc against torch.distributed.rpc (TensorPipe) and raw pyzmq, in one run.

Measures, each framework with two worker processes on loopback tcp:
  * rpc_sync round-trip latency of a tiny tensor (4 float32) through a Python function (echo),
    median over many calls, and the CPU time per round trip of the caller's process and of the
    callee's (all threads; raw pyzmq's server from /proc, to the clock tick);
  * echo throughput at 4 KiB, 1, 16 and 64 MiB: rpc_async keeping ``WINDOW`` calls in flight, each
    sending a float32 tensor of that size which the callee returns; MB/s counts both directions;
  * rpc_async calls/s of the tiny echo with 32 calls kept in flight (sliding window);
  * async_execution batching: calls/s to a server that answers every ``BATCH`` calls together
    (PyTorch's ``batch`` example: each call returns a Future completed when the batch is full;
    no callee thread waits), 32 calls kept in flight, refilled a batch at a time.

"raw" is a DEALER client (the parent process) against a ROUTER echo server (a separate process),
the payload one frame with ``copy=False``: the floor any RPC layer on ZeroMQ pays. zgrad's
``rpc_sync`` rides its stream sockets (``[transport] direct_streams``, docs/transport.md), which
skip ZeroMQ's I/O threads; below the table, the same calls on ZeroMQ caller-direct sockets
(``direct_streams = false``, a third pair of workers), and the round trip of the same payload over
plain Python TCP sockets (TCP_NODELAY, blocking calls, no ZeroMQ I/O threads), which shows what
raw pyzmq's floor itself costs: the two I/O-thread wake-ups per message. Every worker
runs with NUMBA_NUM_THREADS=1, OMP_NUM_THREADS=1 (the box has few cores, two workers each) so no
framework is penalised by oversubscription. Workers are fresh interpreters (subprocess, no fork).

Targets (issue 17): rpc_sync latency at most 0.6x torch's and 1.6x raw pyzmq's; echo 1 MiB at
least 1.2x torch's throughput; rpc_async with 32 in flight at least 2x torch's calls/s.

Prints a table of ratios measured in this run and writes ``bench/results/rpc.json``.

    python bench/rpc.py            # full run (a few minutes)
    python bench/rpc.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import _procs  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20
SIZES = (("4 KiB", 4 * KIB), ("1 MiB", MIB), ("16 MiB", 16 * MIB), ("64 MiB", 64 * MIB))
WINDOW = 2
ASYNC_IN_FLIGHT = 32
BATCH = 8  # ASYNC_IN_FLIGHT is a multiple: the window always holds full batches


def _settings(quick: bool) -> dict:
    if quick:
        return {"lat_iters": 300, "tput_s": 0.4, "tput_min_iters": 4, "async_s": 0.5, "repeats": 1}
    return {"lat_iters": 3000, "tput_s": 2.0, "tput_min_iters": 10, "async_s": 2.0, "repeats": 3}


# ------------------------------------------------------------------------------- measuring


def _latency_us(call, payload, iters: int, callee_cpu_s) -> tuple[float, float, float]:
    """Median round-trip µs, and CPU µs per round trip of the caller's process and of the
    callee's (every thread of each: user + system)."""
    for _ in range(min(100, iters)):
        call(payload)
    times = []
    callee0, caller0 = callee_cpu_s(), time.process_time()
    for _ in range(iters):
        t = time.perf_counter()
        call(payload)
        times.append(time.perf_counter() - t)
    caller_s, callee_s = time.process_time() - caller0, callee_cpu_s() - callee0
    return statistics.median(times) * 1e6, caller_s / iters * 1e6, callee_s / iters * 1e6


def _throughput_mbs(start, wait, payload, nbytes: int, seconds: float, min_iters: int) -> float:
    for _ in range(2):
        wait(start(payload))
    inflight = collections.deque()
    done = 0
    t0 = time.perf_counter()
    while True:
        while len(inflight) < WINDOW:
            inflight.append(start(payload))
        wait(inflight.popleft())
        done += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds and done >= min_iters:
            break
    while inflight:
        wait(inflight.popleft())
    elapsed = time.perf_counter() - t0
    done += 0  # the drained ones are not counted: conservative and the same for all
    return 2 * nbytes * done / elapsed / 1e6


def _calls_per_s(start, wait, payload, seconds: float, group: int = 1) -> float:
    """Calls/s with ``ASYNC_IN_FLIGHT`` calls kept in flight, refilled ``group`` at a time: the
    oldest ``group`` calls are waited for, then as many are started. A batching server needs
    ``group`` = its batch size: it answers only full batches, and a server that runs calls out
    of order (torch's thread pool does) may put the oldest call in a batch that is full only
    once calls sent after it arrive; refilled one at a time, the window then waits on a call
    that can never complete (seen with torch after about 11k calls)."""
    inflight = collections.deque(start(payload) for _ in range(ASYNC_IN_FLIGHT))

    def turn() -> None:
        for _ in range(group):
            wait(inflight.popleft())
        for _ in range(group):
            inflight.append(start(payload))

    for _ in range(200 // group):
        turn()
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(64 // group):
            turn()
        done += 64 // group * group
    elapsed = time.perf_counter() - t0
    while inflight:
        wait(inflight.popleft())
    return done / elapsed


def _measure(sync, start, wait, make_payload, s: dict, callee_cpu_s, latency_only: bool = False) -> dict:
    tiny = make_payload(16)
    latency, caller_cpu, callee_cpu = min(_latency_us(sync, tiny, s["lat_iters"], callee_cpu_s)
                                          for _ in range(s["repeats"]))
    out = {"latency_us": latency, "caller_cpu_us": caller_cpu, "callee_cpu_us": callee_cpu, "mbs": {}}
    if latency_only:
        return out
    for label, nbytes in SIZES:
        payload = make_payload(nbytes)
        out["mbs"][label] = max(_throughput_mbs(start, wait, payload, nbytes, s["tput_s"], s["tput_min_iters"])
                                for _ in range(s["repeats"]))
    out["async_calls_per_s"] = max(_calls_per_s(start, wait, tiny, s["async_s"]) for _ in range(s["repeats"]))
    return out


def _batch_calls_per_s(rpc, targets, wait, payload, settings: dict) -> tuple[float | None, str | None]:
    """Calls/s to a batching server, a fresh one per repeat, whose RRef its owner made (as the
    batch example's server does), on workers that made no other calls; the window is refilled a
    batch at a time (see :func:`_calls_per_s`: refilled call by call it could wait forever on
    torch, which runs calls out of order). A failure is reported, not raised."""
    best = 0.0
    for _ in range(settings["repeats"]):
        server = rpc.rpc_sync("worker1", targets.make_batch_server, args=(BATCH,))
        submit = lambda p: rpc.rpc_async("worker1", targets.BatchServer.submit, args=(server, p))  # noqa: E731
        try:
            best = max(best, _calls_per_s(submit, wait, payload, settings["async_s"], group=BATCH))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            return (best or None), f"{type(exc).__name__}: {exc}"[:200]
    return best, None


# ------------------------------------------------------------------------------- workers


def _worker(framework: str, rank: int, spec: dict) -> None:
    rpc = _procs.init_worker(framework, rank, spec)
    try:
        if rank == 0:
            import numpy as np
            if framework == "zgrad":
                import zgrad
                import _zg_targets as T
                make = lambda n: zgrad.from_numpy(np.zeros(n // 4, dtype=np.float32))  # noqa: E731
                wait = lambda f: f.wait(120)  # noqa: E731
            else:
                import torch
                import _torch_targets as T
                make = lambda n: torch.zeros(n // 4, dtype=torch.float32)  # noqa: E731
                wait = lambda f: f.wait()  # noqa: E731
            sync = lambda p: rpc.rpc_sync("worker1", T.echo, args=(p,))  # noqa: E731
            start = lambda p: rpc.rpc_async("worker1", T.echo, args=(p,))  # noqa: E731
            if spec.get("only") == "batch":  # a pair of fresh workers for it (see _batch_calls_per_s)
                calls, error = _batch_calls_per_s(rpc, T, wait, make(16), spec["settings"])
                _procs.emit({"batch_calls_per_s": calls, "batch_error": error})
                return
            result = _measure(sync, start, wait, make, spec["settings"],
                              lambda: rpc.rpc_sync("worker1", T.cpu_seconds), spec.get("only") == "latency")
            if framework == "zgrad":  # whether big tensors took the same-host single-copy path
                result["transport"] = {k: v for k, v in rpc.get_debug_info()["transport"].items() if k.startswith("cma")}
            _procs.emit(result)
    finally:
        rpc.shutdown()


def _raw_server() -> None:
    import zmq
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.linger = 0
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    while sock.poll(120_000):
        parts = sock.recv_multipart(copy=False)
        if parts[1].bytes == b"stop":
            break
        sock.send_multipart(parts, copy=False)
    sock.close(0)
    ctx.term()


def _socket_server() -> None:
    """An echo server on a plain TCP socket (the floor without ZeroMQ): prints its port."""
    import socket
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    listener.settimeout(120)
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(120)
    while True:
        data = conn.recv(65536)
        if not data or data == b"stop":
            break
        conn.sendall(data)
    conn.close()
    listener.close()


def _run_socket_floor(settings: dict) -> float:
    """Median round trip (µs) of a 16-byte echo over plain TCP sockets between two processes."""
    import socket
    server = subprocess.Popen([sys.executable, __file__, "--socket-server"], stdout=subprocess.PIPE, text=True,
                              env=_procs.worker_env())
    try:
        conn = socket.create_connection(("127.0.0.1", int(server.stdout.readline())), timeout=60)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = bytes(16)

        def call(p: bytes) -> None:
            conn.sendall(p)
            got = 0
            while got < len(p):
                chunk = conn.recv(65536)
                if not chunk:
                    raise ConnectionError("the socket echo server closed the connection")
                got += len(chunk)

        latency = min(_latency_us(call, payload, settings["lat_iters"], lambda: 0.0)[0]
                      for _ in range(settings["repeats"]))
        conn.sendall(b"stop")
        conn.close()
        server.wait(10)
        return latency
    finally:
        if server.poll() is None:
            server.kill()


def _process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used, from /proc (clock-tick resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _echo_client(server_flag: str):
    """Start ``bench/rpc.py <server_flag>`` (an echo server printing its port) and yield a zmq
    context, a DEALER connected to it and the server's pid; the server is always reaped or killed
    afterwards."""
    import zmq
    server = subprocess.Popen([sys.executable, __file__, server_flag], stdout=subprocess.PIPE, text=True,
                              env=_procs.worker_env())
    try:
        port = int(server.stdout.readline())
        ctx = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.connect(f"tcp://127.0.0.1:{port}")
        yield ctx, sock, server.pid
        server.wait(10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(5)


def _run_raw(settings: dict) -> dict:
    with _echo_client("--raw-server") as (ctx, sock, server_pid):
        def recv():
            if not sock.poll(60_000):
                raise TimeoutError("raw echo server did not answer within 60 s")
            sock.recv(copy=False)

        def sync(p):
            sock.send(p, copy=False)
            recv()

        def start(p):
            sock.send(p, copy=False)
            return None

        out = _measure(sync, start, lambda _: recv(), lambda n: bytearray(n), settings,
                       lambda: _process_cpu_s(server_pid))
        sock.send(b"stop")
    sock.close(0)
    ctx.term()
    return out


# ------------------------------------------------------------------------------- report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--raw-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--socket-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.raw_server:
        return _raw_server()
    if args.socket_server:
        return _socket_server()
    if args.worker:
        return _worker(args.worker, args.rank, json.loads(args.spec))

    settings = _settings(args.quick)
    with_torch = _procs.have_torch()
    print(f"rpc benchmark ({'quick' if args.quick else 'full'}); 2 worker processes per framework, loopback tcp; "
          f"workers run with NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1; async window {WINDOW} for throughput", flush=True)
    results = {"zgrad": _procs.run_pair(__file__, "zgrad", {"settings": settings}, 900)}
    if with_torch:
        results["torch"] = _procs.run_pair(__file__, "torch", {"settings": settings}, 900)
    for framework in (["zgrad", "torch"] if with_torch else ["zgrad"]):
        results[framework].update(_procs.run_pair(__file__, framework, {"settings": settings, "only": "batch"}, 600))
    # The same calls on ZeroMQ caller-direct sockets instead of zgrad's stream sockets.
    results["zgrad_zmq"] = _procs.run_pair(__file__, "zgrad", {"settings": settings, "only": "latency",
                                                               "transport": {"direct_streams": False}}, 600)
    results["raw"] = _run_raw(settings)
    results["socket_floor_us"] = _run_socket_floor(settings)

    cols = ["zgrad", "torch", "raw"] if with_torch else ["zgrad", "raw"]
    rows = []
    z = results["zgrad"]
    rows.append(["rpc_sync latency (µs, median)"] + [f"{results[c]['latency_us']:.0f}" for c in cols]
                + ([f"{z['latency_us'] / results['torch']['latency_us']:.2f}x"] if with_torch else [])
                + [f"{z['latency_us'] / results['raw']['latency_us']:.2f}x"])
    for side in ("caller", "callee"):
        key = f"{side}_cpu_us"
        rows.append([f"  {side} CPU per round trip (µs)"] + [f"{results[c][key]:.0f}" for c in cols]
                    + ([f"{z[key] / results['torch'][key]:.2f}x"] if with_torch else [])
                    + [f"{z[key] / results['raw'][key]:.2f}x" if results['raw'][key] else "-"])
    for label, _ in SIZES:
        rows.append([f"echo {label} (MB/s)"] + [f"{results[c]['mbs'][label]:.0f}" for c in cols]
                    + ([f"{z['mbs'][label] / results['torch']['mbs'][label]:.2f}x"] if with_torch else [])
                    + [f"{z['mbs'][label] / results['raw']['mbs'][label]:.2f}x"])
    rows.append([f"rpc_async calls/s ({ASYNC_IN_FLIGHT} in flight)"]
                + [f"{results[c]['async_calls_per_s']:.0f}" for c in cols]
                + ([f"{z['async_calls_per_s'] / results['torch']['async_calls_per_s']:.2f}x"] if with_torch else [])
                + [f"{z['async_calls_per_s'] / results['raw']['async_calls_per_s']:.2f}x"])
    def batch_cell(c: str) -> str:
        value = results[c].get("batch_calls_per_s")
        return "-" if c == "raw" else ("failed" if value is None else f"{value:.0f}")

    batch_ratio = (z["batch_calls_per_s"] / results["torch"]["batch_calls_per_s"]
                   if with_torch and z.get("batch_calls_per_s") and results["torch"].get("batch_calls_per_s") else None)
    rows.append([f"async_execution batch of {BATCH}: calls/s"] + [batch_cell(c) for c in cols]
                + ([f"{batch_ratio:.2f}x" if batch_ratio else "-"] if with_torch else []) + ["-"])
    header = ["measure"] + cols + (["zgrad/torch"] if with_torch else []) + ["zgrad/raw"]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print()
    for r in [header] + rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    for c in ("zgrad", "torch"):
        if results.get(c, {}).get("batch_error"):
            print(f"\n  {c} async_execution batching: {results[c]['batch_error']}")
    zmq_path = results["zgrad_zmq"]
    print(f"\n  zgrad rpc_sync on ZeroMQ caller-direct sockets ([transport] direct_streams = false): "
          f"{zmq_path['latency_us']:.0f} µs = {zmq_path['latency_us'] / results['raw']['latency_us']:.2f}x raw pyzmq's; "
          f"CPU per round trip {zmq_path['caller_cpu_us']:.0f} / {zmq_path['callee_cpu_us']:.0f} µs (caller / callee)")
    print(f"  round trip without ZeroMQ (plain TCP sockets, same 16 bytes): {results['socket_floor_us']:.0f} µs "
          f"= {results['socket_floor_us'] / results['raw']['latency_us']:.2f}x raw pyzmq's")
    cma = z.get("transport", {})
    print("\n  zgrad same-host single copy (transport.cma): "
          + (f"on, {cma['cma_sent']} tensors sent by ticket" if cma.get("cma_sent") else "off / not used"))

    targets = {"rpc_sync latency <= 1.6x raw pyzmq": z["latency_us"] <= 1.6 * results["raw"]["latency_us"]}
    if with_torch:
        t = results["torch"]
        targets["rpc_sync latency <= 0.6x torch"] = z["latency_us"] <= 0.6 * t["latency_us"]
        targets["echo 1 MiB >= 1.2x torch"] = z["mbs"]["1 MiB"] >= 1.2 * t["mbs"]["1 MiB"]
        targets[f"rpc_async calls/s ({ASYNC_IN_FLIGHT} in flight) >= 2x torch"] = \
            z["async_calls_per_s"] >= 2 * t["async_calls_per_s"]
    print()
    for name, ok in targets.items():
        print(f"  target {name}: {'MET' if ok else 'MISSED'}")
    out = ROOT / "results" / "rpc.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"quick": args.quick, "settings": settings, "window": WINDOW,
                               "async_in_flight": ASYNC_IN_FLIGHT, "batch": BATCH, "thread_env": _procs.THREAD_ENV,
                               "python": platform.python_version(), "results": results, "targets": targets},
                              indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()

"""Transport benchmark: zgrad's mesh against raw pyzmq doing the same work, in the same run.

Measures, over tcp and ipc, with CURVE off and on:
  * round-trip latency of an 8-byte message (median over thousands of ping-pongs);
  * echo throughput at 1, 16 and 64 MiB: the client keeps ``--window`` messages in flight, the
    server sends each one back; MB/s counts the bytes moved both ways.

The echo server is a separate process in every case (its own GIL, as in a real job). "raw" is a
DEALER/ROUTER pair sending each payload as one frame with ``copy=False``, the client calling
send/recv on its own thread. "raw+thread" is the same raw pyzmq client built the way the
architecture requires of zgrad (an I/O thread owns the socket; the caller hands messages over
through a queue and an inproc wake-up and waits for the reply on a queue): it shows how much of
zgrad's latency is that hand-off rather than zgrad. raw and zgrad are measured in alternating
blocks so that background load hits both alike; each figure is the median over the blocks.

Prints a table of ratios (zgrad vs raw; for latency the overhead in µs) and writes
``bench/results/transport.json``.

    python bench/transport.py            # full run (a few minutes)
    python bench/transport.py --quick    # smoke run (well under a minute)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import zmq

from zgrad.config import parse_config
from zgrad.transport import create_mesh, generate_keys

KIND = 1
MIB = 1 << 20
SIZES_MIB = (1, 16, 64)
ROOT = Path(__file__).resolve().parent


def _settings(quick: bool) -> dict:
    if quick:
        return {"blocks": 2, "lat_iters": 300, "tput_s": 0.3, "tput_min_iters": 3}
    return {"blocks": 5, "lat_iters": 1500, "tput_s": 1.5, "tput_min_iters": 8}


# ---------------------------------------------------------------------------------- servers


def _serve_raw(endpoint: str, curve_secret: str | None) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.linger = 0
    if curve_secret:
        sock.curve_server = True
        sock.curve_secretkey = curve_secret.encode()
    sock.bind(endpoint)
    print(sock.last_endpoint.decode(), flush=True)
    while sock.poll(60_000):
        parts = sock.recv_multipart(copy=False)
        if len(parts) == 2 and parts[1].bytes == b"stop":
            break
        sock.send_multipart(parts, copy=False)
    sock.close(0)
    ctx.term()


def _serve_zgrad(raw_config: str, master_port: int) -> None:
    config = parse_config(json.loads(raw_config))
    done = threading.Event()
    box: dict = {}

    def on_message(env) -> None:
        if env.meta == "stop":
            done.set()
        else:
            box["mesh"].send(env.src, env.kind, env.request_id, None, env.buffers)

    mesh = create_mesh(
        config, 1, 2, "server", on_message=on_message, on_peer_lost=lambda rank, why: done.set(),
        valid_kinds={KIND}, master_addr="127.0.0.1", master_port=master_port or None,
    )
    box["mesh"] = mesh
    mesh.start()
    done.wait(3600)
    mesh.close(timeout_s=1.0)


def _spawn(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)


# ---------------------------------------------------------------------------------- clients


class RawClient:
    """Raw pyzmq, the caller's own thread doing send/recv."""

    def __init__(self, ctx: zmq.Context, endpoint: str, server_public: bytes | None):
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        if server_public is not None:
            self.sock.curve_serverkey = server_public
            self.sock.curve_publickey, self.sock.curve_secretkey = zmq.curve_keypair()
        self.sock.connect(endpoint)

    def send(self, payload) -> None:
        self.sock.send(payload, copy=False)

    def recv(self) -> None:
        if not self.sock.poll(30_000):
            raise TimeoutError("raw echo server did not answer within 30 s")
        self.sock.recv(copy=False)

    def close(self) -> None:
        self.sock.send(b"stop")
        self.sock.close(0)


class RawThreadedClient:
    """Raw pyzmq behind an I/O thread, as the architecture requires: queue + inproc wake-up."""

    def __init__(self, ctx: zmq.Context, endpoint: str, server_public: bytes | None):
        self._raw = RawClient(ctx, endpoint, server_public)
        self._wake_rx = ctx.socket(zmq.PAIR)
        self._wake_rx.bind(f"inproc://bench-wake-{id(self)}")
        self._wake_tx = ctx.socket(zmq.PAIR)
        self._wake_tx.connect(f"inproc://bench-wake-{id(self)}")
        self._out: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._replies: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._wake_rx, zmq.POLLIN)
        poller.register(self._raw.sock, zmq.POLLIN)
        while not self._stop:
            events = dict(poller.poll(100))
            if self._wake_rx in events:
                self._wake_rx.recv()
                with self._lock:
                    items = list(self._out)
                    self._out.clear()
                for item in items:
                    self._raw.send(item)
            if self._raw.sock in events:
                self._replies.put(self._raw.sock.recv(copy=False))

    def send(self, payload) -> None:
        with self._lock:
            self._out.append(payload)
            self._wake_tx.send(b"")

    def recv(self) -> None:
        self._replies.get(timeout=30)

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        self._wake_rx.close(0)
        self._wake_tx.close(0)
        self._raw.close()


class ZgradClient:
    """Rank 0 of a two-worker zgrad mesh; rank 1 (the server) echoes."""

    def __init__(self, mesh, replies: "CallbackReplies"):
        self.mesh, self._replies = mesh, replies

    def send(self, payload) -> None:
        self.mesh.send(1, KIND, 0, None, (payload,))

    def recv(self) -> None:
        reply = self._replies.get(timeout=30)
        if isinstance(reply, str):
            raise RuntimeError(f"echo server lost: {reply}")

    def close(self) -> None:
        self.mesh.send(1, KIND, 0, "stop")
        self.mesh.close(timeout_s=2.0)


class CallbackReplies:
    """The client mesh's ``on_message``: hands replies to the caller's thread through a queue,
    or, during :meth:`ping_pong`, sends the next ping itself on the I/O thread. The second mode
    measures the mesh alone, without the caller-to-I/O-thread hand-off that the threading model
    adds (and that the "raw+thread" column prices separately)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._left = 0
        self._t0 = 0.0
        self._samples: list[float] = []
        self._done = threading.Event()
        self.mesh = None

    def __call__(self, envelope) -> None:
        if self._left <= 0:
            self._queue.put(envelope)
            return
        now = time.perf_counter()
        self._samples.append((now - self._t0) * 1e6)
        self._left -= 1
        if self._left == 0:
            self._done.set()
            return
        self._t0 = time.perf_counter()
        self.mesh.send(1, KIND, 0, None, (b"8 bytes!",))

    def put(self, item) -> None:
        self._queue.put(item)

    def get(self, timeout: float):
        return self._queue.get(timeout=timeout)

    def ping_pong(self, iters: int) -> list[float]:
        """Round trips driven from the I/O thread; returns the samples in µs."""
        self._samples, self._left = [], iters
        self._done.clear()
        self._t0 = time.perf_counter()
        self.mesh.send(1, KIND, 0, None, (b"8 bytes!",))
        if not self._done.wait(60):
            raise RuntimeError("the zgrad echo server stopped answering")
        return self._samples


# ---------------------------------------------------------------------------------- measuring


def latency_block_us(client, iters: int) -> list[float]:
    payload = b"8 bytes!"
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        client.send(payload)
        client.recv()
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples


def throughput_block_mb_s(client, payload, window: int, seconds: float, min_iters: int) -> float:
    """Keep ``window`` echoes in flight for about ``seconds``; return MB/s both ways."""
    for _ in range(window):
        client.send(payload)
    done = 0
    t0 = time.perf_counter()
    while done < min_iters or time.perf_counter() - t0 < seconds:
        client.recv()
        done += 1
        client.send(payload)
    elapsed = time.perf_counter() - t0
    for _ in range(window):
        client.recv()
    return 2 * len(payload) * done / elapsed / 1e6


def compare(clients: dict, s: dict, window: int) -> dict:
    """Measure every client in alternating blocks; return {client: {metric: value}}."""
    lat = {name: [] for name in clients}
    lat["zgrad (I/O thread)"] = []
    tput = {name: {mib: [] for mib in SIZES_MIB} for name in clients}
    for name, client in clients.items():  # warm-up: connections, pools, page faults
        latency_block_us(client, 50)
    payloads = {mib: bytearray(os.urandom(MIB)) * mib for mib in SIZES_MIB}
    for _ in range(s["blocks"]):
        for name, client in clients.items():
            lat[name] += latency_block_us(client, s["lat_iters"])
        lat["zgrad (I/O thread)"] += clients["zgrad"]._replies.ping_pong(s["lat_iters"])
        for mib in SIZES_MIB:
            for name, client in clients.items():
                if name in ("raw", "zgrad"):
                    tput[name][mib].append(throughput_block_mb_s(client, payloads[mib], window, s["tput_s"], s["tput_min_iters"]))
    out = {}
    for name in lat:
        out[name] = {"latency_us": statistics.median(lat[name])}
        if name in ("raw", "zgrad"):
            out[name] |= {f"echo_{mib}MiB_MB_s": statistics.median(tput[name][mib]) for mib in SIZES_MIB}
    return out


def run_pair(transport: str, curve: bool, tmp: str, s: dict, window: int, cma: str = "auto") -> dict:
    ctx = zmq.Context()
    server_public, server_secret = zmq.curve_keypair()
    raw_endpoint = "tcp://127.0.0.1:0" if transport == "tcp" else f"ipc://{tmp}/raw-{int(curve)}.sock"
    raw_servers = [_spawn(["--serve-raw", raw_endpoint.replace(".sock", f"-{i}.sock"),
                           "--curve-secret", server_secret.decode() if curve else ""]) for i in range(2)]
    raw_config = {"job": {"name": f"bench-{transport}-{int(curve)}"},
                  "transport": {"kind": transport, "ipc_dir": tmp, "connect_timeout_s": 30.0, "cma": cma}}
    if curve:
        key_dir = os.path.join(tmp, "keys")
        if not os.path.isdir(key_dir):
            generate_keys(key_dir, 2)
        raw_config["security"] = {"curve": True, "key_dir": key_dir}
    replies = CallbackReplies()
    mesh = create_mesh(parse_config(raw_config), 0, 2, "client", on_message=replies,
                       on_peer_lost=lambda rank, why: replies.put(why), valid_kinds={KIND})
    port = int(mesh.bind().rsplit(":", 1)[1]) if transport == "tcp" else 0
    zgrad_server = _spawn(["--serve-zgrad", json.dumps(raw_config), "--master-port", str(port)])
    replies.mesh = mesh
    clients: dict = {}
    try:
        mesh.start()
        public = server_public if curve else None
        clients["raw"] = RawClient(ctx, raw_servers[0].stdout.readline().strip(), public)
        clients["raw+thread"] = RawThreadedClient(ctx, raw_servers[1].stdout.readline().strip(), public)
        clients["zgrad"] = ZgradClient(mesh, replies)
        result = compare(clients, s, window)
        result["zgrad_stats"] = mesh.stats()
        return result
    finally:
        for client in clients.values():
            client.close()
        mesh.close(timeout_s=2.0)
        for proc in (*raw_servers, zgrad_server):
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            proc.stdout.close()
        ctx.term()


# ---------------------------------------------------------------------------------- report


def table(results: dict) -> str:
    """Latency rows: "caller" sends from the user's thread (zgrad then pays the hand-off to its
    I/O thread, compared with raw+thread, which pays the same); "mesh" drives the ping-pong from
    the I/O thread's callback (no hand-off, compared with raw pyzmq on its own thread)."""
    head = f"{'transport':<10}{'curve':<7}{'metric':<22}{'raw pyzmq':>11}{'raw+thread':>12}{'zgrad':>10}{'zgrad overhead':>26}"
    rows = [head, "-" * len(head)]
    for key, res in results.items():
        transport, curve = key.split("/")
        raw, threaded, zg = res["raw"], res["raw+thread"], res["zgrad"]
        r, t, z = raw["latency_us"], threaded["latency_us"], zg["latency_us"]
        m = res["zgrad (I/O thread)"]["latency_us"]
        rows.append(f"{transport:<10}{curve:<7}{'rtt 8 B caller (µs)':<22}{r:>11.1f}{t:>12.1f}{z:>10.1f}"
                    f"{f'{z - t:+.1f} µs vs raw+thread':>26}")
        rows.append(f"{transport:<10}{curve:<7}{'rtt 8 B mesh (µs)':<22}{r:>11.1f}{'':>12}{m:>10.1f}{f'{m - r:+.1f} µs vs raw':>26}")
        for mib in SIZES_MIB:
            metric = f"echo_{mib}MiB_MB_s"
            r, z = raw[metric], zg[metric]
            rows.append(f"{transport:<10}{curve:<7}{f'echo {mib} MiB (MB/s)':<22}{r:>11.0f}{'':>12}{z:>10.0f}{f'{z / r:.2f}x raw':>26}")
        sent = res["zgrad_stats"].get("cma_sent", 0)  # same-host single copy ([transport] cma)
        rows.append(f"{transport:<10}{curve:<7}{'zgrad single copy':<22}{'':>33}"
                    f"{(f'on: {sent} buffers by ticket' if sent else 'off / not used'):>26}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few iterations: a smoke run")
    parser.add_argument("--transports", default="tcp,ipc")
    parser.add_argument("--curve", default="off,on", help="comma list of off/on")
    parser.add_argument("--window", type=int, default=4, help="echoes in flight in the throughput runs")
    parser.add_argument("--cma", default="auto", choices=["auto", "off"],
                        help="zgrad's [transport] cma: same-host single copy of big buffers")
    parser.add_argument("--out", default=str(ROOT / "results" / "transport.json"))
    parser.add_argument("--serve-raw", help=argparse.SUPPRESS)
    parser.add_argument("--curve-secret", default="", help=argparse.SUPPRESS)
    parser.add_argument("--serve-zgrad", help=argparse.SUPPRESS)
    parser.add_argument("--master-port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_raw:
        return _serve_raw(args.serve_raw, args.curve_secret or None)
    if args.serve_zgrad:
        return _serve_zgrad(args.serve_zgrad, args.master_port)
    s = _settings(args.quick)
    results = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="zgb") as tmp:
        for transport in args.transports.split(","):
            for curve in args.curve.split(","):
                key = f"{transport}/{curve}"
                print(f"running {key} ...", file=sys.stderr, flush=True)
                results[key] = run_pair(transport, curve == "on", tmp, s, args.window, args.cma)
    print(table(results))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"quick": args.quick, "window": args.window, "cma": args.cma, "seconds": round(time.perf_counter() - t0, 1),
            "python": sys.version.split()[0], "pyzmq": zmq.pyzmq_version(), "libzmq": zmq.zmq_version(),
            "cpus": os.cpu_count(), "machine": platform.machine(), "settings": s}
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

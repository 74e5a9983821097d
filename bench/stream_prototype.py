"""Prototype measurement (not a zgrad feature): zgrad's own rpc_sync work over a plain TCP stream.

A small ``rpc_sync`` costs about twice raw pyzmq's ping-pong (``bench/rpc.py``). This measures how
much of that is zgrad's Python and how much the ZeroMQ path it rides on: every ZeroMQ message
wakes the sender's I/O thread and the receiver's on top of the receiving thread, three wake-ups
where a socket the threads own directly needs one. The prototype runs zgrad's real work for each
call — the caller's ``_call_message`` (codec, hooks) and frame encoding, the callee's frame
checks, ``RpcAgent._on_message`` (schema, target, decode, run, encode, reply frames) and the
caller's reply decoding — but moves the frames over one TCP connection (TCP_NODELAY,
length-prefixed, blocking calls on the threads themselves): the callee answers from a thread
that blocks in ``recv`` on it, its reply taken from ``mesh.reply`` by patching the loop's
``reply_now`` for that connection. The design it argues for: caller-direct requests on a stream
socket each calling thread owns, polled by the callee's leader beside its ZeroMQ sockets
(``zmq_poll`` takes plain file descriptors) and answered on the same connection.

Prints, alternating in one run (medians of the blocks): zgrad's ``rpc_sync``, the prototype, raw
pyzmq (DEALER/ROUTER, as in ``bench/rpc.py``) and a plain TCP echo of the same 16 bytes; writes
``bench/results/stream_prototype.json``.

    python bench/stream_prototype.py          # about a minute
    python bench/stream_prototype.py --quick
"""

from __future__ import annotations

import json
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import _procs  # noqa: E402

LENGTH = struct.Struct("!I")
TOKEN = b"stream-prototype"  # the reply_to of the prototype's envelopes


def _receive_exactly(conn: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = conn.recv_into(view[got:])
        if not k:
            raise ConnectionError("the prototype connection closed")
        got += k
    return buf


def _send_frames(conn: socket.socket, frames: list) -> None:
    data = frames[0] if len(frames) == 1 else b"".join(bytes(f) for f in frames)
    conn.sendall(LENGTH.pack(len(data)) + bytes(data))


def _decode(data: bytearray, mesh) -> tuple:
    from zgrad.transport import frames as fr
    return fr.decode([data], valid_kinds=mesh._valid_kinds, max_message_bytes=1 << 30,
                     take_buffer=lambda k: memoryview(bytearray(k)))


def _callee(agent) -> None:
    """Serve the prototype connection on a thread of its own (rank 1)."""
    import _zg_targets as T
    from zgrad.distributed.rpc.state import bind_thread
    from zgrad.transport.envelope import Envelope

    mesh = agent.mesh
    listener = socket.create_server(("127.0.0.1", 0))
    T.PROTOTYPE["port"] = listener.getsockname()[1]
    connection = {}
    reply_now = mesh._loop.reply_now

    def reply_on_stream(dst, routing_id, frames, nbytes):
        if routing_id != TOKEN:
            return reply_now(dst, routing_id, frames, nbytes)
        _send_frames(connection["conn"], frames)
        return True

    mesh._loop.reply_now = reply_on_stream

    def serve() -> None:
        listener.settimeout(300)
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection["conn"] = conn
        bind_thread(agent)
        while True:
            try:
                (size,) = LENGTH.unpack(_receive_exactly(conn, LENGTH.size))
                data = _receive_exactly(conn, size)
            except (ConnectionError, OSError):
                return
            kind, flags, request_id, meta, buffers = _decode(data, mesh)
            agent._on_message(Envelope(0, kind, flags, request_id, meta, buffers, False, TOKEN))

    threading.Thread(target=serve, daemon=True, name="stream-prototype").start()


def _caller(rpc, agent, settings: dict) -> dict:
    """Measure on rank 0, alternating blocks."""
    import numpy as np
    import zgrad
    import _zg_targets as T
    from zgrad.distributed.rpc.messages import Kind, check_meta
    from zgrad.transport.envelope import Envelope

    mesh = agent.mesh
    x = zgrad.from_numpy(np.zeros(4, dtype=np.float32))
    conn = socket.create_connection(("127.0.0.1", rpc.rpc_sync("worker1", T.prototype_port)), timeout=60)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lock = threading.Lock()

    def prototype() -> None:
        meta, buffers, what = agent._call_message(1, T.echo, (x,), None, 60.0)
        request_id = agent.next_request_id()
        with lock:  # the pending-call bookkeeping rpc_sync does
            agent._pending[request_id] = None
        frames, _ = mesh._frames(1, Kind.CALL, request_id, meta, buffers)
        _send_frames(conn, frames)
        (size,) = LENGTH.unpack(_receive_exactly(conn, LENGTH.size))
        kind, flags, got, reply_meta, reply_buffers = _decode(_receive_exactly(conn, size), mesh)
        with lock:
            agent._pending.pop(request_id, None)
        envelope = Envelope(1, kind, flags, got, reply_meta, reply_buffers, False)
        check_meta(envelope.kind, envelope.meta)
        agent._reply_value(envelope, True, None, what)

    raw = subprocess.Popen([sys.executable, str(ROOT / "rpc.py"), "--raw-server"], stdout=subprocess.PIPE, text=True,
                           env=_procs.worker_env())
    plain = subprocess.Popen([sys.executable, str(ROOT / "rpc.py"), "--socket-server"], stdout=subprocess.PIPE,
                             text=True, env=_procs.worker_env())
    import zmq
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.linger = 0
    dealer.connect(f"tcp://127.0.0.1:{int(raw.stdout.readline())}")
    tcp = socket.create_connection(("127.0.0.1", int(plain.stdout.readline())), timeout=60)
    tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    payload = bytes(16)

    def raw_pyzmq() -> None:
        dealer.send(payload, copy=False)
        if not dealer.poll(60_000):
            raise TimeoutError("raw echo server did not answer within 60 s")
        dealer.recv(copy=False)

    def plain_tcp() -> None:
        tcp.sendall(payload)
        _receive_exactly(tcp, len(payload))

    ways = {"zgrad rpc_sync": lambda: rpc.rpc_sync("worker1", T.echo, args=(x,)),
            "zgrad's work over a TCP stream": prototype, "raw pyzmq": raw_pyzmq, "plain TCP echo": plain_tcp}
    blocks: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for _ in range(settings["blocks"]):
            for name, call in ways.items():
                for _ in range(100):
                    call()
                times = []
                for _ in range(settings["iters"]):
                    t = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - t)
                blocks[name].append(statistics.median(times) * 1e6)
    finally:
        dealer.send(b"stop")
        tcp.sendall(b"stop")
        for server in (raw, plain):
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
        conn.close()
    return {name: {"median_us": statistics.median(v), "blocks_us": v} for name, v in blocks.items()}


def _worker(rank: int, spec: dict) -> None:
    rpc = _procs.init_worker("zgrad", rank, spec)
    from zgrad.distributed.rpc.state import current_agent

    agent = current_agent()
    try:
        if rank == 1:
            _callee(agent)
        else:
            _procs.emit(_caller(rpc, agent, spec["settings"]))
    finally:
        rpc.shutdown()


def main() -> None:
    args = _procs.bench_args(__doc__).parse_args()
    if args.worker:
        return _worker(args.rank, json.loads(args.spec))
    settings = {"blocks": 2, "iters": 300} if args.quick else {"blocks": 5, "iters": 2000}
    print("stream prototype: zgrad's rpc_sync work over a plain TCP stream vs over ZeroMQ (2 processes, loopback)")
    results = _procs.run_pair(__file__, "zgrad", {"settings": settings}, 600)
    raw = results["raw pyzmq"]["median_us"]
    rows = [[name, f"{r['median_us']:.0f}", f"{r['median_us'] / raw:.2f}x", " ".join(f"{b:.0f}" for b in r["blocks_us"])]
            for name, r in results.items()]
    _procs.print_table(["round trip, 16 B tensor", "µs (median)", "vs raw pyzmq", "blocks"], rows)
    out = ROOT / "results" / "stream_prototype.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"quick": args.quick, "settings": settings, "results": results}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()

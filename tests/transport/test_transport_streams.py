"""Caller-direct requests over plain stream sockets (``streams.py``, ``stream_inbound.py``).

The reader and writer on their own (any cut of the bytes, big messages, garbage, a peer that does
not read); the announcement in the worker table (tcp, ipc; none with CURVE, inproc, or turned
off); requests and replies between meshes, small, chunked and after the callee closed; and a
worker whose stream listener gets garbage, bad hellos, silence and oversize claims from a raw
peer: it closes those connections, counts each, and keeps serving. Loopback only, bounded.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

import pytest
from test_transport_fuzz import mutate, valid_message
from transport_world import RAW_PEER_SESSION, target_with_raw_peer

from zgrad.errors import WorkerUnavailableError
from zgrad.transport import frames as fr
from zgrad.transport.caller_sockets import DIRECT_ID, DIRECT_MAGIC
from zgrad.transport.loop.stream_inbound import StreamConnection
from zgrad.transport.streams import (STREAM_HEAD, STREAM_MAGIC, StreamReader, StreamStalled, connect,
                                     send_message, stream_address)

pytestmark = pytest.mark.timeout(60)
KINDS = frozenset({1, 2})


class Pieces:
    """A fake socket that hands out ``data`` in pieces of random sizes, then EOF."""

    def __init__(self, data: bytes, rng: random.Random, max_piece: int) -> None:
        self.data, self.pos, self.rng, self.max_piece = data, 0, rng, max_piece

    def recv_into(self, view, nbytes=0, flags=0):
        n = min(len(view), len(self.data) - self.pos, self.rng.randint(1, self.max_piece))
        view[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def wire(frames) -> bytes:
    """One message as the writer puts it on a stream."""
    a, b = socket.socketpair()
    with a, b:
        done = []
        reader = threading.Thread(target=lambda: done.append(b"".join(iter(lambda: b.recv(1 << 20), b""))))
        reader.start()
        send_message(a, frames, time.monotonic() + 10)
        a.shutdown(socket.SHUT_WR)
        reader.join(10)
    return done[0]


def read_all(reader: StreamReader, sock) -> list[list[bytes]]:
    out = []
    while True:
        try:
            messages = reader.feed(sock)
        except EOFError:
            return out
        out.extend([bytes(p) for p in parts] for parts in messages)


@pytest.mark.parametrize("max_piece", [1, 7, 5000, 1 << 20])
def test_the_reader_cuts_any_split_of_the_bytes_into_the_messages_sent(max_piece):
    rng = random.Random(max_piece)
    # Pieces of a few bytes cut the heads and frame lengths anywhere; feeding megabytes that way
    # only repeats the same cuts, so small pieces get small frames, and one big frame each (a
    # message received into a buffer of its own).
    sizes = [0, 5, 100, 3000] if max_piece < 100 else [0, 5, 100, 3000, 70_000, 300_000]
    sent = []
    for _ in range(40):
        nframes = rng.choice([1, 1, 2, 3, 9])
        sent.append([os.urandom(rng.choice(sizes)) for _ in range(nframes)])
    sent.insert(rng.randrange(len(sent)), [os.urandom(70_000)])
    data = b"".join(wire(frames) for frames in sent)
    assert read_all(StreamReader(1 << 22), Pieces(data, rng, max_piece)) == sent


@pytest.mark.parametrize("damage, reason", [
    (lambda head: b"nope" + head[4:], "bad_stream"),
    (lambda head: STREAM_HEAD.pack(STREAM_MAGIC, 0, 8), "bad_stream"),
    (lambda head: STREAM_HEAD.pack(STREAM_MAGIC, 1 << 20, 8 << 20), "bad_stream"),
    (lambda head: STREAM_HEAD.pack(STREAM_MAGIC, 1, 1 << 40), "too_large"),
    (lambda head: STREAM_HEAD.pack(STREAM_MAGIC, 2, 4), "bad_stream"),
])
def test_the_reader_refuses_a_malformed_head(damage, reason):
    data = wire([b"hello", b"world"])
    bad = damage(data[:STREAM_HEAD.size]) + data[STREAM_HEAD.size:]
    with pytest.raises(fr.Rejected) as caught:
        read_all(StreamReader(1 << 20), Pieces(bad, random.Random(0), 1 << 16))
    assert caught.value.reason == reason


def test_the_reader_refuses_frame_lengths_that_do_not_add_up():
    data = bytearray(wire([b"hello", b"world"]))
    struct.pack_into("!Q", data, STREAM_HEAD.size, 4)  # the first frame claims 4 bytes, not 5
    with pytest.raises(fr.Rejected, match="add up"):
        read_all(StreamReader(1 << 20), Pieces(bytes(data), random.Random(0), 1 << 16))


def test_a_writer_whose_peer_does_not_read_stalls_by_its_deadline():
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        start = time.monotonic()
        with pytest.raises(StreamStalled):
            send_message(a, [bytes(64 << 20)], time.monotonic() + 0.3)
        assert 0.25 < time.monotonic() - start < 3


def test_stream_addresses_follow_the_zeromq_endpoint():
    assert stream_address("tcp://127.0.0.1:5000", "tcp://127.0.0.1:5000") == (("tcp", "127.0.0.1"), "tcp://127.0.0.1:")
    assert stream_address("tcp://0.0.0.0:5000", "tcp://10.1.2.3:5000") == (("tcp", "0.0.0.0"), "tcp://10.1.2.3:")
    assert stream_address("tcp://[::1]:5000", "tcp://[::1]:5000") == (("tcp", "::1"), "tcp://[::1]:")
    assert stream_address("ipc:///tmp/x/w0", "ipc:///tmp/x/w0") == (("ipc", "/tmp/x/w0.stream"), "ipc:///tmp/x/w0.stream")
    assert stream_address("ipc:///" + "d" * 120, "ipc:///" + "d" * 120) is None
    assert stream_address("inproc://w0", "inproc://w0") is None


# -- meshes ---------------------------------------------------------------------------------------


def replying(rank, worker):
    """Answer every request of kind 1 with kind 2: its meta, and the buffer it names the size of."""
    def handle(envelope):
        worker.inbox.put(envelope)
        if envelope.kind == 1:
            size = envelope.meta.get("reply_bytes", 0) if isinstance(envelope.meta, dict) else 0
            worker.mesh.reply(envelope, 2, envelope.meta, [bytes(range(256)) * (size // 256)] if size else [])
    return handle


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_requests_and_replies_go_over_the_announced_stream(worlds, kind):
    workers = worlds.world(kind, 2, on_message=replying, chunk_mb=1)
    table = workers[0].mesh.workers
    assert all(entry.stream.startswith(f"{kind}://") for entry in table)
    a, b = workers[0].mesh, workers[1].mesh
    for size in (0, 4096, 3 << 20):  # the 3 MiB reply goes as three chunks
        reply = a.call(1, 1, 100 + size, {"reply_bytes": size}, [b"x" * 10], timeout_s=10)
        assert (reply.kind, reply.request_id, reply.meta) == (2, 100 + size, {"reply_bytes": size})
        assert b"".join(bytes(v) for v in reply.buffers) == (bytes(range(256)) * (size // 256) if size else b"")
        assert type(workers[1].get().reply_to) is StreamConnection
    stats = b.stats()  # one per calling thread and peer, kept, and a's link
    assert (stats["stream_connections"], stats["stream_links"]) == (2, 1)
    paths = [entry.stream[6:] for entry in table]
    worlds.close_all()
    if kind == "ipc":
        assert not any(os.path.exists(p) for p in paths), "the Unix stream sockets were not removed"


def test_no_stream_with_curve_over_inproc_or_when_turned_off(worlds, tmp_path):
    from zgrad.transport import generate_keys

    generate_keys(tmp_path, 2)
    curve = worlds.workers(worlds.config("tcp", security={"curve": True, "key_dir": str(tmp_path)}), 2)
    worlds.start(curve)
    off = worlds.world("tcp", 2, on_message=replying, direct_streams=False)
    inproc = worlds.world("inproc", 2)
    for world in (curve, off, inproc):
        assert [entry.stream for entry in world[0].mesh.workers] == ["", ""]
        assert all(w.mesh.stats().get("stream_links", 0) == 0 for w in world)  # the links are DEALERs
    reply = off[0].mesh.call(1, 1, 7, {}, [], timeout_s=10)  # the ZeroMQ direct path
    assert reply.request_id == 7 and type(off[1].get().reply_to) is bytes


def test_a_caller_waiting_on_a_stream_learns_at_once_that_the_callee_closed(worlds):
    workers = worlds.world("tcp", 2, heartbeat_timeout_s=60.0)  # only the stream can tell it in time
    a, b = workers[0].mesh, workers[1].mesh
    threading.Timer(0.5, b.close, kwargs={"timeout_s": 1.0}).start()
    start = time.monotonic()
    with pytest.raises(WorkerUnavailableError, match="w1"):
        a.call(1, 1, 1, {}, [], timeout_s=30)  # never answered: w1 queues it and closes
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("kind", ["tcp", "inproc"])
def test_a_thread_that_ends_closes_its_sockets(worlds, kind):
    workers = worlds.world(kind, 2, on_message=replying)
    a, b = workers[0].mesh, workers[1].mesh
    threads = [threading.Thread(target=a.call, args=(1, 1, i, {}, [], 10)) for i in range(5)]
    for thread in threads:
        thread.start()
        thread.join(10)
    assert a.stats()["direct_requests"] == 5
    wait_until(lambda: not a._callers._all)  # every socket those threads made is closed
    if kind == "tcp":  # and the callee closed its end of each stream
        wait_until(lambda: b.stats().get("stream_closed", 0) == 5)
    assert a.call(1, 1, 99, {}, [], timeout_s=10).request_id == 99  # this thread makes its own


# -- a raw peer on the stream listener -----------------------------------------------------------


@pytest.fixture
def worker_and_raw_peer():
    with target_with_raw_peer("streams", 3.0, KINDS) as (mesh, inbox, peer, _):
        stream = peer.table["workers"][0][3]
        assert stream.startswith("tcp://127.0.0.1:")
        yield mesh, inbox, stream


def hello(rank=1, session=RAW_PEER_SESSION, magic=DIRECT_MAGIC):
    return [DIRECT_ID.pack(magic, rank, session, 1)]


def wait_until(predicate, timeout_s=20.0):
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.02)


def closed_by_peer(sock, timeout_s=10.0) -> bool:
    sock.settimeout(timeout_s)
    try:
        while sock.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass
    return True


def call(stream, request_id, text):
    """One good call from a fresh connection: hello, request; the envelope the worker got."""
    sock = connect(stream, 5)
    send_message(sock, hello(), time.monotonic() + 5)
    send_message(sock, fr.encode(1, 0, request_id, fr.encode_meta(text), [memoryview(b"ok")], 1 << 20),
                 time.monotonic() + 5)
    return sock


def test_a_worker_closes_and_counts_bad_stream_connections_and_keeps_serving(worker_and_raw_peer):
    mesh, inbox, stream = worker_and_raw_peer
    rng = random.Random(99)
    cases = {
        "noise": lambda s: s.sendall(os.urandom(200)),
        "bad hello magic": lambda s: send_message(s, hello(magic=b"evil"), time.monotonic() + 5),
        "hello of another session": lambda s: send_message(s, hello(session=1), time.monotonic() + 5),
        "hello of an unknown rank": lambda s: send_message(s, hello(rank=9), time.monotonic() + 5),
        "oversize claim": lambda s: s.sendall(STREAM_HEAD.pack(STREAM_MAGIC, 1, 1 << 62)),
        "control kind": lambda s: [send_message(s, m, time.monotonic() + 5) for m in
                                   (hello(), fr.encode(fr.KIND_GOODBYE, 0, 0, fr.encode_meta(None), [], 1 << 20))],
    }
    for name, send in cases.items():
        with connect(stream, 5) as sock:
            send(sock)
            assert closed_by_peer(sock), name
    reasons = mesh.stats()["rejected"]
    assert {"bad_stream", "unknown_peer", "too_large", "bad_control"} <= set(reasons), reasons

    mutated = 0
    for _ in range(300):  # a valid hello, then damaged messages: each closes its connection or is served
        with connect(stream, 5) as sock:
            send_message(sock, hello(), time.monotonic() + 5)
            send_message(sock, mutate(rng, valid_message(rng)), time.monotonic() + 5)
            mutated += 1
    silent = connect(stream, 5)  # says nothing: closed after connect_timeout_s (3 s)
    assert closed_by_peer(silent, timeout_s=15)
    silent.close()
    wait_until(lambda: mesh.stats()["rejected"].get("no_hello", 0) == 1)

    while not inbox.empty():
        inbox.get()
    with call(stream, 4242, "still there?") as sock:
        envelope = inbox.get(timeout=10)
        assert (envelope.src, envelope.request_id, envelope.meta, bytes(envelope.buffers[0])) == (1, 4242, "still there?", b"ok")
        mesh.reply(envelope, 2, "yes", [b"fine"])
        reader = StreamReader(1 << 20)
        sock.settimeout(10)
        messages = []
        while not messages:
            messages = reader.feed(sock)
        kind, _, request_id, meta, buffers = fr.decode(messages[0], valid_kinds=KINDS, max_message_bytes=1 << 20,
                                                       take_buffer=bytearray)
        assert (kind, request_id, meta, bytes(buffers[0])) == (2, 4242, "yes", b"fine")
    stats = mesh.stats()
    assert stats["stream_connections"] >= len(cases) + mutated + 2
    print(f"\nstream fuzz: {len(cases)} bad connections, {mutated} mutated messages; stats: {stats}")


def test_a_reply_to_a_caller_that_left_is_dropped_without_harm(worker_and_raw_peer):
    mesh, inbox, stream = worker_and_raw_peer
    sock = call(stream, 1, "going")
    envelope = inbox.get(timeout=10)
    sock.close()
    time.sleep(0.2)
    mesh.reply(envelope, 2, "gone", [bytes(8 << 20)])  # nobody reads: refused or reset, not raised
    with call(stream, 2, "next") as sock:
        assert inbox.get(timeout=10).request_id == 2


def test_a_caller_waits_for_room_in_a_full_unix_listener_backlog_up_to_its_timeout(short_tmp):
    path = os.path.join(short_tmp, "w0.stream")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(0)
    waiting = []
    try:
        while True:  # fill the backlog: then the kernel refuses at once (EAGAIN), unlike TCP
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            waiting.append(sock)
            if sock.connect_ex(path) != 0:
                break
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="took no connection"):
            connect(f"ipc://{path}", 0.3)
        assert 0.25 < time.monotonic() - start < 3
        accepting = threading.Timer(0.2, lambda: listener.accept()[0].close())
        accepting.start()
        connect(f"ipc://{path}", 10).close()  # room made 0.2 s later: connected
        accepting.join(10)
    finally:
        for sock in waiting:
            sock.close()
        listener.close()

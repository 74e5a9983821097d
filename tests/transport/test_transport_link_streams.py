"""Links on stream sockets (``links/stream.py``): when CURVE is off, each worker's link to a peer that
announced a stream socket is a stream connection, not a DEALER.

Every link of a world rides a stream (rank 0's too, moved there on the table); the messages of
a pair keep their order under load from many threads and from the leader itself, while both
leaders write more than the kernel holds to each other; a thread writes a link itself when
nothing waits there, and the leader writes what the kernel left of it; everything sent before a close arrives
before the goodbye; a worker whose link a peer closes drops what it sends there (counted) and
loses the peer by its silence; a raw connection that claims to be a link is checked like a
routing id, a bad message on it is dropped alone and a second link for a rank is refused.
Loopback only, bounded.
"""

from __future__ import annotations

import hashlib
import queue
import random
import socket
import threading
import time

import pytest
import zmq
from transport_world import RAW_PEER_SESSION, WAIT_S, control, target_with_raw_peer

from zgrad.config import parse_config
from zgrad.errors import WorkerUnavailableError
from zgrad.transport import create_mesh
from zgrad.transport import frames as fr
from zgrad.transport.loop.inbound import routing_id
from zgrad.transport.streams import StreamReader, connect, send_message

pytestmark = pytest.mark.timeout(90)
KINDS = frozenset({1, 2, 3})
MIB = 1 << 20


def payload(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def digest(buffers) -> str:
    return hashlib.sha1(b"".join(bytes(b) for b in buffers)).hexdigest()


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_every_link_rides_a_stream_and_keeps_its_order_while_both_leaders_write_more_than_the_kernel_holds(worlds, kind):
    received: dict[int, list] = {0: [], 1: [], 2: []}

    def handler(rank, worker):
        def handle(envelope):
            entry = [envelope.src, envelope.kind, envelope.request_id, envelope.meta, None]
            received[rank].append(entry)  # in arrival order, before the (slow) digest
            entry[4] = digest(envelope.buffers)
            if envelope.kind == 3:  # answered by the leader itself, a big message back
                worker.mesh.send(envelope.src, 2, envelope.request_id, {"echo": envelope.request_id},
                                 [payload(envelope.request_id, 2 * MIB)])
        return handle

    workers = worlds.world(kind, 3, on_message=handler, cma="off", chunk_mb=1)
    for worker in workers:
        stats = worker.mesh.stats()
        assert stats["stream_links"] == 2, stats  # from both peers; rank 0's links moved there too

    a, b = workers[1].mesh, workers[2].mesh
    sizes = [0, 10, 5000, 70_000, 3 * MIB]
    per_thread = 60

    def send_from(mesh, dst, tag):
        rng = random.Random(tag)
        for i in range(per_thread):
            size = rng.choice(sizes)
            kind_ = 3 if i % 10 == 0 else 1
            mesh.send(dst, kind_, tag * 1000 + i, {"tag": tag, "i": i, "size": size}, [payload(tag * 1000 + i, size)])

    threads = [threading.Thread(target=send_from, args=(a, 2, t)) for t in (1, 2, 3)]
    threads += [threading.Thread(target=send_from, args=(b, 1, t)) for t in (4, 5)]
    threads += [threading.Thread(target=send_from, args=(workers[0].mesh, 2, 6))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads)
    echoes = per_thread // 10
    expected = {1: 2 * per_thread + 3 * echoes, 2: 4 * per_thread + 2 * echoes}  # requests + echoes of kind 3
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (any(len(received[r]) < n for r, n in expected.items())
                                           or any(e[4] is None for r in expected for e in received[r])):
        time.sleep(0.05)
    assert {r: len(received[r]) for r in expected} == expected

    for rank in (1, 2):
        by_tag: dict[int, list[int]] = {}
        for src, kind_, request_id, meta, got in received[rank]:
            if kind_ == 2:  # an echo (handlers that ran on different threads are not ordered)
                assert meta == {"echo": request_id} and got == digest([payload(request_id, 2 * MIB)])
                continue
            assert got == digest([payload(request_id, meta["size"])]) and request_id % 1000 == meta["i"]
            by_tag.setdefault(meta["tag"], []).append(meta["i"])
        for tag, order in by_tag.items():
            assert order == sorted(order), f"rank {rank}: messages of thread {tag} out of order"
    for worker in workers:
        stats = worker.mesh.stats()
        assert stats["rejected_total"] == 0 and stats.get("dropped", 0) == 0, stats


def test_a_sending_thread_writes_the_link_itself_and_what_the_kernel_leaves_the_leader_writes_in_order(worlds):
    """A thread other than the I/O thread writes its message on the stream link itself when
    nothing waits for that peer; what the kernel does not take waits in the link's queue for the
    leader, and the messages sent meanwhile go behind it through the outbox, in order."""
    release = threading.Event()
    received: list = []

    def handler(rank, worker):
        def handle(envelope):
            received.append((envelope.request_id, envelope.meta, digest(envelope.buffers)))
            if envelope.meta == "hold":  # the leader keeps its role (no allow_takeover): nobody reads
                release.wait(WAIT_S)
        return handle

    workers = worlds.world("tcp", 2, on_message=handler, cma="off")
    a = workers[0].mesh
    before = a.stats()
    a.send(1, 1, 0, "hold", [])
    deadline = time.monotonic() + WAIT_S
    while not received and time.monotonic() < deadline:
        time.sleep(0.01)
    big = payload(1, 48 * MIB)  # more than both kernel buffers of a loopback connection hold
    sent = {}

    def send_all():
        a.send(1, 1, 1, "big", [big])
        for i in range(2, 22):
            a.send(1, 1, i, "small", [payload(i, 1000)])
        sent["done"] = True

    sender = threading.Thread(target=send_all)
    sender.start()
    sender.join(WAIT_S)
    assert sent == {"done": True}  # nothing blocked although the peer reads nothing
    assert len(received) == 1
    release.set()
    deadline = time.monotonic() + WAIT_S
    while len(received) < 22 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r[0] for r in received] == list(range(22))
    assert received[1][2] == digest([big])
    assert all(r[2] == digest([payload(r[0], 1000)]) for r in received[2:])
    middle = a.stats()
    a.send(1, 1, 22, "after the backlog", [])  # the link is empty again: the thread writes it
    deadline = time.monotonic() + WAIT_S
    while len(received) < 23 and time.monotonic() < deadline:
        time.sleep(0.01)
    after = a.stats()
    assert middle.get("link_thread_writes", 0) >= before.get("link_thread_writes", 0) + 2  # "hold" and "big"
    assert after["link_thread_writes"] == middle["link_thread_writes"] + 1
    assert after["messages_out"] - before.get("messages_out", 0) == 23  # every message counted once
    assert after.get("dropped", 0) == 0 and after["rejected_total"] == 0


def test_everything_sent_before_a_close_arrives_before_the_goodbye(worlds):
    workers = worlds.world("tcp", 2, cma="off", chunk_mb=1)
    a, b = workers[0], workers[1]
    for i in range(300):
        a.mesh.send(1, 1, i, i, [payload(i, MIB if i % 50 == 0 else 64)])
    a.mesh.close(timeout_s=10)
    rank, why = b.lost.get(timeout=WAIT_S)
    assert rank == 0 and "closed" in why
    got = []
    while not b.inbox.empty():
        got.append(b.inbox.get())
    assert [e.request_id for e in got] == list(range(300))
    assert all(digest(e.buffers) == digest([payload(e.meta, MIB if e.meta % 50 == 0 else 64)]) for e in got)


# -- a peer that announces a stream, played by hand ----------------------------------------------


def read_messages(reader: StreamReader, sock: socket.socket, until_kind: int, read: list,
                  timeout_s: float = WAIT_S) -> list[tuple]:
    """Decoded messages from a link stream until one of ``until_kind`` (included); ``read``
    holds the undecoded ones a receive brought beyond it."""
    got = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        while read:
            got.append(fr.decode(read.pop(0), valid_kinds=KINDS, max_message_bytes=1 << 30, take_buffer=bytearray))
            if got[-1][0] == until_kind:
                return got
        read.extend(reader.feed(sock))
    raise AssertionError(f"no message of kind {until_kind:#x} within {timeout_s} s; got {[g[0] for g in got]}")


def test_a_link_its_peer_closes_drops_what_is_sent_there_and_the_peer_is_lost_by_its_silence():
    config = parse_config({"job": {"name": "linkstream"}, "transport": {
        "kind": "tcp", "connect_timeout_s": 5.0, "heartbeat_interval_s": 0.1, "heartbeat_timeout_s": 3.0}})
    lost: queue.SimpleQueue = queue.SimpleQueue()
    mesh = create_mesh(config, 0, 2, "target", on_message=print, on_peer_lost=lambda r, why: lost.put((r, why)),
                       valid_kinds=KINDS)
    endpoint = mesh.bind()
    ctx = zmq.Context()
    raw_out = ctx.socket(zmq.DEALER)
    raw_out.linger = 0
    raw_out.routing_id = routing_id(1, RAW_PEER_SESSION)
    raw_out.connect(endpoint)
    listener = socket.create_server(("127.0.0.1", 0))
    started = threading.Thread(target=mesh.start)
    started.start()
    try:
        raw_out.send_multipart(control(fr.KIND_REGISTER, {
            "rank": 1, "name": "raw", "endpoint": "tcp://127.0.0.1:9", "world_size": 2, "transport": "tcp",
            "curve": False, "stream": f"tcp://127.0.0.1:{listener.getsockname()[1]}"}))
        listener.settimeout(WAIT_S)
        link, _ = listener.accept()  # rank 0 dials the stream it was told, not the endpoint
        link.settimeout(WAIT_S)
        reader = StreamReader(1 << 30)
        read: list = []
        while not read:
            read = reader.feed(link)
        hello = [bytes(f) for f in read.pop(0)]
        table = read_messages(reader, link, fr.KIND_TABLE, read)[-1][3]
        assert hello == [routing_id(0, table["workers"][0][2])]  # the target's routing id
        assert table["workers"][1][3].startswith("tcp://127.0.0.1:")
        read_messages(reader, link, fr.KIND_HELLO, read)
        raw_out.send_multipart(control(fr.KIND_HELLO_ACK))
        read_messages(reader, link, fr.KIND_CMA_OFFER, read)
        raw_out.send_multipart(control(fr.KIND_CMA_READY, {"readable": False}))
        started.join(WAIT_S)
        assert not started.is_alive()

        mesh.send(1, 1, 77, "over the stream", [b"abc"])
        got = [g for g in read_messages(reader, link, 1, read) if g[0] == 1]
        assert [(g[2], g[3], bytes(g[4][0])) for g in got] == [(77, "over the stream", b"abc")]

        link.close()  # the peer ends the link but stays in the table: nothing is sent there any more
        deadline = time.monotonic() + WAIT_S
        while mesh.stats().get("dropped", 0) == 0 and time.monotonic() < deadline:
            mesh.send(1, 1, 78, "dropped", [])
            time.sleep(0.05)
        assert mesh.stats()["dropped"] > 0
        before = mesh.stats()["heartbeats_out"]
        time.sleep(1.0)  # a heartbeat per interval (0.1 s) still, not one per turn of a spinning loop
        assert mesh.stats()["heartbeats_out"] - before <= 15
        rank, why = lost.get(timeout=WAIT_S)  # silence: raw_out sends nothing
        assert rank == 1 and "heartbeat_timeout_s" in why
        with pytest.raises(WorkerUnavailableError, match="raw"):
            mesh.send(1, 1, 79, "after", [])
    finally:
        mesh.close(timeout_s=0.5)
        started.join(WAIT_S)
        listener.close()
        raw_out.close(0)
        ctx.term()


def test_a_raw_link_is_checked_like_a_routing_id_and_a_bad_message_on_it_is_dropped_alone():
    with target_with_raw_peer("rawlink", 3.0, KINDS) as (mesh, inbox, peer, _):
        stream = peer.table["workers"][0][3]

        def message(request_id, text):
            return fr.encode(1, 0, request_id, fr.encode_meta(text), [memoryview(b"ok")], 1 << 20)

        def refused(hello) -> bool:
            with connect(stream, 5) as sock:
                send_message(sock, [hello], time.monotonic() + 5)
                sock.settimeout(5)
                try:
                    return sock.recv(1) == b""
                except ConnectionResetError:
                    return True

        assert refused(routing_id(1, RAW_PEER_SESSION + 1))  # another session than the table's
        assert refused(routing_id(0, mesh.workers[0].session))  # the worker's own rank
        assert refused(routing_id(7, RAW_PEER_SESSION))  # no such rank

        with connect(stream, 5) as link:  # rank 1's link (the raw peer's own link is ZeroMQ)
            send_message(link, [routing_id(1, RAW_PEER_SESSION)], time.monotonic() + 5)
            send_message(link, message(1, "first"), time.monotonic() + 5)
            send_message(link, [b"\x00" * 3], time.monotonic() + 5)  # not a zgrad message: dropped alone
            send_message(link, message(2, "second"), time.monotonic() + 5)
            assert [(e.src, e.request_id, e.meta, e.reply_to) for e in (inbox.get(timeout=WAIT_S), inbox.get(timeout=WAIT_S))] \
                == [(1, 1, "first", None), (1, 2, "second", None)]
            assert refused(routing_id(1, RAW_PEER_SESSION))  # a second link for rank 1
            stats = mesh.stats()
            assert stats["stream_links"] == 1 and stats["rejected"]["unknown_peer"] == 4, stats
            assert sum(stats["rejected"].values()) == 5  # and the bad message

"""Fuzz a worker's port with raw ZeroMQ and raw TCP: it keeps serving and counts every reject.

The worker under test is rank 0 of a two-worker tcp mesh whose rank 1 is played by raw pyzmq
sockets in this test (it does the start-up handshake by hand, then sends garbage with a valid
routing id, so the garbage reaches every check past the peer check). Loopback only; the counts
and the time are bounded.
"""

from __future__ import annotations

import os
import random
import socket
import time

import pytest
import zmq

from transport_world import control, target_with_raw_peer

from zgrad.transport import frames as fr

FUZZ_WITH_IDENTITY = 4000
FUZZ_UNKNOWN_PEER = 1000
RAW_TCP_CONNECTIONS = 200
KINDS = frozenset({1, 2})


def mutate(rng: random.Random, parts: list[bytes]) -> list[bytes]:
    """Damage a valid message in one of the ways a broken or hostile peer would."""
    parts = [bytearray(p) for p in parts]
    how = rng.randrange(7)
    if how == 0:  # flip random bytes anywhere
        for _ in range(rng.randint(1, 6)):
            p = rng.randrange(len(parts))
            if parts[p]:
                parts[p][rng.randrange(len(parts[p]))] = rng.randrange(256)
    elif how == 1:  # truncate one frame
        p = rng.randrange(len(parts))
        del parts[p][rng.randrange(len(parts[p]) + 1):]
    elif how == 2:  # drop or add frames
        if rng.random() < 0.5 and len(parts) > 1:
            del parts[rng.randrange(len(parts))]
        else:
            parts.insert(rng.randrange(len(parts) + 1), bytearray(os.urandom(rng.randrange(40))))
    elif how == 3:  # garbage metadata (of the length the header gives)
        *_, nbuffers, meta_bytes = fr.HEADER.unpack_from(parts[0])
        start = fr.HEADER.size + 8 * nbuffers
        parts[0][start : start + meta_bytes] = os.urandom(meta_bytes)
    elif how == 4:  # claim one buffer of a wrong (often huge) length, inline or in a frame
        *_, nbuffers, meta_bytes = fr.HEADER.unpack_from(parts[0])
        meta = parts[0][fr.HEADER.size + 8 * nbuffers :][:meta_bytes]
        parts[0][fr.HEADER.size - 8 : fr.HEADER.size - 4] = (1).to_bytes(4, "big")
        del parts[0][fr.HEADER.size:]
        parts[0] += (rng.choice([1 << 40, 3 << 30, 65]) | rng.choice([0, fr.INLINE_BIT])).to_bytes(8, "big") + meta
    elif how == 5:  # an unknown or reserved kind
        parts[0][6:8] = rng.choice([7, 0xFEFF, fr.KIND_TABLE, fr.KIND_ABORT, fr.KIND_REGISTER, 0xFFFF]).to_bytes(2, "big")
    else:  # pure noise
        parts = [bytearray(os.urandom(rng.randrange(60))) for _ in range(rng.randint(1, 5))]
    if len(parts[0]) >= 8 and int.from_bytes(parts[0][6:8], "big") == fr.KIND_GOODBYE:
        parts[0][6:8] = b"\x00\x07"  # a goodbye would (rightly) end the peer's membership
    return [bytes(p) for p in parts]


def valid_message(rng: random.Random) -> list[bytes]:
    buffers = [os.urandom(rng.randrange(3000)) for _ in range(rng.randrange(3))]
    return fr.encode(rng.choice([1, 2]), 0, rng.randrange(1 << 32), fr.encode_meta({"i": rng.random()}),
                     [memoryview(b) for b in buffers], 1024)


@pytest.fixture
def worker_and_raw_peer():
    with target_with_raw_peer("fuzz", 10.0, KINDS) as (mesh, inbox, peer, endpoint):
        assert [row[0] for row in peer.table["workers"]] == ["target", "raw"]
        assert mesh.workers[1].name == "raw"
        yield mesh, inbox, peer.raw_in, peer.raw_out, peer.ctx, endpoint


def counted(stats: dict) -> int:
    return sum(stats.get(k, 0) for k in ("messages_in", "heartbeats_in", "control_in", "rejected_total"))


def wait_until(predicate, timeout_s=20.0):
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.02)


@pytest.mark.timeout(90)
def test_fuzzed_messages_are_counted_and_the_worker_keeps_serving(worker_and_raw_peer):
    mesh, inbox, raw_in, raw_out, ctx, endpoint = worker_and_raw_peer
    rng = random.Random(1234)
    before = counted(mesh.stats())
    delivered_before = inbox.qsize()
    for i in range(FUZZ_WITH_IDENTITY):
        raw_out.send_multipart(mutate(rng, valid_message(rng)))
        if i % 500 == 0:
            raw_out.send_multipart(control(fr.KIND_HEARTBEAT))
    sent = FUZZ_WITH_IDENTITY + FUZZ_WITH_IDENTITY // 500
    wait_until(lambda: counted(mesh.stats()) - before == sent)
    stats = mesh.stats()
    delivered = [inbox.get() for _ in range(inbox.qsize() - delivered_before)]
    assert all(e.kind in KINDS and e.src == 1 for e in delivered)
    assert stats["rejected_total"] > FUZZ_WITH_IDENTITY // 2, stats
    assert {"bad_header", "bad_magic", "bad_kind", "bad_frame_count", "bad_metadata", "too_large"} <= set(stats["rejected"])

    stranger = ctx.socket(zmq.DEALER)
    stranger.linger = 0
    stranger.routing_id = b"not-a-worker"
    stranger.connect(endpoint)
    for _ in range(FUZZ_UNKNOWN_PEER):
        stranger.send_multipart(valid_message(rng))
    wait_until(lambda: mesh.stats()["rejected"].get("unknown_peer", 0) == FUZZ_UNKNOWN_PEER)
    stranger.close(0)

    host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
    for i in range(RAW_TCP_CONNECTIONS):
        with socket.create_connection((host, int(port)), timeout=2) as s:
            greeting = b"\xff" + bytes(8) + b"\x7f\x03\x00NULL" if i % 2 else b""
            s.sendall(greeting + os.urandom(rng.randrange(1, 300)))
    wait_until(lambda: mesh.stats().get("handshake_failed", 0) > 0)

    raw_out.send_multipart(fr.encode(2, 0, 31337, fr.encode_meta("still there?"), [memoryview(b"ok")], 1024))
    wait_until(lambda: not inbox.empty())
    last = inbox.get()
    assert (last.src, last.kind, last.request_id, last.meta, bytes(last.buffers[0])) == (1, 2, 31337, "still there?", b"ok")
    mesh.send(1, 1, 4242, {"reply": True}, [b"fine"])
    end = time.monotonic() + 10
    while True:
        assert time.monotonic() < end, "the worker stopped sending"
        assert raw_in.poll(5000)
        parts = raw_in.recv_multipart()
        kind, _, request_id, meta, buffers = fr.decode(parts[1:], valid_kinds=KINDS, max_message_bytes=1 << 30,
                                                       take_buffer=bytearray)
        if kind == 1:
            assert (request_id, meta, bytes(buffers[0])) == (4242, {"reply": True}, b"fine")
            break
    print(f"\nfuzz: {sent} identified + {FUZZ_UNKNOWN_PEER} unknown-peer messages, {RAW_TCP_CONNECTIONS} raw TCP "
          f"connections; stats: {mesh.stats()}")

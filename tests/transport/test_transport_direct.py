"""Caller-direct requests (``Mesh.call`` / ``Mesh.reply``): over every transport, under CURVE
with per-thread sockets authenticated like the worker's own, late replies dropped, impostors and
garbage on a direct routing id rejected while the worker keeps serving."""

from __future__ import annotations

import threading
import time

import pytest
import zmq
from test_transport_curve import a_message, curve_world, raw_client, wait_for

from zgrad.errors import WorkerUnavailableError, ZgradTimeoutError
from zgrad.transport import generate_keys
from zgrad.transport.caller_sockets import DIRECT_ID, DIRECT_MAGIC
from zgrad.transport.security import load_curve_keys

pytestmark = pytest.mark.timeout(30)


def echo_handler(rank, worker):
    """Rank 1 answers kind 1 with its meta doubled, after ``meta["sleep_s"]``; kind 2 is only queued."""
    def on_message(env):
        if env.kind == 1:
            time.sleep(env.meta.get("sleep_s", 0))
            worker.mesh.reply(env, 3, {"twice": env.meta["n"] * 2, "auth": env.authenticated}, env.buffers)
        else:
            worker.inbox.put(env)
    return on_message


def test_requests_from_many_threads_get_their_own_replies(worlds, transport):
    workers = worlds.world(transport, 2, on_message=echo_handler)
    got: dict[int, list] = {}

    def caller(i):
        got[i] = [workers[0].mesh.call(1, 1, 1000 * i + k, {"n": k}, [bytes([i])], 10.0) for k in range(5)]

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    for i, replies in got.items():
        assert [(r.kind, r.request_id, r.meta["twice"], bytes(r.buffers[0])) for r in replies] == \
            [(3, 1000 * i + k, 2 * k, bytes([i])) for k in range(5)]
    assert workers[0].mesh.stats()["direct_requests"] == 40


def test_a_late_reply_is_dropped_and_counted(worlds, transport):
    workers = worlds.world(transport, 2, on_message=echo_handler)
    mesh = workers[0].mesh
    with pytest.raises(ZgradTimeoutError):
        mesh.call(1, 1, 1, {"n": 1, "sleep_s": 0.5}, [], 0.1)
    time.sleep(0.6)
    assert mesh.call(1, 1, 2, {"n": 2}, [], 5.0).meta["twice"] == 4
    assert mesh.stats()["late_replies"] == 1


def test_a_request_to_a_lost_peer_fails_at_once(worlds):
    workers = worlds.world("tcp", 2, on_message=echo_handler)
    workers[1].mesh.close()
    assert workers[0].lost.get(timeout=10)[0] == 1
    with pytest.raises(WorkerUnavailableError, match="rank 1"):
        workers[0].mesh.call(1, 1, 1, {"n": 1}, [], 5.0)


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_direct_requests_are_authenticated_under_curve(worlds, tmp_path, kind):
    generate_keys(tmp_path, 2)
    config = worlds.config(kind, security={"curve": True, "key_dir": str(tmp_path)})
    workers = worlds.workers(config, 2, on_message=echo_handler)
    worlds.start(workers)
    reply = workers[0].mesh.call(1, 1, 9, {"n": 21}, [b"x"], 10.0)
    assert reply.authenticated and reply.meta == {"twice": 42, "auth": True}


def test_a_direct_routing_id_cannot_claim_another_rank_or_send_garbage(worlds, tmp_path):
    generate_keys(tmp_path, 3)
    workers = curve_world(worlds, "tcp", 3, tmp_path)
    rank2 = load_curve_keys(tmp_path, 2, 3)
    ctx, impostor = raw_client(workers[0].mesh.endpoint, rank2.peers[0], (rank2.public, rank2.secret),
                               identity=DIRECT_ID.pack(DIRECT_MAGIC, 1, workers[1].mesh.workers[1].session, 1))
    try:
        impostor.send_multipart(a_message())
        for garbage in ([b"\x00"], [b"zgrad", b""], [b"x" * 40, b"\xc1"]):
            impostor.send_multipart(garbage, zmq.NOBLOCK)
        wait_for(lambda: workers[0].mesh.stats()["rejected"].get("unauthenticated", 0) == 4)
        workers[1].mesh.send(0, 2, 1, "still serving")
        assert workers[0].get().meta == "still serving"
    finally:
        impostor.close(0), ctx.term()


def test_sent_requests_are_collected_later_with_a_wake_fd(worlds, transport):
    """``post`` returns at once; ``collect`` collects the replies to the ids it expects
    (one wait may bring several), drops others, and returns early when its wake fd is written."""
    import os

    workers = worlds.world(transport, 2, on_message=echo_handler)
    mesh = workers[0].mesh
    wake = os.eventfd(0, os.EFD_NONBLOCK)
    try:
        for request_id in (11, 12):
            mesh.post(1, 1, request_id, {"n": request_id}, [b"x"])
        expected = {1: {11, 12}}
        replies = []
        deadline = time.monotonic() + 10
        while expected[1] and time.monotonic() < deadline:
            replies += mesh.collect(expected, wake, 1.0)
        assert sorted((r.request_id, r.meta["twice"], bytes(r.buffers[0])) for r in replies) == [(11, 22, b"x"), (12, 24, b"x")]
        assert expected == {1: set()}
        # a reply nobody expects any more is dropped and counted
        mesh.post(1, 1, 13, {"n": 13, "sleep_s": 0.2}, [])
        late_before = mesh.stats().get("late_replies", 0)
        mesh.post(1, 1, 14, {"n": 14, "sleep_s": 0.2}, [])
        expected = {1: {14}}
        while expected[1] and time.monotonic() < deadline:
            assert all(r.request_id == 14 for r in mesh.collect(expected, wake, 1.0))
        assert mesh.stats()["late_replies"] == late_before + 1
        # the wake fd ends a wait at once
        mesh.post(1, 1, 15, {"n": 15, "sleep_s": 1.0}, [])
        threading.Timer(0.1, lambda: os.eventfd_write(wake, 1)).start()
        started = time.monotonic()
        expected = {1: {15}}
        while time.monotonic() - started < 0.8:
            assert mesh.collect(expected, wake, 0.05) == []
            try:
                os.eventfd_read(wake)
                break
            except BlockingIOError:
                continue
        assert time.monotonic() - started < 0.8
        while expected[1] and time.monotonic() < deadline:  # the slow reply still comes
            mesh.collect(expected, wake, 1.0)
        assert expected == {1: set()}
    finally:
        os.close(wake)


def test_post_to_a_lost_peer_fails_at_once(worlds):
    workers = worlds.world("inproc", 2, on_message=echo_handler)
    workers[1].mesh.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            workers[0].mesh.post(1, 1, 1, {"n": 1}, [])
        except WorkerUnavailableError:
            return
        time.sleep(0.05)
    raise AssertionError("post kept accepting messages for a lost peer")


@pytest.mark.parametrize("transport", ["tcp", "inproc"])
def test_a_big_request_takes_the_link_and_its_reply_still_comes_to_the_caller(worlds, transport):
    """With ``direct_max_kb`` of buffers or more, ``call`` and ``post`` send on the link (no
    caller-direct socket is made) and the reply, read by the I/O leader, is handed to the waiting
    thread; the layer above sees no difference but the route. A late one goes to nobody."""
    workers = worlds.world(transport, 2, on_message=echo_handler, direct_max_kb=64)
    mesh = workers[0].mesh
    big = bytes(range(256)) * 256  # exactly 64 KiB: the threshold takes the link
    reply = mesh.call(1, 1, 1, {"n": 5}, [big], 10.0)
    assert (reply.request_id, reply.kind, reply.meta["twice"], bytes(reply.buffers[0])) == (1, 3, 10, big)
    assert mesh.stats().get("direct_requests", 0) == 0
    for request_id in (2, 3):
        mesh.post(1, 1, request_id, {"n": request_id}, [big])
    mesh.post(1, 1, 4, {"n": 4}, [b"small"])  # caller-direct, collected with the others
    expected = {1: {2, 3, 4}}
    replies = []
    deadline = time.monotonic() + 10
    while expected[1] and time.monotonic() < deadline:
        assert all(mesh.awaits(1, i) for i in expected[1])
        replies += mesh.collect(expected, None, 1.0)
    assert sorted((r.request_id, r.meta["twice"]) for r in replies) == [(2, 4), (3, 6), (4, 8)]
    assert mesh.stats()["direct_requests"] == 1
    with pytest.raises(ZgradTimeoutError):
        mesh.call(1, 1, 5, {"n": 5, "sleep_s": 0.5}, [big], 0.1)
    assert workers[0].get().request_id == 5  # the late reply reaches on_message, as any message

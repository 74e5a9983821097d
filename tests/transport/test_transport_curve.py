"""CURVE: allowed workers talk; unknown keys, plain clients and rank impostors get nothing through."""

from __future__ import annotations

import time

import pytest
import zmq
from transport_world import WAIT_S

from zgrad.transport import generate_keys
from zgrad.transport import frames as fr
from zgrad.transport.loop.inbound import routing_id
from zgrad.transport.security import load_curve_keys


def curve_world(worlds, kind, n, key_dir):
    config = worlds.config(kind, security={"curve": True, "key_dir": str(key_dir)}, heartbeat_interval_s=0.1,
                           heartbeat_timeout_s=5.0)
    workers = worlds.workers(config, n)
    worlds.start(workers)
    return workers


def wait_for(predicate, timeout_s=WAIT_S):
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.02)


def raw_client(endpoint, server_public=None, keypair=None, identity=b""):
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    if identity:
        sock.routing_id = identity
    if server_public is not None:
        sock.curve_serverkey = server_public
        sock.curve_publickey, sock.curve_secretkey = keypair or zmq.curve_keypair()
    sock.connect(endpoint)
    return ctx, sock


def a_message(kind=1, request_id=77):
    return fr.encode(kind, 0, request_id, fr.encode_meta("sneaky"), [], 1 << 20)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_allowed_workers_talk_authenticated(worlds, tmp_path, kind):
    generate_keys(tmp_path, 2)
    workers = curve_world(worlds, kind, 2, tmp_path)
    workers[0].mesh.send(1, 1, 5, {"secret": True}, [b"payload"])
    env = workers[1].get()
    assert env.src == 0 and env.authenticated and env.meta == {"secret": True} and env.buffers[0] == b"payload"


@pytest.mark.timeout(30)
def test_unknown_keys_and_plain_clients_get_nothing_through(worlds, tmp_path):
    generate_keys(tmp_path, 2)
    workers = curve_world(worlds, "tcp", 2, tmp_path)
    server_public = load_curve_keys(tmp_path, 0, 2).public
    endpoint = workers[0].mesh.endpoint
    stranger_ctx, stranger = raw_client(endpoint, server_public, identity=routing_id(1, 12345))
    plain_ctx, plain = raw_client(endpoint, identity=routing_id(1, 54321))
    try:
        for _ in range(20):
            stranger.send_multipart(a_message(), zmq.NOBLOCK)
            plain.send_multipart(a_message(), zmq.NOBLOCK)
        wait_for(lambda: workers[0].mesh.stats().get("auth_denied", 0) >= 1)
        wait_for(lambda: workers[0].mesh.stats().get("handshake_failed", 0) >= 2)
        workers[1].mesh.send(0, 1, 1, "still serving")
        assert workers[0].get().meta == "still serving"
        assert workers[0].inbox.empty()
        assert workers[0].mesh.stats()["rejected_total"] == 0  # nothing even reached the checks
    finally:
        stranger.close(0), plain.close(0), stranger_ctx.term(), plain_ctx.term()


@pytest.mark.timeout(30)
def test_an_allowed_key_cannot_claim_another_rank(worlds, tmp_path):
    generate_keys(tmp_path, 3)
    workers = curve_world(worlds, "tcp", 3, tmp_path)
    rank2 = load_curve_keys(tmp_path, 2, 3)
    ctx, impostor = raw_client(workers[0].mesh.endpoint, rank2.peers[0], (rank2.public, rank2.secret),
                               identity=routing_id(1, 999))
    try:
        impostor.send_multipart(a_message())
        wait_for(lambda: workers[0].mesh.stats()["rejected"].get("unauthenticated", 0) == 1)
        assert workers[0].inbox.empty()
    finally:
        impostor.close(0), ctx.term()

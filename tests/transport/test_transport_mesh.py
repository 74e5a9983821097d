"""The mesh over every built-in transport: ordering, big buffers, many peers, concurrency, errors."""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest
from transport_world import KINDS, WAIT_S, start_all

from zgrad.errors import ConfigError, TransportError, WorkerUnavailableError, ZgradTimeoutError
from zgrad.transport import create_mesh

MIB = 1 << 20


@pytest.mark.timeout(60)
def test_messages_between_each_pair_arrive_in_order(worlds, transport):
    workers = worlds.world(transport, 3)
    n = 1500
    for src in workers:
        for dst in range(3):
            if dst != src.mesh.rank:
                for i in range(n):
                    src.mesh.send(dst, 1, i, {"from": src.mesh.rank}, [i.to_bytes(4, "little")])
    for w in workers:
        got = w.get_many(2 * n)
        for src in {e.src for e in got}:
            seq = [e.request_id for e in got if e.src == src]
            assert seq == list(range(n)), f"rank {w.mesh.rank}: messages from {src} out of order"
            assert all(bytes(e.buffers[0]) == e.request_id.to_bytes(4, "little") for e in got if e.src == src)


@pytest.mark.timeout(60)
def test_large_multi_frame_buffers_arrive_byte_exact(worlds, transport):
    workers = worlds.world(transport, 2)
    big = os.urandom(64 * MIB + 12345)
    exact = bytearray(os.urandom(16 * MIB))  # exactly one chunk: no split
    workers[0].mesh.send(1, 2, 9, {"what": "big"}, [big, b"", exact, memoryview(b"tail")])
    env = workers[1].get(30)
    assert (env.src, env.kind, env.request_id, env.meta) == (0, 2, 9, {"what": "big"})
    assert [b.nbytes for b in env.buffers] == [len(big), 0, len(exact), 4]
    assert hashlib.sha256(env.buffers[0]).digest() == hashlib.sha256(big).digest()
    assert env.buffers[2] == exact and env.buffers[3] == b"tail"
    assert not env.buffers[0].readonly and not env.buffers[2].readonly
    del env
    workers[0].mesh.send(1, 2, 10, None, [big])  # the receive pool hands the same pages out again
    again = workers[1].get(30)
    assert again.buffers[0] == big
    assert workers[1].mesh.stats()["pool_reused"] >= 1


@pytest.mark.timeout(60)
def test_many_peers_all_to_all(worlds, transport):
    n = 8
    workers = worlds.world(transport, n)
    for w in workers:
        for dst in range(n):
            w.mesh.send(dst, 3, w.mesh.rank * 100 + dst, [w.mesh.rank, dst])
    for w in workers:
        got = sorted((e.src, e.request_id, tuple(e.meta)) for e in w.get_many(n))
        assert got == [(src, src * 100 + w.mesh.rank, (src, w.mesh.rank)) for src in range(n)]
    assert [e.name for e in workers[3].mesh.workers] == [f"w{r}" for r in range(n)]
    assert workers[5].mesh.rank_of("w2") == 2


@pytest.mark.timeout(60)
def test_concurrent_senders_keep_each_thread_in_order(worlds, transport):
    workers = worlds.world(transport, 2)
    threads, per_thread = 4, 400

    def sender(t: int) -> None:
        for i in range(per_thread):
            workers[0].mesh.send(1, 1, t * per_thread + i, t, [bytes(100)])

    pool = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
    for p in pool:
        p.start()
    for p in pool:
        p.join(WAIT_S)
    got = workers[1].get_many(threads * per_thread)
    for t in range(threads):
        assert [e.request_id for e in got if e.meta == t] == [t * per_thread + i for i in range(per_thread)]


@pytest.mark.timeout(30)
def test_send_to_self_is_delivered_as_a_copy(worlds, transport):
    workers = worlds.world(transport, 2)
    payload = bytearray(b"abc" * 1000)
    workers[1].mesh.send(1, 1, 5, {"loop": True}, [payload, bytes(20 * MIB)])
    env = workers[1].get()
    assert (env.src, env.request_id, env.meta, env.authenticated) == (1, 5, {"loop": True}, True)
    assert env.buffers[0] == payload and env.buffers[1].nbytes == 20 * MIB
    env.buffers[0][0] = ord("z")
    assert payload[0] == ord("a")
    assert workers[1].mesh.stats()["loopback"] == 1


@pytest.mark.timeout(30)
def test_send_arguments_are_checked(worlds):
    workers = worlds.world("inproc", 2, max_message_mb=1, chunk_mb=1)
    mesh = workers[0].mesh
    with pytest.raises(ValueError, match="valid_kinds"):
        mesh.send(1, 7, 0)
    with pytest.raises(ValueError, match="valid_kinds"):
        mesh.send(1, 0xFF06, 0)
    with pytest.raises(ValueError, match="out of range"):
        mesh.send(2, 1, 0)
    with pytest.raises(ValueError, match="64-bit"):
        mesh.send(1, 1, -1)
    with pytest.raises(TypeError, match="C-contiguous"):
        mesh.send(1, 1, 0, None, [memoryview(bytearray(10))[::2]])
    with pytest.raises(TypeError, match="buffer protocol"):
        mesh.send(1, 1, 0, None, ["text"])
    with pytest.raises(TypeError, match="msgpack"):
        mesh.send(1, 1, 0, {"x": object()})
    with pytest.raises(TransportError, match="max_message_mb"):
        mesh.send(1, 1, 0, None, [bytes(2 * MIB)])


@pytest.mark.timeout(30)
def test_send_outside_the_started_state_fails_clearly(worlds):
    config = worlds.config("inproc")
    mesh = create_mesh(config, 0, 1, "solo", on_message=lambda e: None, on_peer_lost=lambda r, w: None, valid_kinds=KINDS)
    worlds.meshes.append(mesh)
    with pytest.raises(TransportError, match="not started"):
        mesh.send(0, 1, 0)
    with pytest.raises(TransportError, match="start"):
        _ = mesh.workers
    mesh.start()
    mesh.send(0, 1, 0)
    mesh.close()
    with pytest.raises(TransportError, match="closed"):
        mesh.send(0, 1, 0)
    with pytest.raises(TransportError, match="closed"):
        mesh.start()


@pytest.mark.timeout(60)
def test_a_new_mesh_works_after_close_in_the_same_process(worlds, transport):
    config = worlds.config(transport)
    for round_ in range(2):
        workers = worlds.workers(config, 2)
        worlds.start(workers)
        workers[0].mesh.send(1, 1, round_, None, [b"x"])
        assert workers[1].get().request_id == round_
        for w in workers:
            w.mesh.close()


@pytest.mark.timeout(30)
def test_close_delivers_what_was_sent_before_and_peers_learn_it(worlds, transport):
    workers = worlds.world(transport, 2)
    for i in range(200):
        workers[0].mesh.send(1, 1, i, None, [bytes(1000)])
    workers[0].mesh.close()
    assert [e.request_id for e in workers[1].get_many(200)] == list(range(200))
    rank, reason = workers[1].lost.get(timeout=WAIT_S)
    assert rank == 0 and "closed its mesh" in reason
    with pytest.raises(WorkerUnavailableError, match="w0"):
        workers[1].mesh.send(0, 1, 0)


def test_a_close_while_another_thread_closes_returns_when_the_mesh_is_closed(worlds):
    # A second close() (a fixture's, a shutdown path's) used to return at once while the first
    # was still saying goodbye: its caller went on with the mesh's I/O threads still running.
    workers = worlds.world("tcp", 2)
    a = workers[0].mesh
    first = threading.Thread(target=a.close, kwargs={"timeout_s": 5.0})
    first.start()
    a.close()
    running = [t.name for t in threading.enumerate() if t.name.startswith("zgrad-mesh-io-w0-")]
    first.join(10)
    assert running == []


@pytest.mark.timeout(30)
def test_inbound_kinds_outside_valid_kinds_are_rejected(worlds, transport):
    config = worlds.config(transport)
    workers = worlds.workers(config, 2, kinds=frozenset({1, 2}))
    wide = create_mesh(config, 1, 2, "w1", on_message=workers[1].inbox.put, on_peer_lost=lambda r, w: None,
                       valid_kinds={1, 2, 3}, master_addr="127.0.0.1",
                       master_port=int(workers[0].mesh.bind().rsplit(":", 1)[1]) if transport == "tcp" else None)
    worlds.meshes.append(wide)
    start_all([workers[0].mesh, wide])
    wide.send(0, 3, 1)
    wide.send(0, 1, 2)
    assert workers[0].get().request_id == 2
    assert workers[0].mesh.stats()["rejected"] == {"bad_kind": 1}


@pytest.mark.timeout(30)
def test_on_message_errors_are_counted_and_delivery_goes_on(worlds):
    def handler(rank, worker):
        def on_message(env):
            if env.request_id == 0:
                raise RuntimeError("handler bug")
            worker.inbox.put(env)
        return on_message

    workers = worlds.world("inproc", 2, on_message=handler)
    workers[0].mesh.send(1, 1, 0)
    workers[0].mesh.send(1, 1, 1)
    assert workers[1].get().request_id == 1
    assert workers[1].mesh.stats()["callback_errors"] == 1


@pytest.mark.timeout(30)
def test_a_full_peer_queue_makes_send_wait_then_time_out(worlds, transport):
    release = threading.Event()

    def handler(rank, worker):
        return lambda env: release.wait(WAIT_S) if rank == 1 else None

    workers = worlds.world(transport, 2, on_message=handler, high_water_mark=4, send_timeout_s=0.3,
                           heartbeat_timeout_s=30.0)
    try:
        t0 = time.monotonic()
        with pytest.raises(ZgradTimeoutError, match="high_water_mark"):
            for i in range(2000):
                workers[0].mesh.send(1, 1, i, None, [bytes(MIB)])
        assert time.monotonic() - t0 < WAIT_S
    finally:
        release.set()


@pytest.mark.timeout(30)
def test_start_times_out_naming_the_missing_workers(worlds, transport):
    config = worlds.config(transport, connect_timeout_s=1.0)
    workers = worlds.workers(config, 3)
    with pytest.raises(ZgradTimeoutError) as info:
        start_all([w.mesh for w in workers[:2]])
    assert "rank 2" in str(info.value) and "connect_timeout_s" in str(info.value)


@pytest.mark.timeout(30)
def test_names_from_the_config_appear_in_the_timeout(worlds):
    raw = {"job": {"name": "named-timeout"}, "transport": {"kind": "inproc", "connect_timeout_s": 0.5},
           "workers": [{"name": "alpha"}, {"name": "beta"}]}
    from zgrad.config import parse_config

    mesh = create_mesh(parse_config(raw), 0, 2, "alpha", on_message=print, on_peer_lost=print, valid_kinds=KINDS)
    worlds.meshes.append(mesh)
    with pytest.raises(ZgradTimeoutError, match="'beta' \\(rank 1\\)"):
        mesh.start()


@pytest.mark.timeout(30)
def test_workers_with_different_world_sizes_abort_start_up(worlds, transport):
    config = worlds.config(transport, connect_timeout_s=5.0)
    rank0 = worlds.workers(config, 2)[0]
    port = int(rank0.mesh.bind().rsplit(":", 1)[1]) if transport == "tcp" else None
    odd = create_mesh(config, 1, 3, "odd", on_message=print, on_peer_lost=print, valid_kinds=KINDS,
                      master_addr="127.0.0.1", master_port=port)
    worlds.meshes.append(odd)
    errors = []
    for mesh in (rank0.mesh, odd):
        threading.Thread(target=lambda m=mesh: errors.append(_start_error(m))).start()
    deadline = time.monotonic() + 15
    while len(errors) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(errors) == 2 and all(isinstance(e, TransportError) for e in errors)
    assert all("world_size=3" in str(e) for e in errors)


def _start_error(mesh):
    try:
        mesh.start()
    except Exception as exc:  # noqa: BLE001 - returned for the assertion
        return exc
    return None


@pytest.mark.timeout(30)
def test_bad_configurations_are_config_errors(short_tmp):
    from zgrad.config import parse_config

    def make(raw, rank=1, **kw):
        return create_mesh(parse_config(raw), rank, 2, f"w{rank}", on_message=print, on_peer_lost=print,
                           valid_kinds=KINDS, **kw)

    with pytest.raises(ConfigError, match="known transports: inproc, ipc, tcp"):
        make({"transport": {"kind": "carrier-pigeon"}})
    with pytest.raises(ConfigError, match="MASTER_ADDR"):
        make({"transport": {"kind": "tcp"}})
    with pytest.raises(ConfigError, match="ipc_dir"):
        make({"transport": {"kind": "ipc", "ipc_dir": short_tmp + "/" + "d" * 120}}).bind()
    with pytest.raises(ConfigError, match="not available over transport 'inproc'"):
        make({"transport": {"kind": "inproc"}, "security": {"curve": True, "key_dir": short_tmp}})
    with pytest.raises(ConfigError, match="workers\\[1\\].name"):
        make({"transport": {"kind": "inproc"}, "workers": [{"name": "a"}, {"name": "b"}]})
    with pytest.raises(ConfigError, match="advertise_address"):
        make({"transport": {"kind": "tcp", "bind_address": "0.0.0.0"}}, rank=0).bind()
    with pytest.raises(ValueError, match="valid_kinds"):
        create_mesh(parse_config({}), 0, 1, "x", on_message=print, on_peer_lost=print, valid_kinds={0xFF01})


@pytest.mark.timeout(30)
def test_static_workers_table_from_the_config(short_tmp):
    """Every worker listed with host and port in [[workers]]: no master address needed."""
    import socket

    from zgrad.config import parse_config

    ports = []
    for _ in range(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    raw = {"job": {"name": "static"}, "transport": {"kind": "tcp", "connect_timeout_s": 10.0},
           "workers": [{"name": f"n{r}", "host": "127.0.0.1", "port": p} for r, p in enumerate(ports)]}
    config = parse_config(raw)
    inboxes = [[] for _ in range(3)]
    meshes = [create_mesh(config, r, 3, f"n{r}", on_message=inboxes[r].append, on_peer_lost=print, valid_kinds=KINDS)
              for r in range(3)]
    try:
        start_all(meshes)
        assert [e.endpoint for e in meshes[2].workers] == [f"tcp://127.0.0.1:{p}" for p in ports]
        meshes[2].send(1, 1, 3)
        end = time.monotonic() + WAIT_S
        while not inboxes[1] and time.monotonic() < end:
            time.sleep(0.01)
        assert inboxes[1][0].src == 2
    finally:
        for mesh in meshes:
            mesh.close(timeout_s=2.0)

"""The transport's pieces without sockets: liveness, rendezvous, outbox, pool, keys, config."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time

import pytest

from zgrad.config import parse_config
from zgrad.errors import ConfigError, TransportError, WorkerUnavailableError, ZgradTimeoutError
from zgrad.transport import frames as fr
from zgrad.transport import generate_keys
from zgrad.transport.envelope import WorkerEntry
from zgrad.transport.liveness import Liveness
from zgrad.transport.loop.outbox import Outbox
from zgrad.transport.pool import BufferPool
from zgrad.transport.rendezvous import Rendezvous
from zgrad.transport.security import load_curve_keys

# -- liveness -------------------------------------------------------------------------------


def test_heartbeats_only_on_quiet_links_and_silence_after_the_timeout():
    live = Liveness(heartbeat_interval_s=1.0, heartbeat_timeout_s=3.0)
    assert live.heartbeats_due(0.0) == [] and live.next_due_s() is None
    live.heard_from(1, 10.0)
    assert live.heartbeats_due(10.0) == [1]  # a new peer hears from us at once
    live.sent_to(1, 10.0)
    assert live.heartbeats_due(10.5) == [] and live.next_due_s() == 11.0
    live.sent_to(1, 10.9)  # other traffic postpones the heartbeat
    assert live.heartbeats_due(11.5) == []
    assert live.silent(12.9) == [] and live.silent(13.5) == [(1, 3.5)]
    live.lose(1)
    live.heard_from(1, 14.0)
    assert live.silent(100.0) == [] and live.heartbeats_due(100.0) == []


# -- rendezvous -----------------------------------------------------------------------------


class Network:
    """Rendezvous objects wired to each other in memory; the test picks the delivery order."""

    def __init__(self, world_size: int, job=None, deadline_s=100.0):
        self.queue: list[tuple[int, int, int, object]] = []
        self.nodes = []
        self.dialled: dict[int, set[int]] = {}
        for rank in range(world_size):
            me = WorkerEntry(rank, f"w{rank}", f"inproc://w{rank}", 1000 + rank)
            link = _Link(self, rank)
            self.nodes.append(Rendezvous(link, me, world_size, "inproc://w0", job or {"transport": "inproc", "curve": False},
                                         [f"w{r}" for r in range(world_size)], 5.0, deadline_s))

    def run(self, order=lambda q: 0) -> None:
        for node in self.nodes:
            node.begin()
        while self.queue:
            src, dst, kind, meta = self.queue.pop(order(self.queue))
            self.nodes[dst].on_control(src, 1000 + src, kind, meta)


class _Link:
    def __init__(self, net: Network, rank: int):
        self.net, self.rank = net, rank

    def connect_peer(self, rank, endpoint, session, stream=""):
        self.net.dialled.setdefault(self.rank, set()).add(rank)

    def send_control(self, rank, kind, meta):
        self.net.queue.append((self.rank, rank, kind, meta))


@pytest.mark.parametrize("order", [lambda q: 0, lambda q: len(q) - 1], ids=["fifo", "lifo"])
def test_rendezvous_gives_everyone_the_same_table_in_any_order(order):
    net = Network(4)
    net.run(order)
    assert all(node.ready and node.error is None for node in net.nodes)
    assert len({node.table for node in net.nodes}) == 1
    assert [e.name for e in net.nodes[2].table] == ["w0", "w1", "w2", "w3"]
    assert all(net.dialled[r] == {p for p in range(4) if p != r} for r in range(4))


def test_rendezvous_of_one_worker_is_ready_at_once():
    net = Network(1)
    net.run()
    assert net.nodes[0].ready


def test_a_mismatched_worker_aborts_everyone_with_the_reason():
    net = Network(3)
    net.nodes[2]._job = {"transport": "tcp", "curve": False}
    net.run()
    assert all(isinstance(n.error, TransportError) for n in net.nodes)
    assert "world_size=3" in str(net.nodes[1].error) and "aborted" in str(net.nodes[1].error)


def test_rendezvous_timeout_names_who_is_missing():
    net = Network(3, deadline_s=1.0)
    net.nodes[0].begin()
    net.nodes[1].begin()
    for src, dst, kind, meta in net.queue:
        net.nodes[dst].on_control(src, 1000 + src, kind, meta)
    net.nodes[0].check_deadline(2.0)
    assert isinstance(net.nodes[0].error, ZgradTimeoutError) and "'w2' (rank 2)" in str(net.nodes[0].error)
    net.nodes[1].check_deadline(2.0)
    assert "worker table from rank 0 at inproc://w0" in str(net.nodes[1].error)


@pytest.mark.parametrize(
    "kind, meta",
    [
        (fr.KIND_REGISTER, {"rank": "one"}),
        (fr.KIND_REGISTER, ["not", "a", "map"]),
        (fr.KIND_TABLE, {"workers": [["w0"]]}),
        (fr.KIND_HELLO_ACK, None),
        (fr.KIND_ABORT, {"reason": 5}),
    ],
)
def test_malformed_rendezvous_messages_are_rejected(kind, meta):
    node = Network(2).nodes[0 if kind == fr.KIND_REGISTER else 1]
    with pytest.raises(fr.Rejected) as info:
        node.on_control(0 if node._me.rank == 1 else 1, 1000, kind, meta)
    assert info.value.reason == "bad_control" and node.error is None


_REGISTER_W1 = {"rank": 1, "name": "w1", "endpoint": "inproc://w1", "world_size": 2, "transport": "inproc", "curve": False}


@pytest.mark.parametrize(
    "kind, meta",
    [
        (fr.KIND_REGISTER, {**_REGISTER_W1, "stream": "http://evil:80"}),
        (fr.KIND_REGISTER, _REGISTER_W1),  # no stream field at all
        (fr.KIND_TABLE, {"workers": [["w0", "inproc://w0", 1000, ""], ["w1", "inproc://w1", 1001, "file:///etc"]]}),
    ],
)
def test_a_bad_stream_address_in_the_rendezvous_is_rejected_by_name(kind, meta):
    node = Network(2).nodes[0 if kind == fr.KIND_REGISTER else 1]
    with pytest.raises(fr.Rejected) as info:
        node.on_control(0 if node._me.rank == 1 else 1, 1000, kind, meta)
    assert info.value.reason == "bad_control" and "stream" in info.value.detail and node.error is None
    assert node.table is None  # nothing taken from it


# -- outbox -----------------------------------------------------------------------------------


def test_outbox_back_pressure_dead_peers_and_close():
    box = Outbox(high_water_mark=2, send_timeout_s=0.2, describe=lambda r: f"worker rank {r}")
    box.put(1, "a")
    box.put(1, "b")
    t0 = time.monotonic()
    with pytest.raises(ZgradTimeoutError, match="high_water_mark"):
        box.put(1, "c")
    assert 0.15 < time.monotonic() - t0 < 2.0
    threading.Timer(0.05, box.handed_over, args=(1,)).start()
    box.put(1, "c")  # room appears while waiting
    assert box.take_all(woken=False) == ["a", "b", "c"]
    box.mark_dead(2, "gone")
    with pytest.raises(WorkerUnavailableError, match="worker rank 2 is unavailable: gone"):
        box.put(2, "x")
    assert box.close("closed for the test") and not box.close("again")
    with pytest.raises(TransportError, match="closed for the test"):
        box.put(1, "x")


# -- receive pool -----------------------------------------------------------------------------


def test_pool_reuses_buffers_nobody_views_any_more():
    pool = BufferPool(capacity_bytes=64 << 20)
    first = pool.take(20 << 20)
    held = pool.take(20 << 20)
    del first
    again = pool.take(20 << 20)
    assert (pool.allocated, pool.reused) == (2, 1)
    view_of_view = again[10:20]
    del again
    pool.take(20 << 20)  # `held` and `view_of_view` keep theirs: a new one
    assert (pool.allocated, pool.reused) == (3, 1)
    pool.take(30 << 20)  # over capacity: allocated unpooled
    assert len(held) == 20 << 20 and len(view_of_view) == 10


# -- keys ---------------------------------------------------------------------------------------


def test_generate_keys_writes_a_private_key_pair_per_worker(tmp_path):
    paths = generate_keys(tmp_path / "keys", 3)
    assert sorted(p.name for p in paths) == sorted(f"{stem}.key{s}" for stem in ("worker-0", "worker-1", "worker-2", "agent")
                                                   for s in ("", "_secret"))
    secret = tmp_path / "keys" / "worker-1.key_secret"
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    keys = load_curve_keys(tmp_path / "keys", 1, 3)
    assert len(keys.public) == 40 and len(keys.secret) == 40 and keys.peers[1] == keys.public
    assert len(set(keys.peers.values())) == 3
    with pytest.raises(FileExistsError, match="worker-0.key"):
        generate_keys(tmp_path / "keys", 1)
    with pytest.raises(ConfigError, match="zgrad-launch keygen"):
        load_curve_keys(tmp_path / "keys", 0, 4)
    with pytest.raises(ValueError):
        generate_keys(tmp_path / "none", 0)


# -- config -------------------------------------------------------------------------------------


def test_transport_and_security_config_validation():
    cfg = parse_config({"transport": {"advertise_address": "10.0.0.5", "send_timeout_s": 2, "recv_pool_mb": 64}})
    assert cfg.transport.advertise_address == "10.0.0.5" and cfg.transport.send_timeout_s == 2.0
    with pytest.raises(ConfigError, match="chunk_mb"):
        parse_config({"transport": {"chunk_mb": 64, "max_message_mb": 32}})
    with pytest.raises(ConfigError, match="recv_pool_mb"):
        parse_config({"transport": {"recv_pool_mb": 0}})
    with pytest.raises(ConfigError, match="key_dir"):
        parse_config({"security": {"curve": True}})


# -- import hygiene -------------------------------------------------------------------------------


def test_importing_the_transport_opens_nothing_and_starts_no_thread():
    code = (
        "import threading, zgrad.transport, zgrad.transport.mesh, zgrad.transport.loop.io_loop;"
        "assert threading.active_count() == 1, threading.enumerate()"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_stall_of_this_worker_moves_every_peer_clock_on():
    live = Liveness(heartbeat_interval_s=0.1, heartbeat_timeout_s=1.0)
    live.heard_from(1, 0.0)
    live.heard_from(2, 0.5)
    live.stalled(5.0)  # this worker was frozen from about 0.6 s to 5.6 s
    assert live.silent(5.6) == []
    assert [r for r, _ in live.silent(6.2)] == [1]
    assert [r for r, _ in live.silent(6.6)] == [1, 2]

"""Same-host single-copy buffers (cross-memory attach): exact bytes, order, fallback, forgery, release.

The cross-process tests run rank 1 as a child process (``peer_process.py``), always killed in
``finally``; the others use meshes in this process (CMA works within one process too: the
worker reads its own pid). Loopback only.
"""

from __future__ import annotations

import errno
import gc
import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
import weakref

import numpy as np
import pytest
from transport_world import WAIT_S, control, raw_peer_joined, recv_kind, start_all

from zgrad.config import parse_config
from zgrad.errors import ConfigError
from zgrad.transport import cma_sys, cma_tickets, create_mesh
from zgrad.transport import frames as fr
from paths import SUPPORT

PEER = SUPPORT / "peer_process.py"
MIB = 1 << 20
MIN = 256 << 10  # the default transport.cma_min_kb, in bytes


class Bytes(bytearray):
    """A bytearray that can be weakly referenced (to see when the transport lets go of it)."""


def wait_until(predicate, timeout_s: float = WAIT_S, what: str = "condition") -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, f"{what} not met within {timeout_s} s"
        time.sleep(0.02)


def digest(buffer) -> bytes:
    return hashlib.sha256(memoryview(buffer).cast("B")).digest()


# -- a rank 0 here and a rank 1 in a child process ---------------------------------------------


class ChildWorld:
    """Rank 0 in this process, rank 1 an echoing ``peer_process.py`` (tcp or ipc; ``transport`` overrides)."""

    def __init__(self, kind: str, ipc_dir: str, child_transport: dict | None = None, **transport):
        job = f"cma{uuid.uuid4().hex[:8]}"
        settings = {"kind": kind, "ipc_dir": ipc_dir, "heartbeat_interval_s": 0.1, "heartbeat_timeout_s": 5.0, **transport}
        config = parse_config({"job": {"name": job}, "transport": {"connect_timeout_s": 20.0, **settings}})
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.lost: queue.SimpleQueue = queue.SimpleQueue()
        self.mesh = create_mesh(config, 0, 2, "survivor", on_message=self.inbox.put,
                                on_peer_lost=lambda rank, why: self.lost.put((rank, why)), valid_kinds={1, 2})
        endpoint = self.mesh.bind()
        port = endpoint.rsplit(":", 1)[1] if kind == "tcp" else "0"
        self.child = subprocess.Popen([sys.executable, str(PEER), "1", "2", port, job,
                                       json.dumps({**settings, **(child_transport or {})})],
                                      stdout=subprocess.PIPE, text=True)

    def start(self) -> None:
        self.mesh.start()
        assert self.child.stdout.readline().strip() == "READY"

    def peer_stats(self) -> dict:
        self.mesh.send(1, 2, 0)
        env = self.inbox.get(timeout=WAIT_S)
        assert env.kind == 2
        return env.meta

    def close(self) -> None:
        self.mesh.close(timeout_s=1.0)
        if self.child.poll() is None:
            os.kill(self.child.pid, signal.SIGCONT)
            self.child.kill()
        self.child.wait(10)
        self.child.stdout.close()


@pytest.fixture
def child_world(short_tmp):
    made = []

    def make(kind: str, child_transport: dict | None = None, **transport) -> ChildWorld:
        world = ChildWorld(kind, short_tmp, child_transport, **transport)
        made.append(world)
        world.start()
        return world

    yield make
    for world in made:
        world.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cma_mode", ["auto", "off"])
@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_big_and_small_buffers_echo_byte_exact_in_order_across_processes(child_world, kind, cma_mode):
    world = child_world(kind, cma=cma_mode)
    mesh = world.mesh
    base = os.urandom(2 * MIB + 7)
    mixed = [
        os.urandom(1024),                                   # small: inline either way
        bytearray(os.urandom(MIN)),                         # exactly the threshold
        os.urandom(MIB + 5),                                # read-only bytes
        memoryview(base)[7 : 7 + MIB + 3],                  # a read-only view at an odd offset
        b"",
        np.arange((16 * MIB + 4) // 4, dtype=np.float32),   # a numpy array, over one chunk
        memoryview(bytearray(os.urandom(3 * MIB))).cast("I")[::1],  # a typed writable view
    ]
    huge = os.urandom(64 * MIB + 3)
    mesh.send(1, 1, 1, {"what": "mixed"}, mixed)
    mesh.send(1, 1, 2, {"what": "huge"}, [huge, b"tail"])
    for i in range(3, 203):  # inline and remote messages interleaved: the order must hold
        mesh.send(1, 1, i, i, [i.to_bytes(4, "little") * (1 if i % 2 else MIN // 4 + i)])

    first = world.inbox.get(timeout=60)
    assert (first.request_id, first.meta) == (1, {"what": "mixed"})
    assert [b.nbytes for b in first.buffers] == [memoryview(b).nbytes for b in mixed]
    assert [digest(b) for b in first.buffers] == [digest(b) for b in mixed]
    second = world.inbox.get(timeout=60)
    assert second.request_id == 2 and digest(second.buffers[0]) == digest(huge) and second.buffers[1] == b"tail"
    assert not second.buffers[0].readonly
    del first, second
    for i in range(3, 203):
        env = world.inbox.get(timeout=WAIT_S)
        assert env.request_id == i and env.meta == i, "messages overtook each other"
        assert bytes(env.buffers[0]) == i.to_bytes(4, "little") * (1 if i % 2 else MIN // 4 + i)
    del env

    remote_per_send = 5 + 1 + 100  # five big buffers, the huge one, every other small message
    mine = mesh.stats()
    if cma_mode == "off":
        assert mine["cma_peers"] == 0 and "cma_sent" not in mine and "cma_received" not in mine
        assert "cma_received" not in world.peer_stats()
        return
    assert mine["cma_peers"] == 1 and mine["cma_sent"] == remote_per_send
    assert mine["cma_received"] == remote_per_send  # the echoes came back by ticket too
    wait_until(lambda: mesh.stats()["cma_tickets_open"] == 0, what="our tickets all reported done")
    wait_until(lambda: world.peer_stats()["cma_tickets_open"] == 0, what="the peer's tickets all reported done")
    theirs = world.peer_stats()
    assert theirs["cma_received"] == theirs["cma_sent"] == remote_per_send
    assert theirs["rejected_total"] == 0 and mesh.stats()["rejected_total"] == 0


@pytest.mark.timeout(60)
def test_a_peer_killed_while_holding_tickets_has_them_taken_back(child_world):
    # Rank 0 loses the stopped peer after 2 s of silence; the peer itself never gives up on rank 0
    # (a loaded machine may keep rank 0 quiet for a while), so the loss is the stop's, not a goodbye.
    world = child_world("tcp", child_transport={"heartbeat_timeout_s": 60.0}, heartbeat_timeout_s=2.0)
    mesh = world.mesh
    buffers = [Bytes(os.urandom(MIB)) for _ in range(4)]
    refs = [weakref.ref(b) for b in buffers]
    mesh.send(1, 1, 1, None, buffers[:1])
    assert world.inbox.get(timeout=WAIT_S).request_id == 1
    wait_until(lambda: mesh.stats()["cma_tickets_open"] == 0, what="the first ticket reported done")

    os.kill(world.child.pid, signal.SIGSTOP)  # it will never read what comes next
    sent_before = mesh.stats()["cma_sent"]
    mesh.send(1, 1, 2, None, buffers[1:])
    assert mesh.stats()["cma_sent"] == sent_before + 3  # each buffer went by ticket, held for the reader
    del buffers
    os.kill(world.child.pid, signal.SIGKILL)
    rank, why = world.lost.get(timeout=30)
    assert rank == 1 and "heartbeat_timeout_s" in why
    assert mesh.stats()["cma_tickets_open"] == 0
    gc.collect()
    assert all(r() is None for r in refs), "buffers offered to a lost peer are still referenced"


# -- meshes in this process --------------------------------------------------------------------


def test_tickets_to_a_stuck_peer_are_taken_back_when_the_mesh_closes(worlds):
    release = threading.Event()

    def handler(rank, worker):
        return (lambda env: release.wait(WAIT_S)) if rank == 1 else worker.inbox.put

    workers = worlds.world("tcp", 2, on_message=handler, heartbeat_timeout_s=30.0)
    try:
        payload = Bytes(MIB)
        ref = weakref.ref(payload)
        for i in range(4):  # the first one blocks rank 1's I/O thread; the others wait unread
            workers[0].mesh.send(1, 1, i, None, [payload])
        del payload
        assert workers[0].mesh.stats()["cma_tickets_open"] >= 3
        workers[0].mesh.close(timeout_s=0.3)
        assert workers[0].mesh.stats()["cma_tickets_open"] == 0
        gc.collect()
        assert ref() is None
    finally:
        release.set()


def test_in_process_worlds_use_cma_except_over_inproc(worlds, transport):
    workers = worlds.world(transport, 2)
    big = os.urandom(3 * MIB)
    workers[0].mesh.send(1, 1, 7, None, [big, b"x"])
    env = workers[1].get()
    assert env.buffers[0] == big and env.buffers[1] == b"x"
    uses_cma = transport != "inproc"
    assert workers[0].mesh.stats()["cma_peers"] == int(uses_cma)
    assert workers[1].mesh.stats().get("cma_received", 0) == int(uses_cma)


def _failing_reader(hold_gil: bool = False):
    def read(pid, remote_address, local_address, nbytes):
        raise OSError(errno.EPERM, "Operation not permitted")
    return read


def _wrong_nonce(self):
    return {"pid": self.pid, "table": self.address, "slots": self.slots, "nonce": bytes(cma_tickets.NONCE_BYTES)}


@pytest.mark.parametrize("how", ["eperm", "wrong_nonce", "unsupported", "one_side_off"])
def test_a_failed_probe_falls_back_to_frames_at_once(worlds, monkeypatch, how):
    if how == "eperm":
        monkeypatch.setattr(cma_sys, "libc_reader", _failing_reader)
    elif how == "wrong_nonce":
        monkeypatch.setattr(cma_tickets.TicketTable, "offer", _wrong_nonce)
    elif how == "unsupported":
        monkeypatch.setattr(cma_sys, "libc_reader", lambda hold_gil=False: None)
    if how == "one_side_off":
        job = f"mixed{uuid.uuid4().hex[:8]}"
        meshes = []
        port = None
        for rank, mode in enumerate(["auto", "off"]):
            config = parse_config({"job": {"name": job}, "transport": {"kind": "tcp", "cma": mode, "connect_timeout_s": 10.0}})
            inbox: queue.SimpleQueue = queue.SimpleQueue()
            mesh = create_mesh(config, rank, 2, f"w{rank}", on_message=inbox.put, on_peer_lost=print, valid_kinds={1},
                               master_addr="127.0.0.1" if port else None, master_port=port)
            worlds.meshes.append(mesh)
            port = port or int(mesh.bind().rsplit(":", 1)[1])
            meshes.append((mesh, inbox))
        t0 = time.monotonic()
        start_all([m for m, _ in meshes])
        pairs = meshes
    else:
        t0 = time.monotonic()
        workers = worlds.world("tcp", 2)
        pairs = [(w.mesh, w.inbox) for w in workers]
    assert time.monotonic() - t0 < 5.0, "start-up waited for CMA answers that never came"
    big = os.urandom(2 * MIB)
    for (mesh, _), dst in zip(pairs, (1, 0)):
        mesh.send(dst, 1, dst, None, [big, b"small"])
    for mesh, inbox in pairs:
        env = inbox.get(timeout=WAIT_S)
        assert env.buffers[0] == big and env.buffers[1] == b"small"
        stats = mesh.stats()
        assert stats["cma_peers"] == 0 and "cma_sent" not in stats and "cma_received" not in stats
        assert stats["rejected_total"] == 0


# -- a raw peer that forges descriptors -------------------------------------------------------


@pytest.fixture
def worker_and_forger():
    """Rank 0: a mesh. Rank 1: raw sockets here that offer a ticket table of their own."""
    config = parse_config({"job": {"name": "forge"}, "transport": {"kind": "tcp", "connect_timeout_s": 10.0,
                                                                   "heartbeat_timeout_s": 60.0}})
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    mesh = create_mesh(config, 0, 2, "target", on_message=inbox.put, on_peer_lost=print, valid_kinds={1})
    endpoint = mesh.bind()
    tickets = cma_tickets.TicketTable(min_bytes=1, per_peer=100)

    def offer_own_tickets(raw_in, raw_out):
        raw_out.send_multipart(control(fr.KIND_CMA_OFFER, tickets.offer()))
        assert recv_kind(raw_in, fr.KIND_CMA_READY) == {"readable": True}

    with raw_peer_joined(mesh, endpoint, "forger", before_start_ends=offer_own_tickets) as peer:
        tickets.readers[0] = mesh.workers[0].session
        yield mesh, inbox, peer.raw_in, peer.raw_out, tickets


@pytest.mark.timeout(60)
def test_forged_descriptors_are_rejected_counted_and_the_worker_keeps_serving(worker_and_forger):
    mesh, inbox, raw_in, raw_out, tickets = worker_and_forger
    payload = os.urandom(MIB)

    def send(request_id, views):
        raw_out.send_multipart(fr.encode(1, 0, request_id, fr.encode_meta(None), views, 1 << 24))

    def ticket(dst=0):
        views, slots = tickets.attach(dst, [memoryview(payload)])
        return views[0], slots[0]

    good, _ = ticket()
    send(1, [good])
    stale, _ = ticket()
    slot, generation = fr.DESCRIPTOR.unpack(stale.descriptor)
    send(2, [fr.RemoteBuffer(MIB, fr.DESCRIPTOR.pack(slot, generation + 1))])   # wrong generation
    short, _ = ticket()
    send(3, [fr.RemoteBuffer(MIB - 1, short.descriptor)])                       # wrong length
    send(4, [fr.RemoteBuffer(MIB, fr.DESCRIPTOR.pack(tickets.slots - 1, 1))])   # never issued
    send(5, [fr.RemoteBuffer(MIB, fr.DESCRIPTOR.pack(tickets.slots + 9, 1))])   # outside the table
    tickets.readers[5] = 12345
    elsewhere, _ = ticket(dst=5)
    send(6, [elsewhere])                                                        # issued to another worker
    wait_until(lambda: mesh.stats()["rejected"].get("bad_cma", 0) == 5, what="five bad_cma rejections")

    env = inbox.get(timeout=WAIT_S)
    assert env.request_id == 1 and env.buffers[0] == payload
    send(8, [memoryview(b"still serving")])
    env = inbox.get(timeout=WAIT_S)
    assert (env.request_id, bytes(env.buffers[0])) == (8, b"still serving")
    assert inbox.empty()

    done: list[int] = []
    end = time.monotonic() + WAIT_S
    while len(done) < 12 and time.monotonic() < end:  # six descriptors reported done
        done += recv_kind(raw_in, fr.KIND_CMA_DONE)
    assert sorted(zip(done[::2], done[1::2])) == sorted(
        [fr.DESCRIPTOR.unpack(d) for d in (good.descriptor, short.descriptor, elsewhere.descriptor)]
        + [(slot, generation + 1), (tickets.slots - 1, 1), (tickets.slots + 9, 1)])
    assert tickets.release(0, done) == 4  # only the good and the short ticket were ours to give back
    assert tickets.open_count == 2  # the stale and the foreign ticket were never given back

    before = mesh.stats()["rejected"]["bad_cma"]
    raw_out.send_multipart(control(fr.KIND_CMA_DONE, [0, 1, 77, 3]))  # tickets never issued to rank 1
    wait_until(lambda: mesh.stats()["rejected"]["bad_cma"] == before + 1, what="a forged CMA_DONE counted")
    assert mesh.stats()["cma_tickets_open"] == 0


# -- the pieces ---------------------------------------------------------------------------------


class FakeSource:
    def __init__(self, data: bytes):
        self.data, self.released, self.read_calls = data, [], 0

    def release(self, slot, generation):
        self.released.append((slot, generation))

    def read(self, slot, generation, nbytes, take_buffer):
        self.read_calls += 1
        out = take_buffer(nbytes)
        out[:] = self.data[:nbytes]
        return out


def _remote_message(meta=None, descriptor=fr.DESCRIPTOR.pack(3, 9), nbytes=100):
    return fr.encode(1, 0, 5, fr.encode_meta(meta), [memoryview(b"inline"), fr.RemoteBuffer(nbytes, descriptor)], 64)


def test_remote_buffers_decode_through_the_source_and_are_checked_in_order():
    source = FakeSource(os.urandom(100))
    parts = _remote_message({"m": 1})
    second_length = fr.HEADER.size + 8  # after the inline buffer's
    assert int.from_bytes(parts[0][second_length : second_length + 8], "big") == 100 | fr.REMOTE_BIT
    kind, _, _, meta, buffers = fr.decode(parts, valid_kinds=frozenset({1}), max_message_bytes=1 << 20,
                                          take_buffer=lambda n: memoryview(bytearray(n)), remote=source)
    assert (kind, meta, bytes(buffers[0]), bytes(buffers[1])) == (1, {"m": 1}, b"inline", source.data)
    assert source.released == [(3, 9)]

    def reason(parts, remote=source, cap=1 << 20):
        with pytest.raises(fr.Rejected) as info:
            fr.decode(parts, valid_kinds=frozenset({1}), max_message_bytes=cap, take_buffer=pytest.fail, remote=remote)
        return info.value.reason

    assert reason(_remote_message(), cap=120) == "too_large"  # the remote length counts
    assert reason(_remote_message(descriptor=b"\0" * 11)) == "bad_frame_length"
    assert reason(_remote_message(), remote=None) == "bad_cma"
    source.released.clear()
    meta_at = fr.HEADER.size + 16
    assert reason([parts[0][:meta_at] + b"\xc1" + parts[0][meta_at + 1 :], *parts[1:]]) == "bad_metadata"
    assert source.released == [(3, 9)] and source.read_calls == 1  # released although never read


def test_ticket_table_issues_within_limits_and_takes_back_only_what_it_issued():
    table = cma_tickets.TicketTable(min_bytes=1000, per_peer=2, slots=3)
    small, big = memoryview(b"s" * 10), memoryview(bytearray(4000))
    assert table.attach(1, [big]) == ([big], None)  # rank 1 never said it reads us
    table.readers.update({1: 11, 2: 22})
    views, slots = table.attach(1, [small, big, big, big])
    assert views[0] is small and type(views[1]) is fr.RemoteBuffer and views[3] is big  # 2 per peer
    assert slots == [0, 1] and table.open_count == 2 and table.no_ticket == 1
    (_, [slot]) = table.attach(2, [big])
    assert table.attach(2, [big])[1] is None and table.no_ticket == 2  # the table is full
    descriptor = fr.DESCRIPTOR.unpack(views[1].descriptor)
    assert table.release(2, list(descriptor)) == 1  # not rank 2's ticket
    assert table.release(1, [descriptor[0], descriptor[1] + 1]) == 1  # wrong generation
    assert table.release(1, [99, 1]) == 1 and table.open_count == 3
    assert table.release(1, list(descriptor)) == 0 and table.open_count == 2
    table.cancel([slot])
    table.release_rank(1)
    assert table.open_count == 0 and table.readers == {2: 22}
    views, _ = table.attach(2, [big])
    assert fr.DESCRIPTOR.unpack(views[0].descriptor)[1] >= 2  # a reused slot has a new generation
    table.release_all()
    assert table.open_count == 0 and table.readers == {}


def test_buffer_addresses_of_every_kind_of_buffer_read_back_exactly():
    read = cma_sys.libc_reader()
    if read is None:
        pytest.skip("no process_vm_readv here")
    data = os.urandom(5000)
    for buffer in (data, bytearray(data), memoryview(data)[123:4567], np.frombuffer(data, np.uint8)[8:],
                   memoryview(bytearray(data))[1:]):
        view = fr.as_byte_view(buffer)
        out = memoryview(bytearray(view.nbytes))
        cma_sys.read_into(read, os.getpid(), cma_sys.buffer_address(view), out)
        assert out == view
    with pytest.raises(OSError):
        cma_sys.read_into(read, os.getpid(), 8, memoryview(bytearray(16)))  # nothing is mapped there


def test_cma_config_keys_are_validated():
    assert parse_config({}).transport.cma == "auto"
    with pytest.raises(ConfigError, match="'auto', 'off'"):
        parse_config({"transport": {"cma": "on"}})
    with pytest.raises(ConfigError, match="cma_min_kb"):
        parse_config({"transport": {"cma_min_kb": 0}})

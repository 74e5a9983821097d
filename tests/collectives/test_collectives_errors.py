"""What goes wrong with collectives, and every documented error: ranks that call different
collectives, timeouts, a monitored barrier, a killed rank, a rank that leaves early, malformed
messages, and the mistakes init_process_group and the collectives refuse."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

import zgrad
import zgrad.distributed as dist
from pg_harness import leftover_threads, pg_config, rank_process, run_ranks, run_ranks_expecting_errors
from rpc_harness import free_port, join_threads
from zgrad.distributed.collectives.messages import KIND_ABORT, KIND_DATA
from zgrad.distributed.collectives.state import current_world
from zgrad.errors import CollectiveError, ConfigError, WorkerUnavailableError, ZgradError, ZgradTimeoutError

pytestmark = pytest.mark.timeout(120)

MISMATCH = "Detected mismatch between collectives on ranks"


@pytest.fixture(autouse=True)
def no_leftover_threads():
    yield
    assert not leftover_threads(), f"process group threads still running: {leftover_threads()}"


# --- ranks that disagree ----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["one_hop", "ring"])
def test_different_collectives_fail_on_every_rank_naming_what_each_called(path):
    config = pg_config("tcp", chunk_kb=1, small_tensor_kb=64 if path == "one_hop" else 0)

    def body(rank: int) -> None:
        t = zgrad.ones(1000)
        if rank == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, 0)

    errors = run_ranks_expecting_errors(2, body, "tcp", config)
    for error in errors:
        assert isinstance(error, CollectiveError), error
        assert MISMATCH in str(error)
        assert "all_reduce(SequenceNumber=1, ReduceOp=SUM" in str(error) and "broadcast(SequenceNumber=1" in str(error)


@pytest.mark.parametrize("what", ["dtype", "shape", "op"])
def test_dtype_shape_or_reduction_mismatch_fails_every_rank_and_the_group_stays_failed(what):
    def body(rank: int) -> None:
        dtype = np.float64 if what == "dtype" and rank == 1 else np.float32
        n = 11 if what == "shape" and rank == 1 else 10
        op = dist.ReduceOp.MAX if what == "op" and rank == 1 else dist.ReduceOp.SUM
        try:
            dist.all_reduce(zgrad.zeros(n, dtype=dtype), op=op)
        finally:
            with pytest.raises(CollectiveError, match=MISMATCH):  # sticky: later collectives fail too
                dist.all_reduce(zgrad.zeros(3))

    errors = run_ranks_expecting_errors(2, body, "inproc")
    for error in errors:
        assert isinstance(error, CollectiveError) and MISMATCH in str(error), error


@pytest.mark.parametrize("path", ["one_hop", "ring"])
def test_one_odd_rank_out_of_three_fails_all_three(path):
    config = pg_config("tcp", chunk_kb=1, small_tensor_kb=64 if path == "one_hop" else 0)

    def body(rank: int) -> None:
        dist.all_reduce(zgrad.ones(500 if rank != 2 else 400))

    errors = run_ranks_expecting_errors(3, body, "tcp", config)
    for error in errors:
        assert isinstance(error, CollectiveError) and MISMATCH in str(error), error
        assert "TensorShape=[500]" in str(error) and "TensorShape=[400]" in str(error)


def test_different_settings_are_a_mismatch_not_a_hang():
    """Ranks whose [ddp] settings pick different algorithms for the same call are told so."""
    port = free_port()
    configs = [pg_config("tcp", small_tensor_kb=64), pg_config("tcp", small_tensor_kb=0, chunk_kb=1)]
    configs[1]["job"] = configs[0]["job"]
    errors: list = [None, None]

    def rank_thread(rank: int) -> None:
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, config=configs[rank])
        try:
            dist.all_reduce(zgrad.ones(100))
        except CollectiveError as exc:
            errors[rank] = exc
        finally:
            dist.destroy_process_group()

    join_threads([threading.Thread(target=rank_thread, args=(r,)) for r in range(2)], 60)
    assert all(isinstance(e, CollectiveError) and "Algorithm=one_hop" in str(e) and "Algorithm=ring/256" in str(e)
               for e in errors), errors


# --- timeouts -----------------------------------------------------------------------------------


def test_a_timeout_names_the_rank_not_heard_from():
    config = pg_config("tcp", timeout_s=1.0)

    def body(rank: int) -> None:
        if rank == 0:
            start = time.monotonic()
            with pytest.raises(ZgradTimeoutError, match=r"Timed out after 1 s in all_reduce\(SequenceNumber=1.*no message "
                                                        r"from rank\(s\) 1") as caught:
                dist.all_reduce(zgrad.ones(4))
            assert time.monotonic() - start < 5
            assert caught.value.silent_ranks == [1]
        else:
            time.sleep(2.0)  # never calls it

    run_ranks(2, body, "tcp", config)


def test_monitored_barrier_names_the_missing_ranks():
    config = pg_config("tcp")

    def body(rank: int) -> None:
        if rank == 0:
            with pytest.raises(ZgradTimeoutError, match="Rank 2 failed to pass monitoredBarrier in 500 ms"):
                dist.monitored_barrier(timeout=0.5)
        elif rank == 1:
            with pytest.raises(CollectiveError, match="Rank 2 failed to pass monitoredBarrier"):
                dist.monitored_barrier(timeout=10)  # rank 0 gives up and tells it
        else:
            time.sleep(1.5)

    run_ranks(3, body, "tcp", config)


def test_monitored_barrier_waiting_for_all_ranks_names_every_missing_one():
    def body(rank: int) -> None:
        if rank == 0:
            with pytest.raises(ZgradTimeoutError, match="Ranks 1, 2 failed to pass monitoredBarrier in 300 ms"):
                dist.monitored_barrier(timeout=0.3, wait_all_ranks=True)
        else:
            time.sleep(1.0)

    run_ranks(3, body, "inproc")


def test_monitored_barrier_passes_when_everyone_arrives():
    run_ranks(3, lambda rank: dist.monitored_barrier(timeout=20), "inproc")


def test_work_wait_with_a_timeout_then_without():
    entered = threading.Event()

    def body(rank: int) -> None:
        t = zgrad.ones(3)
        if rank == 0:
            work = dist.all_reduce(t, async_op=True)
            with pytest.raises(ZgradTimeoutError):
                work.wait(timeout=0.2)
            assert not work.is_completed() and work.exception() is None
            with pytest.raises(RuntimeError, match="has not completed yet"):
                work.is_success()
            entered.set()
            work.wait()
            np.testing.assert_array_equal(t.numpy(), [2.0, 2.0, 2.0])
        else:
            assert entered.wait(20)
            dist.all_reduce(t)

    run_ranks(2, body, "inproc")


# --- dead and departed ranks --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["kill-9", "sigstop"])
def test_a_killed_rank_fails_the_collective_on_the_survivors_within_the_heartbeat_timeout(kind, how):
    config = pg_config(kind)
    config["transport"].update(heartbeat_interval_s=0.1, heartbeat_timeout_s=1.0)
    port = free_port()
    with rank_process(config, 2, 3, port) as peer:
        def body(rank: int) -> None:
            dist.all_reduce(zgrad.ones(4))  # the peer joins this one
            if rank == 0:
                time.sleep(0.2)
                peer.send_signal(how)
            start = time.monotonic()
            with pytest.raises(WorkerUnavailableError, match="rank 2 of group WORLD is unavailable"):
                dist.all_reduce(zgrad.ones(4))
            assert time.monotonic() - start < 1.0 + 2.5  # heartbeat_timeout_s plus slack
            start = time.monotonic()
            with pytest.raises(WorkerUnavailableError, match="rank 2"):
                dist.all_reduce(zgrad.ones(4))  # the group stays failed: at once
            assert time.monotonic() - start < 0.5

        run_ranks(3, body, kind, config, ranks=[0, 1], port=port)


def test_a_rank_that_leaves_early_fails_only_what_still_waits_for_it():
    def body(rank: int) -> None:
        if rank == 1:
            dist.all_reduce(zgrad.ones(2))
            return  # and destroys the group: its mesh says goodbye
        dist.all_reduce(zgrad.ones(2))  # it took part in this one: fine
        # found on the receive, or on the send (the transport may know first that it is gone)
        with pytest.raises(WorkerUnavailableError, match=r"rank\(s\) 1 of group WORLD left|\(rank 1\) is unavailable: it "
                                                         r"closed its mesh"):
            dist.all_reduce(zgrad.ones(2))

    run_ranks(2, body, "tcp")


@pytest.mark.parametrize("news", ["abort", "departure", "none"])
def test_a_send_to_a_peer_seen_closed_first_waits_for_why_it_left(news, monkeypatch):
    """The sending socket can see a peer close before this rank's I/O thread has handed on the
    ABORT the peer sent before it left (a race CI met once: a three-rank mismatch surfaced on one
    rank as "rank 2 closed its mesh"). The failed send waits for that news and raises it."""
    from zgrad.distributed.collectives import channel as channel_module
    from zgrad.distributed.collectives.channel import Channel
    from zgrad.distributed.collectives.fingerprint import Fingerprint
    from zgrad.distributed.collectives.group_state import GroupState

    monkeypatch.setattr(channel_module, "_CATCH_UP_S", 0.2 if news == "none" else 30.0)
    group = GroupState(0, (0, 1, 2), 1, "WORLD")
    closed = WorkerUnavailableError("worker 'rank2' (rank 2) is unavailable: it closed its mesh (shut down)")

    def send(rank, meta, buffers):
        raise closed

    channel = Channel(send, group, 1, Fingerprint("all_reduce", "SUM", "float32", (500,), -1), group.begin(1), 60.0,
                      lambda reason, src: None)
    aborted = CollectiveError(f"collective 1 of group WORLD failed on rank 2: {MISMATCH} ...")
    arrives = {"abort": lambda: group.fail(aborted), "departure": lambda: group.depart(2, "it closed its mesh"),
               "none": lambda: None}[news]
    timer = threading.Timer(0.05, arrives)
    timer.start()
    try:
        with pytest.raises((CollectiveError, WorkerUnavailableError)) as raised:
            channel.send(2, 0)
    finally:
        timer.join(5)
    if news == "abort":
        assert raised.value is aborted
    elif news == "departure":
        assert "left (destroyed the process group" in str(raised.value)
    else:
        assert raised.value is closed


def test_a_rank_told_of_a_failure_passes_it_on_before_it_can_leave(monkeypatch):
    """Three ranks in a ring: rank 0 finds the mismatch and ABORTs; rank 1 learns it from that
    ABORT before it sends rank 2 anything, and leaves. Rank 2 waits for rank 1, and rank 0's ABORT
    reaches it over another connection, in no order with rank 1's goodbye (a race CI met: the
    mismatch surfaced on rank 2 as "rank 1 left"). So rank 1 passes the ABORT on, once, on the
    connection its goodbye takes later."""
    from zgrad.distributed.collectives.comm import MeshComm
    from zgrad.transport import Envelope

    sent = []

    class StandInMesh:
        def is_alive(self, rank):
            return True

        def send(self, rank, kind, flags, meta, buffers=()):
            sent.append((rank, kind, meta))

    monkeypatch.setattr("zgrad.distributed.collectives.comm.create_mesh", lambda *a, **k: StandInMesh())
    comm = MeshComm(None, 1, 3, "rank1", None, None)
    group = comm.add_group(0, (0, 1, 2), "WORLD")
    abort = Envelope(0, KIND_ABORT, 0, 0, {"group": 0, "seq": 1, "error": f"CollectiveError: {MISMATCH} ..."}, ())
    comm._on_message(abort)
    assert MISMATCH in str(group.failure) and "failed on rank 0" in str(group.failure)
    assert sorted(rank for rank, kind, _ in sent if kind == KIND_ABORT) == [0, 2]
    assert all(MISMATCH in meta["error"] for _, _, meta in sent), "the reason travels on"
    comm._on_message(abort._replace(src=2))  # a second failure changes nothing and is not passed on
    assert len(sent) == 2


# --- malformed messages -------------------------------------------------------------------------


def test_malformed_messages_are_counted_and_dropped_and_the_rank_keeps_serving():
    sent = threading.Event()
    bad_meta = [
        "not a list", [0, 1, 2], [0, 1, 2, ["all_reduce", "SUM", "float32", [4], -1]],  # short fingerprint
        [-1, 1, 0, ["all_reduce", "SUM", "float32", [4], -1, "one_hop"]],  # negative group
        [0, 1, 0, ["all_reduce", "SUM", "float32", [4] * 100, -1, "one_hop"]],  # too many dims
        [0, 1, 0, ["all_reduce", "SUM", "float32", "4", -1, "one_hop"]],  # shape not a list
    ]

    def body(rank: int) -> dict:
        mesh = current_world().comm.mesh
        if rank == 1:
            for meta in bad_meta:
                mesh.send(0, KIND_DATA, 0, meta)
            mesh.send(0, KIND_DATA, 0, [0, 1, 0, ["all_reduce", "SUM", "float32", [1], -1, "one_hop"]], [b"a", b"b"])
            mesh.send(0, KIND_ABORT, 0, {"group": 0, "seq": 1})  # a key missing
            sent.set()
        else:
            assert sent.wait(20)
            time.sleep(0.2)
        t = zgrad.ones(4)
        dist.all_reduce(t)
        np.testing.assert_array_equal(t.numpy(), [2.0] * 4)
        return dict(current_world().comm.rejected)

    rejected = run_ranks(2, body, "tcp")[0]
    assert rejected.get("bad_metadata") == len(bad_meta) + 2, rejected


def test_a_message_for_a_group_from_a_non_member_is_dropped():
    def body(rank: int) -> dict:
        group = dist.new_group([0, 1])
        if rank == 2:
            current_world().comm.mesh.send(0, KIND_DATA, 0, [1, 1, 0, ["all_reduce", "SUM", "float32", [1], -1, "one_hop"]])
        else:
            t = zgrad.ones(1)
            dist.all_reduce(t, group=group)
            assert t.item() == 2.0
        dist.barrier()
        return dict(current_world().comm.rejected)

    assert run_ranks(3, body, "inproc")[0].get("not_a_member") == 1


# --- what init_process_group and the collectives refuse -------------------------------------------


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "ZGRAD_RANK", "ZGRAD_WORLD_SIZE", "ZGRAD_CONFIG",
                 "ZGRAD_PG_MASTER_ADDR", "ZGRAD_PG_MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_not_initialized_says_how_to_fix_it(clean_env):
    for call in (lambda: dist.all_reduce(zgrad.ones(1)), dist.get_rank, dist.barrier, dist.destroy_process_group):
        with pytest.raises(ZgradError, match="Default process group has not been initialized, please make sure to "
                                             "call init_process_group"):
            call()
    assert not dist.is_initialized()


def test_init_mistakes(clean_env):
    with pytest.raises(ConfigError, match="needs a rank and a world size"):
        dist.init_process_group()
    with pytest.raises(ValueError, match="Invalid backend: 'tpu'"):
        dist.init_process_group("tpu", rank=0, world_size=1)
    with pytest.raises(ValueError, match="init_method 'file:///tmp/store' is not supported"):
        dist.init_process_group(init_method="file:///tmp/store", rank=0, world_size=1)
    with pytest.raises(ConfigError, match="needs rank 0's address"):
        dist.init_process_group(rank=0, world_size=2)
    with pytest.raises(ConfigError, match="rank 2 is not valid for world_size 2"):
        dist.init_process_group(init_method="tcp://127.0.0.1:1", rank=2, world_size=2)
    with pytest.raises(ValueError, match="timeout must not be negative"):
        dist.init_process_group(rank=0, world_size=1, timeout=-1)


def test_env_init_torch_backend_names_and_a_second_init(clean_env):
    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "1")
    clean_env.setenv("MASTER_ADDR", "127.0.0.1")
    clean_env.setenv("MASTER_PORT", str(free_port()))
    dist.init_process_group("gloo", init_method="env://")
    try:
        assert dist.get_rank() == 0 and dist.get_world_size() == 1
        assert dist.get_backend() == "gloo"  # the name the script asked for
        t = zgrad.tensor([1.0, 2.0])
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
        with pytest.raises(ZgradError, match="trying to initialize the default process group twice!"):
            dist.init_process_group("nccl")
    finally:
        dist.destroy_process_group()


def test_bad_collective_arguments(clean_env):
    dist.init_process_group(rank=0, world_size=1, config={"transport": {"kind": "inproc"}})
    try:
        with pytest.raises(TypeError, match="must be a zgrad Tensor, got ndarray"):
            dist.all_reduce(np.ones(3))
        with pytest.raises(TypeError, match="dtype bool; collectives support float32, float64, int32, int64"):
            dist.all_reduce(zgrad.tensor([True, False]))
        with pytest.raises(ValueError, match="unsupported reduction 'median'"):
            dist.all_reduce(zgrad.ones(2), op="median")
        with pytest.raises(ValueError, match="one tensor per rank of the group \\(1\\), got 2"):
            dist.all_gather([zgrad.ones(2), zgrad.ones(2)], zgrad.ones(2))
        with pytest.raises(ValueError, match="expected \\[2\\] and float32"):
            dist.all_gather([zgrad.ones(3)], zgrad.ones(2))
        with pytest.raises(ValueError, match="the output must be a contiguous tensor of 1 x 2 elements"):
            dist.all_gather_into_tensor(zgrad.ones(3), zgrad.ones(2))
        with pytest.raises(ValueError, match="dst=1 is not a rank of WORLD"):
            dist.reduce(zgrad.ones(2), dst=1)
        with pytest.raises(TypeError, match="group must be a ProcessGroup"):
            dist.all_reduce(zgrad.ones(2), group="WORLD")
        with pytest.raises(ValueError, match="new_group: ranks must be distinct and in 0..0"):
            dist.new_group([0, 0])
    finally:
        dist.destroy_process_group()


def test_a_rank_that_never_joins_fails_init_in_time(clean_env):
    config = pg_config("tcp")
    config["transport"]["connect_timeout_s"] = 1.0
    start = time.monotonic()
    with pytest.raises(ZgradTimeoutError, match=r"waiting for 1 worker\(s\) to register: rank 1"):
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=2, config=config)
    assert time.monotonic() - start < 10
    assert not dist.is_initialized() and not leftover_threads()


def test_destroying_the_group_ends_a_collective_still_waiting_at_once():
    def body(rank: int) -> None:
        if rank == 0:
            work = dist.all_reduce(zgrad.ones(4), async_op=True)  # rank 1 never joins it
            time.sleep(0.2)
            start = time.monotonic()
            dist.destroy_process_group()
            assert time.monotonic() - start < 5
            with pytest.raises(CollectiveError, match="the process group was destroyed on this rank"):
                work.wait(timeout=5)
        else:
            time.sleep(1.0)
            dist.destroy_process_group()

    run_ranks(2, body, "tcp", destroy=False)

"""Context releases riding in the next call to their worker (``zgrad/distributed/autograd/releases.py``):
no CONTEXT_RELEASE message while calls keep coming, a flush when none comes, nothing overtaken."""

from __future__ import annotations

import pytest

import rpc_targets as T
import zgrad
from rpc_harness import assert_settled, make_config, poll, run_workers, settled_counters
from zgrad.distributed import autograd as dist_autograd
from zgrad.distributed import rpc
from zgrad.distributed.autograd import releases
from zgrad.distributed.autograd.releases import PendingReleases, released_ids
from zgrad.errors import ProtocolError, RemoteError

pytestmark = pytest.mark.timeout(120)


def test_pending_releases_wait_per_worker_and_flush_when_due():
    pending = PendingReleases(delay_s=1.0)
    assert pending.add(1, 10, now_s=0.0) is True  # the first arms the flush
    assert pending.add(2, 11, now_s=0.5) is False  # armed already
    assert pending.add(1, 12, now_s=0.6) is False
    assert len(pending) == 3
    assert pending.take(3) == []
    assert pending.take(1) == [10, 12]
    assert pending.take(1) == []
    due, next_s = pending.take_due(1.2)
    assert due == [] and next_s == pytest.approx(0.3)  # 11 waits until 1.5
    due, next_s = pending.take_due(1.5)
    assert due == [(2, 11)] and next_s is None  # nothing waits: disarmed
    assert pending.add(2, 13, now_s=2.0) is True  # so the next one arms it again
    assert pending.add(3, 14, now_s=2.0) is False
    assert sorted(pending.take_all()) == [(2, 13), (3, 14)]
    assert len(pending) == 0


def test_released_ids_are_checked():
    assert released_ids([1, 2]) == [1, 2]
    for bad in ("1", [1, "2"], [True], None, [1.0]):
        with pytest.raises(ProtocolError, match="'released' must be a list of autograd context ids"):
            released_ids(bad)


def engine_sent(rank, kind):
    return rpc.rpc_sync(f"worker{rank}", T.dist_debug_info).get(f"messages_sent.{kind}", 0)


def contexts_on(rank):
    """worker ``rank``'s context count, asked through worker3 (a call from here would carry the
    releases waiting for ``rank``)."""
    return rpc.rpc_sync("worker3", T.remote_contexts, args=(f"worker{rank}",))


def test_a_release_rides_in_the_next_call_and_is_passed_on_the_same_way(monkeypatch):
    monkeypatch.setattr(releases, "RELEASE_DELAY_S", 60.0)  # no flush during the test: only calls carry them

    def body(rank):
        if rank != 0:
            return None
        a, b = (zgrad.randn(3, 3, requires_grad=True) for _ in range(2))
        sent_before = [engine_sent(r, "CONTEXT_RELEASE") for r in range(4)]
        with dist_autograd.context() as context_id:
            loss = rpc.rpc_sync("worker1", T.chain_through, args=(["worker2"], a, b)).sum()
            dist_autograd.backward(context_id, [loss])
        # worker1 and worker2 still hold the context: nothing carried its release yet
        assert [contexts_on(1), contexts_on(2)] == [1, 1]
        # the next call to worker1 carries it; worker1 releases it before running the call
        assert rpc.rpc_sync("worker1", T.dist_debug_info)["num_autograd_contexts"] == 0
        assert contexts_on(2) == 1  # worker1 keeps it for its next call to worker2
        rpc.rpc_sync("worker1", T.chain_through, args=(["worker2"], 2.0, 3.0))
        assert contexts_on(2) == 0
        assert [engine_sent(r, "CONTEXT_RELEASE") for r in range(4)] == sent_before
        return settled_counters(4)

    assert_settled(run_workers(4, make_config("tcp", 4), body)[0])


def test_a_release_without_a_call_to_ride_goes_out_by_itself():
    def body(rank):
        if rank != 0:
            return None
        a, b = (zgrad.randn(2, requires_grad=True) for _ in range(2))
        sent_before = engine_sent(0, "CONTEXT_RELEASE")
        with dist_autograd.context():
            rpc.rpc_sync("worker1", T.add, args=(a, b))
        assert poll(lambda: contexts_on(1), lambda n: n == 0) == 0
        assert engine_sent(0, "CONTEXT_RELEASE") == sent_before + 1
        return settled_counters(4)

    assert_settled(run_workers(4, make_config("tcp", 4), body)[0])


def test_a_release_never_overtakes_a_call_of_its_context_still_in_flight(monkeypatch):
    monkeypatch.setattr(releases, "RELEASE_DELAY_S", 60.0)

    def body(rank):
        if rank != 0:
            return None
        sent_before = engine_sent(0, "CONTEXT_RELEASE")
        with dist_autograd.context():
            future = rpc.rpc_async("worker1", T.wait_at_gate, args=("release-behind-async", 5))
        # The call made in the context has not run yet: its release goes now, behind it on the link,
        # not in the next call (which travels on another connection and could overtake it).
        assert rpc.rpc_sync("worker1", T.echo, args=(7,)) == 7
        assert engine_sent(0, "CONTEXT_RELEASE") == sent_before + 1
        T.Gates.open("release-behind-async")
        # it ran on worker1 in its context (not "already released on this worker"); its result,
        # without gradients, is the caller's although the context is gone here
        assert future.wait() == 5
        return settled_counters(4)

    assert_settled(run_workers(4, make_config("tcp", 4), body)[0])


def test_shutdown_sends_the_releases_still_waiting(monkeypatch):
    monkeypatch.setattr(releases, "RELEASE_DELAY_S", 60.0)
    workers = {}

    def body(rank):
        from zgrad.distributed.autograd.worker import current_worker

        workers[rank] = current_worker()
        if rank == 0:
            with dist_autograd.context():
                rpc.rpc_sync("worker1", T.add, args=(zgrad.ones(2, requires_grad=True), 1.0))
            T.Gates.get("release-at-shutdown").wait(20)  # then shutdown() sends the release still waiting
        else:
            held = poll(lambda: len(workers[1].contexts.all()), lambda n: n == 1)
            T.Gates.open("release-at-shutdown")
            return held
        return None

    assert run_workers(2, make_config("tcp", 2), body)[1] == 1
    assert len(workers[0]._pending) == 0
    assert len(workers[1].contexts.all()) == 0


def test_a_malformed_release_list_is_refused_with_an_error():
    from zgrad.distributed.rpc.codec import encode_value
    from zgrad.distributed.rpc.messages import Kind
    from zgrad.distributed.rpc.state import current_agent

    def body(rank):
        if rank != 0:
            return None
        meta = {"target": "rpc_targets:add", "payload": encode_value([[1, 2], {}]).payload, "timeout_s": 5.0,
                "released": ["x"]}
        with pytest.raises(RemoteError, match="'released' must be a list of autograd context ids"):
            current_agent().caller.request(1, Kind.CALL, meta, (), 5.0, "bad release list").wait()
        return rpc.rpc_sync("worker1", T.add, args=(1, 2))

    assert run_workers(2, make_config("tcp", 2), body)[0] == 3


def test_the_releases_riding_in_a_call_that_never_left_still_go(monkeypatch):
    """A call refused before it leaves (over ``max_message_mb``) loses nothing that rode in it."""
    monkeypatch.setattr(releases, "RELEASE_DELAY_S", 60.0)  # no flush: only the failed call could carry it

    def body(rank):
        if rank != 0:
            return None
        sent_before = engine_sent(0, "CONTEXT_RELEASE")
        with dist_autograd.context():
            rpc.rpc_sync("worker1", T.add, args=(zgrad.ones(2, requires_grad=True), 1.0))
        too_big = zgrad.zeros(2 << 20)  # 8 MiB over a 1 MiB cap: refused here, before it leaves
        with pytest.raises(Exception, match="max_message_mb"):
            rpc.rpc_sync("worker1", T.echo, args=(too_big,))
        assert poll(lambda: rpc.rpc_sync("worker1", T.dist_debug_info)["num_autograd_contexts"],
                    lambda n: n == 0) == 0
        assert engine_sent(0, "CONTEXT_RELEASE") == sent_before + 1
        return settled_counters(2)

    config = make_config("tcp", 2)
    config["transport"].update(max_message_mb=1, chunk_mb=1)
    assert_settled(run_workers(2, config, body)[0])


def held_before_start(name, count):
    """Whether worker ``name`` (in this process) holds ``count`` messages that arrived before its
    agent finished starting (polled, bounded)."""
    from zgrad.distributed.rpc.state import agent_named

    agent = agent_named(name)
    return poll(lambda: len(agent.callee._early or ()), lambda n: n >= count) >= count


def test_messages_that_arrive_before_start_run_in_arrival_order(monkeypatch):
    """worker1's agent finishes starting late: the CALL made in a context and the context's
    release (sent at once behind it, the call being in flight) both arrive before; they must
    run in that order, not the release first ("already released on this worker")."""
    from zgrad.distributed.rpc.pool import CalleePool

    held_open = T.Gates.get("worker1-start-held")
    start_pool = CalleePool.start

    def late_start(pool):
        if pool._name == "zgrad-worker1":
            held_open.wait(20)  # worker1's agent is not started until worker0 has sent both
        start_pool(pool)

    monkeypatch.setattr(CalleePool, "start", late_start)

    def body(rank):
        if rank != 0:
            return None
        with dist_autograd.context():
            future = rpc.rpc_async("worker1", T.add, args=(zgrad.ones(2, requires_grad=True), 1.0))
        released = engine_sent(0, "CONTEXT_RELEASE")
        assert held_before_start("worker1", 2)  # the CALL and the release both wait for the start
        held_open.set()
        value = future.wait()  # no "already released on this worker" from worker1
        return released, value

    with pytest.raises(Exception, match="Could not find autograd context"):  # only the late result, here
        run_workers(2, make_config("tcp", 2), body)


def test_an_early_call_that_blocks_does_not_hold_up_the_ones_after_it(monkeypatch):
    """Messages queued before start run in order, but one that blocks is left to finish on its
    thread while the rest go on (as the I/O leader is taken over): no early call stalls another."""
    from zgrad.distributed.rpc.pool import CalleePool

    held_open = T.Gates.get("worker1-start-held-2")
    start_pool = CalleePool.start

    def late_start(pool):
        if pool._name == "zgrad-worker1":
            held_open.wait(20)
        start_pool(pool)

    monkeypatch.setattr(CalleePool, "start", late_start)

    def body(rank):
        if rank != 0:
            return None
        blocked = rpc.rpc_async("worker1", T.wait_at_gate, args=("early-blocker", "late"))
        after = rpc.rpc_async("worker1", T.echo, args=("after",))
        assert held_before_start("worker1", 2)
        held_open.set()
        first = after.wait(10)  # while the first early call still waits at its gate
        T.Gates.open("early-blocker")
        return first, blocked.wait(10)

    assert run_workers(2, make_config("tcp", 2), body)[0] == ("after", "late")

"""The message path (docs/architecture.md, Threading model): callers send on sockets of their own
and wait there; the thread holding a worker's inbound socket runs calls itself and hands the
socket on before it blocks, or is taken over when a call runs long. Over every built-in
transport."""

from __future__ import annotations

import gc
import signal
import threading
import time

import numpy as np
import pytest

import rpc_targets as T
import zgrad
from rpc_harness import TRANSPORTS, join_threads, make_config, peer_process, poll, run_workers
from zgrad.distributed import autograd as dist_autograd
from zgrad.distributed import rpc
from zgrad.errors import WorkerUnavailableError, ZgradTimeoutError

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nested_calls_that_come_back_20_deep_over_4_workers(transport, tmp_path):
    # worker0 -> 1 -> 0 -> 1 -> 2 -> 1 -> ... : every worker is called back while its own calls wait.
    names = [f"worker{r}" for r in (1, 0, 1, 2, 1, 3, 2, 3, 0, 2, 0, 3, 1, 2, 3, 0, 1, 0, 2, 1)]

    def body(rank):
        if rank == 0:
            return rpc.rpc_sync(names[0], T.bounce, args=(names[1:], 1))
        return None

    assert run_workers(4, make_config(transport, 4, tmp_path), body)[0] == len(names)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_handler_calls_its_own_worker_with_almost_direct_max_kb(transport, tmp_path):
    # worker1's handler (its leader) sends 2 x 480 KB to worker1 itself on its own socket: over a
    # stream it writes to a connection that only a leader reads; the take-over frees it.
    def body(rank):
        if rank != 0:
            return None
        a = zgrad.tensor(np.arange(120_000, dtype=np.float32))
        out = rpc.rpc_sync("worker1", T.nested_add, args=("worker1", a, a))
        return np.array_equal(out.numpy(), 4 * a.numpy())

    assert run_workers(2, make_config(transport, 2, tmp_path), body)[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_64_threads_calling_at_once(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        results: dict[int, list] = {}

        def caller(i):
            rpc.bind_worker("worker0")  # workers are threads of this process here
            results[i] = [rpc.rpc_sync(f"worker{1 + (i + k) % 2}", T.add, args=(i, k)) for k in range(10)]

        join_threads([threading.Thread(target=caller, args=(i,)) for i in range(64)], 60)
        assert results == {i: [i + k for k in range(10)] for i in range(64)}
        return rpc.get_debug_info()["transport"]

    stats = run_workers(3, make_config(transport, 3, tmp_path), body)[0]
    assert stats["direct_requests"] >= 640 and stats.get("late_replies", 0) == 0


def test_a_sync_call_below_direct_max_kb_goes_direct_and_a_bigger_one_by_single_copy(tmp_path):
    config = make_config("tcp", 2, tmp_path)
    config["transport"]["direct_max_kb"] = 512

    def body(rank):
        if rank != 0:
            return None
        results = []
        for kb in (300, 512):  # both above cma_min_kb (256); only the second reaches direct_max_kb
            before = rpc.get_debug_info()["transport"]
            value = zgrad.tensor(np.arange(kb * 256, dtype=np.float32))
            echoed = rpc.rpc_sync("worker1", T.echo, args=(value,))
            after = rpc.get_debug_info()["transport"]
            assert np.array_equal(echoed.numpy(), value.numpy())
            results.append((after.get("direct_requests", 0) - before.get("direct_requests", 0),
                            after.get("cma_sent", 0) - before.get("cma_sent", 0)))
        return results

    assert run_workers(2, config, body)[0] == [(1, 0), (0, 1)]


def test_a_direct_call_over_inproc_shares_no_memory_either_way(tmp_path):
    """Over inproc a zero-copy frame would alias the sender's memory in the receiver: the caller's
    argument and the callee's result must arrive as copies (as over tcp, and as in PyTorch)."""
    def body(rank):
        if rank != 0:
            return None
        x = zgrad.zeros(32768)  # 128 KiB: a zero-copy frame size, below direct_max_kb (caller-direct)
        before = rpc.get_debug_info()["transport"].get("direct_requests", 0)
        rpc.rpc_sync("worker1", T.keep, args=("inproc-arg", x))
        x._data[...] = 1.0  # the caller writes its own tensor afterwards
        held_sum = rpc.rpc_sync("worker1", T.kept_sum, args=("inproc-arg",))
        result = rpc.rpc_sync("worker1", T.kept, args=("inproc-arg",))  # the callee's own tensor, as the result
        rpc.rpc_sync("worker1", T.fill_kept, args=("inproc-arg", 2.0))  # the callee writes it afterwards
        direct = rpc.get_debug_info()["transport"].get("direct_requests", 0) - before
        return held_sum, float(result.sum()), direct

    assert run_workers(2, make_config("inproc", 2, tmp_path), body)[0] == (0.0, 0.0, 4)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_callee_computing_2_s_holds_up_no_call_heartbeat_or_backward(transport, tmp_path):
    config = make_config(transport, 2, tmp_path)
    config["transport"].update(heartbeat_interval_s=0.1, heartbeat_timeout_s=1.0)

    def body(rank):
        if rank != 0:
            return None
        spinning = rpc.rpc_async("worker1", T.spin_for, args=(2.0,))
        time.sleep(0.1)  # the spin runs on worker1's leader, which is taken over
        slowest_s = 0.0
        while not spinning.done():
            start = time.monotonic()
            assert rpc.rpc_sync("worker1", T.add, args=(1, 2)) == 3
            a, b = (zgrad.tensor(np.full((3, 3), v), requires_grad=True) for v in (2.0, 3.0))
            with dist_autograd.context() as context_id:
                loss = rpc.rpc_sync("worker1", T.mul, args=(a, b)).sum()
                dist_autograd.backward(context_id, [loss])
                grads = dist_autograd.get_gradients(context_id)
            np.testing.assert_allclose(grads[a].numpy(), b.numpy())
            slowest_s = max(slowest_s, time.monotonic() - start)
        assert spinning.wait() > 0
        assert slowest_s < 1.0  # each round waited at most a few switch intervals, not for the spin
        return rpc.get_debug_info(), rpc.rpc_sync("worker1", T.transport_stats)

    info, stats1 = run_workers(2, config, body)[0]
    assert info["dead_workers"] == [] and stats1.get("peers_lost", 0) == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_quick_nested_call_keeps_the_role_and_a_slow_one_hands_it_on(transport, tmp_path, monkeypatch):
    """A handler's nested call that is answered within the leading wait, with nothing else
    arriving, keeps the socket role (its reply goes out from the same thread, no hand-off); one
    that waits while a call arrives hands the role on, so worker1 serves other calls while its
    handler still waits. The leading wait is 2 ms, within the inline budget of 5 ms; a loaded
    machine stalls a reply longer than that now and then, so here they are 1 s and 10 s: which
    path is taken then depends on what arrives, not on the machine's speed."""
    from zgrad.transport import caller_sockets

    monkeypatch.setattr(caller_sockets, "LEADING_WAIT_S", 1.0)

    measured = f"quick-calls-measured-{transport}"

    def body(rank):
        if rank != 0:
            # the other workers' own traffic (their shutdown's messages) waits until the quick calls
            # are counted: a message arriving at worker1 then makes its leader hand the role on
            T.Gates.open(f"{measured}-reached-{rank}")
            return T.wait_at_gate(measured, None)
        try:
            for other in (1, 2):
                assert T.Gates.get(f"{measured}-reached-{other}").wait(20.0)
            handoffs = rpc.rpc_sync("worker1", T.role_handoffs)
            for _ in range(20):
                assert rpc.rpc_sync("worker1", T.nested_add, args=("worker2", 1.0, 2.0)) == 6.0
            kept = rpc.rpc_sync("worker1", T.role_handoffs) - handoffs
            if kept:  # why (the counters of worker1's leader waits): reported by the assertion below
                kept = (kept, {k: v for k, v in rpc.rpc_sync("worker1", T.transport_stats).items() if "leader" in k})
        finally:
            T.Gates.open(measured)
        waiting = rpc.rpc_async("worker1", T.call_gated, args=("worker2", f"nested-wait-{transport}", 5))
        time.sleep(0.05)
        # worker1's handler waits on worker2's gate: worker1 still answers
        answered = [rpc.rpc_sync("worker1", T.add, args=(i, 1)) for i in range(5)]
        assert not waiting.done()
        T.Gates.open(f"nested-wait-{transport}")
        return kept, answered, waiting.wait(), rpc.rpc_sync("worker1", T.role_handoffs) - handoffs

    # and no heartbeat may arrive during a nested wait (it makes the leader hand the role on)
    config = make_config(transport, 3, tmp_path, transport={"inline_budget_ms": 10_000.0, "heartbeat_interval_s": 30.0,
                                                            "heartbeat_timeout_s": 120.0})
    kept, answered, value, handed = run_workers(3, config, body)[0]
    assert kept == 0
    assert answered == [1, 2, 3, 4, 5] and value == 5 and handed >= 1


def test_a_handler_making_many_quick_nested_calls_is_taken_over(tmp_path):
    """Quick nested calls keep the role one by one, but a handler making them for longer than the
    inline budget is taken over like one that computes: heartbeats and other calls go on."""
    config = make_config("tcp", 3, tmp_path)
    config["transport"].update(heartbeat_interval_s=0.05, heartbeat_timeout_s=0.5)

    def body(rank):
        if rank != 0:
            return None
        n = 3000
        busy = rpc.rpc_async("worker1", T.many_nested, args=("worker2", n))
        served = 0
        while not busy.done():
            assert rpc.rpc_sync("worker1", T.add, args=(served, 1)) == served + 1
            served += 1
        assert busy.wait() == n * (n - 1) // 2
        return served, rpc.get_debug_info(), rpc.rpc_sync("worker1", T.transport_stats)

    served, info, stats1 = run_workers(3, config, body)[0]
    assert served > 0 and info["dead_workers"] == [] and stats1.get("peers_lost", 0) == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_caller_that_times_out_drops_the_late_reply(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        start = time.monotonic()
        with pytest.raises(ZgradTimeoutError, match="ran past 0.2 seconds"):
            rpc.rpc_sync("worker1", T.sleep_then, args=(0.6, "late"), timeout=0.2)
        assert time.monotonic() - start < 0.5
        time.sleep(0.6)  # the late reply reaches this thread's socket
        assert rpc.rpc_sync("worker1", T.echo, args=("on time",)) == "on time"
        return rpc.get_debug_info()

    info = run_workers(2, make_config(transport, 2, tmp_path), body)[0]
    assert info["transport"]["late_replies"] == 1 and info["calls_in_flight"] == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_rref_forks_and_deletes_stay_ordered_under_load(transport, tmp_path):
    def body(rank):
        def churn(i):
            rpc.bind_worker(f"worker{rank}")
            for k in range(15):
                owner = f"worker{(rank + i + k) % 3}"
                rrefs = [rpc.remote(owner, T.add, args=(i, k)) for _ in range(3)]
                # forks to the owner (inside a caller-direct call) and to a third worker
                assert rpc.rpc_sync(owner, T.pass_rrefs_back, args=(rrefs,)) == [i + k] * 3
                third = f"worker{(rank + i + k + 1) % 3}"
                assert rpc.rpc_async(third, T.pass_rrefs_back, args=(rrefs[:1],)).wait() == [i + k]
                del rrefs

        join_threads([threading.Thread(target=churn, args=(i,)) for i in range(6)], 90)
        return None

    def settled(rank):
        return poll(lambda: [rpc.rpc_sync(f"worker{r}", T.rrefs_owned) for r in range(3)],
                    lambda owned: owned == [0, 0, 0])

    config = make_config(transport, 3, tmp_path)
    owned = run_workers(3, config, lambda rank: (body(rank), settled(rank))[1])
    assert owned == [[0, 0, 0]] * 3


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_rref_passed_to_its_owner_sends_no_fork_message_and_every_fork_is_freed(transport, tmp_path):
    # The owner registers the fork when it decodes the call (rpc_sync, rpc_async, remote, a
    # proxy); a third worker still gets its fork announced by RREF_FORK.
    def body(rank):
        if rank != 0:
            return None
        forks = lambda: rpc.get_debug_info()["messages_sent"].get("RREF_FORK", 0)  # noqa: E731
        before = forks()
        values = []
        for i in range(10):
            rref = rpc.remote("worker1", T.add, args=(i, 1))
            values.append(rpc.rpc_sync("worker1", T.rref_local_value, args=(rref,)))
            values.append(rpc.rpc_async("worker1", T.rref_local_value, args=(rref,)).wait())
            values.append(rpc.remote("worker1", T.rref_local_value, args=(rref,)).to_here())
            values.append(rref.rpc_sync().bit_length())
            del rref  # the caller's own fork goes at once: what it sent stays registered
        owner_calls = forks() - before
        rref = rpc.remote("worker1", T.add, args=(5, 5))
        third = rpc.rpc_sync("worker2", T.pass_rrefs_back, args=([rref],))
        return values, owner_calls, forks() - before - owner_calls, third

    def settled(rank):
        return poll(lambda: [rpc.rpc_sync(f"worker{r}", T.rrefs_owned) for r in range(3)],
                    lambda owned: owned == [0, 0, 0])

    results = run_workers(3, make_config(transport, 3, tmp_path), lambda rank: (body(rank), settled(rank)))
    values, owner_calls, third_calls, third = results[0][0]
    assert values == [v for i in range(10) for v in (i + 1, i + 1, i + 1, (i + 1).bit_length())]
    assert (owner_calls, third_calls, third) == (0, 1, [10])
    assert [owned for _, owned in results] == [[0, 0, 0]] * 3


@pytest.mark.parametrize("fields", [
    [7, 0, 9, 1],  # the fork "for the owner to register", but the receiver (rank 1) does not own it
    [7, 1, 9, 2],  # a fourth field that is not 1
    [7, 1, 9, True],
    [7, 1, 9, 1, 0],  # five fields
    [7, 5, 9],  # no such owner
])
def test_a_call_with_a_bad_rref_reference_is_refused_and_registers_no_fork(fields, tmp_path):
    import msgpack

    from zgrad.distributed.rpc.codec import EXT_RREF
    from zgrad.distributed.rpc.messages import Kind
    from zgrad.distributed.rpc.state import current_agent

    payload = msgpack.packb([[msgpack.ExtType(EXT_RREF, msgpack.packb(fields))], {}])

    def body(rank):
        if rank != 0:
            return None
        meta = {"target": "rpc_targets:echo", "payload": payload, "timeout_s": 5.0}
        with pytest.raises(rpc.RemoteError, match="malformed RRef reference"):
            current_agent().caller.request(1, Kind.CALL, meta, (), 5.0, "a call with a bad RRef").wait()
        owned = rpc.rpc_sync("worker1", T.rrefs_owned)  # still serving; nothing registered
        return owned, rpc.get_debug_info("worker1")["rejects_by_reason"]

    owned, rejects = run_workers(2, make_config("tcp", 2, tmp_path), body)[0]
    assert owned == 0
    assert any("malformed RRef reference" in reason for reason in rejects), rejects


def test_an_rref_in_a_call_to_its_owner_that_timed_out_lives_until_the_late_reply(tmp_path):
    # worker1 reads nothing for a while (two long calls: one handler past the budget is all
    # num_worker_threads = 1 lets go on beside the leader), so the call carrying the RRef
    # times out before the owner decoded it; the caller drops its own RRef at once. The fork it
    # sent must still find the value when the call runs, and both forks go after the late reply.
    # worker1 sends nothing meanwhile either, heartbeats included: on a loaded machine, where
    # its threads wait long for a core and the GIL, that silence outlasts the harness's 3 s.
    config = make_config("tcp", 2, tmp_path, rpc={"num_worker_threads": 1}, transport={"heartbeat_timeout_s": 30.0})

    def body(rank):
        if rank != 0:
            return None
        rref = rpc.remote("worker1", T.add, args=(20, 22))
        assert rref.to_here() == 42
        spins = [rpc.rpc_async("worker1", T.spin_for, args=(0.8,)) for _ in range(2)]
        time.sleep(0.1)
        with pytest.raises(ZgradTimeoutError):
            rpc.rpc_sync("worker1", T.keep_local_value, args=("late", rref), timeout=0.2)
        del rref
        gc.collect()
        for spin in spins:
            spin.wait()
        late = poll(lambda: rpc.rpc_sync("worker1", T.kept, args=("late",)) if rpc.rpc_sync(
            "worker1", T.has_kept, args=("late",)) else None, lambda value: value is not None)
        owned = poll(lambda: rpc.rpc_sync("worker1", T.rrefs_owned), lambda n: n == 0)
        return late, owned, rpc.get_debug_info()["transport"].get("late_replies", 0)

    assert run_workers(2, config, body)[0] == (42, 0, 1)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_calls_a_thread_collects_on_its_own_sockets_end_by_reply_error_timeout_or_size(transport, tmp_path):
    # start_call / collect (DistributedOptimizer.step's path): replies in order, a remote
    # error, a timeout whose late reply is dropped, a call big enough for the mesh; and from a
    # handler on a leader, calls back to its own caller do not deadlock.
    config = make_config(transport, 3, tmp_path)
    config["transport"]["direct_max_kb"] = 64

    def body(rank):
        if rank != 0:
            return None
        from zgrad.distributed.rpc.state import current_agent

        agent = current_agent()
        before = rpc.get_debug_info()["transport"]
        big = zgrad.tensor(np.arange(32768, dtype=np.float32))  # 128 KiB: through the mesh
        calls = [agent.caller.start_call("worker1", T.add, args=(1, 2)),
                 agent.caller.start_call("worker2", T.raise_value_error, args=("no",)),
                 agent.caller.start_call("worker2", T.sleep_then, args=(0.5, "late"), timeout=0.2),
                 agent.caller.start_call("worker1", T.tensor_sum, args=(big,)),
                 agent.caller.start_call("worker2", T.echo, args=("last",))]
        results = agent.caller.collect(calls)
        time.sleep(0.5)
        assert rpc.rpc_sync("worker2", T.echo, args=("after",)) == "after"  # reads the late reply
        after = rpc.get_debug_info()["transport"]
        nested = rpc.rpc_sync("worker1", T.direct_fan_out, args=(["worker0", "worker2", "worker0"],))
        return (results, after["direct_requests"] - before.get("direct_requests", 0),
                after.get("late_replies", 0) - before.get("late_replies", 0), nested)

    results, direct, late, nested = run_workers(3, config, body)[0]
    assert results[0] == (3, None) and results[4] == ("last", None)
    assert results[1][0] is None and isinstance(results[1][1], ValueError) and "worker2': no" in str(results[1][1])
    assert results[2][0] is None and isinstance(results[2][1], ZgradTimeoutError)
    assert results[3] == (float(np.arange(32768, dtype=np.float32).sum()), None)
    assert (direct, late, nested) == (5, 1, [10, 11, 12])  # 4 direct calls and the echo after


def test_a_call_collected_on_its_own_socket_fails_when_its_worker_dies(tmp_path):
    config = make_config("tcp", 2, tmp_path)
    config["transport"].update(heartbeat_interval_s=0.1, heartbeat_timeout_s=1.0)
    with peer_process(config, 1, 2) as peer:
        rpc.init_rpc("worker0", rank=0, world_size=2, config=config)
        try:
            from zgrad.distributed.rpc.state import current_agent

            agent = current_agent()
            assert rpc.rpc_sync("worker1", T.add, args=(1, 2)) == 3
            call = agent.caller.start_call("worker1", T.sleep_then, args=(30.0, "never"), timeout=0)
            time.sleep(0.3)
            peer.send_signal(signal.SIGKILL)
            start = time.monotonic()
            [(value, error)] = agent.caller.collect([call])
            assert value is None and isinstance(error, WorkerUnavailableError)
            assert "worker1" in str(error) and time.monotonic() - start < 10
        finally:
            rpc.shutdown(graceful=False)


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_a_peer_killed_while_the_inbound_socket_is_handed_over(kind, tmp_path):
    config = make_config(kind, 2, tmp_path)
    config["transport"].update(heartbeat_interval_s=0.1, heartbeat_timeout_s=1.0)
    with peer_process(config, 1, 2) as peer:
        rpc.init_rpc("worker0", rank=0, world_size=2, config=config)
        try:
            assert rpc.rpc_sync("worker1", T.add, args=(1, 2)) == 3
            # worker1 calls back here; this worker's leader runs that call, which calls worker1
            # again and so hands its socket on; worker1's leader did the same; then worker1 dies.
            pending = rpc.rpc_async("worker1", T.bounce, args=(["worker0", "worker1"], 0, 30.0), timeout=0)
            time.sleep(0.3)
            peer.send_signal(signal.SIGKILL)
            start = time.monotonic()
            with pytest.raises(WorkerUnavailableError, match="worker1"):
                pending.wait()
            with pytest.raises(WorkerUnavailableError, match="worker1"):
                rpc.rpc_sync("worker1", T.add, args=(1, 2))
            assert time.monotonic() - start < 1.0 + 2.0
            # this worker still answers (itself), on whichever thread holds its socket now
            assert rpc.rpc_sync("worker0", T.bounce, args=(["worker0"] * 3, 0)) == 3
            assert rpc.get_debug_info()["transport"]["peers_lost"] == 1
        finally:
            with pytest.raises(WorkerUnavailableError, match="worker1"):
                rpc.shutdown(timeout=5.0)


# -- arrival order: what a handler must do before the next message is handled -----------------


def test_a_remote_whose_owner_is_slow_to_register_the_fork_is_still_freed_by_the_delete_behind_it(
        monkeypatch, tmp_path):
    # remote()'s CALL registers the creator's fork on arrival, and the creator's RREF_DELETE follows
    # it on the link. The owner's thread may be descheduled before the registration (a sleep of ten
    # inline budgets stands for it): the DELETE must still be handled after it, else it finds no
    # fork, is dropped, and the value is never freed.
    from zgrad.distributed.rpc.rref_context import OwnerTable

    register = OwnerTable.add_fork

    def descheduled_add_fork(self, rref_id, fork_id):
        time.sleep(0.05)
        register(self, rref_id, fork_id)

    monkeypatch.setattr(OwnerTable, "add_fork", descheduled_add_fork)

    def body(rank):
        if rank != 0:
            return None
        for _ in range(5):
            rref = rpc.remote("worker1", T.add, args=(20, 22))
            del rref
            gc.collect()
        return poll(lambda: rpc.rpc_sync("worker1", T.rrefs_owned), lambda n: n == 0)

    assert run_workers(2, make_config("tcp", 2, tmp_path), body)[0] == 0


def test_a_call_whose_callee_is_slow_to_enter_its_context_runs_before_the_release_behind_it(
        monkeypatch, tmp_path):
    # An rpc_async left running when its dist_autograd context closes (its result needs no
    # gradient, so it is the caller's after the context, as in PyTorch): the context's release
    # goes to the callee as a CONTEXT_RELEASE on the link, behind the CALL. The callee's thread
    # may be descheduled before the CALL enters the context: the release must still be handled
    # after it, else the CALL finds its context released and fails.
    from zgrad.distributed.autograd.worker import DistAutogradWorker

    enter = DistAutogradWorker.incoming_call

    def descheduled_incoming_call(self, src, meta, tensors):
        if meta.get("context") is not None:
            time.sleep(0.05)
        return enter(self, src, meta, tensors)

    monkeypatch.setattr(DistAutogradWorker, "incoming_call", descheduled_incoming_call)

    def body(rank):
        if rank != 0:
            return None
        a = zgrad.ones(3, requires_grad=True)
        futures = []
        for _ in range(3):
            with dist_autograd.context():
                futures.append(rpc.rpc_async("worker1", T.tensor_sum, args=(a,)))
        values = [future.wait() for future in futures]
        contexts = poll(lambda: rpc.rpc_sync("worker1", T.dist_debug_info)["num_autograd_contexts"], lambda n: n == 0)
        return values, contexts

    assert run_workers(2, make_config("tcp", 2, tmp_path), body)[0] == ([3.0] * 3, 0)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_peer_lost_while_its_messages_wait_in_the_early_queue_is_lost_after_them(transport, monkeypatch, tmp_path):
    # What reaches a worker before its agent has started waits in one queue and runs in arrival
    # order. A peer's loss (its GOODBYE, seen at once on the I/O thread) must take its turn behind
    # that peer's messages still waiting there: else rank 0's SHUTDOWN_GO, queued while the
    # queue's runner is descheduled, is overtaken by the goodbye that follows it, and worker1's
    # shutdown says rank 0 died before releasing the barrier.
    from zgrad.distributed.rpc.callee import Callee
    from zgrad.distributed.rpc.messages import Kind
    from zgrad.distributed.rpc.pool import CalleePool

    start_pool, run_handler = CalleePool.start, Callee._run_handler

    def late_start(self):
        if "worker1" in self._name:  # worker1's agent starts late: rank 0's call waits in its queue
            time.sleep(0.5)
        start_pool(self)

    def descheduled_after_a_call(self, handler, envelope):
        run_handler(self, handler, envelope)
        if self.name == "worker1" and envelope.kind == Kind.CALL:  # the queue's runner, descheduled after answering
            time.sleep(0.5)

    monkeypatch.setattr(CalleePool, "start", late_start)
    monkeypatch.setattr(Callee, "_run_handler", descheduled_after_a_call)
    results = run_workers(2, make_config(transport, 2, tmp_path), lambda rank: rpc.rpc_sync("worker1", T.add, args=(1, 2))
                          if rank == 0 else None)
    assert results == [3, None]

"""RPC over every built-in transport: calls, RRefs, errors, timeouts, codec safety, shutdown."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import rpc_targets as T
import zgrad
from rpc_harness import TRANSPORTS, make_config, run_workers
from zgrad.distributed import rpc
from zgrad.errors import RemoteError, ZgradError, ZgradTimeoutError

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


@pytest.mark.parametrize("world_size", [2, 4])
def test_calls_reach_every_worker(transport, world_size, tmp_path):
    config = make_config(transport, world_size, tmp_path)

    def body(rank):
        names = [f"worker{r}" for r in range(world_size)]
        got = [rpc.rpc_sync(name, T.whoami) for name in names]
        by_rank = [rpc.rpc_sync(r, T.whoami) for r in range(world_size)]
        by_info = rpc.rpc_sync(rpc.get_worker_info(names[-1]), T.whoami)
        futures = [rpc.rpc_async(names[(rank + 1) % world_size], T.add, args=(i, 1)) for i in range(32)]
        values = [f.wait() for f in futures]
        tensor = rpc.rpc_sync(names[(rank + 1) % world_size], T.add, args=(zgrad.ones(2, 3), zgrad.ones(2, 3)))
        return got, by_rank, by_info, values, tensor.numpy().tolist()

    for got, by_rank, by_info, values, tensor in run_workers(world_size, config, body):
        assert got == by_rank == [f"worker{r}" for r in range(world_size)]
        assert by_info == f"worker{world_size - 1}"
        assert values == list(range(1, 33))
        assert tensor == [[2.0] * 3] * 2


def test_values_round_trip_through_the_safe_codec(transport, tmp_path):
    value = {
        "scalars": (None, True, 3, -2**63, 2.5, "text", b"\x00bytes"),
        "nested": [[1, (2, [3])], {"k": {7: "int key", (1, 2): "tuple key"}}],
        "tensor": zgrad.randn(3, 4, requires_grad=True),
        "float64": zgrad.zeros(2, dtype=zgrad.float64),
        "ints": zgrad.tensor([1, 2, 3]),
        "array": np.arange(6, dtype=np.int16).reshape(2, 3),
        "empty": np.zeros((0, 5), dtype=np.float32),
    }

    def body(rank):
        if rank == 0:
            back = rpc.rpc_sync("worker1", T.echo, args=(value,))
            shape = rpc.rpc_sync("worker1", T.describe, args=(value["tensor"],))
            return back, shape

    back, shape = run_workers(2, make_config(transport, 2, tmp_path), body)[0]
    assert back["scalars"] == value["scalars"] and isinstance(back["scalars"], tuple)
    assert back["nested"] == [[1, (2, [3])], {"k": {7: "int key", (1, 2): "tuple key"}}]
    np.testing.assert_array_equal(back["tensor"].numpy(), value["tensor"].numpy())
    assert back["tensor"].requires_grad and back["float64"].dtype == np.float64 and back["ints"].dtype == np.int64
    np.testing.assert_array_equal(back["array"], value["array"])
    assert back["empty"].shape == (0, 5)
    assert shape == ["tensor", [3, 4], "float32", True]


def test_nested_chains_and_recursion_deeper_than_the_pool(transport, tmp_path):
    config = make_config(transport, 4, tmp_path)  # 4 callee threads per worker

    def body(rank):
        if rank == 0:
            names = ["worker1", "worker2", "worker3", "worker0", "worker2"]
            total = rpc.rpc_sync("worker1", T.chain, args=(names, 0))
            deep = rpc.rpc_sync("worker1", T.ping_pong, args=(24, "worker1", "worker2"))
            concurrent = [rpc.rpc_async("worker3", T.ping_pong, args=(10, "worker3", "worker0")) for _ in range(6)]
            return total, deep, [f.wait() for f in concurrent]

    total, deep, concurrent = run_workers(4, config, body)[0]
    assert total == 5 and deep == 24 and concurrent == [10] * 6


def test_remote_errors_carry_type_message_worker_and_traceback(tmp_path):
    def body(rank):
        if rank == 0:
            with pytest.raises(ValueError) as builtin:
                rpc.rpc_sync("worker1", T.raise_value_error, args=("bad input 42",))
            with pytest.raises(RemoteError) as custom:
                rpc.rpc_sync("worker1", T.raise_custom)
            chained = rpc.rpc_async("worker1", T.raise_value_error, args=("async",)).then(lambda f: f.exception())
            return builtin.value, custom.value, chained.wait()

    builtin, custom, chained = run_workers(2, make_config("inproc", 2), body)[0]
    assert isinstance(builtin, RemoteError) and isinstance(builtin, RuntimeError)
    assert "ValueError" in str(builtin) and "bad input 42" in str(builtin) and "worker1" in str(builtin)
    assert builtin.worker == "worker1" and "raise_value_error" in builtin.remote_traceback
    assert custom.remote_type == "rpc_targets.CustomError" and "custom failure" in str(custom)
    assert not isinstance(custom, ValueError)
    assert isinstance(chained, ValueError) and "async" in str(chained)


def test_timeouts_name_worker_and_function(tmp_path):
    def body(rank):
        if rank == 0:
            start = time.monotonic()
            with pytest.raises(ZgradTimeoutError) as info:
                rpc.rpc_sync("worker1", T.sleep_then, args=(3.0, "late"), timeout=0.3)
            waited = time.monotonic() - start
            no_timeout = rpc.rpc_sync("worker1", T.sleep_then, args=(0.5, "done"), timeout=0)
            future = rpc.rpc_async("worker1", T.sleep_then, args=(2.0, "x"), timeout=0.2)
            with pytest.raises(ZgradTimeoutError):
                future.wait()
            return str(info.value), waited, no_timeout

    message, waited, no_timeout = run_workers(2, make_config("inproc", 2), body)[0]
    assert "ran past 0.3 seconds" in message and "worker1" in message and "sleep_then" in message
    assert isinstance(ZgradTimeoutError("x"), RuntimeError)
    assert waited < 2.0 and no_timeout == "done"


def test_remote_objects_and_rref_proxies(transport, tmp_path):
    def body(rank):
        if rank == 0:
            counter = rpc.remote("worker1", T.Counter, args=(10,))
            assert counter.owner_name() == "worker1" and counter.owner().id == 1 and not counter.is_owner()
            a = counter.rpc_sync().increment(5)
            b = counter.rpc_async().increment(1).wait()
            got = counter.remote().get()
            with pytest.raises(KeyError):
                counter.rpc_sync().fail()
            with pytest.raises(AttributeError):
                counter.rpc_sync()._lock
            with pytest.raises(ZgradError, match="only be called on the owner"):
                counter.local_value()
            return a, b, got.to_here(), got.owner_name()

    assert run_workers(2, make_config(transport, 2, tmp_path), body)[0] == (15, 16, 16, "worker1")


def test_rrefs_fork_to_third_workers_and_are_freed_everywhere(tmp_path):
    config = make_config("inproc", 3)

    def body(rank):
        if rank == 0:
            local = rpc.RRef(zgrad.ones(2))
            assert local.is_owner() and local.local_value().shape == (2,)
            remote_value = rpc.remote("worker1", T.add, args=(3, 4))
            # Pass both to a third worker, and get an RRef back that worker2 created.
            seen = rpc.rpc_sync("worker2", T.rref_owner_and_value, args=(remote_value,))
            mine = rpc.rpc_sync("worker2", T.rref_owner_and_value, args=(local,))
            made = rpc.rpc_sync("worker2", T.make_rref_here, args=("hello",))
            back_home = rpc.rpc_sync("worker1", T.rref_local_value, args=(remote_value,))
            during = [rpc.rpc_sync(f"worker{r}", T.rrefs_owned) for r in range(3)]
            fetched = made.to_here()
            del local, remote_value, made
            gc.collect()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                after = [rpc.rpc_sync(f"worker{r}", T.rrefs_owned) for r in range(3)]
                if after == [0, 0, 0]:
                    break
                time.sleep(0.05)
            return seen, mine[0], mine[1].tolist(), fetched, back_home, during, after

    seen, mine_owner, mine_value, fetched, back_home, during, after = run_workers(3, config, body)[0]
    assert seen == ["worker1", 7] and mine_owner == "worker0" and mine_value == [1.0, 1.0]
    assert fetched == "hello" and back_home == 7
    assert during == [1, 1, 1]
    assert after == [0, 0, 0]


def test_rejected_values_and_targets_fail_at_the_caller_with_a_fix(tmp_path):
    def body(rank):
        if rank == 0:
            with pytest.raises(rpc.CodecError, match="RRef"):
                rpc.rpc_sync("worker1", T.echo, args=({1, 2},))
            with pytest.raises(rpc.TargetError, match="module-level"):
                rpc.rpc_sync("worker1", lambda: 1)
            with pytest.raises(RemoteError, match="cannot send a value of type builtins.set"):
                rpc.rpc_sync("worker1", T.unsendable)
            with pytest.raises(RemoteError, match=r"allowed_modules"):
                rpc.rpc_sync("worker1", np.zeros, args=(3,))

    run_workers(2, make_config("inproc", 2), body)


def test_hostile_target_outside_the_allow_list_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    from zgrad.distributed.rpc.codec import encode_value
    from zgrad.distributed.rpc.messages import Kind
    from zgrad.distributed.rpc.state import current_agent

    def body(rank):
        if rank == 0:
            agent = current_agent()
            errors = []
            for target in ("os:system", "rpc_targets:os", "subprocess:run", "builtins:eval", "rpc_targets:__class__"):
                payload = encode_value([[f"touch {marker}"], {}]).payload
                meta = {"target": target, "payload": payload, "timeout_s": 5.0}
                future = agent.request(1, Kind.CALL, meta, (), 5.0, "hostile call")
                with pytest.raises(RemoteError) as info:
                    future.wait()
                errors.append(str(info.value))
            healthy = rpc.rpc_sync("worker1", T.add, args=(1, 1))
            return errors, healthy

    errors, healthy = run_workers(2, make_config("inproc", 2), body)[0]
    assert not marker.exists()
    assert "not in the allow-list" in errors[0] and "allowed_modules" in errors[0]
    assert "not in 'rpc_targets'" in errors[1]
    assert healthy == 2


def test_malformed_messages_are_counted_and_the_worker_keeps_serving(tmp_path):
    from zgrad.distributed.rpc.messages import Kind
    from zgrad.distributed.rpc.state import current_agent

    def body(rank):
        if rank == 0:
            agent = current_agent()
            bad_calls = [
                {"target": 5, "payload": b"", "timeout_s": 1.0},
                {"target": "rpc_targets:add"},
                {"target": "rpc_targets:add", "payload": b"\xc1garbage", "timeout_s": 1.0},
                {"target": "rpc_targets:add", "payload": b"\x90", "timeout_s": 1.0, "extra": 1},
                ["not", "a", "map"],
            ]
            for meta in bad_calls:
                with pytest.raises(RemoteError):
                    agent.request(1, Kind.CALL, meta, (), 5.0, "bad call").wait()
            for kind, meta in [(Kind.RREF_DELETE, {"rref": "x"}), (Kind.RESULT, {"payload": b"\x00"}),
                               (Kind.SHUTDOWN_GO, {"dead": "x"}),
                               (Kind.GRAD, {"body": {"ctx": "x"}}), (Kind.GRAD_ACK, [1, 2])]:
                agent.send(1, kind, meta)
            time.sleep(0.2)
            info = rpc.get_debug_info("worker1")
            return info, rpc.rpc_sync("worker1", T.add, args=(2, 3))

    info, healthy = run_workers(2, make_config("inproc", 2), body)[0]
    assert healthy == 5
    assert info["rejects"] >= 8
    assert info["messages_received"]["CALL"] >= 6


def test_debug_info_counts_calls_messages_and_rrefs(tmp_path):
    def body(rank):
        if rank == 0:
            keep = rpc.remote("worker1", T.Counter)
            keep.rpc_sync().get()
            slow = rpc.rpc_async("worker1", T.sleep_then, args=(0.5, 1))
            local = rpc.get_debug_info()
            remote_info = rpc.get_debug_info("worker1")
            slow.wait()
            return local, remote_info

    local, remote_info = run_workers(2, make_config("inproc", 2), body)[0]
    assert local["name"] == "worker0" and local["calls_in_flight"] >= 1
    assert local["messages_sent"]["CALL"] >= 3 and remote_info["rrefs_owned"] == 1
    assert remote_info["messages_received"]["CALL"] >= 3 and "transport" in remote_info


def test_calls_before_init_rpc_say_to_call_it():
    with pytest.raises(ZgradError, match="init_rpc"):
        rpc.rpc_sync("worker1", T.add, args=(1, 2))
    with pytest.raises(ZgradError, match="init_rpc"):
        rpc.get_worker_info()
    with pytest.raises(ZgradError, match="init_rpc"):
        rpc.RRef(1)


def test_unknown_worker_names_the_known_ones(tmp_path):
    def body(rank):
        if rank == 0:
            with pytest.raises(ValueError, match="worker0, worker1"):
                rpc.rpc_sync("worker9", T.add, args=(1, 2))
            with pytest.raises(ValueError, match="ranks are 0..1"):
                rpc.rpc_sync(7, T.add, args=(1, 2))

    run_workers(2, make_config("inproc", 2), body)


def test_graceful_shutdown_loses_no_work_and_init_rpc_works_again(transport, tmp_path):
    threads_before = threading.active_count()
    config = make_config(transport, 3, tmp_path)

    def body(rank):
        if rank == 0:
            # worker1 and worker2 reach shutdown at once; these calls must still all be served.
            futures = [rpc.rpc_async(f"worker{1 + i % 2}", T.sleep_then, args=(0.01, i)) for i in range(40)]
            return [f.wait() for f in futures]

    assert run_workers(3, config, body)[0] == list(range(40))
    assert run_workers(3, make_config(transport, 3, tmp_path), lambda rank: rank)[2] == 2
    deadline = time.monotonic() + 5
    while threading.active_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= threads_before

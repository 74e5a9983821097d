"""RPC over every built-in transport (2 and 4 workers where the count matters): calls, RRefs,
errors, timeouts, codec safety, hostile and malformed messages, debug info, shutdown."""

from __future__ import annotations

import gc
import threading
import time
import uuid

import numpy as np
import pytest

import rpc_targets as T
import zgrad
from rpc_harness import TRANSPORTS, make_config, poll, run_workers
from zgrad.distributed import rpc
from zgrad.errors import RemoteError, ZgradError, ZgradTimeoutError

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


def neighbour(rank, world_size):
    """The worker each rank talks to, so that every pair of a ring is exercised at once."""
    return f"worker{(rank + 1) % world_size}"


def hostile_call(dst, target, args):
    """What a hostile peer does: put any target on the wire, skipping the caller's checks.
    Returns the callee's error message (the call must fail)."""
    from zgrad.distributed.rpc.codec import encode_value
    from zgrad.distributed.rpc.messages import Kind
    from zgrad.distributed.rpc.state import current_agent

    meta = {"target": target, "payload": encode_value([list(args), {}]).payload, "timeout_s": 5.0}
    with pytest.raises(RemoteError) as info:
        current_agent().caller.request(dst, Kind.CALL, meta, (), 5.0, "hostile call").wait()
    return str(info.value)


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


@pytest.mark.parametrize("world_size", [2, 4])
def test_remote_errors_carry_type_message_worker_and_traceback(transport, world_size, tmp_path):
    def body(rank):
        peer = neighbour(rank, world_size)
        with pytest.raises(ValueError) as builtin:
            rpc.rpc_sync(peer, T.raise_value_error, args=(f"bad input {rank}",))
        with pytest.raises(RemoteError) as custom:
            rpc.rpc_sync(peer, T.raise_custom)
        chained = rpc.rpc_async(peer, T.raise_value_error, args=("async",)).then(lambda f: f.exception())
        # Raised at the end of a chain through every other worker: the error keeps its origin.
        ring = [f"worker{(rank + k) % world_size}" for k in range(1, world_size)]
        with pytest.raises(ValueError) as nested:
            rpc.rpc_sync(ring[0], T.raise_via, args=(ring[1:], "deep"))
        return builtin.value, custom.value, chained.wait(), nested.value

    for rank, (builtin, custom, chained, nested) in enumerate(
            run_workers(world_size, make_config(transport, world_size, tmp_path), body)):
        peer = neighbour(rank, world_size)
        assert isinstance(builtin, RemoteError) and isinstance(builtin, RuntimeError)
        assert "ValueError" in str(builtin) and f"bad input {rank}" in str(builtin) and peer in str(builtin)
        assert builtin.worker == peer and "raise_value_error" in builtin.remote_traceback
        assert custom.remote_type == "rpc_targets.CustomError" and "custom failure" in str(custom)
        assert custom.worker == peer and not isinstance(custom, ValueError)
        assert isinstance(chained, ValueError) and "async" in str(chained)
        origin = f"worker{(rank - 1) % world_size}"
        assert isinstance(nested, RemoteError) and nested.worker == origin and origin in str(nested)
        assert "deep" in str(nested) and "raise_via" in nested.remote_traceback


@pytest.mark.parametrize("world_size", [2, 4])
def test_timeouts_name_worker_and_function(transport, world_size, tmp_path):
    run_id = uuid.uuid4().hex

    def body(rank):
        peer, gate = neighbour(rank, world_size), f"timeouts-{run_id}-{rank}"
        # The calls wait at a gate this rank opens once its timeouts have fired: no fixed sleeps.
        try:
            unlimited = rpc.rpc_async(peer, T.wait_at_gate, args=(gate, "done"), timeout=0)
            future = rpc.rpc_async(peer, T.wait_at_gate, args=(gate, "x"), timeout=0.2)
            start = time.monotonic()
            with pytest.raises(ZgradTimeoutError) as info:
                rpc.rpc_sync(peer, T.wait_at_gate, args=(gate, "late"), timeout=0.3)
            waited = time.monotonic() - start
            with pytest.raises(ZgradTimeoutError) as async_info:
                future.wait()
            still_running = not unlimited.done()
        finally:
            T.Gates.open(gate)
        return str(info.value), str(async_info.value), waited, still_running, unlimited.wait()

    results = run_workers(world_size, make_config(transport, world_size, tmp_path), body)
    for rank, (message, async_message, waited, still_running, unlimited) in enumerate(results):
        peer = neighbour(rank, world_size)
        assert "ran past 0.3 seconds" in message and peer in message and "wait_at_gate" in message
        assert "ran past 0.2 seconds" in async_message and peer in async_message
        assert 0.25 < waited < 2.0
        assert still_running and unlimited == "done", "a call with timeout=0 must not time out"
    assert isinstance(ZgradTimeoutError("x"), RuntimeError)


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


@pytest.mark.parametrize("world_size", [3, 4])
def test_rrefs_fork_along_workers_and_are_freed_when_no_reference_remains(transport, world_size, tmp_path):
    names = [f"worker{r}" for r in range(world_size)]
    relay = names[2:]  # worker2 (-> worker3): the RRefs pass worker -> worker -> worker

    def owned():
        return [rpc.rpc_sync(name, T.rrefs_owned) for name in names]

    def body(rank):
        if rank != 0:
            return None
        local = rpc.RRef(zgrad.ones(2))
        assert local.is_owner() and local.local_value().shape == (2,)
        remote_value = rpc.remote("worker1", T.add, args=(3, 4))
        seen = rpc.rpc_sync(relay[0], T.relay_rref, args=(relay[1:], remote_value))
        mine = rpc.rpc_sync(relay[0], T.relay_rref, args=(relay[1:] + ["worker1"], local))
        made = rpc.rpc_sync(names[-1], T.make_rref_here, args=("hello",))
        back_home = rpc.rpc_sync("worker1", T.rref_local_value, args=(remote_value,))
        # The last worker keeps a reference to worker1's value inside a value it owns.
        holder = rpc.remote(names[-1], T.echo, args=(remote_value,))
        inner = holder.to_here()
        during = owned()
        fetched, inner_owner = made.to_here(), inner.owner_name()
        del local, remote_value, made, inner
        gc.collect()
        # worker0's deletes reach worker1 before the poll's calls (messages of a pair keep their order).
        held = poll(owned, lambda counts: counts[0] == 0 and counts[-1] == 1)
        del holder
        gc.collect()
        after = poll(owned, lambda counts: not any(counts))
        return seen, mine, fetched, inner_owner, back_home, during, held, after

    seen, mine, fetched, inner_owner, back_home, during, held, after = run_workers(
        world_size, make_config(transport, world_size, tmp_path), body)[0]
    assert seen == [names[-1], "worker1", 7]
    assert mine[:2] == ["worker1", "worker0"] and mine[2].tolist() == [1.0, 1.0]
    assert fetched == "hello" and back_home == 7 and inner_owner == "worker1"
    middle = [0] * (world_size - 3)
    assert during == [1, 1, *middle, 2]
    assert held == [0, 1, *middle, 1], "worker1 freed a value that the last worker still references"
    assert after == [0] * world_size


def test_rejected_values_and_targets_fail_at_the_caller_with_a_fix(transport, tmp_path):
    def body(rank):
        if rank == 0:
            with pytest.raises(rpc.CodecError, match="RRef"):
                rpc.rpc_sync("worker1", T.echo, args=(threading.Lock(),))
            with pytest.raises(rpc.TargetError, match="module-level"):
                rpc.rpc_sync("worker1", lambda: 1)
            with pytest.raises(RemoteError, match="cannot send a value of type _thread.lock"):
                rpc.rpc_sync("worker1", T.unsendable)
            with pytest.raises(RemoteError, match=r"allowed_modules"):
                rpc.rpc_sync("worker1", np.zeros, args=(3,))

    run_workers(2, make_config(transport, 2, tmp_path), body)


@pytest.mark.parametrize("world_size", [2, 4])
def test_hostile_target_outside_the_allow_list_runs_nothing(transport, world_size, tmp_path):
    targets = ("os:system", "rpc_targets:os", "subprocess:run", "builtins:eval", "rpc_targets:__class__",
               "rpc_targets:write_file.__globals__")

    def body(rank):
        peer = (rank + 1) % world_size
        errors = [hostile_call(peer, target, [f"touch {tmp_path / f'pwned-by-{rank}'}"]) for target in targets]
        return errors, rpc.rpc_sync(peer, T.add, args=(1, 1))

    for errors, healthy in run_workers(world_size, make_config(transport, world_size, tmp_path), body):
        assert "not in the allow-list" in errors[0] and "allowed_modules" in errors[0]
        assert "not in 'rpc_targets'" in errors[1]
        assert healthy == 2
    assert not list(tmp_path.glob("pwned-by-*"))


def test_hostile_target_inside_zgrad_that_is_not_an_op_runs_nothing(transport, tmp_path):
    """docs/architecture.md (Security) allows zgrad's compute modules, not every callable of the
    package: the launcher and key tools must not be reachable from the network either."""
    marker, keys = tmp_path / "pwned", tmp_path / "keys"
    script = tmp_path / "payload.py"  # stands for any Python file on the callee's disk
    script.write_text(f"open({str(marker)!r}, 'w').write('ran')\nmain = print\n")
    calls = [("zgrad.launch.inproc_runner:load_main", [[str(script)]]),  # runs any file / imports any module
             ("zgrad.transport.security:generate_keys", [str(keys), 1])]  # writes files anywhere

    def body(rank):
        if rank == 0:
            return [hostile_call(1, target, args) for target, args in calls]

    errors = run_workers(2, make_config(transport, 2, tmp_path), body)[0]
    ran = [path.name for path in (marker, keys) if path.exists()]
    assert not ran, f"hostile calls ran on the callee and left {ran}; the callee answered {errors}"
    assert all("not allowed" in error for error in errors), errors


@pytest.mark.parametrize("world_size", [2, 4])
def test_malformed_messages_are_counted_and_the_worker_keeps_serving(transport, world_size, tmp_path):
    from zgrad.distributed.rpc.messages import Kind
    from zgrad.distributed.rpc.state import current_agent

    bad_calls = [  # metadata that breaks the CALL schema or a payload that does not decode:
        {"target": 5, "payload": b"", "timeout_s": 1.0},  # rejected (counted) and answered with an error
        {"target": "rpc_targets:add"},
        {"target": "rpc_targets:add", "payload": b"\x90", "timeout_s": 1.0, "extra": 1},
        ["not", "a", "map"],
        {"target": "rpc_targets:add", "payload": b"\xc1garbage", "timeout_s": 1.0},
    ]
    report = {"ctx": 1, "pass": 1, "task": 1, "children": [], "error": None, "open": False}
    bad_messages = [(Kind.RREF_DELETE, {"rref": "x"}, ()), (Kind.RESULT, {"payload": b"\x00"}, ()),
                    (Kind.SHUTDOWN_GO, {"dead": "x"}, ()), (Kind.GRAD, {"body": {"ctx": "x"}}, ()), (Kind.GRAD_ACK, [1, 2], ()),
                    # gradients described wrongly: more arrays than buffers, an object dtype, a size mismatch,
                    # a repeat of a buffer that comes later
                    (Kind.GRAD_ACK, {"body": report, "arrays": [["<f4", [2]]]}, ()),
                    (Kind.GRAD_ACK, {"body": report, "arrays": [["|O", [1]]]}, (b"\0" * 8,)),
                    (Kind.GRAD_ACK, {"body": report, "arrays": [["<f4", [3]]]}, (b"\0" * 8,)),
                    (Kind.GRAD_ACK, {"body": report, "arrays": [0, ["<f4", [2]]]}, (b"\0" * 8,))]
    expected_rejects = len(bad_calls) + len(bad_messages)

    def body(rank):
        agent, peer = current_agent(), (rank + 1) % world_size
        for meta in bad_calls:
            with pytest.raises(RemoteError):
                agent.caller.request(peer, Kind.CALL, meta, (), 5.0, "bad call").wait()
        for kind, meta, buffers in bad_messages:
            agent.caller.send(peer, kind, meta, buffers)
        # Only this rank sends to its neighbour; some rejects happen on its pool, so poll (bounded).
        info = poll(lambda: rpc.get_debug_info(peer), lambda i: i["rejects"] >= expected_rejects)
        return info, rpc.rpc_sync(peer, T.add, args=(2, 3))

    for info, healthy in run_workers(world_size, make_config(transport, world_size, tmp_path), body):
        assert healthy == 5
        assert info["rejects"] >= expected_rejects, info["rejects_by_reason"]
        assert any(reason.startswith("undecodable CALL payload") for reason in info["rejects_by_reason"]), \
            info["rejects_by_reason"]
        for words in ("describes 1 arrays but carries 0 buffers", "is not a plain numeric dtype", "cannot hold shape [3]",
                      "repeats buffer 0, which is not among the 0 before it"):
            assert any(words in reason for reason in info["rejects_by_reason"]), (words, info["rejects_by_reason"])
        assert info["messages_received"]["CALL"] >= len(bad_calls) + 1


@pytest.mark.parametrize("world_size", [2, 4])
def test_debug_info_counts_calls_messages_and_rrefs(transport, world_size, tmp_path):
    run_id = uuid.uuid4().hex

    def body(rank):
        peer, gate = neighbour(rank, world_size), f"debug-{run_id}-{rank}"
        keep = rpc.remote(peer, T.Counter)
        keep.rpc_sync().get()
        try:
            waiting = rpc.rpc_async(peer, T.wait_at_gate, args=(gate, 1))
            local = rpc.get_debug_info()
            remote_info = rpc.get_debug_info(peer)
        finally:
            T.Gates.open(gate)
        waiting.wait()
        return local, remote_info

    for rank, (local, remote_info) in enumerate(
            run_workers(world_size, make_config(transport, world_size, tmp_path), body)):
        assert local["name"] == f"worker{rank}" and local["rank"] == rank and local["calls_in_flight"] >= 1
        assert local["messages_sent"]["CALL"] >= 3 and remote_info["rrefs_owned"] == 1
        assert remote_info["name"] == neighbour(rank, world_size)
        assert remote_info["messages_received"]["CALL"] >= 3 and remote_info["callee_tasks_in_flight"] >= 1
        assert remote_info["transport"]["messages_in"] >= 3 and remote_info["dead_workers"] == []


def test_calls_before_init_rpc_and_after_shutdown_say_to_call_it(transport, tmp_path):
    def assert_not_initialized():
        with pytest.raises(ZgradError, match="init_rpc"):
            rpc.rpc_sync("worker1", T.add, args=(1, 2))
        with pytest.raises(ZgradError, match="init_rpc"):
            rpc.get_worker_info()
        with pytest.raises(ZgradError, match="init_rpc"):
            rpc.RRef(1)

    assert_not_initialized()
    run_workers(2, make_config(transport, 2, tmp_path), lambda rank: rpc.rpc_sync(1 - rank, T.add, args=(rank, 1)))
    assert_not_initialized()


def test_unknown_worker_names_the_known_ones(transport, tmp_path):
    def body(rank):
        if rank == 0:
            with pytest.raises(ValueError, match="worker0, worker1"):
                rpc.rpc_sync("worker9", T.add, args=(1, 2))
            with pytest.raises(ValueError, match="ranks are 0..1"):
                rpc.rpc_sync(7, T.add, args=(1, 2))

    run_workers(2, make_config(transport, 2, tmp_path), body)


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


def test_zgrad_entry_points_resolve_and_nothing_else_of_zgrad_outside_the_compute_modules():
    """Every name in ZGRAD_ENTRY_POINTS still exists (a rename would break zgrad's own calls),
    compute modules resolve, and the rest of the package does not."""
    from zgrad.distributed.rpc.targets import ZGRAD_ENTRY_POINTS, TargetError, resolve_target, target_name

    for name in ZGRAD_ENTRY_POINTS:
        assert target_name(resolve_target(name, (), "me")) == name
    for func in (zgrad.add, zgrad.ones, zgrad.nn.Linear, zgrad.optim.SGD):
        # zgrad.add takes sparse tensors too (zgrad.sparse); it travels as the dense function it wraps,
        # which is what runs remotely: RPC values are dense
        assert resolve_target(target_name(func), (), "me") is getattr(func, "__wrapped__", func)
    for name in ("zgrad.launch.demo:main", "zgrad.launch.cli:main", "zgrad.config:load_config",
                 "zgrad.distributed.rpc.api:init_rpc", "zgrad.kernels.dispatch:backend_for"):
        with pytest.raises(TargetError, match="not allowed"):
            resolve_target(name, (), "me")

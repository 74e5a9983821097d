"""What PyTorch's RPC programs need beyond calls and RRefs, over tcp and inproc: a shutdown that
waits as long as the job runs, functions, methods and objects as values, ``async_execution``,
``RemoteModule``, any optimizer class in ``DistributedOptimizer``, a flat ``get_debug_info``,
PyTorch's backend options, and the errors each of them gives on bad input."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

import rpc_targets as T
import zgrad
import zgrad.distributed.autograd as dist_autograd
from rpc_harness import free_port, make_config, poll, run_workers
from zgrad.distributed import rpc
from zgrad.distributed.nn import RemoteModule
from zgrad.distributed.optim import DistributedOptimizer
from zgrad.errors import ConfigError, RemoteError, ZgradTimeoutError
from zgrad.futures import Future

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=["tcp", "inproc"])
def transport(request):
    return request.param


# --- shutdown waits as long as the job runs ----------------------------------------------------


def test_a_passive_worker_shuts_down_at_once_and_waits_for_a_long_job(transport, tmp_path):
    """The canonical PyTorch pattern: rank 1 calls shutdown() right after init_rpc while rank 0
    keeps working (and calling it) for several heartbeat timeouts. With the default config the
    barrier has no time bound, so both return cleanly; heartbeats keep the waiting worker alive."""
    config = make_config(transport, 2, tmp_path)
    config["transport"].update(heartbeat_interval_s=0.1, heartbeat_timeout_s=0.6)
    work_s = 3.0  # five heartbeat timeouts

    def body(rank):
        if rank == 1:
            return None  # straight to shutdown()
        start = time.monotonic()
        results = []
        while time.monotonic() - start < work_s:
            results.append(rpc.rpc_sync("worker1", T.add, args=(len(results), 1)))
            time.sleep(0.05)
        return results

    started = time.monotonic()
    results = run_workers(2, config, body)[0]
    assert time.monotonic() - started >= work_s
    assert results == list(range(1, len(results) + 1)) and len(results) > 10


def test_an_explicit_shutdown_bound_still_applies(transport, tmp_path):
    config = make_config(transport, 2, tmp_path, rpc={"shutdown_timeout_s": 0.5})

    def body(rank):
        if rank == 0:
            time.sleep(2.0)
            return None
        start = time.monotonic()
        with pytest.raises(ZgradTimeoutError, match="did not release the barrier within 0.5 s"):
            rpc.shutdown()
        return time.monotonic() - start

    waited = run_workers(2, config, body, shutdown=False)[1]
    assert waited < 1.5
    rpc.shutdown(graceful=False)  # rank 0's agent, the only one left: it never reached the barrier


def test_shutdown_timeout_config_takes_zero_and_refuses_negative():
    from zgrad.config import load_config

    assert load_config(None).rpc.shutdown_timeout_s == 0.0
    assert load_config({"rpc": {"shutdown_timeout_s": 0}}).rpc.shutdown_timeout_s == 0.0
    with pytest.raises(ConfigError, match="'rpc.shutdown_timeout_s' got -1; expected 0 \\(no bound\\)"):
        load_config({"rpc": {"shutdown_timeout_s": -1}})


# --- functions, methods and objects as values ---------------------------------------------------


def test_functions_classes_and_methods_travel_by_name(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        counter = rpc.remote("worker1", T.Counter, args=(10,))
        return [
            rpc.rpc_sync("worker1", T.apply, args=(T.add, 2, 3)),
            rpc.rpc_sync("worker1", T.apply, args=(zgrad.ones, 2)).numpy().tolist(),
            rpc.rpc_sync("worker1", T.echo, args=(T.Counter,)) is T.Counter,
            rpc.rpc_sync("worker1", T.echo, args=([T.add, {"f": T.Counter.increment}],)),
            # PyTorch's examples: _call_method(method, rref, *args) runs a method on the owner
            rpc.rpc_sync(counter.owner(), T._call_method, args=(T.Counter.increment, counter, 5)),
            rpc.rpc_sync("worker1", T.echo, args=(T.BatchServer.doubled,)) == T.BatchServer.doubled,
        ]

    results = run_workers(2, make_config(transport, 2, tmp_path), body)[0]
    assert results[:3] == [5, [1.0, 1.0], True]
    assert results[3] == [T.add, {"f": T.Counter.increment}]
    assert results[4] == 15 and results[5] is True


def test_unsendable_and_refused_functions_name_the_fix(transport, tmp_path):
    import os

    def body(rank):
        if rank != 0:
            return None
        with pytest.raises(rpc.CodecError, match="nested functions"):
            rpc.rpc_sync("worker1", T.apply, args=(T.make_adder(1), 2))
        with pytest.raises(rpc.CodecError, match="no lambdas"):
            rpc.rpc_sync("worker1", T.apply, args=(lambda x: x, 2))
        with pytest.raises(RemoteError, match=r"function value 'posix:getcwd' is not allowed on worker 'worker1'.*allowed_modules"):
            rpc.rpc_sync("worker1", T.apply, args=(os.getcwd,))
        return rpc.rpc_sync("worker1", T.add, args=(1, 1))  # still serving

    assert run_workers(2, make_config(transport, 2, tmp_path), body)[0] == 2


def test_dunder_names_never_resolve_and_private_ones_only_outside_zgrad():
    from zgrad.distributed.rpc.targets import TargetError, resolve_target

    assert resolve_target("rpc_targets:_call_method", ["rpc_targets"], "me") is T._call_method
    assert resolve_target("rpc_targets:Counter.increment", ["rpc_targets"], "me") is T.Counter.increment
    for name in ("rpc_targets:__builtins__", "rpc_targets:Counter.__init__", "rpc_targets:Counter.__class__",
                 "zgrad.ops:_operand", "rpc_targets:make_adder.__globals__"):
        with pytest.raises(TargetError, match="dunder and zgrad-private names do not resolve"):
            resolve_target(name, ["rpc_targets"], "me")


def test_spawned_main_is_main():
    """A script runs as ``__mp_main__`` in a spawn child; its functions travel and resolve as
    ``__main__``'s (every PyTorch example failed its first RPC on that name)."""
    import sys
    import types

    from zgrad.distributed.rpc.targets import resolve_target, target_name

    script = types.ModuleType("__mp_main__")
    exec("def run_trainer(x):\n    return x + 1\n", script.__dict__)
    saved = sys.modules.get("__main__"), sys.modules.get("__mp_main__")
    sys.modules["__main__"] = sys.modules["__mp_main__"] = script
    try:
        assert target_name(script.run_trainer) == "__main__:run_trainer"
        assert resolve_target("__main__:run_trainer", (), "me") is script.run_trainer
        assert resolve_target("__mp_main__:run_trainer", (), "me") is script.run_trainer
    finally:
        sys.modules["__main__"] = saved[0]
        if saved[1] is None:
            del sys.modules["__mp_main__"]
        else:
            sys.modules["__mp_main__"] = saved[1]


def test_objects_travel_as_class_and_attributes_without_running_their_code(transport, tmp_path):
    zgrad.manual_seed(0)
    model = zgrad.nn.Sequential(zgrad.nn.Linear(3, 4), zgrad.nn.Tanh(), zgrad.nn.Linear(4, 2))
    x = zgrad.randn(5, 3)
    expected = model(x).numpy()
    snapshot = [p.numpy().copy() for p in model.parameters()]  # inproc receivers see the sender's memory
    tracked = T.Tracked(payload={"values": (1, 2.5, "three"), "array": np.arange(3)})
    constructed = T.Tracked.constructed

    def body(rank):
        if rank != 0:
            return None
        point = rpc.rpc_sync("worker1", T.echo, args=(T.Point(3.0, 4.0, "p"),))
        back = rpc.rpc_sync("worker1", T.echo, args=(tracked,))
        return [
            point, point.norm(),
            type(back).__name__, back.payload["values"], back.payload["array"].tolist(),
            rpc.rpc_sync("worker1", T.module_forward, args=(model, x)).numpy(),
            rpc.rpc_sync("worker1", T.parameter_types, args=(model,)),
            rpc.rpc_sync("worker1", T.echo, args=({"s": {1, 2}, "f": frozenset({"a"}), "d": zgrad.float64},)),
            rpc.rpc_sync("worker1", T.add_to_all, args=(model, 1.0)),
        ]

    results = run_workers(2, make_config(transport, 2, tmp_path), body)[0]
    assert results[0] == T.Point(3.0, 4.0, "p") and results[1] == 5.0
    assert results[2:5] == ["Tracked", (1, 2.5, "three"), [0, 1, 2]]
    np.testing.assert_allclose(results[5], expected, rtol=1e-6)
    assert results[6] == ["Parameter"] * 4
    assert results[7] == {"s": {1, 2}, "f": frozenset({"a"}), "d": zgrad.float64}
    changed = results[8]
    assert isinstance(changed, zgrad.nn.Sequential) and changed is not model
    for before, after in zip(snapshot, changed.parameters()):
        assert isinstance(after, zgrad.nn.Parameter) and after.requires_grad
        np.testing.assert_array_equal(after.numpy(), before + 1.0)
    assert T.Tracked.constructed == constructed  # no __init__ (nor __setstate__) ran on the receiver


def test_bad_objects_name_the_attribute_path(transport, tmp_path):
    import argparse

    def body(rank):
        if rank != 0:
            return None
        looped = T.Holder(name="outer")
        looped.inner = T.Holder(back=looped)
        with pytest.raises(rpc.CodecError, match=r"cyclic object.*\(at inner\.back\)"):
            rpc.rpc_sync("worker1", T.echo, args=(looped,))
        locked = T.Holder(state={"items": [1, T.Holder(lock=threading.Lock())]})
        with pytest.raises(rpc.CodecError, match=r"_thread\.lock.*\(at state\['items'\]\[1\]\.lock\)"):
            rpc.rpc_sync("worker1", T.echo, args=(locked,))
        with pytest.raises(RemoteError, match=r"class of an object 'argparse:Namespace' is not allowed on worker 'worker1'"):
            rpc.rpc_sync("worker1", T.echo, args=(argparse.Namespace(a=1),))
        with pytest.raises(RemoteError, match=r"cannot rebuild an object of 'rpc_targets:CustomNew'.*__new__"):
            rpc.rpc_sync("worker1", T.echo, args=(T.CustomNew(),))
        return rpc.rpc_sync("worker1", T.add, args=(2, 2))

    assert run_workers(2, make_config(transport, 2, tmp_path), body)[0] == 4


# --- async_execution ------------------------------------------------------------------------------


def test_async_execution_answers_a_batch_without_holding_callee_threads(transport, tmp_path):
    """A batching server on worker1 with two callee threads: five trainers' calls wait for the
    batch to fill, and meanwhile none of them holds a callee task on the server; the sixth call
    completes the batch and every caller gets its answer."""
    batch = 6
    config = make_config(transport, 4, tmp_path, rpc={"num_worker_threads": 2})

    def body(rank):
        if rank != 0:
            return None
        server = rpc.rpc_sync("worker1", T.make_batch_server, args=(batch,))
        futures = [rpc.rpc_async(f"worker{2 + i % 2}", T.submit_to, args=(server, i)) for i in range(batch - 1)]
        arrived = poll(lambda: server.rpc_sync().waiting(), lambda n: n == batch - 1)
        # a submit is counted as waiting when its handler adds it, a moment before its callee task
        # ends: the count settles to the counting call's own task
        in_flight = poll(lambda: rpc.rpc_sync("worker1", T.callee_tasks_in_flight), lambda n: n == 1)
        early = [f.done() for f in futures]
        last = rpc.rpc_sync("worker1", T.BatchServer.submit, args=(server, batch - 1))
        return arrived, in_flight, early, [f.wait(10) for f in futures] + [last]

    arrived, in_flight, early, answers = run_workers(4, config, body)[0]
    assert arrived == batch - 1
    assert in_flight == 1  # the counting call itself: the five waiting submits hold no task
    assert early == [False] * (batch - 1)
    total = sum(range(batch))
    assert answers == [[total, i] for i in range(batch)]


def test_async_execution_through_rref_proxies_remote_and_class_methods(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        server = rpc.remote("worker1", T.BatchServer, args=(2,))
        first = server.rpc_async().submit_method(10)
        second = server.rpc_sync().submit_method(5)
        later = rpc.remote("worker1", T.async_add_later, args=(2, 3, 0.2))
        return [first.wait(10), second, later.to_here(), rpc.rpc_sync("worker1", T.BatchServer.doubled, args=(4,))]

    assert run_workers(2, make_config(transport, 2, tmp_path), body)[0] == [[15, 10], [15, 5], 5, 8]


def test_async_execution_errors_reach_the_caller_and_the_worker_keeps_serving(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        with pytest.raises(RemoteError, match=r"async_not_a_future' is decorated with @rpc.functions.async_execution "
                                              r"but returned a int, not a Future"):
            rpc.rpc_sync("worker1", T.async_not_a_future)
        with pytest.raises(ValueError, match="deferred failure"):
            rpc.rpc_sync("worker1", T.async_fails, args=("deferred failure",))
        assert isinstance(rpc.rpc_async("worker1", T.add, args=(1, 2)), Future)
        return rpc.rpc_sync("worker1", T.add, args=(1, 2))

    assert run_workers(2, make_config(transport, 2, tmp_path), body)[0] == 3


# --- RemoteModule -----------------------------------------------------------------------------------


def test_remote_module_forward_gradients_optimizer_and_as_an_argument(transport, tmp_path):
    x = zgrad.randn(4, 3, dtype=zgrad.float64)

    def body(rank):
        if rank != 0:
            return None
        remote = RemoteModule("worker1/cpu", zgrad.nn.Linear, args=(3, 2), kwargs={"dtype": zgrad.float64})
        weight, bias = [p.to_here() for p in remote.remote_parameters()]
        expected = x.numpy() @ weight.numpy().T + bias.numpy()
        out = remote(x).numpy()
        out_async = remote.forward_async(x).wait(10).numpy()
        elsewhere = rpc.rpc_sync("worker2", T.module_forward, args=(remote, x)).numpy()
        assert remote.get_module_rref().owner_name() == "worker1"
        with pytest.raises(ValueError, match="remote_parameters"):
            list(remote.parameters())
        opt = DistributedOptimizer(zgrad.optim.SGD, remote.remote_parameters(), lr=0.5)
        with dist_autograd.context() as context_id:
            loss = remote(x).sum()
            dist_autograd.backward(context_id, [loss])
            opt.step(context_id)
        new_weight = remote.remote_parameters()[0].to_here().numpy()
        return expected, out, out_async, elsewhere, weight.numpy(), new_weight

    expected, out, out_async, elsewhere, weight, new_weight = run_workers(3, make_config(transport, 3, tmp_path), body)[0]
    np.testing.assert_allclose(out, expected)
    np.testing.assert_allclose(out_async, expected)
    np.testing.assert_allclose(elsewhere, expected)
    # d(sum(x W^T + b))/dW = column sums of x, for each output row
    np.testing.assert_allclose(new_weight, weight - 0.5 * np.tile(x.numpy().sum(axis=0), (2, 1)))


def test_remote_device_forms_and_errors(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        by_rank = RemoteModule("rank:1/cpu", zgrad.nn.ReLU)
        for bad, match in (("worker1/cuda:0", "only 'cpu'"), ("a/b/c", "worker_name/device"), ("/cpu", "names no worker"),
                           ("rank:x/cpu", "integer rank")):
            with pytest.raises(ValueError, match=match):
                RemoteModule(bad, zgrad.nn.ReLU)
        with pytest.raises(RemoteError, match="boom"):
            RemoteModule("worker1", T.FailingConstructor, args=("boom",))
        return by_rank.on

    assert run_workers(2, make_config(transport, 2, tmp_path), body)[0] == "worker1"


# --- DistributedOptimizer takes any optimizer class -------------------------------------------------


def test_distributed_optimizer_steps_a_plain_optimizer_class_and_restores_grad(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        stage = rpc.remote("worker1", T.LinearStage, args=(3, 2, 7))
        params = stage.rpc_sync().parameter_rrefs()
        local = zgrad.nn.Parameter(np.ones(2))
        local.grad = zgrad.tensor([100.0, 100.0], dtype=zgrad.float64)  # must survive the step
        before = stage.rpc_sync().weights()
        opt = DistributedOptimizer(T.PlainSGD, params + [rpc.RRef(local)], lr=0.1)
        x = zgrad.randn(4, 3, dtype=zgrad.float64)
        with dist_autograd.context() as context_id:
            loss = (rpc.rpc_sync("worker1", T.stage_forward, args=(stage, x)).sum(1) * local.sum()).sum()
            dist_autograd.backward(context_id, [loss])
            grads = dist_autograd.get_gradients(context_id)
            opt.step(context_id)
        return before, stage.rpc_sync().weights(), local.numpy().copy(), grads[local].numpy(), local.grad.numpy()

    before, after, local, local_grad, kept = run_workers(2, make_config(transport, 2, tmp_path), body)[0]
    assert all(not np.allclose(b, a) for b, a in zip(before, after))  # the remote owner stepped
    np.testing.assert_allclose(local, 1.0 - 0.1 * local_grad)
    assert kept.tolist() == [100.0, 100.0]


# --- debug info, backend options, unobserved errors -------------------------------------------------


def test_dist_autograd_debug_info_is_flat_and_int_convertible(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        a = zgrad.randn(2, 2, requires_grad=True)
        with dist_autograd.context() as context_id:
            loss = rpc.rpc_sync("worker1", T.mul, args=(a, a)).sum()
            dist_autograd.backward(context_id, [loss])
            return dist_autograd.get_debug_info(), rpc.rpc_sync("worker1", T.dist_debug_info)

    root, peer = run_workers(2, make_config(transport, 2, tmp_path), body)[0]
    for info in (root, peer):
        assert all(not isinstance(v, dict) for v in info.values())
        counters = {k: int(v) for k, v in info.items()}  # what PyTorch code does with its Dict[str, str]
        assert counters["num_autograd_contexts"] == 1
    assert root["messages_received.GRAD_ACK"] >= 1 and peer["messages_sent.GRAD_ACK"] >= 1


def test_tensorpipe_options_map_onto_the_config(tmp_path):
    port = free_port()
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=3, rpc_timeout=7)
    options.init_method = f"tcp://127.0.0.1:{port}"  # set after construction, as PyTorch's ddp_rpc does
    config = {"transport": {"kind": "tcp", "connect_timeout_s": 20.0}, "rpc": {"allowed_modules": ["rpc_targets"]}}
    results: list = [None, None]

    def worker(rank):
        rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, config=config, backend=rpc.BackendType.TENSORPIPE,
                     rpc_backend_options=options)
        try:
            results[rank] = rpc.rpc_sync(f"w{1 - rank}", T.agent_settings)
        finally:
            rpc.shutdown()

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [[3, 7.0], [3, 7.0]]


def test_bad_backend_options_are_config_errors():
    from zgrad.distributed.rpc.options import apply_backend_options, rendezvous_of
    from zgrad.config import load_config

    base = load_config(None)
    for options, match in ((rpc.TensorPipeRpcBackendOptions(num_worker_threads=0), "num_worker_threads got 0"),
                           (rpc.TensorPipeRpcBackendOptions(rpc_timeout=-1), "rpc_timeout got -1"),
                           (rpc.TensorPipeRpcBackendOptions(devices=["cuda:1"]), "one CUDA device per process"),
                           (rpc.TensorPipeRpcBackendOptions(device_maps={"w1": {"cuda:0": "cpu", "cpu": "cpu"}}),
                            "maps two devices to one device of 'w1'"),
                           (rpc.TensorPipeRpcBackendOptions(device_maps={"w1": {"tpu": "cpu"}}), "expected 'cpu' or 'cuda:0'"),
                           ("threads=4", "must be a TensorPipeRpcBackendOptions")):
        with pytest.raises(ConfigError, match=match):
            apply_backend_options(base, options)
    with pytest.raises(ConfigError, match="'file:///tmp/x' is not supported"):
        rendezvous_of(rpc.TensorPipeRpcBackendOptions(init_method="file:///tmp/x"))
    with pytest.raises(ConfigError, match="needs a host and a port"):
        rendezvous_of(rpc.TensorPipeRpcBackendOptions(init_method="tcp://localhost"))
    with pytest.raises(ConfigError, match="unknown RPC backend 'GLOO_RPC'"):
        rpc.init_rpc("w", rank=0, world_size=1, backend="GLOO_RPC")
    assert rpc.RpcBackendOptions is rpc.TensorPipeRpcBackendOptions
    assert zgrad.accelerator.is_available() is zgrad.cuda.is_available()
    assert zgrad.accelerator.current_accelerator() == ("cuda" if zgrad.cuda.is_available() else None)


def test_a_remote_constructor_error_nobody_observed_is_logged_at_owner_shutdown(transport, tmp_path, caplog):
    def body(rank):
        if rank != 0:
            return None
        unobserved = rpc.remote("worker1", T.FailingConstructor, args=("nobody looked",))
        observed = rpc.remote("worker1", T.FailingConstructor, args=("seen by to_here",))
        with pytest.raises(ValueError, match="seen by to_here"):
            observed.to_here()
        return [unobserved, observed]  # kept alive until shutdown

    with caplog.at_level(logging.WARNING, logger="zgrad.rpc"):
        run_workers(2, make_config(transport, 2, tmp_path), body)
    logged = [r.getMessage() for r in caplog.records if "nobody fetched its result" in r.getMessage()]
    assert len(logged) == 1, logged
    assert "worker1" in logged[0] and "rpc_targets:FailingConstructor" in logged[0] and "nobody looked" in logged[0]


def test_rpc_and_a_process_group_rendezvous_at_the_same_master_port(monkeypatch):
    """PyTorch's batching example calls init_process_group and init_rpc with one env:// address:
    the process group holds the port, and RPC agrees on another one through it."""
    import zgrad.distributed as dist

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    config = {"transport": {"kind": "tcp", "connect_timeout_s": 20.0}, "rpc": {"allowed_modules": ["rpc_targets"]}}
    results: list = [None, None]
    errors: list = []

    def worker(rank):
        try:
            dist.init_process_group("gloo", rank=rank, world_size=2, config=config)
            try:
                rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, config=config)
                try:
                    results[rank] = rpc.rpc_sync(f"w{1 - rank}", T.add, args=(rank, 10))
                finally:
                    rpc.shutdown()
            finally:
                dist.destroy_process_group()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert results == [10, 11]

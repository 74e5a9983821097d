"""Distributed autograd over real RPC (4 workers, tcp and inproc), ported from the behaviours
PyTorch's dist_autograd_test.py, dist_optimizer_test.py and the RRef backward tests check.

Every gradient is compared with local autograd on the same computation.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import rpc_targets as T
import zgrad
from rpc_harness import assert_settled, make_config, peer_process, poll, run_workers, settled_counters
from zgrad.distributed import autograd as dist_autograd
from zgrad.distributed import rpc
from zgrad.distributed.optim import DistributedOptimizer
from zgrad.errors import AutogradError, WorkerUnavailableError, ZgradTimeoutError

pytestmark = pytest.mark.timeout(120)


def leaves(*shapes, seed=0, dtype=zgrad.float64):
    zgrad.manual_seed(seed)
    return [zgrad.randn(*s, dtype=dtype, requires_grad=True) for s in shapes]


def reference(fn, tensors):
    """Gradients of ``fn(*copies)`` computed locally."""
    copies = [zgrad.tensor(t.numpy(), requires_grad=True) for t in tensors]
    fn(*copies).backward()
    return [c.grad.numpy() for c in copies]


def assert_grads(context_id, tensors, expected):
    grads = dist_autograd.get_gradients(context_id)
    for t, e in zip(tensors, expected):
        assert t in grads, "a leaf that requires grad got no gradient"
        np.testing.assert_allclose(grads[t].numpy(), e, rtol=1e-10, atol=1e-12)
        assert t.grad is None, "distributed backward must not touch .grad"


@pytest.fixture(params=["tcp", "inproc"])
def transport(request):
    return request.param


@pytest.fixture(params=["fast", "smart"])
def mode(request):
    return request.param


def test_gradients_equal_local_autograd_along_every_rpc_path(transport, mode, tmp_path):
    """Design-note example via rpc_sync, rpc_async and remote; nested chains across 4 workers;
    round trips back to the caller; multiple roots; mixed dtypes; unused outputs."""

    def body(rank):
        if rank != 0:
            return None
        t1, t2, t4 = leaves((3, 3), (3, 3), (3, 3), seed=1)
        cases = {
            "rpc_sync": (lambda a, b, c: (rpc.rpc_sync("worker1", T.add, args=(a, b)) * c).sum(),
                         lambda a, b, c: ((a + b) * c).sum()),
            "rpc_async": (lambda a, b, c: (rpc.rpc_async("worker2", T.matmul_tanh, args=(a, b)).wait() * c).sum(),
                          lambda a, b, c: ((a @ b).tanh() * c).sum()),
            "remote": (lambda a, b, c: (rpc.remote("worker3", T.mul, args=(a, b)).to_here() + c).sum(),
                       lambda a, b, c: (a * b + c).sum()),
            "nested": (lambda a, b, c: (rpc.rpc_sync("worker1", T.nested_add, args=("worker2", a, b)) * c).sum(),
                       lambda a, b, c: ((a + b) * 2.0 * c).sum()),
            "chain-4-workers": (lambda a, b, c: rpc.rpc_sync("worker1", T.chain_through, args=(["worker2", "worker3"], a, b)).sum() * c.sum(),
                                lambda a, b, c: (a * b + a + a).sum() * c.sum()),
            "round-trip-home": (lambda a, b, c: (rpc.rpc_sync("worker1", T.call_back_home, args=("worker0", a, b)) * c).mean(),
                                lambda a, b, c: ((a.exp() * b + a) * c).mean()),
            "unused-output": (lambda a, b, c: (rpc.rpc_sync("worker2", T.two_outputs, args=(a, b))[0] * c).sum(),
                              lambda a, b, c: (a * b * c).sum()),
        }
        for name, (distributed, local) in cases.items():
            with dist_autograd.context() as context_id:
                loss = distributed(t1, t2, t4)
                dist_autograd.backward(context_id, [loss], mode=mode)
                try:
                    assert_grads(context_id, [t1, t2, t4], reference(local, [t1, t2, t4]))
                except AssertionError as exc:
                    raise AssertionError(f"case {name}: {exc}") from exc
        # Multiple roots and mixed dtypes (a float64 tensor comes back as float32).
        a, b = leaves((4,), (4,), seed=2)
        with dist_autograd.context() as context_id:
            r1 = rpc.rpc_sync("worker1", T.mul, args=(a, b)).sum()
            r2 = rpc.rpc_sync("worker3", T.cast_to_float32, args=(a,)).sum()
            assert r2.dtype == np.float32
            dist_autograd.backward(context_id, [r1, r2], mode=mode)
            grads = dist_autograd.get_gradients(context_id)
            assert grads[a].dtype == np.float64
            np.testing.assert_allclose(grads[a].numpy(), b.numpy() + 3.0, rtol=1e-6)
            np.testing.assert_allclose(grads[b].numpy(), a.numpy(), rtol=1e-10)
        return settled_counters(4)

    assert_settled(run_workers(4, make_config(transport, 4, tmp_path), body)[0])


def test_rref_backward_paths(transport, mode, tmp_path):
    """RRef.to_here inside a context on the owner's caller (owner worker1), on a third worker
    (worker2), and for an RRef made outside the context (owner worker3)."""

    def body(rank):
        if rank != 0:
            return None
        a, b = leaves((2, 3), (2, 3), seed=3)
        made_outside = rpc.remote("worker3", T.mul, args=(a.detach(), b.detach()))
        with dist_autograd.context() as context_id:
            owned = rpc.remote("worker1", T.mul, args=(a, b))
            via_third = rpc.rpc_sync("worker2", T.rref_to_here_sum, args=(owned, a))
            outside = made_outside.to_here()
            loss = (owned.to_here() * 2.0).sum() + via_third.sum() + (outside * a).sum()
            dist_autograd.backward(context_id, [loss], mode=mode)
            expected = reference(lambda x, y: (x * y * 2.0).sum() + (x * y * x).sum() + (x.detach() * y.detach() * x).sum(), [a, b])
            assert_grads(context_id, [a, b], expected)
        return settled_counters(4)

    assert_settled(run_workers(4, make_config(transport, 4, tmp_path), body)[0])


def test_hooks_repeated_passes_and_concurrent_contexts(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        a, b = leaves((3,), (3,), seed=4)
        seen = []
        handle = a.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10.0)
        with dist_autograd.context() as context_id:
            loss = rpc.rpc_sync("worker1", T.mul, args=(a, b)).sum()
            dist_autograd.backward(context_id, [loss], retain_graph=True)
            dist_autograd.backward(context_id, [loss])
            grads = dist_autograd.get_gradients(context_id)
            np.testing.assert_allclose(grads[a].numpy(), 2 * 10.0 * b.numpy())
            np.testing.assert_allclose(grads[b].numpy(), 2 * a.numpy())
        handle.remove()
        assert len(seen) == 2 and np.allclose(seen[0], b.numpy())

        # Dozens of contexts running backward at once from different threads stay separate and exact.
        results, errors = {}, []

        def one(i):
            rpc.bind_worker("worker0")  # several agents (worker threads) share this process
            try:
                x, y = leaves((5,), (5,), seed=100 + i)
                with dist_autograd.context() as cid:
                    loss = (rpc.rpc_sync(f"worker{1 + i % 3}", T.mul, args=(x, y)) * (i + 1)).sum()
                    dist_autograd.backward(cid, [loss])
                    g = dist_autograd.get_gradients(cid)
                    results[i] = (g[x].numpy(), (i + 1) * y.numpy(), g[y].numpy(), (i + 1) * x.numpy())
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert len(results) == 24
        for gx, ex, gy, ey in results.values():
            np.testing.assert_allclose(gx, ex)
            np.testing.assert_allclose(gy, ey)
        return settled_counters(4)

    assert_settled(run_workers(4, make_config(transport, 4, tmp_path), body)[0])


def test_a_pass_sends_nothing_after_its_gradients_and_back_to_back_passes_work(transport, tmp_path):
    """FAST: the design-note pass is one GRAD out and one GRAD_ACK back, carrying worker1's GRAD
    (no PASS_END; add's two identical gradients as one buffer); worker1 has closed the pass before backward returns. SMART adds one DISCOVER,
    one DISCOVER_ACK (carrying worker1's DISCOVER for the root) and one START.
    Then passes run back to back in one context, alternating modes, and gradients accumulate."""

    def engine_messages():
        return [{key.split(".", 1)[1]: n for key, n in rpc.rpc_sync(f"worker{r}", T.dist_debug_info).items()
                 if key.startswith("messages_sent.")} for r in range(2)]

    def body(rank):
        if rank != 0:
            return None
        t1, t2, t4 = leaves((3, 3), (3, 3), (3, 3), seed=4)
        expected = reference(lambda a, b, c: ((a + b) * c).sum(), [t1, t2, t4])
        with dist_autograd.context() as context_id:
            loss = (rpc.rpc_sync("worker1", T.add, args=(t1, t2)) * t4).sum()
            before = engine_messages()
            transport_before = rpc.get_debug_info()["transport"]
            dist_autograd.backward(context_id, [loss], retain_graph=True, mode="fast")
            transport_after = rpc.get_debug_info()["transport"]
            # add's two gradients are one array: it travels once (3x3 float64), and each leaf gets its own
            assert transport_after.get("bytes_in", 0) - transport_before.get("bytes_in", 0) == 9 * 8
            # the GRAD left from this thread's own socket, and the GRAD_ACK came back there
            assert transport_after["direct_requests"] - transport_before["direct_requests"] == 1
            assert transport_after.get("late_replies", 0) == transport_before.get("late_replies", 0)
            grads = dist_autograd.get_gradients(context_id)
            assert not np.shares_memory(grads[t1].numpy(), grads[t2].numpy())
            assert rpc.rpc_sync("worker1", T.dist_debug_info)["num_current_backward_passes"] == 0
            after = engine_messages()
            sent = {k: sum(a.get(k, 0) - b.get(k, 0) for a, b in zip(after, before)) for k in ("GRAD", "GRAD_ACK", "PASS_END")}
            assert sent == {"GRAD": 1, "GRAD_ACK": 1, "PASS_END": 0}, sent  # worker1's GRAD rides in its GRAD_ACK
            dist_autograd.backward(context_id, [loss], retain_graph=True, mode="smart")
            kinds = ("GRAD", "GRAD_ACK", "DISCOVER", "DISCOVER_ACK", "START", "PASS_END")
            counts = {"GRAD": 1, "GRAD_ACK": 1, "DISCOVER": 1, "DISCOVER_ACK": 1, "START": 1, "PASS_END": 0}
            sent = poll(lambda: {k: sum(a.get(k, 0) - b.get(k, 0) for a, b in zip(engine_messages(), after)) for k in kinds},
                        lambda sent: sent["START"] == 1)  # START is clean-up, sent after the pass completed
            assert sent == counts, sent
            for i in range(8):
                dist_autograd.backward(context_id, [loss], retain_graph=i < 7, mode=("fast", "smart")[i % 2])
            assert_grads(context_id, [t1, t2, t4], [10 * e for e in expected])
        return settled_counters(2)

    assert_settled(run_workers(2, make_config(transport, 2, tmp_path), body)[0])


def test_errors(transport, tmp_path):
    def body(rank):
        if rank != 0:
            return None
        a, b = leaves((3,), (3,), seed=5)
        with dist_autograd.context() as context_id:
            with pytest.raises(AutogradError, match="Already have an autograd context id for this thread"):
                with dist_autograd.context():
                    pass
            with pytest.raises(AutogradError, match="No tensors provided for gradient computation"):
                dist_autograd.backward(context_id, [])
            with pytest.raises(AutogradError, match="requires_grad not set on"):
                dist_autograd.backward(context_id, [zgrad.ones(1)])
            with pytest.raises(AutogradError, match="is not a scalar, all roots need to be scalar"):
                dist_autograd.backward(context_id, [a * 2])
            with pytest.raises(AutogradError, match="does not have a valid gradient function"):
                dist_autograd.backward(context_id, [zgrad.ones(1, requires_grad=True)])
            bogus = context_id + 12345
            with pytest.raises(AutogradError, match=f"Could not find autograd context with id: {bogus}"):
                dist_autograd.backward(bogus, [(a * b).sum()])
            with pytest.raises(AutogradError, match="Could not find autograd context with id"):
                dist_autograd.get_gradients(bogus)
            # An error two hops away reaches the caller, and nothing is left running.
            loss = rpc.rpc_sync("worker1", T.call_failing, args=("worker3", a)).sum()
            loss = loss + rpc.rpc_sync("worker2", T.mul, args=(a, b)).sum()
            with pytest.raises(AutogradError) as info:
                dist_autograd.backward(context_id, [loss])
            assert "Error on Node 3:" in str(info.value) and "simulated error in backward" in str(info.value)
            passes = ("num_current_backward_passes",)
            assert_settled(settled_counters(4, passes), passes)
            # FAST mode does not hang on an unused RPC result; SMART gets it right.
            used = rpc.rpc_sync("worker1", T.mul, args=(a, b))
            rpc.rpc_sync("worker3", T.add, args=(a, b))
            loss = used.sum()
            with pytest.raises(AutogradError, match="never received a gradient.*smart"):
                dist_autograd.backward(context_id, [loss], retain_graph=True)
        with dist_autograd.context() as context_id:
            used = rpc.rpc_sync("worker1", T.mul, args=(a, b))
            rpc.rpc_sync("worker3", T.add, args=(a, b))
            dist_autograd.backward(context_id, [used.sum()], mode="smart")
            assert_grads(context_id, [a, b], [b.numpy(), a.numpy()])
        return settled_counters(4)

    assert_settled(run_workers(4, make_config(transport, 4, tmp_path), body)[0])


def test_distributed_optimizer_matches_a_local_run(transport, tmp_path):
    """A three-stage pipeline, one stage per worker (worker1..worker3), trained from worker0."""
    steps, lr = 4, 0.05
    widths = [5, 6, 4, 2]
    x_np = np.random.default_rng(0).standard_normal((8, widths[0]))

    def local_run():
        stages = []
        for i in range(len(widths) - 1):
            zgrad.manual_seed(10 + i)
            stages.append(zgrad.nn.Linear(widths[i], widths[i + 1], dtype=np.float64))
        opt = zgrad.optim.SGD([p for s in stages for p in s.parameters()], lr=lr, momentum=0.9)
        for _ in range(steps):
            h = zgrad.tensor(x_np)
            for stage in stages:
                h = stage(h).tanh()
            opt.zero_grad()
            (h ** 2).sum().backward()
            opt.step()
        return [[p.numpy() for p in s.parameters()] for s in stages]

    def body(rank):
        if rank != 0:
            return None
        stages, params = [], []
        for i in range(len(widths) - 1):
            # One at a time: the workers are threads of this process and share its random generator.
            stages.append(rpc.remote(f"worker{i + 1}", T.LinearStage, args=(widths[i], widths[i + 1], 10 + i)))
            params += stages[-1].rpc_sync().parameter_rrefs()
        opt = DistributedOptimizer(zgrad.optim.SGD, params, lr=lr, momentum=0.9)
        for _ in range(steps):
            with dist_autograd.context() as context_id:
                h = zgrad.tensor(x_np)
                for i, stage in enumerate(stages):
                    h = rpc.rpc_sync(f"worker{i + 1}", T.stage_forward, args=(stage, h))
                dist_autograd.backward(context_id, [(h ** 2).sum()])
                opt.step(context_id)
        with pytest.raises(rpc.RemoteError, match="Invalid learning rate"):
            DistributedOptimizer(zgrad.optim.SGD, params, lr=-1.0)
        with dist_autograd.context() as context_id:  # no backward: parameters stay unchanged
            before = [s.rpc_sync().weights() for s in stages]
            opt.step(context_id)
            after = [s.rpc_sync().weights() for s in stages]
            assert all(np.array_equal(p, q) for b, a in zip(before, after) for p, q in zip(b, a))
        return [s.rpc_sync().weights() for s in stages]

    weights = run_workers(4, make_config(transport, 4, tmp_path), body)[0]
    for got_stage, expected_stage in zip(weights, local_run(), strict=True):
        for got, expected in zip(got_stage, expected_stage, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_distributed_optimizer_steps_this_workers_own_parameters_without_an_rpc(transport, tmp_path):
    """Parameters on the caller (a local head) and on worker1: same result as a local run, the
    caller's own optimizer is stepped in place, not through a CALL to itself, and worker1's is
    called from the caller's own socket."""
    from zgrad.distributed.rpc.messages import Kind
    from zgrad.distributed.rpc.state import current_agent

    x_np = np.random.default_rng(1).standard_normal((4, 3))

    def local_run():
        body_stage, head = T.LinearStage(3, 5, 21), T.LinearStage(5, 2, 22)
        opt = zgrad.optim.SGD([*body_stage.layer.parameters(), *head.layer.parameters()], lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            (head.forward(body_stage.forward(zgrad.tensor(x_np))) ** 2).sum().backward()
            opt.step()
        return body_stage.weights() + head.weights()

    def body(rank):
        if rank != 0:
            return None
        stage = rpc.remote("worker1", T.LinearStage, args=(3, 5, 21))
        stage.rpc_sync().weights()  # created before the head: inproc workers share the generator
        head = T.LinearStage(5, 2, 22)
        # Held to the end: dropped, worker1's parameter RRefs would be deleted (two RREF_DELETEs
        # through the mesh) once the reply to the constructor's remote() call, which pins them,
        # arrives; that may be during the first step.
        params = stage.rpc_sync().parameter_rrefs() + head.parameter_rrefs()
        opt = DistributedOptimizer(zgrad.optim.SGD, params, lr=0.1)
        agent = current_agent()
        for _ in range(3):
            with dist_autograd.context() as context_id:
                h = rpc.rpc_sync("worker1", T.stage_forward, args=(stage, zgrad.tensor(x_np)))
                dist_autograd.backward(context_id, [(head.forward(h) ** 2).sum()])
                stats_before = agent.mesh.stats()
                opt.step(context_id)
                stats = agent.mesh.stats()
                assert stats.get("loopback", 0) == stats_before.get("loopback", 0)
                # worker1's step leaves from this thread's own socket, its reply comes back there
                assert stats["direct_requests"] == stats_before["direct_requests"] + 1
                assert stats.get("messages_out", 0) == stats_before.get("messages_out", 0)
        assert agent.sent[Kind.CALL] >= 3
        assert len(params) == 4
        return stage.rpc_sync().weights() + head.weights()

    got = run_workers(2, make_config(transport, 2, tmp_path), body)[0]
    for g, e in zip(got, local_run(), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10)


def test_distributed_optimizer_takes_every_optimizer_class():
    """AdamW, RMSprop, Adagrad and Adadelta (with their options) step parameters on another worker
    and on the caller through DistributedOptimizer as a local optimizer steps them."""
    x_np = np.random.default_rng(2).standard_normal((4, 3))
    optimizers = [(zgrad.optim.AdamW, dict(lr=0.05, amsgrad=True)),
                  (zgrad.optim.RMSprop, dict(lr=0.01, momentum=0.9, centered=True)),
                  (zgrad.optim.Adagrad, dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
                  (zgrad.optim.Adadelta, dict(lr=0.5, weight_decay=0.01, maximize=True))]

    def local_run(cls, options):
        body_stage, head = T.LinearStage(3, 5, 31), T.LinearStage(5, 2, 32)
        opt = cls([*body_stage.layer.parameters(), *head.layer.parameters()], **options)
        for _ in range(3):
            opt.zero_grad()
            (head.forward(body_stage.forward(zgrad.tensor(x_np))) ** 2).sum().backward()
            opt.step()
        return body_stage.weights() + head.weights()

    def body(rank):
        if rank != 0:
            return None
        weights = []
        for cls, options in optimizers:
            stage = rpc.remote("worker1", T.LinearStage, args=(3, 5, 31))
            stage.rpc_sync().weights()  # created before the head: inproc workers share the generator
            head = T.LinearStage(5, 2, 32)
            params = stage.rpc_sync().parameter_rrefs() + head.parameter_rrefs()
            opt = DistributedOptimizer(cls, params, **options)
            for _ in range(3):
                with dist_autograd.context() as context_id:
                    h = rpc.rpc_sync("worker1", T.stage_forward, args=(stage, zgrad.tensor(x_np)))
                    dist_autograd.backward(context_id, [(head.forward(h) ** 2).sum()])
                    opt.step(context_id)
            weights.append(stage.rpc_sync().weights() + head.weights())
        return weights

    got = run_workers(2, make_config("inproc", 2), body)[0]
    for (cls, options), got_weights in zip(optimizers, got, strict=True):
        for g, e in zip(got_weights, local_run(cls, options), strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-10, err_msg=cls.__name__)


def test_a_pass_without_progress_fails_after_backward_timeout():
    def body(rank):
        if rank != 0:
            return None
        (a,) = leaves((3,), seed=6)
        with dist_autograd.context() as context_id:
            loss = rpc.rpc_sync("worker1", T.slow_in_backward, args=(a,)).sum()
            start = time.monotonic()
            with pytest.raises(ZgradTimeoutError, match="made no progress for 0.5 s"):
                dist_autograd.backward(context_id, [loss])
            return time.monotonic() - start

    waited = run_workers(2, make_config("inproc", 2, engine={"backward_timeout_s": 0.5}), body)[0]
    assert waited < 2.5


@pytest.mark.parametrize("kind", ["tcp", "ipc"])  # a real process: inproc workers cannot be killed
def test_a_worker_killed_mid_backward_fails_the_pass_naming_it(kind, mode, tmp_path):
    """worker0 -> worker1 -> worker3 (its own process) and worker0 -> worker2; worker3 is killed
    (kill -9) while its backward runs. The pass fails at the caller within heartbeat_timeout_s,
    naming worker3; the survivors free their state, keep working, and shut down without it."""
    world_size, victim, heartbeat_timeout_s, shutdown_timeout_s = 4, 3, 1.0, 5.0
    config = make_config(kind, world_size, tmp_path, engine={"backward_timeout_s": 15.0},
                         transport={"heartbeat_interval_s": 0.1, "heartbeat_timeout_s": heartbeat_timeout_s})
    marker = tmp_path / "victim-in-backward"
    driven = threading.Event()

    def kill_when_blocked(peer, killed_at):
        deadline = time.monotonic() + 20.0
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        if marker.exists():
            killed_at.append(time.monotonic())
            os.kill(peer.pid, signal.SIGKILL)

    def drive(peer):
        (a,) = leaves((3,), seed=7)
        killed_at = []
        with dist_autograd.context() as context_id:
            loss = (rpc.rpc_sync("worker1", T.call_blocking, args=("worker3", a, str(marker)))
                    + rpc.rpc_sync("worker2", T.mul, args=(a, a))).sum()
            killer = threading.Thread(target=kill_when_blocked, args=(peer, killed_at))
            killer.start()
            try:
                with pytest.raises(AutogradError, match="worker 'worker3' .*unavailable") as info:
                    dist_autograd.backward(context_id, [loss], mode=mode)
                failed_at = time.monotonic()
            finally:
                killer.join(30)
        assert killed_at, "worker3 never reached its backward"
        counters = settled_counters([0, 1, 2])
        with dist_autograd.context() as context_id:  # the survivors still run passes together
            dist_autograd.backward(context_id, [rpc.rpc_sync("worker1", T.mul, args=(a, a)).sum()], mode=mode)
            np.testing.assert_allclose(dist_autograd.get_gradients(context_id)[a].numpy(), 2 * a.numpy())
        return str(info.value), failed_at - killed_at[0], counters

    with peer_process(config, victim, world_size) as peer:
        def body(rank):
            try:
                result = drive(peer) if rank == 0 else None
            finally:
                if rank == 0:
                    driven.set()
                driven.wait(60)
                start = time.monotonic()
                with pytest.raises(WorkerUnavailableError, match="worker3"):
                    rpc.shutdown(timeout=shutdown_timeout_s)
            return result, time.monotonic() - start

        results = run_workers(world_size, config, body, ranks=[0, 1, 2], shutdown=False)

    (message, waited, counters), _ = results[0]
    assert "worker3" in message, message
    assert waited < heartbeat_timeout_s + 2.0, f"the pass failed {waited:.2f} s after the kill"
    assert_settled(counters)
    assert all(shutdown_s < shutdown_timeout_s for _, shutdown_s in results[:3])

"""Distributed autograd over real RPC (4 workers, tcp and inproc), ported from the behaviours
PyTorch's dist_autograd_test.py, dist_optimizer_test.py and the RRef backward tests check.

Every gradient is compared with local autograd on the same computation.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rpc_targets as T
import zgrad
from rpc_harness import make_config, run_workers
from zgrad.distributed import autograd as dist_autograd
from zgrad.distributed import rpc
from zgrad.distributed.optim import DistributedOptimizer
from zgrad.errors import AutogradError

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


def counters_everywhere(world_size):
    return [rpc.rpc_sync(f"worker{r}", T.dist_debug_info) for r in range(world_size)]


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
        return counters_everywhere(4)

    counters = run_workers(4, make_config(transport, 4, tmp_path), body)[0]
    assert [c["num_autograd_contexts"] for c in counters] == [0, 0, 0, 0]
    assert [c["num_current_backward_passes"] for c in counters] == [0, 0, 0, 0]


def test_rref_backward_paths(mode, tmp_path):
    """RRef.to_here inside a context on the owner's caller, on a third worker, and for an RRef
    made outside the context."""

    def body(rank):
        if rank != 0:
            return None
        a, b = leaves((2, 3), (2, 3), seed=3)
        made_outside = rpc.remote("worker1", T.mul, args=(a.detach(), b.detach()))
        with dist_autograd.context() as context_id:
            owned = rpc.remote("worker1", T.mul, args=(a, b))
            via_third = rpc.rpc_sync("worker2", T.rref_to_here_sum, args=(owned, a))
            outside = made_outside.to_here()
            loss = (owned.to_here() * 2.0).sum() + via_third.sum() + (outside * a).sum()
            dist_autograd.backward(context_id, [loss], mode=mode)
            expected = reference(lambda x, y: (x * y * 2.0).sum() + (x * y * x).sum() + (x.detach() * y.detach() * x).sum(), [a, b])
            assert_grads(context_id, [a, b], expected)
        return counters_everywhere(3)

    counters = run_workers(3, make_config("inproc", 3), body)[0]
    assert [c["num_autograd_contexts"] for c in counters] == [0, 0, 0]


def test_hooks_repeated_passes_and_concurrent_contexts(tmp_path):
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
            rpc.bind_worker("worker0")  # inproc: several agents share this process
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
        return counters_everywhere(4)

    counters = run_workers(4, make_config("inproc", 4), body)[0]
    assert [c["num_autograd_contexts"] for c in counters] == [0, 0, 0, 0]
    assert [c["num_current_backward_passes"] for c in counters] == [0, 0, 0, 0]


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
            loss = rpc.rpc_sync("worker1", T.call_failing, args=("worker2", a)).sum()
            with pytest.raises(AutogradError) as info:
                dist_autograd.backward(context_id, [loss])
            assert "Error on Node 2:" in str(info.value) and "simulated error in backward" in str(info.value)
            assert [c["num_current_backward_passes"] for c in counters_everywhere(3)] == [0, 0, 0]
            # FAST mode does not hang on an unused RPC result; SMART gets it right.
            used = rpc.rpc_sync("worker1", T.mul, args=(a, b))
            rpc.rpc_sync("worker2", T.add, args=(a, b))
            loss = used.sum()
            with pytest.raises(AutogradError, match="never received a gradient.*smart"):
                dist_autograd.backward(context_id, [loss], retain_graph=True)
        with dist_autograd.context() as context_id:
            used = rpc.rpc_sync("worker1", T.mul, args=(a, b))
            rpc.rpc_sync("worker2", T.add, args=(a, b))
            dist_autograd.backward(context_id, [used.sum()], mode="smart")
            assert_grads(context_id, [a, b], [b.numpy(), a.numpy()])
        return counters_everywhere(3)

    counters = run_workers(3, make_config(transport, 3, tmp_path), body)[0]
    assert [c["num_autograd_contexts"] for c in counters] == [0, 0, 0]
    assert [c["num_current_backward_passes"] for c in counters] == [0, 0, 0]


def test_distributed_optimizer_matches_a_local_run(transport, tmp_path):
    steps, lr = 4, 0.05
    x_np = np.random.default_rng(0).standard_normal((8, 5))

    def local_run():
        zgrad.manual_seed(10)
        s1 = zgrad.nn.Linear(5, 6, dtype=np.float64)
        zgrad.manual_seed(11)
        s2 = zgrad.nn.Linear(6, 2, dtype=np.float64)
        opt = zgrad.optim.SGD(list(s1.parameters()) + list(s2.parameters()), lr=lr, momentum=0.9)
        for _ in range(steps):
            loss = (s2(s1(zgrad.tensor(x_np)).tanh()).tanh() ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.numpy() for p in s1.parameters()], [p.numpy() for p in s2.parameters()]

    def body(rank):
        if rank != 0:
            return None
        s1 = rpc.remote("worker1", T.LinearStage, args=(5, 6, 10))
        s2 = rpc.remote("worker2", T.LinearStage, args=(6, 2, 11))
        params = s1.rpc_sync().parameter_rrefs() + s2.rpc_sync().parameter_rrefs()
        opt = DistributedOptimizer(zgrad.optim.SGD, params, lr=lr, momentum=0.9)
        for _ in range(steps):
            with dist_autograd.context() as context_id:
                h = rpc.rpc_sync("worker1", T.stage_forward, args=(s1, zgrad.tensor(x_np)))
                out = rpc.rpc_sync("worker2", T.stage_forward, args=(s2, h))
                dist_autograd.backward(context_id, [(out ** 2).sum()])
                opt.step(context_id)
        with pytest.raises(rpc.RemoteError, match="Invalid learning rate"):
            DistributedOptimizer(zgrad.optim.SGD, params, lr=-1.0)
        with dist_autograd.context() as context_id:  # no backward: parameters stay unchanged
            before = s1.rpc_sync().weights()
            opt.step(context_id)
            assert all(np.array_equal(p, q) for p, q in zip(before, s1.rpc_sync().weights()))
        return s1.rpc_sync().weights(), s2.rpc_sync().weights()

    w1, w2 = run_workers(3, make_config(transport, 3, tmp_path), body)[0]
    e1, e2 = local_run()
    for got, expected in zip(w1 + w2, e1 + e2):
        np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_a_pass_without_progress_fails_after_backward_timeout():
    from zgrad.errors import ZgradTimeoutError

    def body(rank):
        if rank != 0:
            return None
        (a,) = leaves((3,), seed=6)
        with dist_autograd.context() as context_id:
            loss = rpc.rpc_sync("worker1", T.slow_in_backward, args=(a,)).sum()
            start = __import__("time").monotonic()
            with pytest.raises(ZgradTimeoutError, match="made no progress for 0.5 s"):
                dist_autograd.backward(context_id, [loss])
            return __import__("time").monotonic() - start

    waited = run_workers(2, make_config("inproc", 2, engine={"backward_timeout_s": 0.5}), body)[0]
    assert waited < 2.5

"""DistributedDataParallel against single-process training on the concatenated batch (float64,
to 1e-10): several buckets and their rebuild, unused parameters, no_sync, join, comm hooks
(reduced in index order), gradient_as_bucket_view; over tcp, ipc and inproc."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import zgrad
import zgrad.nn.functional as F
from pg_harness import TRANSPORTS, leftover_threads, pg_config, run_ranks
from zgrad import nn
from zgrad.distributed.algorithms.ddp_comm_hooks import default_hooks
from zgrad.distributed.collectives.state import current_world
from zgrad.futures import Future
from zgrad.nn.parallel import DistributedDataParallel as DDP
from zgrad.nn.parallel import GradBucket
from zgrad.nn.parallel.buckets import assign_buckets

pytestmark = pytest.mark.timeout(180)

TOL = 1e-10
BATCH = 6  # per rank


@pytest.fixture(autouse=True)
def no_leftover_threads():
    yield
    assert not leftover_threads(), f"process group threads still running: {leftover_threads()}"


SEEDING = threading.Lock()  # rank threads share zgrad's default generator


def make_model(seed: int = 0, hidden: int = 16) -> nn.Module:
    with SEEDING:
        zgrad.manual_seed(seed)
        return nn.Sequential(nn.Linear(5, hidden, dtype=np.float64), nn.Tanh(), nn.Linear(hidden, hidden, dtype=np.float64),
                             nn.ReLU(), nn.Linear(hidden, 3, dtype=np.float64))


def data(world: int, steps: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((steps, world * BATCH, 5)), rng.integers(0, 3, (steps, world * BATCH))


def shard(array: np.ndarray, rank: int) -> zgrad.Tensor:
    return zgrad.tensor(array[rank * BATCH:(rank + 1) * BATCH])


def reference_training(world: int, steps: int, lr: float = 0.1, **model_kw) -> list[list[np.ndarray]]:
    """Single-process SGD on the concatenated batches: the gradients of every step."""
    model = make_model(**model_kw)
    opt = zgrad.optim.SGD(model.parameters(), lr=lr)
    xs, ys = data(world, steps)
    grads = []
    for step in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(zgrad.tensor(xs[step])), zgrad.tensor(ys[step])).backward()
        grads.append([p.grad.numpy().copy() for p in model.parameters()])
        opt.step()
    return grads


def ddp_training(rank: int, world: int, steps: int, lr: float = 0.1, model: DDP | None = None,
                 **ddp_kw) -> tuple[list, list]:
    """SGD through ``model`` (a new DDP model by default) on this rank's shards: the gradients of
    every step and the final parameters."""
    model = model or DDP(make_model(), **ddp_kw)
    opt = zgrad.optim.SGD(model.parameters(), lr=lr)
    xs, ys = data(world, steps)
    grads = []
    for step in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(shard(xs[step], rank)), shard(ys[step], rank)).backward()
        grads.append([p.grad.numpy().copy() for p in model.parameters()])
        opt.step()
    return grads, [p.numpy().copy() for p in model.parameters()]


def assert_grads_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=TOL)


# --- the gradients ----------------------------------------------------------------------------


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("kind", TRANSPORTS)
def test_gradients_equal_single_process_training_with_several_buckets(kind, world):
    steps = 4
    want = reference_training(world, steps)
    results = run_ranks(world, lambda rank: ddp_training(rank, world, steps, bucket_cap_mb=0.001), kind,
                        pg_config(kind, chunk_kb=1, small_tensor_kb=1))
    for grads, params in results:
        for step in range(steps):
            assert_grads_close(grads[step], want[step])
        for p, q in zip(params, results[0][1]):
            np.testing.assert_array_equal(p, q)  # every rank took the same steps


def _two_layers() -> nn.Module:
    with SEEDING:  # parameters of 768 KiB, 2 KiB, 512 KiB, 2 KiB (float64)
        zgrad.manual_seed(0)
        return nn.Sequential(nn.Linear(384, 256, dtype=np.float64), nn.Linear(256, 256, dtype=np.float64))


def test_buckets_reverse_order_small_first_bucket_and_rebuild_in_ready_order():
    def body(rank: int) -> tuple:
        ddp = DDP(_two_layers())
        before = [b.params for b in ddp.reducer.buckets]
        ddp(zgrad.ones(2, 384, dtype=np.float64)).sum().backward()
        ready_order = list(ddp.reducer._ready_order)
        assert not ddp.reducer.has_rebuilt
        ddp(zgrad.ones(2, 384, dtype=np.float64))  # the second forward rebuilds
        after = [b.params for b in ddp.reducer.buckets]
        return before, ready_order, after, ddp.reducer.has_rebuilt

    results = run_ranks(2, body, "inproc")
    before, ready_order, after, rebuilt = results[0]
    # in forward order the 1 MiB first bucket closes with parameter 2 (1282 KiB): [0, 1, 2], [3];
    # reversed, so that bucket 0 holds the parameters whose gradients come first
    assert before == [[3], [0, 1, 2]]
    assert rebuilt and sorted(ready_order) == [0, 1, 2, 3] and set(ready_order[:2]) == {2, 3}
    assert after == assign_buckets(list(_two_layers().parameters()), ready_order, [1 << 20, 25 << 20])
    assert results[1][2] == after  # rank 0's order, on every rank


def test_bucket_assignment_follows_pytorch():
    params = [zgrad.zeros(n, dtype=d) for n, d in [(100, np.float32), (300, np.float32), (10, np.float64),
                                                    (500, np.float32), (50, np.float64)]]
    # limits 1000 bytes then 1600: float32 400 B, 1200 B (closes at 1600 B >= 1000), then 2000 B
    assert assign_buckets(params, range(5), [1000, 1600]) == [[0, 1], [3], [2, 4]]
    assert assign_buckets(params, [4, 3, 2, 1, 0], [10 ** 9]) == [[4, 2], [3, 1, 0]]  # open ones by first dtype seen


# --- unused parameters ------------------------------------------------------------------------


class TwoHeads(nn.Module):
    """``head_b`` is used only where ``use_b`` says so."""

    def __init__(self, use_b):
        super().__init__()
        with SEEDING:
            zgrad.manual_seed(3)
            self.trunk = nn.Linear(5, 4, dtype=np.float64)
            self.head_a = nn.Linear(4, 3, dtype=np.float64)
            self.head_b = nn.Linear(4, 3, dtype=np.float64)
        self.use_b = use_b

    def forward(self, x):
        h = self.trunk(x).tanh()
        out = self.head_a(h)
        return out + self.head_b(h) if self.use_b else out


def _two_heads_reference(uses: list[bool]) -> list[np.ndarray]:
    """The average over ranks of each rank's gradients (a parameter unused on a rank gives 0 there)."""
    xs, ys = data(len(uses), 1)
    total = None
    for rank, use_b in enumerate(uses):
        model = TwoHeads(use_b)
        F.cross_entropy(model(shard(xs[0], rank)), shard(ys[0], rank)).backward()
        grads = [p.grad.numpy() if p.grad is not None else np.zeros(p.shape) for p in model.parameters()]
        total = grads if total is None else [t + g for t, g in zip(total, grads)]
    return [t / len(uses) for t in total]


@pytest.mark.parametrize("kind", ["tcp", "inproc"])
def test_find_unused_parameters(kind):
    """A parameter unused on every rank keeps its .grad; one used on some ranks gets the average."""
    xs, ys = data(2, 1)

    def body(rank: int, uses: list[bool]) -> list:
        ddp = DDP(TwoHeads(uses[rank]), find_unused_parameters=True, bucket_cap_mb=0.0001)
        if not any(uses):
            ddp.module.head_b.weight.grad = zgrad.full((3, 4), 7.0, dtype=np.float64)  # kept as it was
        F.cross_entropy(ddp(shard(xs[0], rank)), shard(ys[0], rank)).backward()
        return [None if p.grad is None else p.grad.numpy() for p in ddp.parameters()]

    for uses in ([False, False], [True, False]):
        results = run_ranks(2, lambda rank, uses=uses: body(rank, uses), kind, pg_config(kind))
        want = _two_heads_reference(uses)
        for grads in results:
            for i, (g, w) in enumerate(zip(grads, want)):
                if not any(uses) and i == 4:
                    np.testing.assert_array_equal(g, np.full((3, 4), 7.0))
                elif not any(uses) and i == 5:
                    assert g is None
                else:
                    np.testing.assert_allclose(g, w, rtol=0, atol=TOL)


@pytest.mark.parametrize("uses", [[False, False], [True, False]], ids=["unused-everywhere", "unused-on-rank-1"])
@pytest.mark.parametrize("detail", [False, True])
def test_an_unused_parameter_without_find_unused_parameters_raises_on_every_rank(uses, detail, monkeypatch):
    if detail:
        monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    xs, ys = data(2, 1)

    def body(rank: int) -> None:
        ddp = DDP(TwoHeads(uses[rank]), bucket_cap_mb=0.0001)
        with pytest.raises(RuntimeError, match="Expected to have finished reduction in the prior iteration before "
                                               "starting a new one") as caught:
            F.cross_entropy(ddp(shard(xs[0], rank)), shard(ys[0], rank)).backward()
        text = str(caught.value)
        assert "find_unused_parameters=True" in text
        culprit = rank if not any(uses) else 1  # everyone's own; else rank 1's, the one that never used head_b
        assert f"Parameter indices which did not receive grad for rank {culprit}: 4 5" in text
        if detail:
            assert f"Parameters which did not receive grad for rank {culprit}: head_b.weight, head_b.bias" in text
        else:
            assert "TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL" in text
        with pytest.raises(RuntimeError, match="Expected to have finished reduction in the prior iteration"):
            ddp(shard(xs[0], rank))  # and again where PyTorch raises it

    run_ranks(2, body, "tcp", pg_config("tcp"))


def test_static_graph_is_accepted_and_tolerates_a_parameter_no_rank_uses():
    xs, ys = data(2, 2)

    def body(rank: int) -> list:
        ddp = DDP(TwoHeads(False), static_graph=True)
        for step in range(2):
            ddp.zero_grad()
            F.cross_entropy(ddp(shard(xs[step], rank)), shard(ys[step], rank)).backward()
        return [p.grad is None for p in ddp.parameters()]

    for nones in run_ranks(2, body, "inproc"):
        assert nones == [False, False, False, False, True, True]


# --- no_sync, gradient_as_bucket_view, comm hooks ---------------------------------------------------


@pytest.mark.parametrize("kind", ["tcp", "inproc"])
def test_no_sync_accumulates_locally_without_a_message_and_the_next_sync_reduces_the_sum(kind):
    xs, ys = data(2, 3)
    model = make_model()
    for step in range(3):
        F.cross_entropy(model(zgrad.tensor(xs[step])), zgrad.tensor(ys[step])).backward()
    want = [p.grad.numpy() for p in model.parameters()]

    def body(rank: int) -> tuple:
        ddp = DDP(make_model(), bucket_cap_mb=0.001)
        comm = current_world().comm
        sent = comm.sent
        with ddp.no_sync():
            for step in range(2):
                F.cross_entropy(ddp(shard(xs[step], rank)), shard(ys[step], rank)).backward()
        quiet = comm.sent == sent
        F.cross_entropy(ddp(shard(xs[2], rank)), shard(ys[2], rank)).backward()
        return quiet, [p.grad.numpy() for p in ddp.parameters()]

    for quiet, grads in run_ranks(2, body, kind, pg_config(kind)):
        assert quiet
        assert_grads_close(grads, want)


def test_gradient_as_bucket_view():
    steps = 3
    want = reference_training(2, steps)

    def body(rank: int) -> tuple:
        grads, _ = ddp_training(rank, 2, steps, gradient_as_bucket_view=True, bucket_cap_mb=0.001)
        return grads

    results = run_ranks(2, lambda rank: (body(rank), None), "inproc")
    for grads, _ in results:
        for step in range(steps):
            assert_grads_close(grads[step], want[step])

    def views(rank: int) -> bool:
        ddp = DDP(make_model(), gradient_as_bucket_view=True)
        ddp(zgrad.ones(2, 5, dtype=np.float64)).sum().backward()
        buffers = [b.buffer for b in ddp.reducer.buckets]
        return all(any(np.shares_memory(p.grad._data, buf) for buf in buffers) for p in ddp.parameters())

    assert all(run_ranks(2, views, "inproc"))


@pytest.mark.parametrize("hook", ["allreduce", "fp16", "custom"])
def test_comm_hooks_run_in_bucket_index_order(hook):
    steps = 3
    want = reference_training(2, steps)

    def body(rank: int) -> tuple:
        model = DDP(make_model(), bucket_cap_mb=0.001)
        seen: list[int] = []
        if hook == "allreduce":
            model.register_comm_hook(None, default_hooks.allreduce_hook)
        elif hook == "fp16":
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        else:
            def recording(state, bucket: GradBucket) -> Future:
                seen.append(bucket.index())
                assert bucket.is_last() == (bucket.index() == len(model.reducer.buckets) - 1)
                assert [g.shape for g in bucket.gradients()] == [p.shape for p in bucket.parameters()]
                bucket.set_buffer(bucket.buffer() * 1.0)  # a copy of itself: nothing changes
                return default_hooks.allreduce_hook(state, bucket)
            model.register_comm_hook(None, recording)
        with pytest.raises(RuntimeError, match="register_comm_hook or register_builtin_comm_hook can only be called once"):
            model.register_comm_hook(None, default_hooks.allreduce_hook)
        grads, _ = ddp_training(rank, 2, steps, model=model)
        return grads, seen, len(model.reducer.buckets)

    for grads, seen, nbuckets in run_ranks(2, body, "tcp"):
        for step in range(steps):
            for g, w in zip(grads[step], want[step]):
                np.testing.assert_allclose(g, w, rtol=0, atol=2e-3 if hook == "fp16" else TOL)
        if hook == "custom":  # each step runs the hook on bucket 0, 1, ... (the layout may change once, at rebuild)
            starts = [i for i, b in enumerate(seen) if b == 0] + [len(seen)]
            runs = [seen[a:b] for a, b in zip(starts, starts[1:])]
            assert len(runs) == steps and all(run == list(range(len(run))) for run in runs) and nbuckets > 1, seen


def test_bad_hooks_are_refused():
    def body(rank: int) -> None:
        model = DDP(make_model())
        with pytest.raises(TypeError, match="a DDP communication hook must be callable, got str"):
            model.register_comm_hook(None, "allreduce")
        model.register_comm_hook(None, lambda state, bucket: bucket.buffer())
        with pytest.raises(TypeError, match="must return a zgrad.futures.Future, got Tensor"):
            model(zgrad.ones(2, 5, dtype=np.float64)).sum().backward()
        short = DDP(make_model())

        def wrong_size(state, bucket):
            future = Future()
            future.set_result(zgrad.ones(3))
            return future

        short.register_comm_hook(None, wrong_size)
        with pytest.raises(RuntimeError, match=r"the communication hook's future for bucket 0 must hold a tensor of \d+ "
                                               r"elements \(the bucket's buffer\)"):
            short(zgrad.ones(2, 5, dtype=np.float64)).sum().backward()

    run_ranks(1, body, "inproc")


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_megabyte_buckets_through_the_single_copy_path(kind):
    """Buckets of MiBs go through the ring in chunks of 256-512 KiB that the receiving rank reads from
    the sender's memory; gradients still match to 1e-10."""
    def big_model() -> nn.Module:
        with SEEDING:
            zgrad.manual_seed(5)
            return nn.Sequential(nn.Linear(5, 512, dtype=np.float64), nn.Tanh(), nn.Linear(512, 384, dtype=np.float64),
                                 nn.Tanh(), nn.Linear(384, 3, dtype=np.float64))

    xs, ys = data(2, 1)
    reference = big_model()
    F.cross_entropy(reference(zgrad.tensor(xs[0])), zgrad.tensor(ys[0])).backward()

    def body(rank: int) -> tuple:
        ddp = DDP(big_model())
        F.cross_entropy(ddp(shard(xs[0], rank)), shard(ys[0], rank)).backward()
        return [p.grad.numpy() for p in ddp.parameters()], current_world().comm.mesh.stats()["cma_received"]

    for grads, cma_received in run_ranks(2, body, kind, pg_config(kind, chunk_kb=512, small_tensor_kb=64)):
        assert_grads_close(grads, [p.grad.numpy() for p in reference.parameters()])
        assert cma_received > 0


def test_an_existing_grad_is_updated_in_place_and_a_fresh_one_replaced():
    """After zero_grad(set_to_none=False) the same .grad tensors receive the averages (copied
    in); a gradient this backward created is replaced by its bucket's view (no copy back)."""
    steps = 2
    want = reference_training(2, steps)
    xs, ys = data(2, steps)

    def body(rank: int) -> None:
        ddp = DDP(make_model(), bucket_cap_mb=0.001)
        F.cross_entropy(ddp(shard(xs[0], rank)), shard(ys[0], rank)).backward()
        assert_grads_close([p.grad.numpy() for p in ddp.parameters()], want[0])
        buffers = [b.buffer for b in ddp.reducer.buckets]
        assert all(any(np.shares_memory(p.grad._data, b) for b in buffers) for p in ddp.parameters())
        held = [p.grad for p in ddp.parameters()]
        ddp.zero_grad(set_to_none=False)
        F.cross_entropy(ddp(shard(xs[0], rank)), shard(ys[0], rank)).backward()
        assert all(p.grad is h for p, h in zip(ddp.parameters(), held))
        assert_grads_close([p.grad.numpy() for p in ddp.parameters()], want[0])

    run_ranks(2, body, "inproc")

"""DDP's join() with uneven inputs, what construction checks and broadcasts, and DDP under
distributed autograd (the averages land in the context: PyTorch's ddp_rpc pattern)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rpc_targets as T
import zgrad
import zgrad.distributed as dist
import zgrad.nn.functional as F
from pg_harness import leftover_threads, pg_config, run_ranks
from rpc_harness import free_port, make_config, run_workers
from test_ddp import SEEDING, TOL, data, make_model, shard
from zgrad import nn
from zgrad.distributed import autograd as dist_autograd
from zgrad.distributed import rpc
from zgrad.errors import ZgradError
from zgrad.nn.parallel import DistributedDataParallel as DDP

pytestmark = pytest.mark.timeout(180)

LR = 0.1


@pytest.fixture(autouse=True)
def no_leftover_threads():
    yield
    assert not leftover_threads(), f"process group threads still running: {leftover_threads()}"


# --- join ---------------------------------------------------------------------------------------


def simulate_uneven(counts: list[int], divide_by_initial: bool) -> list[np.ndarray]:
    """SGD where step k averages the gradients of the ranks that still have a batch k."""
    world = len(counts)
    model = make_model()
    xs, ys = data(world, max(counts))
    for step in range(max(counts)):
        active = [r for r in range(world) if counts[r] > step]
        total = None
        for r in active:
            replica = make_model()
            replica.load_state_dict(model.state_dict())
            F.cross_entropy(replica(shard(xs[step], r)), shard(ys[step], r)).backward()
            grads = [p.grad.numpy() for p in replica.parameters()]
            total = grads if total is None else [t + g for t, g in zip(total, grads)]
        divisor = world if divide_by_initial else len(active)
        with zgrad.no_grad():
            for p, g in zip(model.parameters(), total):
                p._data -= LR * (g / divisor)
    return [p.numpy() for p in model.parameters()]


@pytest.mark.parametrize("counts", [[3, 1], [3, 1, 2], [0, 2]], ids=["3-1", "3-1-2", "0-2"])
@pytest.mark.parametrize("divide_by_initial", [True, False])
def test_join_with_uneven_inputs_trains_like_the_ranks_that_still_have_data(counts, divide_by_initial):
    world = len(counts)
    xs, ys = data(world, max(counts))

    def body(rank: int) -> list[np.ndarray]:
        ddp = DDP(make_model(), bucket_cap_mb=0.001)
        opt = zgrad.optim.SGD(ddp.parameters(), lr=LR)
        with ddp.join(divide_by_initial_world_size=divide_by_initial):
            for step in range(counts[rank]):
                opt.zero_grad()
                F.cross_entropy(ddp(shard(xs[step], rank)), shard(ys[step], rank)).backward()
                opt.step()
        return [p.numpy() for p in ddp.parameters()]

    want = simulate_uneven(counts, divide_by_initial)
    for params in run_ranks(world, body, "tcp", pg_config("tcp", chunk_kb=1, small_tensor_kb=1)):
        for p, w in zip(params, want):  # every rank ends with the last joiner's model
            np.testing.assert_allclose(p, w, rtol=0, atol=TOL)


def test_join_throw_on_early_termination():
    xs, ys = data(2, 3)

    def body(rank: int) -> None:
        ddp = DDP(make_model())
        message = "Rank 1 exhausted all inputs." if rank == 1 else \
            "Detected at least one rank that exhausted inputs. Throwing across all ranks."
        with pytest.raises(RuntimeError, match=message):
            with ddp.join(throw_on_early_termination=True):
                for step in range(3 if rank == 0 else 1):
                    F.cross_entropy(ddp(shard(xs[step], rank)), shard(ys[step], rank)).backward()

    run_ranks(2, body, "inproc")


# --- construction -------------------------------------------------------------------------------


class WithBuffer(nn.Module):
    def __init__(self, seed: int):
        super().__init__()
        with SEEDING:
            zgrad.manual_seed(seed)
            self.fc = nn.Linear(3, 2, dtype=np.float64)
        self.register_buffer("running", zgrad.full((2,), float(seed), dtype=np.float64))

    def forward(self, x):
        return self.fc(x) + self.running


def test_construction_broadcasts_rank_0s_parameters_and_buffers_and_forward_its_buffers():
    def body(rank: int) -> tuple:
        ddp = DDP(WithBuffer(seed=rank))  # different initial values on every rank
        after_init = [p.numpy().copy() for p in ddp.parameters()] + [ddp.module.running.numpy().copy()]
        if rank == 1:
            ddp.module.running = zgrad.full((2,), 5.0, dtype=np.float64)
        ddp(zgrad.ones(1, 3, dtype=np.float64))
        return after_init, ddp.module.running.numpy()

    results = run_ranks(3, body, "inproc")
    reference = WithBuffer(seed=0)
    for after_init, running in results:
        for got, want in zip(after_init, [p.numpy() for p in reference.parameters()] + [reference.running.numpy()]):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(running, [0.0, 0.0])  # broadcast from rank 0 at each forward


@pytest.mark.parametrize("kind", ["tcp", "inproc"])
def test_different_parameter_counts_fail_on_every_rank(kind):
    def body(rank: int) -> None:
        model = nn.Sequential(*[nn.Linear(3, 3) for _ in range(1 + rank)])
        other = 1 - rank
        with pytest.raises(RuntimeError, match=f"DDP expects same model across all ranks, but Rank {rank} has "
                                               f"{2 + 2 * rank} params, while rank {other} has inconsistent "
                                               f"{2 + 2 * other} params."):
            DDP(model)

    run_ranks(2, body, kind, pg_config(kind))


def test_different_parameter_shapes_fail_on_every_rank():
    def body(rank: int) -> None:
        model = nn.Sequential(nn.Linear(3, 4 if rank != 1 else 5), nn.Linear(4 if rank != 1 else 5, 2))
        if rank == 1:
            text = r"\[1\]: params\[0\] in this process with sizes \[5, 3\] appears not to match sizes of the same param in process 0."
        else:
            text = r"DDP expects same model across all ranks, but \[1\]: params\[0\] appears not to match sizes"
        with pytest.raises(RuntimeError, match=text):
            DDP(model)

    run_ranks(3, body, "inproc")


def test_a_module_without_trainable_parameters_and_cpu_device_ids_are_refused():
    def body(rank: int) -> None:
        with pytest.raises(RuntimeError, match="DistributedDataParallel is not needed when a module doesn't have any "
                                               "parameter that requires a gradient."):
            DDP(nn.ReLU())
        frozen = nn.Linear(2, 2)
        for p in frozen.parameters():
            p.requires_grad_(False)
        with pytest.raises(RuntimeError, match="doesn't have any parameter that requires a gradient"):
            DDP(frozen)
        with pytest.raises(ValueError, match=r"DistributedDataParallel device_ids and output_device arguments only work "
                                             r"with single-device/multiple-device GPU modules or CPU modules, but got "
                                             r"device_ids \[0\], output_device None, and module parameters "
                                             r"\{device\(type='cpu'\)\}."):
            DDP(nn.Linear(2, 2), device_ids=[0])

    run_ranks(1, body, "inproc")


def test_ddp_needs_an_initialized_process_group():
    with pytest.raises(ZgradError, match="Default process group has not been initialized"):
        DDP(nn.Linear(2, 2))


# --- under distributed autograd -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["tcp", "inproc"])
def test_ddp_under_distributed_autograd_puts_the_averages_in_the_context(kind, tmp_path):
    """Each trainer runs a DDP model, then an RPC to the other trainer on its output (a remote
    part of the graph); dist_autograd.backward reaches the DDP parameters through the other
    worker, and the averaged gradients land in the context, not in .grad."""
    rpc_config = make_config(kind, 2, tmp_path)
    pg_port, pgc = free_port(), pg_config(kind)
    xs, _ = data(2, 2)

    def body(rank: int) -> list:
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{pg_port}", rank=rank, world_size=2, config=pgc)
        try:
            ddp = DDP(make_model(), bucket_cap_mb=0.001)
            steps = []
            for step in range(2):
                with dist_autograd.context() as context_id:
                    h = ddp(shard(xs[step], rank))
                    z = rpc.rpc_sync(f"worker{1 - rank}", T.mul, args=(h, h))
                    dist_autograd.backward(context_id, [z.sum()])
                    grads = dist_autograd.get_gradients(context_id)
                    steps.append([grads[p].numpy() for p in ddp.parameters()])
                assert all(p.grad is None for p in ddp.parameters())
            return steps
        finally:
            dist.destroy_process_group()

    results = run_workers(2, rpc_config, body)
    for step in range(2):
        want = None
        for r in range(2):
            model = make_model()
            h = model(shard(xs[step], r))
            (h * h).sum().backward()
            grads = [p.grad.numpy() / 2 for p in model.parameters()]
            want = grads if want is None else [w + g for w, g in zip(want, grads)]
        for steps in results:
            for g, w in zip(steps[step], want):
                np.testing.assert_allclose(g, w, rtol=0, atol=TOL)




@pytest.mark.parametrize("kind", ["tcp", "inproc"])
def test_the_ddp_rpc_pattern_trainers_with_ddp_and_a_remote_module_on_a_parameter_server(kind, tmp_path):
    """PyTorch's ddp_rpc example: an RPC world of a parameter server and two trainers, a process
    group of the trainers; each trainer runs a remote module on the server, then its DDP model,
    and one DistributedOptimizer steps both kinds of parameters from the context."""
    from zgrad.distributed.nn import RemoteModule
    from zgrad.distributed.optim import DistributedOptimizer

    rpc_config = make_config(kind, 3, tmp_path)
    pg_port, pgc = free_port(), pg_config(kind)
    xs, ys = data(2, 3)

    def body(rank: int) -> Any:
        if rank == 0:
            return None  # the parameter server only serves, until the shutdown barrier
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{pg_port}", rank=rank - 1, world_size=2, config=pgc)
        try:
            with SEEDING:
                zgrad.manual_seed(rank)  # different on each trainer: DDP broadcasts trainer 0's
                local = nn.Linear(8, 3, dtype=np.float64)
            ddp = DDP(local)
            table = RemoteModule("worker0/cpu", nn.Linear, args=(5, 8), kwargs={"dtype": "float64"})
            opt = DistributedOptimizer(zgrad.optim.SGD, table.remote_parameters() + [rpc.RRef(p) for p in ddp.parameters()],
                                       lr=0.05)
            first = None
            for step in range(3):
                with dist_autograd.context() as context_id:
                    h = table(shard(xs[step], rank - 1))
                    weights = [p.numpy().copy() for p in ddp.parameters()]
                    dist_autograd.backward(context_id, [F.cross_entropy(ddp(h), shard(ys[step], rank - 1))])
                    grads = dist_autograd.get_gradients(context_id)
                    if first is None:
                        first = (h.numpy().copy(), weights, [grads[p].numpy() for p in ddp.parameters()])
                    opt.step(context_id)
            return first, [p.numpy() for p in ddp.parameters()]
        finally:
            dist.destroy_process_group()

    results = run_workers(3, rpc_config, body)[1:]
    (h1, weights, g1), params1 = results[0]
    (h2, _, g2), params2 = results[1]
    for p, q in zip(params1, params2):
        np.testing.assert_array_equal(p, q)  # the trainers' DDP models stay identical
    want = None
    for r, h in enumerate((h1, h2)):  # the average of each trainer's own gradients
        model = nn.Linear(8, 3, dtype=np.float64)
        model.load_state_dict({"weight": weights[0], "bias": weights[1]})
        F.cross_entropy(model(zgrad.tensor(h)), shard(ys[0], r)).backward()
        grads = [p.grad.numpy() / 2 for p in model.parameters()]
        want = grads if want is None else [w + g for w, g in zip(want, grads)]
    for got in (g1, g2):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=0, atol=TOL)

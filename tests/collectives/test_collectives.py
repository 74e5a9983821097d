"""Every collective against numpy: world sizes 2-4, over tcp, ipc and inproc, every dtype and
reduction, sizes 0, 1, odd and larger than a chunk, through both all-reduce algorithms; async
works waited in reverse order; subgroups; big tensors through the same-host single copy."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
import zgrad.distributed as dist
from pg_harness import TRANSPORTS, leftover_threads, pg_config, run_ranks
from zgrad.distributed.collectives.state import current_world

pytestmark = pytest.mark.timeout(180)

DTYPES = [np.float32, np.float64, np.int32, np.int64]
SIZES = [0, 1, 7, 1001]  # 1001 elements > one chunk at chunk_kb = 1 (256 float32, 128 float64)
OPS = {dist.ReduceOp.SUM: np.add, dist.ReduceOp.PRODUCT: np.multiply, dist.ReduceOp.MIN: np.minimum,
       dist.ReduceOp.MAX: np.maximum, dist.ReduceOp.AVG: None}
# ring everywhere in pieces of 1 KiB; or the one-hop path for everything up to 64 KiB
SETTINGS = {"ring": {"chunk_kb": 1, "small_tensor_kb": 0}, "one_hop": {"chunk_kb": 1, "small_tensor_kb": 64}}


@pytest.fixture(autouse=True)
def no_leftover_threads():
    yield
    assert not leftover_threads(), f"process group threads still running: {leftover_threads()}"


def contribution(rank: int, dtype, n: int, salt: int = 0) -> np.ndarray:
    """Rank ``rank``'s data: small integers (so products and int sums stay exact), in ``dtype``."""
    rng = np.random.default_rng(1000 * rank + 7 * n + salt)
    return rng.integers(-3, 4, n).astype(dtype) if n else np.zeros(0, dtype)


def reduced(op, arrays: list[np.ndarray]) -> np.ndarray:
    if op is dist.ReduceOp.AVG:
        total = arrays[0].copy()
        for a in arrays[1:]:
            total = total + a
        if total.dtype.kind == "f":
            return total / total.dtype.type(len(arrays))
        return np.trunc(total / len(arrays)).astype(total.dtype)  # truncation toward zero
    out = arrays[0].copy()
    for a in arrays[1:]:
        out = OPS[op](out, a)
    return out


def every_collective(rank: int, world: int) -> None:
    for dtype in DTYPES:
        for n in SIZES:
            mine = [contribution(r, dtype, n) for r in range(world)]
            for op in OPS:
                t = zgrad.tensor(mine[rank].copy())
                dist.all_reduce(t, op=op)
                np.testing.assert_allclose(t.numpy(), reduced(op, mine), rtol=1e-6, err_msg=f"all_reduce {op} {dtype} {n}")
            for src in range(world):
                t = zgrad.tensor(mine[rank].copy())
                dist.broadcast(t, src)
                np.testing.assert_array_equal(t.numpy(), mine[src])
            for dst in range(world):
                t = zgrad.tensor(mine[rank].copy())
                dist.reduce(t, dst, op=dist.ReduceOp.SUM)
                np.testing.assert_array_equal(t.numpy(), reduced(dist.ReduceOp.SUM, mine) if rank == dst else mine[rank])
            outs = [zgrad.zeros(n, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs, zgrad.tensor(mine[rank]))
            for r in range(world):
                np.testing.assert_array_equal(outs[r].numpy(), mine[r])
            whole = zgrad.zeros(world * n, dtype=dtype)
            dist.all_gather_into_tensor(whole, zgrad.tensor(mine[rank]))
            np.testing.assert_array_equal(whole.numpy(), np.concatenate(mine))
            parts = [[contribution(r, dtype, n, salt=d + 1) for d in range(world)] for r in range(world)]
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.AVG):
                out = zgrad.zeros(n, dtype=dtype)
                dist.reduce_scatter(out, [zgrad.tensor(p) for p in parts[rank]], op=op)
                np.testing.assert_allclose(out.numpy(), reduced(op, [parts[r][rank] for r in range(world)]), rtol=1e-6)
                out = zgrad.zeros(n, dtype=dtype)
                dist.reduce_scatter_tensor(out, zgrad.tensor(np.concatenate(parts[rank])), op=op)
                np.testing.assert_allclose(out.numpy(), reduced(op, [parts[r][rank] for r in range(world)]), rtol=1e-6)
    dist.barrier()


@pytest.mark.parametrize("algorithm", list(SETTINGS))
@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("kind", TRANSPORTS)
def test_every_collective_matches_numpy(kind, world, algorithm):
    run_ranks(world, lambda rank: every_collective(rank, world), kind, pg_config(kind, **SETTINGS[algorithm]))


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_big_tensors_take_the_single_copy_path_and_leave_nothing_open(kind):
    """Chunks of 256 KiB and more are read by the receiving collective straight from the
    sender's memory; when every collective returned, every such buffer has been read."""
    n = 3 << 18  # 3 MiB of float32: 12 ring chunks per segment at chunk_kb = 256
    config = pg_config(kind, chunk_kb=256, small_tensor_kb=0)

    def body(rank: int) -> dict:
        base = np.arange(n, dtype=np.float32)
        t = zgrad.tensor(base * (rank + 1))
        dist.all_reduce(t)
        np.testing.assert_array_equal(t.numpy(), base * 6)
        t = zgrad.tensor(base * (rank + 1))
        dist.broadcast(t, 2)
        np.testing.assert_array_equal(t.numpy(), base * 3)
        outs = [zgrad.zeros(n) for _ in range(3)]
        dist.all_gather(outs, zgrad.tensor(base + rank))
        for r in range(3):
            np.testing.assert_array_equal(outs[r].numpy(), base + r)
        dist.barrier()
        return current_world().comm.mesh.stats()

    stats = run_ranks(3, body, kind, config)
    assert all(s["cma_received"] > 0 for s in stats), [s.get("cma_received") for s in stats]
    assert all(s["cma_tickets_open"] == 0 for s in stats)


def test_sum_of_floats_is_identical_on_every_rank():
    """The ring adds in a different order per segment, but every rank ends with the same bits."""
    def body(rank: int) -> bytes:
        x = np.random.default_rng(rank).standard_normal(5000).astype(np.float32)
        t = zgrad.tensor(x)
        dist.all_reduce(t)
        return t.numpy().tobytes()

    results = run_ranks(3, body, "tcp", pg_config("tcp", chunk_kb=1, small_tensor_kb=0))
    assert results[0] == results[1] == results[2]


def test_avg_divides_the_sum_instead_of_multiplying_by_the_inverse():
    def body(rank: int) -> np.ndarray:
        x = np.random.default_rng(rank).standard_normal(4096).astype(np.float32)
        t = zgrad.tensor(x)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        return t.numpy()

    results = run_ranks(3, body, "inproc", pg_config("inproc", small_tensor_kb=64))
    xs = [np.random.default_rng(r).standard_normal(4096).astype(np.float32) for r in range(3)]
    np.testing.assert_array_equal(results[0], ((xs[0] + xs[1]) + xs[2]) / np.float32(3))


def test_float16_all_reduce_for_compressed_gradients():
    def body(rank: int) -> np.ndarray:
        t = zgrad.tensor(np.full(600, 0.5 * (rank + 1), np.float16))
        dist.all_reduce(t)
        return t.numpy()

    for result in run_ranks(2, body, "tcp", pg_config("tcp", chunk_kb=1, small_tensor_kb=0)):
        assert result.dtype == np.float16
        np.testing.assert_array_equal(result, np.full(600, 1.5, np.float16))


def test_non_contiguous_tensors_are_reduced_in_place():
    grid = np.arange(24, dtype=np.float64).reshape(4, 6)

    def body(rank: int) -> np.ndarray:
        base = grid * (rank + 1)
        dist.all_reduce(zgrad.Tensor(base[:, ::2]))  # a strided view: every other column
        return base

    for rank, base in enumerate(run_ranks(2, body, "inproc")):
        np.testing.assert_array_equal(base[:, ::2], grid[:, ::2] * 3)
        np.testing.assert_array_equal(base[:, 1::2], grid[:, 1::2] * (rank + 1))  # the rest untouched


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_async_works_waited_in_reverse_order(kind):
    def body(rank: int) -> None:
        tensors = [zgrad.tensor(np.full(n, float(rank + i), np.float32)) for i, n in enumerate([3, 5000, 1, 700, 0, 20000])]
        works = [dist.all_reduce(t, async_op=True) for t in tensors]
        sync = zgrad.ones(10)
        dist.all_reduce(sync)  # issued after the async ones: runs after them
        np.testing.assert_array_equal(sync.numpy(), np.full(10, 3.0))
        for i, work in reversed(list(enumerate(works))):
            assert work.wait() is True
            assert work.is_completed() and work.is_success() and work.exception() is None
            np.testing.assert_array_equal(tensors[i].numpy(), np.full(tensors[i].numel(), float(3 * i + 3)))
        future = dist.all_reduce(zgrad.ones(3), async_op=True).get_future()
        value = future.wait(30)
        assert isinstance(value, list) and len(value) == 1
        np.testing.assert_array_equal(value[0].numpy(), [3.0, 3.0, 3.0])
        barrier = dist.barrier(async_op=True)
        barrier.wait(timeout=30)

    run_ranks(3, body, kind, pg_config(kind, chunk_kb=4, small_tensor_kb=1))


@pytest.mark.parametrize("kind", ["tcp", "inproc"])
def test_subgroups(kind):
    def body(rank: int) -> None:
        evens = dist.new_group([0, 2])
        odds = dist.new_group([1, 3])
        mine = evens if rank % 2 == 0 else odds
        other = odds if rank % 2 == 0 else evens
        assert other is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(mine) == rank // 2 and dist.get_world_size(mine) == 2
        assert dist.get_rank(other) == -1 and dist.get_world_size(other) == -1
        assert dist.get_process_group_ranks(mine) == ([0, 2] if rank % 2 == 0 else [1, 3])
        t = zgrad.tensor([float(rank)] * 3)
        dist.all_reduce(t, group=mine)
        np.testing.assert_array_equal(t.numpy(), [2.0] * 3 if rank % 2 == 0 else [4.0] * 3)
        assert dist.all_reduce(t, group=other) is None  # outside it: returns at once
        t = zgrad.tensor([float(rank)])
        dist.broadcast(t, src=3 if rank % 2 else 2, group=mine)
        assert t.item() == (3.0 if rank % 2 else 2.0)
        with pytest.raises(ValueError, match=r"src=[01] is not a rank of group"):
            dist.broadcast(t, src=0 if rank % 2 else 1, group=mine)
        everyone = dist.new_group()
        t = zgrad.ones(2)
        dist.all_reduce(t, group=everyone)
        np.testing.assert_array_equal(t.numpy(), [4.0, 4.0])
        dist.destroy_process_group(mine)
        dist.destroy_process_group(other)  # outside it: nothing to do
        t = zgrad.ones(2)
        dist.all_reduce(t)  # the world still works
        np.testing.assert_array_equal(t.numpy(), [4.0, 4.0])

    run_ranks(4, body, kind)


def test_queries_and_world_group():
    def body(rank: int) -> None:
        assert dist.is_initialized()
        assert dist.get_rank() == rank and dist.get_world_size() == 2
        assert dist.get_backend() == "zmq"
        assert isinstance(dist.group.WORLD, dist.ProcessGroup)
        assert dist.group.WORLD.rank() == rank and dist.group.WORLD.size() == 2
        t = zgrad.ones(2)
        dist.all_reduce(t, group=dist.group.WORLD)
        np.testing.assert_array_equal(t.numpy(), [2.0, 2.0])

    run_ranks(2, body, "inproc")
    assert not dist.is_initialized()
    assert dist.group.WORLD is None


def test_chunks_are_as_few_and_as_even_as_the_chunk_size_allows():
    from zgrad.distributed.collectives.ring import chunk_ranges

    assert chunk_ranges(10, 10, 4) == [(10, 10)]
    assert chunk_ranges(0, 8, 4) == [(0, 4), (4, 8)]
    assert chunk_ranges(0, 9, 8) == [(0, 5), (5, 9)]  # not (0, 8), (8, 9)
    ranges = chunk_ranges(100, 1101, 256)
    assert ranges[0][0] == 100 and ranges[-1][1] == 1101 and len(ranges) == 4
    assert all(b - a <= 256 for a, b in ranges) and max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1

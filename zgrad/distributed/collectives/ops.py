"""The collectives on arrays: pick the algorithm, build the fingerprint, run on a group.

The public functions (``api.py``) check tensors and resolve groups, then call these with the
tensors' arrays; DDP's reducer calls them directly. Arrays are worked on flat: a C-contiguous
array in place, any other (a strided or a CUDA array) through a contiguous host copy written back
at the end.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zgrad.distributed.collectives import one_hop, ring
from zgrad.distributed.collectives.channel import Channel
from zgrad.distributed.collectives.fingerprint import Fingerprint, ReduceOp
from zgrad.distributed.collectives.process_group import ProcessGroup
from zgrad.distributed.collectives.work import Work
from zgrad.kernels import dispatch, dispatch_pointwise

__all__ = ["all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "barrier", "marker", "monitored_barrier"]


@functools.cache
def _name(dtype: np.dtype) -> str:
    return dtype.name  # numpy computes it on every access


def _write_to_device(array: Any, staged: np.ndarray) -> None:
    """Copy the collective's result up into device ``array`` and wait for it: the thread that
    finishes a collective may not be the one that reads the tensor next (streams are per thread)."""
    device_type = dispatch.device_type_of(array)
    dispatch_pointwise.write(array, dispatch.to_device(staged.reshape(array.shape), device_type))
    dispatch.backend(device_type).synchronize()


def _flat(array: Any) -> tuple[np.ndarray, Callable[[], None] | None]:
    """A flat view of ``array``, or a contiguous copy and the function writing it back. A CUDA
    array is staged: copied on the calling thread's stream into a pinned host buffer, which the
    collective works on, and copied up again at the end (the buffer then goes back to its pool)."""
    if dispatch.device_type_of(array) != "cpu":
        staged = dispatch.host_buffer(array).reshape(-1)
        return staged, lambda: _write_to_device(array, staged)
    if array.flags.c_contiguous:
        return array.reshape(-1), None
    copy = np.ascontiguousarray(array).reshape(-1)
    return copy, lambda: np.copyto(array, copy.reshape(array.shape))


def _with_writeback(algorithm: Callable[[Channel], None], writebacks: Sequence[Callable[[], None] | None]) -> Callable[[Channel], None]:
    pending = [w for w in writebacks if w is not None]
    if not pending:
        return algorithm

    def run(ch: Channel) -> None:
        algorithm(ch)
        for writeback in pending:
            writeback()

    return run


def _chunk_elems(pg: ProcessGroup, dtype: np.dtype) -> int:
    return max(1, (pg.world.config.ddp.chunk_kb << 10) // dtype.itemsize)


def _reduction(op: ReduceOp) -> tuple[str, bool]:
    return ("sum", True) if op is ReduceOp.AVG else (op.value, False)


def all_reduce(pg: ProcessGroup, x: np.ndarray, op: ReduceOp, async_op: bool, result: list[Any],
               label: str = "all_reduce") -> Work | None:
    """Reduce ``x`` in place across ``pg``: one hop for small arrays, else the chunked ring."""
    flat, writeback = _flat(x)
    reduce_op, average = _reduction(op)
    if flat.nbytes <= pg.world.config.ddp.small_tensor_kb << 10:
        algorithm, how = (lambda ch: one_hop.small_all_reduce(ch, flat, reduce_op, average)), "one_hop"
    else:
        chunk = _chunk_elems(pg, flat.dtype)
        algorithm, how = (lambda ch: ring.ring_all_reduce(ch, flat, reduce_op, average, chunk)), f"ring/{chunk}"
    fingerprint = Fingerprint(label, op.name, _name(x.dtype), x.shape, -1, how)
    return pg.run(fingerprint, _with_writeback(algorithm, [writeback]), result, async_op)


def broadcast(pg: ProcessGroup, x: np.ndarray, root: int, async_op: bool, result: list[Any],
              label: str = "broadcast") -> Work | None:
    """``x`` = group rank ``root``'s ``x`` on every rank."""
    flat, writeback = _flat(x)
    chunk = _chunk_elems(pg, flat.dtype)
    fingerprint = Fingerprint(label, "", _name(x.dtype), x.shape, root, f"chain/{chunk}")
    return pg.run(fingerprint, _with_writeback(lambda ch: one_hop.chain_broadcast(ch, flat, root, chunk), [writeback]),
                  result, async_op)


def reduce(pg: ProcessGroup, x: np.ndarray, root: int, op: ReduceOp, async_op: bool, result: list[Any]) -> Work | None:
    """Group rank ``root``'s ``x`` = the reduction over the ranks (the others' are unchanged)."""
    flat, writeback = _flat(x)
    reduce_op, average = _reduction(op)
    chunk = _chunk_elems(pg, flat.dtype)
    fingerprint = Fingerprint("reduce", op.name, _name(x.dtype), x.shape, root, f"chain/{chunk}")
    algorithm = lambda ch: one_hop.chain_reduce(ch, flat, root, reduce_op, average, chunk)  # noqa: E731
    return pg.run(fingerprint, _with_writeback(algorithm, [writeback]), result, async_op)


def all_gather(pg: ProcessGroup, outs: Sequence[np.ndarray], x: np.ndarray, async_op: bool, result: list[Any],
               label: str = "all_gather") -> Work | None:
    """``outs[i]`` = group rank i's ``x``."""
    flats = [_flat(out) for out in outs]
    source = dispatch.host_buffer(x).reshape(-1)
    chunk = _chunk_elems(pg, source.dtype)
    fingerprint = Fingerprint(label, "", _name(x.dtype), x.shape, -1, f"ring/{chunk}")
    algorithm = lambda ch: ring.ring_all_gather(ch, [f for f, _ in flats], source, chunk)  # noqa: E731
    return pg.run(fingerprint, _with_writeback(algorithm, [w for _, w in flats]), result, async_op)


def reduce_scatter(pg: ProcessGroup, out: np.ndarray, inputs: Sequence[np.ndarray], op: ReduceOp, async_op: bool,
                   result: list[Any], label: str = "reduce_scatter") -> Work | None:
    """``out`` = the reduction over the ranks of their ``inputs[rank]``."""
    flat, writeback = _flat(out)
    sources = [dispatch.host_buffer(a).reshape(-1) for a in inputs]
    reduce_op, average = _reduction(op)
    chunk = _chunk_elems(pg, flat.dtype)
    fingerprint = Fingerprint(label, op.name, _name(out.dtype), out.shape, -1, f"ring/{chunk}")
    algorithm = lambda ch: ring.ring_reduce_scatter(ch, flat, sources, reduce_op, average, chunk)  # noqa: E731
    return pg.run(fingerprint, _with_writeback(algorithm, [writeback]), result, async_op)


def barrier(pg: ProcessGroup, async_op: bool) -> Work | None:
    """Every rank of ``pg`` has entered the barrier when this returns."""
    return pg.run(Fingerprint("barrier", "", "", (), -1, "one_hop"), one_hop.barrier, [], async_op)


def marker(pg: ProcessGroup, label: str) -> None:
    """A barrier whose fingerprint is ``label``: a rank tells the others, at this point of the
    sequence, what it runs instead of what they expect (DDP: a bucket it cannot reduce). Blocks."""
    pg.run(Fingerprint(label, "", "", (), -1, "one_hop"), one_hop.barrier, [], False)


def monitored_barrier(pg: ProcessGroup, timeout_s: float, wait_all_ranks: bool) -> None:
    """Rank 0 of ``pg`` waits for the others at most ``timeout_s`` and names the missing ones."""
    fingerprint = Fingerprint("monitored_barrier", "", "", (), 0, "one_hop")
    pg.run(fingerprint, lambda ch: one_hop.monitored_barrier(ch, timeout_s, wait_all_ranks), [], False, timeout_s)

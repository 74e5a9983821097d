"""Ring algorithms: all-reduce (reduce-scatter, then all-gather), reduce-scatter, all-gather.

Each rank sends to its right neighbour and receives from its left one. Data is cut into one
segment per rank and each segment into chunks of ``chunk_elems``; a chunk is passed on as soon
as it has been reduced, so sending one chunk overlaps reducing the next (the mesh's threads and
the right neighbour move and read it while this rank's kernels, which release the GIL, reduce
the next).

Zero-copy sends and the buffers they read. The mesh sends arrays without copying, and a peer on
the same host reads big ones straight from this process's memory, when it gets to them (the
process group's mesh defers those reads to the collective's own thread, which reads each chunk
into its destination). So a buffer handed to :meth:`Channel.send` must not change until the
right neighbour has read it:

* during the collective, no sent range of a tensor is written again before the right neighbour
  has read it: all-reduce overwrites the segment it sent at reduce-scatter step *s* only at
  all-gather step *s*, with data that passed through the right neighbour after it had read that
  segment; everything else is written before it is sent, or not at all;
* at the end, every rank tells its left neighbour that it has read all its chunks (DONE) and
  waits for its right neighbour's DONE: when a ring collective returns, nothing of the caller's
  tensors is still to be read, and they may change. That costs one small message per rank, and
  saves copying what is sent into buffers of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zgrad.distributed.collectives.channel import Channel
from zgrad.kernels import dispatch_collectives

__all__ = ["DONE", "chunk_ranges", "segment_bounds", "tag", "finish", "ring_all_reduce", "ring_reduce_scatter",
           "ring_all_gather", "receive_chunk"]

DONE = (1 << 62) | 1


def tag(step: int, chunk: int) -> int:
    """The message tag of ``chunk`` at ``step`` of an algorithm."""
    return (step << 32) | chunk


def segment_bounds(count: int, parts: int) -> list[int]:
    """``parts + 1`` boundaries cutting ``count`` elements into nearly equal segments."""
    base, extra = divmod(count, parts)
    bounds = [0]
    for i in range(parts):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return bounds


def chunk_ranges(start: int, stop: int, chunk_elems: int) -> list[tuple[int, int]]:
    """``[(a, b), ...]`` covering ``start:stop`` in as few nearly equal pieces of at most
    ``chunk_elems`` as there can be (a segment a little over a chunk makes two halves, not a
    chunk and a sliver that would cost a message of its own); at least one (an empty segment
    still sends one message: it carries the fingerprint)."""
    if stop <= start:
        return [(start, start)]
    bounds = segment_bounds(stop - start, -(-(stop - start) // chunk_elems))
    return [(start + a, start + b) for a, b in zip(bounds, bounds[1:])]


def finish(ch: Channel) -> None:
    """Tell the left neighbour everything it sent has been read; wait until the right one says
    the same of what this rank sent (then the caller's tensors may change)."""
    ch.send((ch.rank - 1) % ch.size, DONE)
    ch.recv((ch.rank + 1) % ch.size, DONE)


def receive_chunk(ch: Channel, out: np.ndarray, tag_in: int, tag_on: int | None) -> None:
    """Receive a chunk from the left straight into ``out``; pass ``out`` on to the right under
    ``tag_on`` unless it is None (``out`` must then stay as it is until the collective ends)."""
    ch.recv_into((ch.rank - 1) % ch.size, tag_in, out)
    if tag_on is not None:
        ch.send((ch.rank + 1) % ch.size, tag_on, (out,))


def ring_all_reduce(ch: Channel, x: np.ndarray, op: str, average: bool, chunk_elems: int) -> None:
    """Reduce the flat array ``x`` in place across the group (``op`` in ``dispatch_collectives.REDUCE_OPS``;
    ``average`` divides the sum by the group size). Every rank ends with identical values."""
    n, r = ch.size, ch.rank
    if n == 1:
        return
    right, left = (r + 1) % n, (r - 1) % n
    bounds = segment_bounds(x.size, n)
    chunks = [chunk_ranges(bounds[j], bounds[j + 1], chunk_elems) for j in range(n)]
    scratch = np.empty(min(chunk_elems, x.size), x.dtype)
    for c, (a, b) in enumerate(chunks[r]):
        ch.send(right, tag(0, c), (x[a:b],))
    for s in range(n - 1):  # reduce-scatter: at step s, segment r-s-1 arrives and is reduced
        for c, (a, b) in enumerate(chunks[(r - s - 1) % n]):
            mine = x[a:b]
            dispatch_collectives.reduce_inplace(mine, ch.recv_array(left, tag(s, c), x.dtype, b - a, scratch), op)
            if average and s == n - 2:
                dispatch_collectives.divide_inplace(mine, n)
            ch.send(right, tag(s + 1, c), (mine,))  # the last step's is all-gather step 0
    for s in range(n - 1):  # all-gather: at step s, finished segment r-s arrives
        for c, (a, b) in enumerate(chunks[(r - s) % n]):
            receive_chunk(ch, x[a:b], tag(n - 1 + s, c), tag(n + s, c) if s < n - 2 else None)
    finish(ch)


def ring_reduce_scatter(ch: Channel, out: np.ndarray, inputs: Sequence[np.ndarray], op: str, average: bool,
                        chunk_elems: int) -> None:
    """``out`` = op over the ranks of ``inputs[rank]`` (``inputs``: one flat array per group rank,
    each of ``out``'s size). ``inputs`` are not modified."""
    n, r = ch.size, ch.rank
    right, left = (r + 1) % n, (r - 1) % n
    dtype, count = out.dtype, out.size
    chunks = chunk_ranges(0, count, chunk_elems)
    if n == 1:
        np.copyto(out, inputs[0])
    else:
        for c, (a, b) in enumerate(chunks):  # step 0: my part of segment r-1
            ch.send(right, tag(0, c), (inputs[(r - 1) % n][a:b],))
        scratch = np.empty(min(chunk_elems, count), dtype)
        for s in range(n - 1):  # at step s, the partial of segment r-2-s arrives
            seg = (r - 2 - s) % n
            for c, (a, b) in enumerate(chunks):
                received = ch.recv_array(left, tag(s, c), dtype, b - a, scratch)
                if s < n - 2:
                    partial = np.empty(b - a, dtype)  # a new buffer: inputs stay as they are
                    dispatch_collectives.reduce_pair(partial, received, inputs[seg][a:b], op)
                    ch.send(right, tag(s + 1, c), (partial,))
                else:
                    dispatch_collectives.reduce_pair(out[a:b], received, inputs[r][a:b], op)
        finish(ch)
    if average:
        dispatch_collectives.divide_inplace(out, n)


def ring_all_gather(ch: Channel, outs: Sequence[np.ndarray], x: np.ndarray, chunk_elems: int) -> None:
    """``outs[i]`` = group rank i's ``x`` (flat arrays of ``x``'s size and dtype)."""
    n, r = ch.size, ch.rank
    chunks = chunk_ranges(0, x.size, chunk_elems)
    np.copyto(outs[r], x)
    if n == 1:
        return
    for c, (a, b) in enumerate(chunks):
        ch.send((r + 1) % n, tag(0, c), (x[a:b],))
    for s in range(n - 1):  # at step s, rank r-s-1's tensor arrives
        target = outs[(r - s - 1) % n]
        for c, (a, b) in enumerate(chunks):
            receive_chunk(ch, target[a:b], tag(s, c), tag(s + 1, c) if s < n - 2 else None)
    finish(ch)

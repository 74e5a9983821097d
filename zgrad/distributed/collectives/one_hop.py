"""Collectives that are not a ring: the latency-optimal all-reduce of small tensors, broadcast,
reduce, barrier and monitored barrier.

The same rule as in ``ring.py``: a buffer handed to the mesh is never written afterwards, and
when a collective returns nothing of the caller's tensors is still being sent (a rank whose
tensor left zero-copy waits for a message that proves it arrived).
"""

from __future__ import annotations

import numpy as np

from zgrad.distributed.collectives.channel import Channel, as_array
from zgrad.distributed.collectives.ring import DONE, chunk_ranges, receive_chunk, tag
from zgrad.errors import ZgradTimeoutError
from zgrad.kernels import dispatch_collectives

__all__ = ["small_all_reduce", "chain_broadcast", "chain_reduce", "barrier", "monitored_barrier"]


def small_all_reduce(ch: Channel, x: np.ndarray, op: str, average: bool) -> None:
    """All-reduce in one hop: every rank sends its tensor to every other and combines the ``n``
    tensors in rank order, so every rank computes the same values bit for bit."""
    n, r = ch.size, ch.rank
    if n == 1:
        return
    sent = x.copy()  # x is written below, maybe before the mesh has sent it
    peers = [p for p in range(n) if p != r]
    for p in peers:
        ch.send(p, 0, (sent,))
    got = ch.gather(peers, 0, x.nbytes)
    parts = [sent if p == r else as_array(got[p], x.dtype, x.size) for p in range(n)]
    dispatch_collectives.reduce_pair(x, parts[0], parts[1], op)
    for part in parts[2:]:
        dispatch_collectives.reduce_inplace(x, part, op)
    if average:
        dispatch_collectives.divide_inplace(x, n)


def chain_broadcast(ch: Channel, x: np.ndarray, root: int, chunk_elems: int) -> None:
    """``x`` = group rank ``root``'s ``x`` on every rank, chunks passed along the ring from the
    root. A rank that read chunks says DONE to its left neighbour; one that sent from ``x`` waits
    for its right neighbour's DONE (then ``x`` may change: see ``ring.py``)."""
    n, r = ch.size, ch.rank
    if n == 1:
        return
    right, left = (r + 1) % n, (r - 1) % n
    position = (r - root) % n
    chunks = chunk_ranges(0, x.size, chunk_elems)
    if position == 0:
        for c, (a, b) in enumerate(chunks):
            ch.send(right, tag(0, c), (x[a:b],))
    else:
        for c, (a, b) in enumerate(chunks):
            receive_chunk(ch, x[a:b], tag(0, c), tag(0, c) if position < n - 1 else None)
        ch.send(left, DONE)
    if position < n - 1:
        ch.recv(right, DONE)


def chain_reduce(ch: Channel, x: np.ndarray, root: int, op: str, average: bool, chunk_elems: int) -> None:
    """Group rank ``root``'s ``x`` = op over every rank's ``x``, partial results passed along the
    ring towards the root (the others' tensors are left as they were; partials travel in new
    buffers). The chain's first rank sends from ``x`` and waits for its right neighbour's DONE."""
    n, r = ch.size, ch.rank
    if n == 1:
        if average:
            dispatch_collectives.divide_inplace(x, n)
        return
    right, left = (r + 1) % n, (r - 1) % n
    position = (r - root - 1) % n  # 0: the chain's first rank; n - 1: the root
    chunks = chunk_ranges(0, x.size, chunk_elems)
    if position == 0:
        for c, (a, b) in enumerate(chunks):
            ch.send(right, tag(0, c), (x[a:b],))
        ch.recv(right, DONE)
        return
    scratch = np.empty(min(chunk_elems, x.size), x.dtype)
    for c, (a, b) in enumerate(chunks):
        received = ch.recv_array(left, tag(0, c), x.dtype, b - a, scratch)
        if position < n - 1:
            partial = np.empty(b - a, x.dtype)
            dispatch_collectives.reduce_pair(partial, received, x[a:b], op)
            ch.send(right, tag(0, c), (partial,))
        else:
            dispatch_collectives.reduce_pair(x[a:b], received, x[a:b], op)
    if position == 1:
        ch.send(left, DONE)
    if position == n - 1 and average:
        dispatch_collectives.divide_inplace(x, n)


def barrier(ch: Channel) -> None:
    """Return once every rank of the group has entered the barrier (one message each way)."""
    peers = [p for p in range(ch.size) if p != ch.rank]
    for p in peers:
        ch.send(p, 0)
    ch.gather(peers, 0)


def monitored_barrier(ch: Channel, timeout_s: float, wait_all_ranks: bool) -> None:
    """Rank 0 waits for every other rank (at most ``timeout_s``), then releases them; a rank
    that does not arrive is named (PyTorch's ``monitored_barrier``).

    Raises:
        ZgradTimeoutError: on rank 0, "Rank R failed to pass monitoredBarrier in T ms" (every
            missing rank with ``wait_all_ranks``); on the others, rank 0's release did not come.
    """
    peers = list(range(1, ch.size))
    if ch.rank != 0:
        ch.send(0, 0)
        ch.recv(0, 1)
        return
    try:
        ch.gather(peers, 0)
    except ZgradTimeoutError as exc:
        ms = int(timeout_s * 1000)
        ranks = exc.silent_ranks
        if wait_all_ranks:
            raise ZgradTimeoutError(f"Ranks {', '.join(map(str, ranks))} failed to pass monitoredBarrier in {ms} ms") from None
        raise ZgradTimeoutError(f"Rank {ranks[0]} failed to pass monitoredBarrier in {ms} ms") from None
    for p in peers:
        ch.send(p, 1)

"""The loop a DataLoader worker process runs: fetch the batches the main process asks for, build
them in shared memory, send them back.

A worker first ties its life to the main process (:mod:`zgrad.utils.orphans`: SIGKILL when it
exits), seeds Python's ``random``, zgrad's and numpy's global generators as PyTorch does (seed =
``base_seed + worker_id``; numpy's legacy generator from PyTorch's hash of both), sets
:func:`get_worker_info`, runs ``worker_init_fn``, then answers messages (:mod:`.channel`) until
the main process closes the link. Its exceptions travel back as text (:mod:`.exceptions`).
"""

from __future__ import annotations

import random
import socket
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from zgrad.random import manual_seed
from zgrad.utils.data._utils.channel import BATCH, END, ERROR, FETCH, RESUME, RESUMED, Channel
from zgrad.utils.data._utils.codec import decode, encode
from zgrad.utils.data._utils.exceptions import capture
from zgrad.utils.data._utils.fetch import create_fetcher
from zgrad.utils.data._utils.shared_memory import BatchArena, SegmentPool, map_segment
from zgrad.utils.data._utils.worker_info import WorkerInfo, set_batch_allocator, set_worker_state
from zgrad.utils.data.dataset import IterableDataset
from zgrad.utils.orphans import follow_parent

__all__ = ["WorkerSpec", "worker_loop", "numpy_seed_state"]


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker is started with (passed by ``fork``, or pickled by ``multiprocessing``'s
    own mechanism for ``spawn`` and ``forkserver``: the main process's own objects, not input
    from a file or the network).

    Attributes:
        parent_pid: the main process, which the worker dies with; None under a fork server, whose
            children are not the main process's.
    """

    dataset: Any
    auto_collation: bool
    collate_fn: Callable[[Any], Any]
    drop_last: bool
    base_seed: int
    worker_init_fn: Callable[[int], None] | None
    worker_id: int
    num_workers: int
    parent_pid: int | None


def numpy_seed_state(base_seed: int, worker_id: int) -> list[int]:
    """PyTorch's seed for a worker's legacy numpy generator: four 32-bit words hashed from
    ``base_seed`` and ``worker_id`` (the scheme of numpy's ``SeedSequence``), so that workers
    get unrelated streams."""
    mask = 0xFFFFFFFF
    shift = 16
    hash_const = 0x43B0D7E5

    def hash_word(value: int) -> int:
        nonlocal hash_const
        value = (value ^ hash_const) & mask
        hash_const = (hash_const * 0x931E8875) & mask
        value = (value * hash_const) & mask
        return (value ^ (value >> shift)) & mask

    def mix(x: int, y: int) -> int:
        result = (((0xCA01F9DD * x) & mask) - ((0x4973F715 * y) & mask)) & mask
        return (result ^ (result >> shift)) & mask

    pool = [hash_word(word) for word in (worker_id, base_seed & mask, base_seed >> 32, 0)]
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hash_word(pool[i_src]))
    state, const_b = [], 0x8B51F9DD
    for word in pool:
        word = (word ^ const_b) & mask
        const_b = (const_b * 0x58F38DED) & mask
        word = (word * const_b) & mask
        state.append((word ^ (word >> shift)) & mask)
    return state


def worker_loop(sock: socket.socket, spec: WorkerSpec) -> None:
    """The body of worker ``spec.worker_id``; returns when the main process closes the link."""
    follow_parent(spec.parent_pid)
    channel = Channel(sock)
    try:
        _serve(channel, spec)
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches the whole process group: the main process reports it
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the main process closed the link: the loader is done with this worker
    finally:
        channel.close()


def _serve(channel: Channel, spec: WorkerSpec) -> None:
    seed = spec.base_seed + spec.worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(numpy_seed_state(spec.base_seed, spec.worker_id))
    set_worker_state(WorkerInfo(id=spec.worker_id, num_workers=spec.num_workers, seed=seed, dataset=spec.dataset))
    where = f"in DataLoader worker process {spec.worker_id}"
    init_error: list[str] | None = None
    fetcher = None
    try:
        if spec.worker_init_fn is not None:
            spec.worker_init_fn(spec.worker_id)
        fetcher = create_fetcher(spec.dataset, spec.auto_collation, spec.collate_fn, spec.drop_last)
    except Exception as exc:  # noqa: BLE001 - reported with the first batch asked for
        init_error = capture(exc, where)
    iterable = isinstance(spec.dataset, IterableDataset)
    iteration_end = False
    pool = SegmentPool()
    while True:
        message, fds = channel.recv()
        if message[0] == RESUME:
            if init_error is None:
                fetcher = create_fetcher(spec.dataset, spec.auto_collation, spec.collate_fn, spec.drop_last)
            iteration_end = False
            channel.send([RESUMED])
            continue
        if message[0] != FETCH:
            raise EOFError(f"unexpected message kind {message[0]!r} from the main process")
        _, task, index_tree, index_segments, released, dropped = message
        pool.release(released)
        pool.drop(dropped)
        index = decode(index_tree, [map_segment(fd, used) for fd, (_, used) in zip(fds, index_segments)])
        if iteration_end:
            continue  # the main process skips what it asked of an exhausted worker
        if init_error is not None:
            channel.send([ERROR, task, *init_error])
            continue
        arena = BatchArena(pool)
        try:
            set_batch_allocator(arena.empty)
            try:
                batch = fetcher.fetch(index)  # type: ignore[union-attr]
            finally:
                set_batch_allocator(None)
            reply = [BATCH, task, encode(batch, arena), *arena.export()]
        except StopIteration as exc:
            if not iterable:
                reply = [ERROR, task, *capture(exc, where)]
            else:
                reply, iteration_end = [END, task], True
        except Exception as exc:  # noqa: BLE001 - raised again in the main process
            reply = [ERROR, task, *capture(exc, where)]
        batch = None  # the worker's views of the segments go before they are handed over
        if reply[0] == BATCH:
            channel.send(reply[:5], reply[5])
            arena.sent()
        else:
            arena.unsent()
            channel.send(reply)

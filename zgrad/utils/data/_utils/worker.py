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
from zgrad.utils.data._utils.channel import BATCH, END, ERROR, RESUME, RESUMED, Channel
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
        worker = _Worker(spec)
        while True:
            message, fds = channel.recv()
            if message[0] == RESUME:
                worker.resume()
                channel.send([RESUMED])
            else:
                worker.answer(channel, message, fds)
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches the whole process group: the main process reports it
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the main process closed the link: the loader is done with this worker
    finally:
        channel.close()


class _Worker:
    """A worker's state: its dataset's fetcher (or the error that prevented it), whether its
    ``IterableDataset`` ended, and its shared-memory segments."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        seed = spec.base_seed + spec.worker_id
        random.seed(seed)
        manual_seed(seed)
        np.random.seed(numpy_seed_state(spec.base_seed, spec.worker_id))
        set_worker_state(WorkerInfo(id=spec.worker_id, num_workers=spec.num_workers, seed=seed, dataset=spec.dataset))
        self.where = f"in DataLoader worker process {spec.worker_id}"
        self.iterable = isinstance(spec.dataset, IterableDataset)
        self.iteration_end = False
        self.pool = SegmentPool()
        self.init_error: list[str] | None = None
        try:
            if spec.worker_init_fn is not None:
                spec.worker_init_fn(spec.worker_id)
            self.resume()
        except Exception as exc:  # noqa: BLE001 - reported with the first batch asked for
            self.init_error = capture(exc, self.where)

    def resume(self) -> None:
        """Start the dataset over (a new epoch of persistent workers)."""
        if self.init_error is None:
            self.fetcher = create_fetcher(self.spec.dataset, self.spec.auto_collation, self.spec.collate_fn,
                                          self.spec.drop_last)
        self.iteration_end = False

    def answer(self, channel: Channel, message: list, fds: list[int]) -> None:
        """Fetch the batch a FETCH message asks for and send it back (or its error, or the end
        of the dataset); an exhausted worker sends nothing, as in PyTorch."""
        _, task, index_tree, index_segments, freed, dropped = message
        self.pool.release(freed)
        self.pool.drop(dropped)
        index_memory = [map_segment(fd, used) for fd, (_, used) in zip(fds, index_segments)]
        if self.iteration_end:
            return
        if self.init_error is not None:
            channel.send([ERROR, task, *self.init_error])
            return
        arena = BatchArena(self.pool)
        reply = self._fetch(task, index_tree, index_memory, arena)
        if reply[0] != BATCH:
            arena.unsent()
            channel.send(reply)
            return
        channel.send(reply[:5], reply[5])
        arena.sent()

    def _fetch(self, task: int, index_tree: Any, index_memory: list, arena: BatchArena) -> list:
        """The reply to a FETCH: the batch built in ``arena`` (with the segments' descriptors
        appended), its error, or the end of the dataset."""
        try:
            index = decode(index_tree, index_memory)
            set_batch_allocator(arena.empty)
            try:
                batch = self.fetcher.fetch(index)
            finally:
                set_batch_allocator(None)
            return [BATCH, task, encode(batch, arena), *arena.export()]
        except StopIteration as exc:
            if not self.iterable:
                return [ERROR, task, *capture(exc, self.where)]
            self.iteration_end = True
            return [END, task]
        except Exception as exc:  # noqa: BLE001 - raised again in the main process
            return [ERROR, task, *capture(exc, self.where)]

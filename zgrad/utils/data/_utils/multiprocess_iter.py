"""The iterator of a loader with ``num_workers > 0``, as PyTorch's: index batches go to the
workers round-robin, at most ``prefetch_factor * num_workers`` are in flight, and batches come
out in the sampler's order whatever order the workers finish in.

Bookkeeping (PyTorch's): task ``i`` is the ``i``-th index sent; ``_task_info[i]`` is ``(worker,)``
while it is out and ``(worker, result)`` once it came back early; ``_rcvd_idx`` is the next task
to hand out. A worker whose ``IterableDataset`` ended is marked inactive, and the tasks it still
owed are skipped.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import weakref
from typing import Any

from zgrad.errors import ProtocolError, ZgradError, ZgradTimeoutError
from zgrad.utils.data._utils.channel import BATCH, END, ERROR, FETCH, RESUME, RESUMED
from zgrad.utils.data._utils.codec import decode, encode
from zgrad.utils.data._utils.exceptions import reraise
from zgrad.utils.data._utils.loader_iter import BaseDataLoaderIter
from zgrad.utils.data._utils.shared_memory import BatchArena
from zgrad.utils.data._utils.worker import WorkerSpec
from zgrad.utils.data._utils.worker_pool import WorkerPool

__all__ = ["_MultiProcessingDataLoaderIter"]


class _WorkerFailure:
    """A task's result that is the worker's exception (raised when the task's turn comes)."""

    def __init__(self, ref: str, where: str, text: str) -> None:
        self.ref, self.where, self.text = ref, where, text


class _MultiProcessingDataLoaderIter(BaseDataLoaderIter):
    """Loads batches in ``loader.num_workers`` worker processes (see the module docstring)."""

    def __init__(self, loader: Any) -> None:
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        if self._prefetch_factor <= 0:  # the loader accepts 0; PyTorch's iterator refuses it so
            raise AssertionError("prefetch_factor must be greater than 0 for MultiProcessingDataLoaderIter")
        context = loader.multiprocessing_context or multiprocessing.get_context()
        parent_pid = None if context.get_start_method() == "forkserver" else os.getpid()
        specs = [WorkerSpec(self._dataset, self._auto_collation, self._collate_fn, self._drop_last, self._base_seed,
                            loader.worker_init_fn, worker_id, self._num_workers, parent_pid)
                 for worker_id in range(self._num_workers)]
        self._pool = WorkerPool(context, specs)
        # The pool, not this iterator, is what the finalizer holds: it runs when the iterator is
        # collected (its last reference dropped) or at interpreter exit, whichever comes first.
        self._finalizer = weakref.finalize(self, self._pool.shutdown)
        self._reset(loader, first_iter=True)

    def _reset(self, loader: Any, first_iter: bool = False) -> None:
        super()._reset(loader)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info: dict[int, tuple] = {}
        self._workers_status = [True] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:  # persistent workers, a new epoch: what the last one left in flight is dropped
            for worker_id in range(self._num_workers):
                self._pool.send(worker_id, [RESUME])
            resumed = 0
            while resumed < self._num_workers:
                worker_id, message, fds = self._receive()
                if message[0] == BATCH:  # its segments are mapped here, and free again at once
                    self._pool.segments[worker_id].receive(message[3], message[4], fds)
                else:
                    _close(fds)
                resumed += message[0] == RESUMED
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _receive(self) -> tuple[int, Any, list[int]]:
        """The next message of any worker, within the loader's ``timeout`` (0: no limit).

        Raises:
            ZgradTimeoutError: none came within ``timeout``.
            ZgradError: a worker died.
        """
        received = self._pool.receive(self._timeout if self._timeout > 0 else None)
        if received is None:
            raise ZgradTimeoutError(f"DataLoader timed out after {self._timeout} seconds")
        return received

    def _abort(self) -> None:
        """Stop the workers at once after a failure of the link (a dead worker, a timeout, an
        interrupt): the iterator cannot go on, and a worker may be stuck."""
        self._finalizer.detach()
        self._pool.shutdown(grace_s=0)

    def _get_data(self) -> tuple[int, Any]:
        """(task, result) of the next task any worker finished."""
        try:
            worker_id, message, fds = self._receive()
        except BaseException:
            self._abort()
            raise
        kind, task = message[0], message[1]
        if kind == BATCH:
            return task, decode(message[2], self._pool.segments[worker_id].receive(message[3], message[4], fds))
        _close(fds)
        if kind == ERROR:
            return task, _WorkerFailure(*message[2:5])
        if kind == END:
            return task, _Exhausted(worker_id)
        raise ProtocolError(f"DataLoader worker {worker_id} sent a message of kind {kind!r} where a batch, an error "
                            "or the end of its dataset was expected")

    @property
    def workers_running(self) -> bool:
        """Whether the workers are up: False once an epoch ended (without persistent workers) or
        the iterator failed (a dead worker, a timeout)."""
        return self._finalizer.alive

    def _next_data(self) -> Any:
        if not self.workers_running:
            raise StopIteration
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info:
                    if len(info) == 2 or self._workers_status[info[0]]:  # has its result, or may still get it
                        break
                    del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                worker_id, data = self._task_info.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)
            task, data = self._get_data()
            if isinstance(data, _Exhausted):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if task != self._rcvd_idx:
                self._task_info[task] += (data,)
                continue
            worker_id = self._task_info.pop(task)[0]
            self._rcvd_idx += 1
            return self._process_data(data, worker_id)

    def _try_put_index(self) -> None:
        """Send the sampler's next index to the next active worker in turn, if any is left."""
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return
        arena = BatchArena()  # one-off segments for the arrays an index may hold (usually none)
        try:
            tree = encode(index, arena)
            segments, _, fds = arena.export()
            released, dropped = self._pool.segments[worker_id].collect()
            self._pool.send(worker_id, [FETCH, self._send_idx, tree, segments, released, dropped], fds)
        except ZgradError:  # the worker is gone
            arena.unsent()
            self._abort()
            raise
        except BaseException:
            arena.unsent()
            raise
        arena.sent()
        self._task_info[self._send_idx] = (worker_id,)
        self._send_idx += 1

    def _process_data(self, data: Any, worker_id: int) -> Any:
        self._try_put_index()
        if isinstance(data, _WorkerFailure):
            reraise(data.ref, data.where, data.text)
        return self._finish(data)

    def _shutdown_workers(self) -> None:
        self._finalizer()


class _Exhausted:
    """A task's result that says the worker's ``IterableDataset`` ended."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)

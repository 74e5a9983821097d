"""The worker processes of one DataLoader iterator: start them, message them, watch them, stop them.

Liveness: the main process waits on the workers' channels and their process sentinels together,
so a worker that dies (killed by a signal, crashed) is reported as soon as it is gone, in
PyTorch's words ("DataLoader worker (pid N) is killed by signal: Killed. "), never waited on.
Stopping: close the channels (a worker leaves its loop at end of file), give the workers
:data:`WORKER_EXIT_GRACE_S`, then SIGTERM, then SIGKILL. The iterator stops its pool when an epoch
ends (unless its workers persist), a finalizer does when the iterator is collected or the
interpreter exits, and the kernel kills the workers of a main process that dies
(:mod:`zgrad.utils.orphans`).

A process forked while pools exist (a worker of another loader, or any other child) closes its
copies of their main-side sockets at once, so that they cannot keep those workers' links open.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import time
import weakref
from typing import Any, Sequence

from zgrad.errors import ZgradError
from zgrad.utils.data._utils.channel import Channel, channel_pair
from zgrad.utils.data._utils.shared_memory import ReceivedSegments
from zgrad.utils.data._utils.worker import WorkerSpec, worker_loop

__all__ = ["WorkerPool", "WORKER_EXIT_GRACE_S", "death_message"]

# How long stopped workers get to leave on their own (PyTorch's MP_STATUS_CHECK_INTERVAL), and
# how long a signalled one gets to die.
WORKER_EXIT_GRACE_S = 5.0
_SIGNALLED_EXIT_S = 5.0


def death_message(pid: int | None, exitcode: int | None) -> str:
    """PyTorch's words for a worker that ended while the loader still needed it."""
    if exitcode is not None and exitcode < 0:
        return f"DataLoader worker (pid {pid}) is killed by signal: {signal.strsignal(-exitcode)}. "
    if exitcode:
        return (f"DataLoader worker (pid {pid}) exited unexpectedly with exit code {exitcode}. Details are lost due "
                "to multiprocessing. Rerunning with num_workers=0 may give better error trace.")
    return f"DataLoader worker (pid(s) {pid}) exited unexpectedly"


class WorkerPool:
    """The processes and channels of one iterator's workers. Used by the thread that iterates."""

    def __init__(self, context: Any, specs: Sequence[WorkerSpec]) -> None:
        """Start one worker per spec with ``context`` (a ``multiprocessing`` context).

        Raises:
            whatever starting a process raises (a dataset that cannot be pickled for ``spawn``);
            the workers already started are stopped first.
        """
        self._closed = False
        self.channels: list[Channel] = []
        self.processes: list[Any] = []
        # the main process's side of each worker's shared-memory segments
        self.segments = [ReceivedSegments() for _ in specs]
        _live_pools.add(self)
        try:
            for spec in specs:
                channel, theirs = channel_pair()
                self.channels.append(channel)
                try:
                    process = context.Process(target=worker_loop, args=(theirs, spec), daemon=True)
                    process.start()
                finally:
                    theirs.close()
                self.processes.append(process)
        except BaseException:
            self.shutdown()
            raise

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def send(self, worker_id: int, message: Any, fds: Sequence[int] = ()) -> None:
        """Send ``message`` to one worker.

        Raises:
            ZgradError: the worker is gone (its death, in PyTorch's words).
        """
        try:
            self.channels[worker_id].send(message, fds)
        except (BrokenPipeError, ConnectionResetError):
            raise self._death(worker_id) from None

    def receive(self, timeout_s: float | None) -> tuple[int, Any, list[int]] | None:
        """The next message of any worker: (worker id, message, its file descriptors, which the
        caller closes); None when ``timeout_s`` (None: no limit) passes first. Blocks.

        Raises:
            ZgradError: a worker died (its channel closed, or its process ended).
        """
        by_channel = {channel: i for i, channel in enumerate(self.channels)}
        by_sentinel = {process.sentinel: i for i, process in enumerate(self.processes)}
        ready = multiprocessing.connection.wait([*by_channel, *by_sentinel], timeout_s)
        for obj in ready:
            if obj in by_channel:
                worker_id = by_channel[obj]
                try:
                    message, fds = obj.recv()  # type: ignore[union-attr]
                except (EOFError, ConnectionResetError):
                    raise self._death(worker_id) from None
                return worker_id, message, fds
        if ready:
            raise self._death(by_sentinel[ready[0]])
        return None

    def _death(self, worker_id: int) -> ZgradError:
        """The error for worker ``worker_id``, which ended (waiting briefly for its exit status:
        its socket closes just before its process ends)."""
        process = self.processes[worker_id]
        process.join(WORKER_EXIT_GRACE_S)
        return ZgradError(death_message(process.pid, process.exitcode))

    def shutdown(self, grace_s: float = WORKER_EXIT_GRACE_S) -> None:
        """Stop every worker (see the module docstring), giving them ``grace_s`` to leave on their
        own (0 after a failure: a worker may be stuck); idempotent. Blocks up to ``grace_s`` plus
        the time signalled workers take to die."""
        if self._closed:
            return
        self._closed = True
        for channel in self.channels:
            channel.close()
        for segments in self.segments:
            segments.close()
        deadline = time.monotonic() + grace_s
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for stop in ("terminate", "kill"):
            alive = [p for p in self.processes if p.is_alive()]
            for process in alive:
                getattr(process, stop)()
            for process in alive:
                process.join(_SIGNALLED_EXIT_S)

    def _disown(self) -> None:
        """In a forked child: close the inherited sockets; the workers are not this process's."""
        self._closed = True
        for channel in self.channels:
            channel.close()


# Pools of this process, so that a forked child can disown them (see the module docstring).
_live_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


def _disown_inherited_pools() -> None:
    for pool in list(_live_pools):
        pool._disown()


os.register_at_fork(after_in_child=_disown_inherited_pools)

"""``spawn`` / ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` child processes.

As in PyTorch: each child gets its index first; a child that raises makes the parent raise
:class:`ProcessRaisedException` carrying the child's traceback, a child killed by a signal or
exiting non-zero raises :class:`ProcessExitedException`; either way the other children are
stopped (SIGTERM, then SIGKILL after a grace period). No child outlives the parent: each asks the
kernel for SIGKILL when its parent exits (Linux), so even a SIGKILLed parent leaves no orphan.

Tracebacks travel through one temporary file per child, written by the child only when it
fails; they are text, never unpickled.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import tempfile
import time
import traceback
from typing import Any, Callable

from zgrad.utils.orphans import follow_parent

__all__ = ["spawn", "start_processes", "ProcessContext", "ProcessException", "ProcessRaisedException",
           "ProcessExitedException"]

# How long stopped siblings get between SIGTERM and SIGKILL.
TERMINATE_GRACE_S = 5.0


class ProcessException(Exception):
    """A child process of ``spawn`` failed.

    Attributes:
        error_index: the failed child's index (its first argument).
        pid: its process id.
    """

    def __init__(self, msg: str, error_index: int, pid: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self) -> Any:
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A child raised; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A child exited with a non-zero status, or was killed by a signal, without raising.

    Attributes:
        exit_code: its exit status (negative: the signal number, as ``multiprocessing`` reports).
        signal_name: the signal's name, or None.
    """

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name: str | None = None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self) -> Any:
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _child(fn: Callable[..., Any], index: int, args: tuple, error_file: str, parent_pid: int | None) -> None:
    """The body of child ``index``: tie its life to the parent, run ``fn``, report a failure."""
    follow_parent(parent_pid)
    try:
        fn(index, *args)
    except KeyboardInterrupt:
        pass  # stopped by the parent (SIGINT): nothing to report
    except BaseException:  # noqa: BLE001 - reported to the parent as text
        with open(error_file, "w", encoding="utf-8") as out:
            out.write(traceback.format_exc())
        raise SystemExit(1)


class ProcessContext:
    """The children of one ``start_processes`` call; :meth:`join` waits for them.

    Attributes:
        processes: the ``multiprocessing`` Process objects, by index.
    """

    def __init__(self, processes: list[multiprocessing.process.BaseProcess], error_files: list[str]) -> None:
        self.processes = processes
        self.error_files = error_files
        self._sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds; None: until done) for the children; True once all
        have exited successfully, False if some still run when ``timeout`` passes.

        Raises:
            ProcessRaisedException: a child raised (its traceback is in the message); the other
                children are stopped first.
            ProcessExitedException: a child exited non-zero or by a signal; likewise.
        """
        if not self._sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self._sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            index = self._sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0 and failed is None:
                failed = index
        if failed is None:
            if self._sentinels:
                return False
            self._remove_error_files()
            return True
        self._stop_others(TERMINATE_GRACE_S if grace_period is None else grace_period)
        raise self._failure(failed)

    def _stop_others(self, grace_s: float) -> None:
        alive = [p for p in self.processes if p.is_alive()]
        for process in alive:
            process.terminate()
        deadline = time.monotonic() + grace_s
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
        self._sentinels.clear()

    def _failure(self, index: int) -> ProcessException:
        process = self.processes[index]
        error_file = self.error_files[index]
        try:
            with open(error_file, encoding="utf-8") as report:
                child_traceback = report.read()
        except OSError:
            child_traceback = ""
        self._remove_error_files()
        if child_traceback:
            message = f"\n\n-- Process {index} terminated with the following error:\n{child_traceback}"
            return ProcessRaisedException(message, index, process.pid)
        exit_code = process.exitcode
        if exit_code is not None and exit_code < 0:
            name = signal.Signals(-exit_code).name
            return ProcessExitedException(f"process {index} terminated with signal {name}", index, process.pid,
                                          exit_code, name)
        return ProcessExitedException(f"process {index} terminated with exit code {exit_code}", index, process.pid,
                                      exit_code)

    def _remove_error_files(self) -> None:
        for path in self.error_files:
            try:
                os.unlink(path)
            except OSError:
                pass

    def kill_all(self) -> None:
        """Stop every child still running (SIGKILL) and reap it."""
        for process in self.processes:
            if process.is_alive():
                process.kill()
        for process in self.processes:
            process.join()
        self._sentinels.clear()
        self._remove_error_files()


def start_processes(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1, join: bool = True,
                    daemon: bool = False, start_method: str = "spawn") -> ProcessContext | None:
    """Start ``nprocs`` processes running ``fn(i, *args)`` for i in 0..nprocs-1.

    ``fn`` must be importable by the children (a module-level function; under ``spawn`` the
    script is imported again as ``__mp_main__``). With ``join`` it blocks until all children
    have exited and returns None; otherwise it returns the :class:`ProcessContext`.

    Raises:
        ValueError: ``nprocs`` < 1 or an unknown start method.
        ProcessRaisedException / ProcessExitedException: a child failed (with ``join``).
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs must be an integer >= 1, got {nprocs!r}")
    if start_method not in multiprocessing.get_all_start_methods():
        raise ValueError(f"unknown start_method {start_method!r}; this platform offers "
                         f"{', '.join(multiprocessing.get_all_start_methods())}")
    context = multiprocessing.get_context(start_method)
    # A fork server's children are its own, not ours: they cannot check that we are their parent.
    parent_pid = None if start_method == "forkserver" else os.getpid()
    processes, error_files = [], []
    try:
        for index in range(nprocs):
            handle, error_file = tempfile.mkstemp(prefix=f"zgrad-spawn-{index}-", suffix=".err")
            os.close(handle)
            os.unlink(error_file)  # the child creates it only when it fails
            error_files.append(error_file)
            process = context.Process(target=_child, args=(fn, index, args, error_file, parent_pid), daemon=daemon)
            process.start()
            processes.append(process)
    except BaseException:
        ProcessContext(processes, error_files).kill_all()
        raise
    process_context = ProcessContext(processes, error_files)
    if not join:
        return process_context
    try:
        while not process_context.join():
            pass
    except BaseException:
        process_context.kill_all()  # an interrupted or failed parent leaves no child behind
        raise
    return None


def spawn(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> ProcessContext | None:
    """PyTorch's ``torch.multiprocessing.spawn``: :func:`start_processes` with ``spawn`` by default.

    Example::

        def run_worker(rank, world_size):
            rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size)
            ...
            rpc.shutdown()

        if __name__ == "__main__":
            zgrad.multiprocessing.spawn(run_worker, args=(2,), nprocs=2, join=True)
    """
    return start_processes(fn, args, nprocs, join, daemon, start_method)

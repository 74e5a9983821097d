"""The worker processes of one node in one round: start them, carry their output, watch, stop.

Shared by both launchers (``zgrad-launch`` and ``zgrad-run``). Nothing here starts a thread:
the agent's loop polls the output pipes (:meth:`WorkerGroup.fds`) and hands the readable ones
to :meth:`WorkerGroup.pump`. A single-threaded launcher is what makes it safe to tie each
worker to the launcher between fork and exec (:func:`zgrad.utils.orphans.die_with_parent`).

Each worker runs in a session of its own; stopping sends SIGTERM to its process group, waits up
to the grace period, then SIGKILLs the group. Output lines go to the console (with a prefix,
or not), to per-worker log files, or both, as :class:`OutputPolicy` says; the last lines of
each worker's error stream are kept for the failure summary.
"""

from __future__ import annotations

import collections
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from zgrad.utils.orphans import die_with_parent

__all__ = ["OutputPolicy", "WorkerFailure", "WorkerGroup", "WorkerSpec", "first_error_line"]

_TAIL_LINES = 60
_READ_BYTES = 1 << 16


@dataclass
class WorkerSpec:
    """One worker process to start.

    Attributes:
        name: how output and summaries name it (``worker0``, ``default0``).
        rank: its global rank, or None for a process that runs several (the inproc runner).
        local_rank: its index on this node.
        argv: the command.
        env: the variables the launcher sets (added to the launcher's own environment).
    """

    name: str
    rank: int | None
    local_rank: int
    argv: list[str]
    env: dict[str, str]


@dataclass(frozen=True)
class OutputPolicy:
    """Where each worker's stdout and stderr go.

    Attributes:
        merge_stderr: stderr joins stdout in one pipe (zgrad-launch's console).
        prefix: a format for console lines, with ``{name}``, ``{rank}`` and ``{local_rank}``.
        log_dir: directory of the per-worker log files (``<local_rank>/stdout.log``,
            ``stderr.log``), or None for none.
        to_file: ``(local_rank, "stdout"|"stderr")`` pairs written to the log files.
        to_console: pairs shown on the console; None shows every stream not redirected.
    """

    merge_stderr: bool = False
    prefix: str = ""
    log_dir: Path | None = None
    to_file: frozenset[tuple[int, str]] = frozenset()
    to_console: frozenset[tuple[int, str]] | None = None

    def shows(self, local_rank: int, stream: str) -> bool:
        if self.to_console is not None:
            return (local_rank, stream) in self.to_console
        return (local_rank, stream) not in self.to_file

    def log_path(self, local_rank: int, stream: str) -> Path | None:
        if self.log_dir is None or (local_rank, stream) not in self.to_file:
            return None
        return self.log_dir / str(local_rank) / f"{stream}.log"


@dataclass(frozen=True)
class WorkerFailure:
    """How one worker failed: what torchrun's summary prints, as data that travels (msgpack)."""

    name: str
    rank: int | None
    local_rank: int
    host: str
    pid: int
    exitcode: int
    time_s: float
    error: str
    log: str

    def as_map(self) -> dict:
        return dict(self.__dict__)

    @staticmethod
    def from_map(values: dict) -> "WorkerFailure":
        fields = WorkerFailure.__dataclass_fields__
        return WorkerFailure(**{k: values.get(k) for k in fields})


def first_error_line(lines: list[str]) -> str:
    """The line that names a Python error (the first unindented line after the last
    ``Traceback`` header), else the last non-empty line."""
    start = max((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")), default=None)
    if start is not None:
        for line in lines[start + 1:]:
            if line and not line[0].isspace():
                return line
    tail = [line for line in lines if line.strip()]
    return tail[-1] if tail else ""


@dataclass
class _Stream:
    worker: int
    name: str  # "stdout" or "stderr"
    console: BinaryIO | None
    prefix: bytes
    log: BinaryIO | None
    pending: bytes = b""
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=_TAIL_LINES))

    def feed(self, data: bytes) -> None:
        data = self.pending + data
        *lines, self.pending = data.split(b"\n")
        self._write(lines)

    def close(self) -> None:
        if self.pending:
            self._write([self.pending])
            self.pending = b""
        if self.log is not None:
            self.log.close()

    def _write(self, lines: list[bytes]) -> None:
        if not lines:
            return
        for line in lines:
            self.tail.append(line.decode(errors="replace"))
        if self.console is not None:
            self.console.write(b"".join(self.prefix + line + b"\n" for line in lines))
            self.console.flush()
        if self.log is not None:
            self.log.write(b"".join(line + b"\n" for line in lines))
            self.log.flush()


class WorkerGroup:
    """The processes of one node in one round."""

    def __init__(self, specs: list[WorkerSpec], output: OutputPolicy):
        self.specs = specs
        self.output = output
        self.popens: list[subprocess.Popen | None] = [None] * len(specs)
        self._streams: dict[int, _Stream] = {}
        self._error_tails: dict[int, collections.deque] = {}  # by worker: its stderr's (or merged stdout's) last lines
        self._exit_times: dict[int, float] = {}
        self._failed: list[int] = []  # the workers that had failed at the last poll, first first

    def start(self) -> None:
        """Start every worker (never from a process with other Python threads running)."""
        preexec = die_with_parent()
        console = {"stdout": sys.stdout.buffer, "stderr": sys.stderr.buffer}
        for index, spec in enumerate(self.specs):
            env = {**os.environ, "PYTHONUNBUFFERED": "1", **spec.env}
            merge = self.output.merge_stderr
            popen = subprocess.Popen(spec.argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                                     start_new_session=True, preexec_fn=preexec)
            self.popens[index] = popen
            prefix = self.output.prefix.format(name=spec.name, rank=spec.rank, local_rank=spec.local_rank).encode()
            for name, pipe in (("stdout", popen.stdout), ("stderr", popen.stderr)):
                if pipe is None:
                    continue
                os.set_blocking(pipe.fileno(), False)
                log_path = self.output.log_path(spec.local_rank, name)
                log = None
                if log_path is not None:
                    log_path.parent.mkdir(parents=True, exist_ok=True)
                    log = open(log_path, "ab")  # noqa: SIM115 - closed with the stream
                shown = console[name] if self.output.shows(spec.local_rank, name) else None
                stream = _Stream(index, name, shown, prefix, log)
                self._streams[pipe.fileno()] = stream
                if name == "stderr" or merge:
                    self._error_tails[index] = stream.tail

    def fds(self) -> list[int]:
        """The output pipes still open."""
        return list(self._streams)

    def pump(self, ready: set[int]) -> list[int]:
        """Read what waits on the ``ready`` pipes; return the pipes that reached their end."""
        closed = []
        for fd in [fd for fd in ready if fd in self._streams]:
            try:
                data = os.read(fd, _READ_BYTES)
            except BlockingIOError:
                continue
            if data:
                self._streams[fd].feed(data)
            else:
                self._streams.pop(fd).close()
                closed.append(fd)
        return closed

    def drain(self, timeout_s: float) -> None:
        """Read the pipes to their end (or until ``timeout_s``): the last lines of a dead worker."""
        deadline = time.monotonic() + timeout_s
        while self._streams and time.monotonic() < deadline:
            readable, _, _ = select.select(list(self._streams), [], [], max(0.0, deadline - time.monotonic()))
            self.pump(set(readable))
        for fd in list(self._streams):
            self._streams.pop(fd).close()

    def poll(self) -> tuple[bool, list[WorkerFailure]]:
        """Return (every worker has exited, the failures so far, first first).

        A failure's error line is the last one its worker's pipes had delivered by then: read them
        to their end first (:meth:`drain`, after :meth:`stop`) and ask :meth:`failures` again for
        the complete lines."""
        now = time.time()
        for index, popen in enumerate(self.popens):
            if popen is not None and popen.poll() is not None and index not in self._exit_times:
                self._exit_times[index] = now
        failed = [i for i, p in enumerate(self.popens) if p is not None and p.returncode not in (None, 0)]
        self._failed = sorted(failed, key=lambda i: self._exit_times[i])
        finished = all(p is not None and p.returncode is not None for p in self.popens)
        return finished, self.failures()

    def failures(self) -> list[WorkerFailure]:
        """The failures the last :meth:`poll` found (not the workers stopped since), built from
        what their pipes have delivered now."""
        return [self._failure(i) for i in self._failed]

    def _failure(self, index: int) -> WorkerFailure:
        spec, popen = self.specs[index], self.popens[index]
        code = popen.returncode
        lines = list(self._error_tails.get(index, ()))
        if code < 0:
            error = f"Signal {-code} ({signal.Signals(-code).name}) received by PID {popen.pid}"
        else:
            error = first_error_line(lines) or f"exit status {code}"
        log_path = self.output.log_path(spec.local_rank, "stderr")
        log = str(log_path) if log_path is not None else "the launcher's console (-r/--redirects writes log files)"
        return WorkerFailure(spec.name, spec.rank, spec.local_rank, socket.getfqdn(), popen.pid, code,
                             self._exit_times[index], error, log)

    def stop(self, grace_s: float) -> None:
        """SIGTERM every live worker's process group, SIGKILL what is left after ``grace_s``."""
        alive = [p for p in self.popens if p is not None and p.poll() is None]
        for popen in alive:
            _signal_group(popen, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for popen in alive:
            try:
                popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(popen, signal.SIGKILL)
                popen.wait()
        for popen in self.popens:  # what a worker left behind in its session dies with it
            if popen is not None:
                _signal_group(popen, signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL every worker now (the launcher is failing itself)."""
        for popen in self.popens:
            if popen is not None and popen.poll() is None:
                _signal_group(popen, signal.SIGKILL)
                popen.wait()


def _signal_group(popen: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(popen.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass

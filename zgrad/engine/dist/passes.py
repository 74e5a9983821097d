"""The distributed backward passes on one worker: the state of one pass (its graph task, its
*tasks*, closing) and the pass table of a context.

A *task* is one piece of work of a pass on one worker: the root's run of its local graph, the run
a gradient message (GRAD) starts at a send node, a SMART discovery step (DISCOVER), or the run a
SMART START releases. Every task has an id, unique per pass (its starter's rank in the high
bits). A task *announces* the tasks it starts (the GRADs its recv nodes send, the DISCOVERs its
walk sends) in its *report*, which the worker that ran it sends straight to the pass's root as
soon as the task has ended (GRAD_ACK, DISCOVER_ACK). How the root tells from the reports that the
pass is over is in ``dist/root.py``.

*Closing.* A send node gets at most one gradient per pass. When the last task of the pass on a
worker other than the root has ended and every send node that takes part got its gradient there
(the pass's mode says which take part, ``dist/modes.py``), nothing of the pass can happen there
any more: the worker forgets the pass at once (it *closes* it) and its report says so. The root
combines the reports of a worker with AND: closing is final, and the task that closed the pass
reports it.

*The pass table.* A pass is *running* on a worker from its first message (or, at the root, its
start) until it ends there: closed by its last task, ended by PASS_END, failed, superseded by a
newer pass of the same root, or dropped with its context. An ended pass's id is remembered, so a
late message cannot start it again. Every change goes through the table, under its own lock.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Generic, Protocol, TypeVar

from zgrad.engine.dist.modes import Mode, discovery_of
from zgrad.engine.dist.trace import PassRecording, clock_ns
from zgrad.engine.graph_task import GraphTask
from zgrad.errors import AutogradError

if TYPE_CHECKING:
    from zgrad.engine.dist.context import DistAutogradContext

__all__ = ["PassState", "PassTable", "TablePass", "TaskRun", "Completion", "PostedReplies", "Gate", "READY_WAIT_S"]


READY_WAIT_S = 60.0  # a pass's set-up is local work (counting dependencies): this is a safety bound


class Gate:
    """Closed until :meth:`open` (called once, by its creator); :meth:`wait` blocks while closed.

    A lock its creator holds until it opens the gate: lighter than an ``Event`` (a Condition
    and a fresh lock per wait), and one is made for every pass on every worker.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._open = False

    def open(self) -> None:
        if not self._open:
            self._open = True
            self._lock.release()

    def wait(self, timeout_s: float) -> bool:
        """Block until open, at most ``timeout_s``; True if open."""
        if self._open:
            return True
        if not self._lock.acquire(timeout=timeout_s):
            return False
        self._lock.release()
        return True


class PassState:
    """One pass of one context on this worker (``is_root``: the worker that runs its backward).

    ``recording`` is the pass's trace on this worker, or None when it is not traced.
    """

    def __init__(self, ctx: DistAutogradContext, pass_id: int, root: int, retain_graph: bool, mode: Mode,
                 is_root: bool = False, recording: PassRecording | None = None) -> None:
        self.ctx = ctx
        self.pass_id = pass_id
        self.root = root
        self.retain_graph = retain_graph
        self.mode = mode
        self.is_root = is_root
        self.recording = recording
        self.sends = mode.select_sends()
        self.task = GraphTask(retain_graph=retain_graph, leaf_sink=ctx.accumulate_grad, sink_keeps=True, leaf_store=ctx)
        if recording is not None:
            self.task.observer = recording.node_ran
        self.executed_sends: set[int] = set()
        self.participants: set[int] = set()  # the workers this one started tasks of the pass on
        self.lock = threading.Lock()
        self.ready = Gate()  # opened once dependencies are counted (or held)
        self.active = 0  # tasks of the pass running on this worker
        self.closed = False
        self.progress = 0
        # At the root: the thread waiting for the pass sends its GRADs from a socket of its own
        # and gets their reports there (``posted_replies``: rank -> ids of those not back yet).
        self.posting_thread: int | None = None
        self.posted_replies: dict[int, set[int]] = {}

    def touch(self) -> None:
        self.progress += 1

    def wait_ready(self) -> None:
        """Block until the thread creating this state has counted its dependencies.

        Raises:
            AutogradError: that did not happen within ``READY_WAIT_S``.
        """
        if not self.ready.wait(READY_WAIT_S):
            raise AutogradError(f"backward pass {self.pass_id:#x} of autograd context {self.ctx.context_id} was not "
                                f"set up on this worker within {READY_WAIT_S:g} s")

    def add_participant(self, rank: int) -> None:
        with self.lock:
            self.participants.add(rank)

    def unexecuted_sends(self) -> list[list[int]]:
        """``[autograd_message_id, peer]`` of the sends that take part and have not received their
        gradient in this pass."""
        return [[s.autograd_message_id, s.peer] for s in self.ctx.sends()
                if self.sends.takes_part(s) and s.autograd_message_id not in self.executed_sends]

    def begin_task(self, send_id: int | None = None) -> None:
        """A task that runs the graph starts here (for the gradient of send ``send_id``, if given).

        Raises:
            AutogradError: that send already got its gradient in this pass.
        """
        with self.lock:
            if send_id is not None:
                if send_id in self.executed_sends:
                    raise AutogradError(f"send function {send_id:#x} already received its gradient in backward pass "
                                        f"{self.pass_id:#x} of autograd context {self.ctx.context_id}")
                self.executed_sends.add(send_id)
            self.active += 1

    def end_task(self, ok: bool = True) -> bool:
        """That task ended (``ok``: without error); True if it closed the pass here."""
        with self.lock:
            self.active -= 1
            return ok and self._close()

    def finalize_marks(self) -> bool:
        """SMART: discovery is over, the marks are final; True if that closed the pass here.

        Raises:
            AutogradError: the pass runs in FAST mode.
        """
        with self.lock:
            discovery_of(self.sends).finalize()
            return self._close()

    def _close(self) -> bool:
        if self.closed or self.is_root or self.active:
            return False
        self.closed = self.sends.all_fed(self.executed_sends, len(self.ctx.send_functions))
        return self.closed

    def ended_here(self) -> None:
        """The pass table ended the pass here: nothing more of it is recorded on this worker (the
        root ends its recording itself, after its clean-up)."""
        if self.recording is not None and not self.is_root:
            self.recording.release()


class TaskRun:
    """A task that runs the pass's local graph; the GRADs its recv nodes send are its children.

    ``label`` names what started it and ``cause`` is ``(kind, sender, message id)`` of the message
    that did, if any: both only for traces.
    """

    def __init__(self, state: PassState, task_id: int, send_id: int | None = None, label: str = "run",
                 cause: tuple[str, int, int] | None = None) -> None:
        self.state = state
        self.task_id = task_id
        self.label = label
        self.cause = cause
        self._lock = threading.Lock()
        self.children: list[list[int]] = []
        self.for_root: list[tuple[int, int, list[Any]]] = []  # GRADs for the root kept for the report
        self.error: str | None = None
        state.begin_task(send_id)

    def started(self, task_id: int, dst: int, msg: int) -> None:
        with self._lock:
            self.children.append([task_id, dst, msg])

    def keep_for_root(self, task_id: int, msg: int, grads: list[Any]) -> None:
        """A GRAD for the root (its last act) that will ride in this task's report."""
        with self._lock:
            self.children.append([task_id, self.state.root, msg])
            self.for_root.append((task_id, msg, grads))

    def failed(self, error: str) -> None:
        with self._lock:
            if self.error is None:
                self.error = error


class Completion:
    """The outcome of a pass at its root: a value or an error, set once. Thread-safe.

    With ``caller_runs_work``, the thread that waits for the pass also runs the work of the pass
    that arrives for this worker meanwhile (:meth:`post`): it is idle anyway, and that saves a
    hand-off to the pool and the wake-up of the waiter at the end. Work and the outcome reach the
    waiter through one ``SimpleQueue`` (a wake-up inside C, no Python-level condition variable).
    """

    def __init__(self, caller_runs_work: bool = False) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._accepting = caller_runs_work
        self._done = False
        self._error: BaseException | None = None
        self._posted: PostedReplies | None = None
        self._wake_fd: int | None = None  # an eventfd: wakes the waiter while it polls its sockets
        self._polling: int | None = None  # the thread polling its sockets now
        self._poked = False  # the eventfd was written since the waiter last read it

    def also_wait_for(self, posted: "PostedReplies") -> None:
        """While ``posted`` has replies outstanding, the waiter waits for them and for posted work
        at once (the root's own socket and this queue)."""
        self._posted = posted

    def set_done(self, error: BaseException | None = None) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done, self._error = True, error
            self._queue.put(_DONE)
            self._poke()
        return True

    def _poke(self) -> None:
        """Wake a waiter polling its sockets (lock held: the fd stays open meanwhile). Work the
        waiter posts itself (a reply it received while polling) needs no wake-up: it looks at
        its queue when the poll returns."""
        if self._polling is not None and not self._poked and self._wake_fd is not None \
                and self._polling != threading.get_ident():
            self._poked = True
            os.eventfd_write(self._wake_fd, 1)

    def done(self) -> bool:
        return self._done

    def post(self, work: Callable[[], None]) -> bool:
        """Queue ``work`` for the waiting thread; False when nobody will run it (run it elsewhere)."""
        with self._lock:
            if not self._accepting:
                return False
            self._queue.put(work)
            self._poke()
            return True

    def wait(self, timeout_s: float | None, idle: Callable[[int, int], None] | None = None) -> bool:
        """Block until done (at most ``timeout_s``), running posted work meanwhile; True when done.
        ``idle(start_ns, end_ns)`` hears of every stretch spent waiting (a traced pass)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._done:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            waited_from = clock_ns() if idle is not None else 0
            try:
                if self._posted is not None and self._posted.outstanding():
                    work = self._wait_both(remaining)
                    if work is None:
                        continue
                else:
                    work = self._queue.get(timeout=remaining)
            except queue.Empty:
                return self._done
            finally:
                if idle is not None:
                    idle(waited_from, clock_ns())
            if work is not _DONE:
                work()
                del work
        return True

    def _wait_both(self, remaining: float | None) -> Callable[[], None] | None:
        """Wait for posted work and for replies on the waiter's sockets (which the messenger
        receives here, posting their work); the next work, or None."""
        if self._wake_fd is None:
            self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._polling = threading.get_ident()
        try:
            if not self._queue.empty():  # one consumer, this thread: the get cannot miss
                return self._queue.get_nowait()
            self._posted.wait(self._wake_fd, POSTED_WAIT_S if remaining is None else min(remaining, POSTED_WAIT_S))
            with self._lock:
                if self._poked:
                    self._poked = False
                    os.eventfd_read(self._wake_fd)
            return None if self._queue.empty() else self._queue.get_nowait()
        finally:
            self._polling = None

    def stop_accepting(self) -> list[Callable[[], None]]:
        """The waiter leaves: later :meth:`post` calls return False; returns the work still queued."""
        with self._lock:
            self._accepting = False
            if self._wake_fd is not None:
                os.close(self._wake_fd)
                self._wake_fd = None
        left = []
        while True:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                return left
            if work is not _DONE:
                left.append(work)

    def result(self) -> None:
        """Raise the pass's error, if it failed."""
        if self._error is not None:
            raise self._error


_DONE = object()  # queued by Completion.set_done: wakes the waiter
POSTED_WAIT_S = 0.05  # longest single wait on the root's sockets (the deadline is checked between)


class PostedReplies:
    """The reports the root's waiting thread expects on its own sockets (answers to the GRADs it
    posted, ``Courier.post``), and how to wait for them: ``receive(expected, wake_fd,
    timeout_s)`` receives what arrived (the messenger's ``collect``)."""

    def __init__(self, expected: dict[int, set[int]], receive: Callable[[dict[int, set[int]], int, float], None]) -> None:
        self.expected = expected
        self._receive = receive

    def outstanding(self) -> bool:
        return any(self.expected.values())

    def wait(self, wake_fd: int, timeout_s: float) -> None:
        self._receive(self.expected, wake_fd, timeout_s)


# --- the pass table ------------------------------------------------------------------------------

class TablePass(Protocol):
    """What the table needs to know of a pass."""

    pass_id: int
    root: int
    is_root: bool

    def ended_here(self) -> None:
        """Called once, when the table ends the pass."""


P = TypeVar("P", bound=TablePass)


class PassTable(Generic[P]):
    """Running passes by id, and the ids of the passes that ended. Thread-safe."""

    def __init__(self, context_id: int) -> None:
        self.context_id = context_id
        self._lock = threading.Lock()
        self._running: dict[int, P] = {}
        self._ended: set[int] = set()

    def open(self, pass_id: int, root: int, make: Callable[[], P]) -> tuple[P, bool]:
        """The running pass ``pass_id``, made with ``make()`` if new; returns it and whether it is new.

        A running pass of the same root with a smaller id is over (a root runs one pass per
        context at a time; its clean-up may still be in flight): it ends.

        Raises:
            AutogradError: the pass already ended here, or another pass of the context runs.
        """
        superseded = []
        with self._lock:
            if pass_id in self._ended:
                raise AutogradError(f"backward pass {pass_id:#x} of autograd context {self.context_id} "
                                    "already ended on this worker")
            state = self._running.get(pass_id)
            if state is not None:
                return state, False
            for older in [p for p in self._running.values() if not p.is_root and p.root == root and p.pass_id < pass_id]:
                del self._running[older.pass_id]
                self._ended.add(older.pass_id)
                superseded.append(older)
            if self._running:
                raise AutogradError(
                    f"another backward pass is already running in autograd context {self.context_id}; "
                    "run one pass per context at a time")
            state = self._running[pass_id] = make()
        for older in superseded:
            older.ended_here()
        return state, True

    def get(self, pass_id: int) -> P | None:
        """The running pass ``pass_id``, or None."""
        with self._lock:
            return self._running.get(pass_id)

    def end(self, pass_id: int) -> bool:
        """End pass ``pass_id`` here (running or not); True if it had not ended before."""
        with self._lock:
            first = pass_id not in self._ended
            state = self._running.pop(pass_id, None)
            self._ended.add(pass_id)
        if state is not None:
            state.ended_here()
        return first

    def end_all(self) -> None:
        """End every running pass (the context is released)."""
        with self._lock:
            states = list(self._running.values())
            self._running.clear()
            self._ended.update(s.pass_id for s in states)
        for state in states:
            state.ended_here()

    def running(self) -> dict[int, P]:
        """A snapshot of the running passes by id."""
        with self._lock:
            return dict(self._running)

    def ended(self) -> set[int]:
        """A snapshot of the ids of the passes that ended here."""
        with self._lock:
            return set(self._ended)

    def __len__(self) -> int:
        with self._lock:
            return len(self._running)

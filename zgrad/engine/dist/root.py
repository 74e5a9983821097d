"""The root's side of a distributed backward pass: knowing when it is over, and its outcome.

Every task of a pass reports to the root when it has ended, announcing the tasks it started (see
``dist/passes.py``). The root keeps a :class:`Tracker`: an announced task counts +1, a reported one
-1 (a report may overtake the report that announces it, so a count may be -1 for a while). When
every count is back to zero, every task announced has reported and every task reported was
announced; as every task except the root's own was announced by the task that started it, no
work of the pass is left anywhere (termination detection by credit counting). The root learns
it one hop after the last task ended, however deep the tasks nested: an acknowledgement chain
(each message answered once all it caused is done, as in PyTorch) costs one more hop per level.

Outcome, when every task reported without error: FAST mode succeeds if every worker closed the
pass (its reports say so) and every send node of the root got its gradient; SMART mode succeeds if
every marked send got its gradient (the root knows both from the reports). Nothing more is sent
then, except SMART's START clean-up. Otherwise the root ends the pass on every participant
(PASS_END, answered with the send nodes that never got a gradient) and fails it naming them. An
error in a report, or a worker lost while a task announced to it has not reported, fails the
pass at once (FAILURE everywhere, ``dist/teardown.py``).

This module decides; it sends nothing. :meth:`RootPasses.on_report` returns a
:class:`ReportOutcome` that the engine acts on.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, NamedTuple, Sequence

from zgrad.engine.dist.passes import Completion, PassState
from zgrad.engine.dist.protocol import GRAD_ACK, DiscoveryReport, Report, WorkReport
from zgrad.errors import AutogradError

__all__ = ["RootPasses", "RootPass", "Tracker", "Progress", "ReportOutcome", "WORK", "DISCOVERY"]

WORK, DISCOVERY = "work", "discovery"


class Progress(NamedTuple):
    """What one report changed at the root."""

    discovery_ended: bool
    done: bool


class _Balance:
    """Announced minus reported, per task id (only the nonzero ones)."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.targets: dict[int, int] = {}  # announced, not yet reported: task -> worker running it

    def add(self, task_id: int, delta: int, dst: int | None = None) -> bool:
        """Returns True when the task is now both announced and reported."""
        count = self.counts.get(task_id, 0) + delta
        if count == 0:
            del self.counts[task_id]
            self.targets.pop(task_id, None)
            return True
        self.counts[task_id] = count
        if delta > 0 and dst is not None:
            self.targets[task_id] = dst
        return False


class Tracker:
    """The root's view of a pass: which tasks are still under way, what they reported.

    Thread-safe. ``done`` is true once, when every task has reported (and, in SMART mode,
    discovery ended); ``settle`` makes the first outcome (done or failed) the only one.
    """

    def __init__(self, discovers: bool, root: int) -> None:
        self.root = root
        self.lock = threading.Lock()
        self._balances = {WORK: _Balance(), DISCOVERY: _Balance()}
        self._msgs: dict[int, int] = {}  # task -> autograd_message_id of the send it feeds / marks
        self.discovered = not discovers  # set when discovery ended (at once without discovery)
        self.release_task: int | None = None
        self.marked: set[int] = set()
        self.executed: set[int] = set()
        self.open: dict[int, bool] = {}
        self.participants: set[int] = set()
        self.reached: set[int] = set()
        self.held: set[int] = set()
        self.settled = False

    def announce(self, kind: str, task_id: int, dst: int, msg: int | None = None) -> None:
        with self.lock:
            self._announce(kind, task_id, dst, msg)

    def _announce(self, kind: str, task_id: int, dst: int, msg: int | None) -> None:
        self.participants.add(dst)
        if msg is not None:
            self._msgs[task_id] = msg
        if self._balances[kind].add(task_id, +1, dst):
            self._completed(kind, task_id)

    def _completed(self, kind: str, task_id: int) -> None:
        msg = self._msgs.pop(task_id, None)
        if msg is not None:
            (self.marked if kind == DISCOVERY else self.executed).add(msg)

    def report(self, kind: str, task_id: int, src: int, children: list[list[int]], still_open: bool = False,
               held: bool = False, new_task_id: Callable[[], int] | None = None) -> Progress | None:
        """Record a task's report; returns what it changed, or None if the pass already had its
        outcome.

        When this report ends discovery, a task with id ``new_task_id()`` is announced with it (the
        root's run of what discovery held back: ``release_task``), so the pass cannot be done
        before that run has reported too.
        """
        with self.lock:
            if self.settled:
                return None
            self.participants.add(src)
            if kind == WORK:
                self.open[src] = self.open.get(src, True) and still_open
            else:
                self.reached.add(src)
                if held:
                    self.held.add(src)
            for child_id, dst, msg in children:
                self._announce(kind, child_id, dst, msg)
            if self._balances[kind].add(task_id, -1):
                self._completed(kind, task_id)
            ended = False
            if kind == DISCOVERY and not self.discovered and not self._balances[DISCOVERY].counts:
                self.discovered = ended = True
                self.release_task = new_task_id()
                self._announce(WORK, self.release_task, self.root, None)
            done = self.discovered and not self._balances[WORK].counts and not self._balances[DISCOVERY].counts
            if done:
                self.settled = True
            return Progress(ended, done)

    def settle(self) -> bool:
        """Claim the outcome of the pass (a failure); False if it was claimed already."""
        with self.lock:
            first = not self.settled
            self.settled = True
            return first

    def waiting_on(self, rank: int) -> bool:
        """Some task announced to ``rank`` has not reported."""
        with self.lock:
            return not self.settled and any(dst == rank for b in self._balances.values() for dst in b.targets.values())

    def participants_now(self) -> set[int]:
        with self.lock:
            return set(self.participants)

    def open_elsewhere(self) -> bool:
        """Some worker other than the root said in all its reports that it still holds the pass."""
        with self.lock:
            return any(still_open and rank != self.root for rank, still_open in self.open.items())

    def marked_unfed(self) -> bool:
        """Some send that discovery marked got no gradient."""
        with self.lock:
            return bool(self.marked - self.executed)

    def held_elsewhere(self) -> tuple[list[int], int | None]:
        """The workers other than the root that hold nodes until discovery ends, and the task that
        runs what the root held."""
        with self.lock:
            return sorted(self.held - {self.root}), self.release_task

    def reached_without_held(self) -> list[int]:
        """The workers other than the root that discovery reached and that hold no node."""
        with self.lock:
            return sorted(self.reached - self.held - {self.root})


class RootPass:
    """A pass rooted on this worker: its state here, its tracker, and the outcome its caller waits for."""

    def __init__(self, state: PassState, caller_runs_work: bool) -> None:
        self.state = state
        self.tracker = Tracker(state.mode.discovers, state.root)
        self.completion = Completion(caller_runs_work)

    def succeeded(self) -> bool:
        """Every task reported without error: did every send that takes part get its gradient?"""
        return self.state.mode.succeeded(root_unfed=bool(self.state.unexecuted_sends()),
                                         open_elsewhere=self.tracker.open_elsewhere(),
                                         marked_unfed=self.tracker.marked_unfed())


class ReportOutcome(NamedTuple):
    """What the engine must do after a report from ``src``: fail the pass (``error``, naming more
    ``participants``), or run the DISCOVERs (``[task, autograd_message_id]``) and GRADs
    (``(task, autograd_message_id, gradients)``) for this worker that rode in it, then end
    discovery or finish the pass."""

    root_pass: RootPass
    src: int
    error: str | None = None
    participants: frozenset[int] = frozenset()
    discovers: list[list[int]] = []
    grads: list[tuple[int, int, list[Any]]] = []
    progress: Progress = Progress(False, False)


def _split(for_root: list[list[int]], arrays: Sequence[Any]) -> list[tuple[int, int, list[Any]]]:
    """The GRADs riding in a report with their own arrays (``[task, msg, n]`` each); the message's
    array list is emptied: each GRAD's task takes its gradients over."""
    grads, start = [], 0
    for task_id, msg, count in for_root:
        grads.append((task_id, msg, list(arrays[start:start + count])))
        start += count
    if isinstance(arrays, list):
        arrays.clear()
    return grads


class RootPasses:
    """The passes rooted on this worker, from their start to their outcome. Thread-safe.

    ``new_task_id`` gives the ids of the tasks the root announces itself (the run of what SMART
    held back).
    """

    def __init__(self, new_task_id: Callable[[], int]) -> None:
        self._new_task_id = new_task_id
        self._lock = threading.Lock()
        self._rooted: dict[int, RootPass] = {}  # not over yet
        self._lost: dict[int, str] = {}  # rank -> why it is unavailable

    def start(self, state: PassState, caller_runs_work: bool) -> RootPass:
        """Track a pass rooted here."""
        root_pass = RootPass(state, caller_runs_work)
        with self._lock:
            self._rooted[state.pass_id] = root_pass
        return root_pass

    def post(self, pass_id: Any, work: Callable[[], None]) -> bool:
        """Give ``work`` of a pass rooted here to the thread waiting for it; False if none will run it."""
        with self._lock:
            root_pass = self._rooted.get(pass_id)
        return root_pass is not None and root_pass.completion.post(work)

    def settle(self, root_pass: RootPass) -> bool:
        """Claim the outcome of a pass (the first caller wins) and stop tracking it."""
        first = root_pass.tracker.settle()
        self.forget(root_pass)
        return first

    def forget(self, root_pass: RootPass) -> None:
        with self._lock:
            self._rooted.pop(root_pass.state.pass_id, None)

    def peer_lost(self, rank: int, error: str) -> list[RootPass]:
        """Remember that ``rank`` is lost; returns the passes that wait for a task on it."""
        with self._lock:
            self._lost[rank] = error
            rooted = list(self._rooted.values())
        return [root_pass for root_pass in rooted if root_pass.tracker.waiting_on(rank)]

    def on_report(self, src: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> ReportOutcome | None:
        """A report message (GRAD_ACK or DISCOVER_ACK) arrived from ``src``: check it, count it.

        Raises:
            ProtocolError: a malformed report (nothing counted).
        """
        report: Report = WorkReport.from_body(body, arrays) if kind == GRAD_ACK else DiscoveryReport.from_body(body, arrays)
        return self.report(src, report, arrays)

    def report(self, src: int, report: Report, arrays: Sequence[Any] = ()) -> ReportOutcome | None:
        """Count a report of a task that ended on ``src``; None if its pass is not tracked here
        (over already, or not rooted here) or had its outcome."""
        with self._lock:
            root_pass = self._rooted.get(report.pass_id)
        if root_pass is None:
            return None
        root_pass.state.touch()
        children = report.children
        if report.error is not None:
            return ReportOutcome(root_pass, src, str(report.error), frozenset({src} | {c[1] for c in children}))
        is_work = report.KIND == GRAD_ACK
        progress = root_pass.tracker.report(WORK if is_work else DISCOVERY, report.task_id, src, children,
                                            is_work and report.still_open, not is_work and report.held,
                                            self._new_task_id)
        if progress is None:
            return None  # the pass failed meanwhile
        with self._lock:
            lost = next((self._lost[c[1]] for c in children if c[1] in self._lost), None)
        if lost is not None:
            return ReportOutcome(root_pass, src, lost)
        if is_work:
            return ReportOutcome(root_pass, src, grads=_split(report.grads, arrays) if report.grads else [], progress=progress)
        return ReportOutcome(root_pass, src, discovers=report.discover, progress=progress)


def end_verdict(state: PassState, errors: list[str], unexecuted: list[list[int]],
                worker_name: Callable[[int], str]) -> AutogradError | None:
    """The outcome of a pass the root ended everywhere (PASS_END): the first error an answer
    carried, else the send functions (``[autograd_message_id, peer, holder]``) that never got a
    gradient, else success (None)."""
    if errors:
        return AutogradError(errors[0])
    if not unexecuted:
        return None
    described = ", ".join(f"autograd_message_id {msg:#x} on {worker_name(holder)!r} (RPC with {worker_name(peer)!r})"
                          for msg, peer, holder in unexecuted[:10])
    more = f" and {len(unexecuted) - 10} more" if len(unexecuted) > 10 else ""
    return AutogradError(
        f"FAST mode could not complete the backward pass of autograd context {state.ctx.context_id}: "
        f"{len(unexecuted)} send function(s) never received a gradient: {described}{more}. This happens when "
        "the result of an RPC made in the context is not used by the roots. Use mode=\"smart\" "
        "(dist_autograd.backward(..., mode=\"smart\") or [engine] mode = \"smart\"), which finds the "
        "RPCs that take part before running."
    )

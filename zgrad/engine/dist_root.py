"""The root's side of a distributed backward pass: knowing when it is over, and its outcome.

Every task of a pass reports to the root when it has ended, announcing the tasks it started (see
``dist_pass.py``). The root keeps a :class:`Tracker`: an announced task counts +1, a reported one
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
pass at once (FAILURE everywhere, ``DistEngine.fail_pass``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

from zgrad.engine.dist_pass import Completion, PassState
from zgrad.errors import AutogradError, ProtocolError

if TYPE_CHECKING:
    from zgrad.engine.dist_engine import DistEngine

__all__ = ["RootPasses", "Tracker", "WORK", "DISCOVERY", "REPORT_KINDS"]

WORK, DISCOVERY = "work", "discovery"


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

    def __init__(self, mode: str, root: int) -> None:
        self.root = root
        self.lock = threading.Lock()
        self._balances = {WORK: _Balance(), DISCOVERY: _Balance()}
        self._msgs: dict[int, int] = {}  # task -> autograd_message_id of the send it feeds / marks
        self.discovered = mode == "fast"  # SMART: set when discovery ended
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
               held: bool = False, new_task_id: Callable[[], int] | None = None) -> tuple[bool, bool] | None:
        """Record a task's report; returns ``(discovery_ended_now, done)``, or None if the pass
        already had its outcome.

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
            return ended, done

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

    def open_workers(self) -> list[int]:
        """FAST: the workers whose reports all say they still hold the pass."""
        with self.lock:
            return sorted(rank for rank, still_open in self.open.items() if still_open)


REPORT_KINDS = {"GRAD_ACK": WORK, "DISCOVER_ACK": DISCOVERY}


def _int_lists(value: Any, length: int) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, list) and len(v) == length and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        for v in value)


def _check_report(kind: str, body: dict[str, Any], arrays: Sequence[Any]) -> None:
    """Check a report's lists before anything acts on it.

    Raises:
        ProtocolError: naming the malformed field.
    """
    if not _int_lists(body["children"], 3):
        raise ProtocolError(f"{kind} children must be [task, worker, autograd_message_id] triples")
    if "discover" in body and not _int_lists(body["discover"], 2):
        raise ProtocolError(f"{kind} discover must be [task, autograd_message_id] pairs")
    if "grads" in body and (not _int_lists(body["grads"], 3) or any(g[2] < 0 for g in body["grads"])
                            or sum(g[2] for g in body["grads"]) != len(arrays)):
        raise ProtocolError(f"{kind} grads must be [task, autograd_message_id, number of arrays] triples that "
                            "account for every array of the message")


class RootPasses:
    """The passes rooted on this worker, from their start to their outcome. Thread-safe."""

    def __init__(self, engine: "DistEngine") -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._rooted: dict[int, PassState] = {}  # not over yet
        self._lost: dict[int, str] = {}  # rank -> why it is unavailable

    def start(self, state: PassState, caller_runs_work: bool) -> Completion:
        """Track a pass rooted here; returns the completion its caller waits on."""
        state.tracker = Tracker(state.mode, state.root)
        state.completion = Completion(caller_runs_work)
        with self._lock:
            self._rooted[state.pass_id] = state
        return state.completion

    def post(self, pass_id: Any, work: Callable[[], None]) -> bool:
        """Give ``work`` of a pass rooted here to the thread waiting for it; False if none will run it."""
        with self._lock:
            state = self._rooted.get(pass_id)
        return state is not None and state.completion.post(work)

    def peer_lost(self, rank: int, error: str) -> None:
        """Fail the passes rooted here that wait for a task on ``rank`` (now or when one is announced)."""
        with self._lock:
            self._lost[rank] = error
            rooted = list(self._rooted.values())
        for state in rooted:
            if state.tracker.waiting_on(rank):
                self.fail(state, error)

    def on_report(self, src: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> None:
        """A task of a pass rooted here ended on ``src`` (GRAD_ACK or DISCOVER_ACK); then run the
        GRADs and DISCOVERs for this worker that ride in it."""
        engine = self.engine
        try:
            ctx = engine.contexts.get(body["ctx"])
        except AutogradError:
            return  # released meanwhile: the pass is long over
        with ctx.lock:
            state = ctx.passes.get(body["pass"])
        if state is None or state.tracker is None:
            return  # a late report of a pass that is over (or one not rooted here)
        children = body["children"]
        _check_report(kind, body, arrays)
        state.touch()
        if body.get("error") is not None:
            self.fail(state, str(body["error"]), {src} | {c[1] for c in children})
            return
        outcome = state.tracker.report(REPORT_KINDS[kind], body["task"], src, children, bool(body.get("open")),
                                       bool(body.get("held")), engine.new_task_id)
        if outcome is None:
            return  # the pass failed meanwhile
        with self._lock:
            lost = next((self._lost[c[1]] for c in children if c[1] in self._lost), None)
        if lost is not None:
            self.fail(state, lost)
            return
        if "discover" in body:
            engine.smart.discover_here(state, src, body["discover"])
        if "grads" in body:
            self._grads_here(state, src, body["grads"], arrays)
        discovery_ended, done = outcome
        if discovery_ended:
            engine.smart.discovered(state)
        elif done:
            self._finish(state)

    def _grads_here(self, state: PassState, src: int, for_root: list[list[int]], arrays: Sequence[Any]) -> None:
        starts = [sum(g[2] for g in for_root[:i]) for i in range(len(for_root))]
        grads = [list(arrays[start:start + g[2]]) for start, g in zip(starts, for_root)]
        if isinstance(arrays, list):
            arrays.clear()  # each GRAD's handler takes its gradients over (see DistEngine.run_activation)
        for (task_id, msg, _), own in zip(for_root, grads):
            self.engine.on_grad(src, {"ctx": state.ctx.context_id, "pass": state.pass_id, "msg": msg, "root": state.root,
                                      "retain": state.retain_graph, "mode": state.mode, "task": task_id}, own)

    def _finish(self, state: PassState) -> None:
        """Every task of the pass reported, without error: it succeeded unless a send never got its gradient."""
        with self._lock:
            self._rooted.pop(state.pass_id, None)
        tracker = state.tracker
        if state.mode == "smart":
            stuck = bool(tracker.marked - tracker.executed)
        else:
            stuck = bool(state.unexecuted_sends()) or any(rank != self.engine.rank for rank in tracker.open_workers())
        if stuck:
            self.end_pass(state, tracker.participants_now(), state.completion)
            return
        self.engine.forget_pass(state)
        state.completion.set_done(None)
        if state.mode == "smart":  # clean-up, off the waiting caller's path
            self.engine.messenger.submit(lambda: self.engine.smart.finished(state))

    def fail(self, state: PassState, error: str, participants: set[int] = frozenset(),
             exc: BaseException | None = None) -> bool:
        """Fail a pass rooted here (first outcome wins): FAILURE everywhere, then complete with
        ``exc`` (default ``AutogradError(error)``). False if the pass had an outcome already."""
        if not state.tracker.settle():
            return False
        with self._lock:
            self._rooted.pop(state.pass_id, None)
        completion = state.completion
        failure = exc if exc is not None else AutogradError(error)
        targets = participants | state.tracker.participants_now()
        self.engine.fail_pass(state, error, targets, lambda: completion.set_done(failure))
        return True

    def end_pass(self, state: PassState, participants: set[int], completion: Completion) -> None:
        """End the pass on every participant and fail it if a send node never got its gradient:
        the exact verdict, for when some worker did not close the pass by itself."""
        others = sorted((participants | state.participants) - {self.engine.rank})
        unexecuted = [[msg, peer, self.engine.rank] for msg, peer in state.unexecuted_sends()]
        waiting = {"n": len(others)}
        lock = threading.Lock()
        errors: list[str] = []

        def finish() -> None:
            self.engine.forget_pass(state)
            if errors:
                completion.set_done(AutogradError(errors[0]))
            elif unexecuted:
                completion.set_done(AutogradError(self._stuck_message(state, unexecuted)))
            else:
                completion.set_done(None)

        def acked(src: int, reply: dict[str, Any], _arrays: Sequence[Any]) -> None:
            with lock:
                if reply.get("error"):
                    errors.append(str(reply["error"]))
                for entry in reply.get("unexecuted", ()):
                    if isinstance(entry, list) and len(entry) == 2:
                        unexecuted.append([entry[0], entry[1], src])
                waiting["n"] -= 1
                last = waiting["n"] == 0
            if last:
                finish()

        if not others:
            finish()
            return
        for dst in others:
            self.engine.request(dst, "PASS_END", {"ctx": state.ctx.context_id, "pass": state.pass_id}, acked)

    def _stuck_message(self, state: PassState, unexecuted: list[list[int]]) -> str:
        name = self.engine.messenger.worker_name
        described = ", ".join(f"autograd_message_id {msg:#x} on {name(holder)!r} (RPC with {name(peer)!r})"
                              for msg, peer, holder in unexecuted[:10])
        more = f" and {len(unexecuted) - 10} more" if len(unexecuted) > 10 else ""
        return (
            f"FAST mode could not complete the backward pass of autograd context {state.ctx.context_id}: "
            f"{len(unexecuted)} send function(s) never received a gradient: {described}{more}. This happens when "
            "the result of an RPC made in the context is not used by the roots. Use mode=\"smart\" "
            "(dist_autograd.backward(..., mode=\"smart\") or [engine] mode = \"smart\"), which finds the "
            "RPCs that take part before running."
        )

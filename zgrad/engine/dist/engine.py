"""The distributed backward engine of one worker: where every message arrives and every outcome is acted on.

The engine is driven by :meth:`DistEngine.receive` and reaches the network only through a
:class:`~zgrad.engine.dist.messaging.Messenger`, so tests run it against an in-memory fake with any
message order. It owns the parts below and is the only one that calls across them; none calls
back into it (each returns what happened: a report to route, an outcome to act on).

=================  ==============================================================================
module             job
=================  ==============================================================================
context            a worker's contexts: ids, send/recv nodes, the passes of each
protocol           message kinds, their typed records and schemas (the protocol table)
messaging          sending (counted by kind), requests and their answers, broadcasts
passes             one pass on one worker (its graph task, tasks, closing; the root's
                   Completion) and the pass table of a context (create, look up, end)
modes              FAST and SMART: what a pass counts from, when it is fed, what completes it
discovery          SMART's discovery state and graph walks
tasks              running this worker's tasks: set-up, runs of the local graph, discovery steps
root               the root's side: termination detection (credit counting) and verdicts
teardown           ending a pass or a context everywhere: FAILURE, PASS_END, CONTEXT_RELEASE
trace              recording the passes that are traced
graph              the graph of a context as DOT
=================  ==============================================================================

Following one GRAD: a recv node runs in :meth:`TaskRunner.run`, which sends GRAD to the worker
holding the matching send node; there :meth:`receive` hands it to :meth:`_on_grad`, which runs the
send node's task (:meth:`TaskRunner.grad`) and routes its report (:meth:`_to_root`) to the root;
the root's :meth:`_on_report` counts it (:meth:`RootPasses.on_report`) and acts on the outcome
(:meth:`_act`): it runs the GRADs for the root that rode in the report, and finishes or fails the
pass once every task reported.

Threads: a message is received on the messenger's inbound path: the agent's I/O leader, or, for
the answers to what the root's waiting thread posted (``Messenger.post``), that thread itself
(``Messenger.collect``). Acknowledgements, reports without riding gradients and PASS_END are
handled right there (cheap, never block). The rest runs graph work or may free a context: it goes
to ``Messenger.submit`` (run where it arrived, which the RPC agent lets a standby take over from
if it runs long), or, for a pass rooted here, to the thread waiting for it in
:meth:`run_backward` (see :class:`~zgrad.engine.dist.passes.Completion`), which saves a hand-off
on every hop of a pass.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable, Sequence

from zgrad.engine.dist.context import ContextContainer, make_id_generator
from zgrad.engine.dist.modes import FastMode, SmartMode
from zgrad.engine.dist.messaging import Messenger, Courier
from zgrad.engine.dist.passes import Completion, PostedReplies, PassState, TaskRun
from zgrad.engine.dist.protocol import ACK_KINDS, CONTEXT_RELEASE, DISCOVER, DISCOVER_ACK, FAILURE, GRAD, GRAD_ACK, \
    PASS_END, START, TRACE_KEY, Discover, Grad, Start, carries_work, crash_report, pass_id_of, root_of
from zgrad.engine.dist.root import DISCOVERY, WORK, ReportOutcome, RootPass, RootPasses, end_verdict
from zgrad.engine.dist.tasks import ReportForRoot, TaskRunner, node_error
from zgrad.engine.dist.teardown import Teardown
from zgrad.engine.dist.trace import TraceRecorder, clock_ns
from zgrad.engine.graph import Edge
from zgrad.errors import AutogradError, ZgradTimeoutError

__all__ = ["DistEngine"]

log = logging.getLogger("zgrad.engine")

INLINE_KINDS = frozenset({GRAD_ACK, PASS_END})  # cheap, never block: handled where received
WAITER_KINDS = frozenset({GRAD, DISCOVER, GRAD_ACK, DISCOVER_ACK})  # may run on the root's waiting thread

Handler = Callable[[int, dict[str, Any], Sequence[Any]], None]


class DistEngine:
    """One worker's distributed backward engine. Thread-safe; handlers never block."""

    def __init__(self, contexts: ContextContainer, messenger: Messenger) -> None:
        self.rank = contexts.rank
        self.contexts = contexts
        self.messenger = messenger
        self.recorder = TraceRecorder()
        self.courier = Courier(messenger, self.recorder)
        self.smart = SmartMode(self.courier.sent)
        self.runner = TaskRunner(contexts, self.courier, (FastMode(), self.smart), self.recorder)
        self.roots = RootPasses(self.runner.new_task_id)
        self.teardown = Teardown(contexts, self.courier)
        self._pass_ids = make_id_generator(self.rank)
        self._handlers: dict[str, Handler] = {
            GRAD: self._on_grad, GRAD_ACK: functools.partial(self._on_report, GRAD_ACK),
            DISCOVER: self._on_discover, DISCOVER_ACK: functools.partial(self._on_report, DISCOVER_ACK),
            START: self._on_start, PASS_END: self.teardown.on_pass_end, FAILURE: self.teardown.on_failure,
            CONTEXT_RELEASE: self.teardown.on_release,
        }
        # The tasks a root may start from its waiting thread, whose report answers it there.
        self._reply_handlers: dict[str, Callable[..., None]] = {GRAD: self._on_grad, DISCOVER: self._on_discover,
                                                                 START: self._on_start}

    # --- arrivals -------------------------------------------------------------------------------

    def receive(self, src: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = (), reply: Any = None) -> None:
        """Handle one message from ``src`` (the messenger's inbound path, e.g. the I/O thread).
        ``reply``: the message came from the root's waiting thread as a request (a GRAD or
        DISCOVER the root sent, ``Messenger.post``); the task's report answers it there.

        Raises:
            AutogradError: an unknown kind.
        """
        self.courier.received[kind] += 1
        if self.recorder.recordings or TRACE_KEY in body:
            self.recorder.receiving(src, kind, body)
        if kind in ACK_KINDS:
            self.courier.answered(src, body)
            return
        handler = self._handlers.get(kind)
        if handler is None:
            raise AutogradError(f"unknown distributed autograd message kind {kind!r}")
        if reply is not None and kind in (GRAD, DISCOVER, START):
            handler = functools.partial(self._reply_handlers[kind], reply=reply)
        if kind in INLINE_KINDS and not carries_work(body):  # a GRAD_ACK with GRADs in it runs them
            handler(src, body, arrays)
            return

        def work() -> None:
            try:
                handler(src, body, arrays)
            except Exception as exc:  # noqa: BLE001 - whatever thread runs it (a caller in backward) must go on
                log.exception("worker %s: handling %s from rank %s failed", self.rank, kind, src)
                self._report_crash(src, kind, body, exc)

        if kind in WAITER_KINDS and root_of(body, self.rank) == self.rank and self.roots.post(pass_id_of(body), work):
            return
        self.messenger.submit(work)

    def _report_crash(self, src: int, kind: str, body: dict[str, Any], exc: Exception) -> None:
        """A task's message could not be handled (an engine bug): fail the pass at once rather
        than let the root wait for ``backward_timeout_s``."""
        crash = crash_report(kind, body, node_error(self.rank, exc), src)
        if crash is not None:
            self._to_root(ReportForRoot(crash[0], crash[1], []))

    def peer_lost(self, rank: int, reason: str) -> None:
        """Fail everything waiting on ``rank``."""
        error = f"worker {self.messenger.worker_name(rank)!r} (rank {rank}) is unavailable: {reason}"
        self.courier.peer_lost(rank, error)
        for root_pass in self.roots.peer_lost(rank, error):
            self._fail(root_pass, error)

    def _on_grad(self, src: int, body: dict[str, Any], arrays: Sequence[Any], reply: Any = None) -> None:
        self._to_root(self.runner.grad(src, Grad.from_body(body), arrays), reply if root_of(body, src) == src else None)

    def _on_discover(self, src: int, body: dict[str, Any], _arrays: Sequence[Any], reply: Any = None) -> None:
        self._to_root(self.runner.on_discover(src, Discover.from_body(body)), reply if root_of(body, src) == src else None)

    def _on_start(self, src: int, body: dict[str, Any], _arrays: Sequence[Any], reply: Any = None) -> None:
        report = self.runner.on_start(src, Start.from_body(body))
        if report is not None:
            self._to_root(report, reply)

    def _on_report(self, kind: str, src: int, body: dict[str, Any], arrays: Sequence[Any]) -> None:
        started = clock_ns() if self.recorder.recordings else 0
        outcome = self.roots.on_report(src, kind, body, arrays)
        self._act(outcome)
        if outcome is not None and outcome.root_pass.state.recording is not None:
            outcome.root_pass.state.recording.span("report", f"{kind} from rank {src}", started, clock_ns())

    def _to_root(self, routed: ReportForRoot, reply: Any = None) -> None:
        """Hand a task's report to its pass's root: here, or over the network (``reply``: as the
        answer to the GRAD the root sent from its waiting thread, see :meth:`receive`)."""
        if routed.root == self.rank:
            self._act(self.roots.report(self.rank, routed.report, routed.arrays))
            return
        try:
            self.courier.send(routed.root, routed.report, routed.arrays, reply)
        except Exception:  # noqa: BLE001 - the root is gone; nobody waits for this
            log.debug("worker %s: could not report %s to rank %s", self.rank, routed.report.KIND, routed.root)

    # --- the root -------------------------------------------------------------------------------

    def backward(self, context_id: int, root_edges: Sequence[Edge], root_grads: Sequence[Any],
                 retain_graph: bool = False, mode: str = "fast", caller_runs_work: bool = False) -> tuple[PassState, Completion]:
        """Start a pass rooted here; returns its state and the completion to wait on (with
        ``caller_runs_work``, the caller promises to wait on it, running the work it is given).
        Does not block.

        Raises:
            AutogradError: unknown context, unknown mode, or a pass already running in the context.
        """
        root_pass = self._start(context_id, root_edges, root_grads, retain_graph, mode, caller_runs_work)
        return root_pass.state, root_pass.completion

    def run_backward(self, context_id: int, root_edges: Sequence[Edge], root_grads: Sequence[Any],
                     retain_graph: bool, mode: str, timeout_s: float) -> None:
        """Run a pass rooted here to its end, running its work for this worker meanwhile. Blocks.

        A watchdog fails the pass when it makes no progress (no task run, no report) for
        ``timeout_s``.

        Raises:
            AutogradError: unknown context or mode, a pass already running in the context, or a
                failure anywhere ("Error on Node N: ...").
            ZgradTimeoutError: no progress for ``timeout_s``.
        """
        started = clock_ns()
        root_pass = self._start(context_id, root_edges, root_grads, retain_graph, mode, caller_runs_work=True)
        state, completion = root_pass.state, root_pass.completion
        recording = state.recording
        idle = None
        if recording is not None:
            recording.hold()
            idle = functools.partial(recording.span, "wait", "waiting for the pass")
        seen = -1
        try:
            while not completion.wait(timeout_s, idle):  # runs the pass's work for this worker meanwhile
                if state.progress == seen:
                    message = (f"the backward pass of autograd context {context_id} made no progress for "
                               f"{timeout_s:g} s ([engine] backward_timeout_s)")
                    self._fail(root_pass, message, exc=ZgradTimeoutError(message))
                    completion.wait(timeout_s, idle)
                    break
                seen = state.progress
        finally:
            state.posting_thread = None
            for work in completion.stop_accepting():
                self.messenger.submit(work)
            if recording is not None:
                recording.span("backward", f"backward ({state.mode.name})", started, clock_ns(),
                               {"context_id": context_id})
                recording.release()
        completion.result()

    def _start(self, context_id: int, root_edges: Sequence[Edge], root_grads: Sequence[Any], retain_graph: bool,
               mode: str, caller_runs_work: bool) -> RootPass:
        pass_mode = self.runner.mode(mode)
        ctx = self.contexts.get(context_id)
        pass_id = next(self._pass_ids)
        traced = bool(self.recorder.sessions)
        state = self.runner.open_pass(ctx, pass_id, self.rank, retain_graph, pass_mode, traced, root_edges, root_grads)
        if traced:
            self.recorder.note_rooted(context_id, pass_id)
        root_pass = self.roots.start(state, caller_runs_work)
        if caller_runs_work and self.courier.can_post:
            # The waiting thread sends the GRADs and DISCOVERs of its tasks from a socket of its
            # own, and their reports come back there: no hand-off to and from the I/O thread.
            state.posting_thread = threading.get_ident()
            root_pass.completion.also_wait_for(PostedReplies(state.posted_replies, self.courier.collect))
        run = TaskRun(state, self.runner.new_task_id(), label="run from the roots")
        root_pass.tracker.announce(WORK, run.task_id, self.rank)
        if pass_mode.discovers:
            walk = self.runner.new_task_id()
            root_pass.tracker.announce(DISCOVERY, walk, self.rank)
            self._to_root(self.runner.discover(state, walk, [edge.node for edge in root_edges if edge is not None]))
        self._to_root(self.runner.run(run))
        return root_pass

    def _act(self, outcome: ReportOutcome | None) -> None:
        """Do what a report at the root calls for (see :class:`~zgrad.engine.dist.root.ReportOutcome`)."""
        if outcome is None:
            return
        root_pass = outcome.root_pass
        if outcome.error is not None:
            self._fail(root_pass, outcome.error, set(outcome.participants))
            return
        state = root_pass.state
        traced = state.recording is not None
        for task_id, msg in outcome.discovers:
            self._to_root(self.runner.on_discover(outcome.src, Discover(
                state.ctx.context_id, state.pass_id, msg, self.rank, state.retain_graph, task_id, traced)))
        for task_id, msg, grads in outcome.grads:
            self._to_root(self.runner.grad(outcome.src, Grad(
                state.ctx.context_id, state.pass_id, msg, self.rank, state.retain_graph, state.mode.name, task_id,
                traced), grads))
        if outcome.progress.discovery_ended:
            self._discovery_ended(root_pass)
        elif outcome.progress.done:
            self._finish(root_pass)

    def _discovery_ended(self, root_pass: RootPass) -> None:
        """SMART: START the other workers that hold nodes (a task the root waits for), then run
        what was held here."""
        state, tracker = root_pass.state, root_pass.tracker
        held, release_task = tracker.held_elsewhere()
        for dst in held:
            task_id = self.runner.new_task_id()
            tracker.announce(WORK, task_id, dst)
            try:
                self.runner.start_task(state, dst, Start(state.ctx.context_id, state.pass_id, task_id))
            except Exception as exc:  # noqa: BLE001 - a lost worker fails the pass ("cannot reach worker ...")
                self._fail(root_pass, f"{exc} (to start the pass)")
                return
        run = TaskRun(state, release_task, label="release after discovery")
        self.runner.release_held(state)
        self._to_root(self.runner.run(run))

    def _finish(self, root_pass: RootPass) -> None:
        """Every task of the pass reported, without error: it succeeded unless a send never got its
        gradient; then the root ends it on every participant for the exact verdict (PASS_END)."""
        self.roots.forget(root_pass)
        state = root_pass.state
        if root_pass.succeeded():
            state.ctx.pass_table.end(state.pass_id)
            clean_up = state.mode.discovers
            if clean_up and state.recording is not None:
                state.recording.hold()
            self._conclude(root_pass, None)
            if clean_up and state.posting_thread == threading.get_ident() and self.courier.can_post \
                    and state.recording is None:
                # The waiter itself: a write on its own socket each costs less than waking another
                # thread to send through the I/O role. Not for a traced pass: the root's call that
                # collects the recordings (and the context's release riding in it) takes the link,
                # and must not overtake the START, whose receipt the worker records.
                self._clean_up(root_pass, posted=True)
            elif clean_up:  # off the waiting caller's path
                self.messenger.submit(lambda: self._clean_up(root_pass))
            return
        others = sorted((root_pass.tracker.participants_now() | state.participants) - {self.rank})
        unexecuted_here = [[msg, peer, self.rank] for msg, peer in state.unexecuted_sends()]

        def ended(errors: list[str], unexecuted: list[list[int]]) -> None:
            state.ctx.pass_table.end(state.pass_id)
            self._conclude(root_pass, end_verdict(state, errors, unexecuted_here + unexecuted, self.courier.worker_name))

        self.teardown.end_pass(state, others, ended)

    def _clean_up(self, root_pass: RootPass, posted: bool = False) -> None:
        """SMART, after success: START the workers reached that had no held nodes, so they close it
        (``posted``: from the root's waiting thread's own sockets; nothing answers these)."""
        state = root_pass.state
        for dst in root_pass.tracker.reached_without_held():
            start = Start(state.ctx.context_id, state.pass_id)
            try:
                if posted:
                    self.courier.post(dst, start)
                else:
                    self.courier.send(dst, start)
            except Exception:  # noqa: BLE001 - it is gone; its state went with it
                pass
        if state.recording is not None:
            state.recording.release()

    def _fail(self, root_pass: RootPass, error: str, participants: set[int] = frozenset(),
              exc: BaseException | None = None) -> bool:
        """Fail a pass rooted here (first outcome wins): FAILURE everywhere, then complete with
        ``exc`` (default ``AutogradError(error)``). False if the pass had an outcome already."""
        if not self.roots.settle(root_pass):
            return False
        failure = exc if exc is not None else AutogradError(error)
        targets = participants | root_pass.tracker.participants_now()
        self.teardown.fail_pass(root_pass.state, error, targets, lambda: self._conclude(root_pass, failure, targets))
        return True

    def _conclude(self, root_pass: RootPass, error: BaseException | None, involved: set[int] = frozenset()) -> None:
        """The pass has its outcome: its caller may return (a traced pass names every worker
        ``involved``, and every one that took part, for the collection of its recordings)."""
        recording = root_pass.state.recording
        if recording is not None:
            # The workers this root sent to count too: a failure reported before the root's own
            # report (which names them to the tracker) settles the pass without them.
            recording.participants.update(involved | root_pass.tracker.participants_now() | root_pass.state.participants)
        root_pass.completion.set_done(error)
        if recording is not None:
            recording.release()

    # --- contexts and introspection -------------------------------------------------------------

    def release_context(self, context_id: int, done: Callable[[], None]) -> None:
        """Release the context here and on every worker it reached, recursively; ``done`` when all
        answered. Does not block."""
        self.teardown.release_context(context_id, done)

    def release_here(self, context_id: int, src: int | None = None) -> set[int] | None:
        """Release the context on this worker only (ending its passes here); returns the workers
        it reached from here (``src`` excepted), or None if it was unknown here. The caller
        releases it there: :meth:`broadcast_release`, or by its own means."""
        return self.teardown.release_here(context_id, src)

    def broadcast_release(self, context_id: int, targets: set[int], done: Callable[[], None]) -> None:
        """CONTEXT_RELEASE to ``targets`` (they forward it); ``done`` once all answered. Does not block."""
        self.teardown.broadcast_release(context_id, targets, done)

    def debug_info(self) -> dict[str, Any]:
        contexts = self.contexts.all()
        return {
            "num_current_backward_passes": sum(len(c.pass_table) for c in contexts),
            "num_autograd_contexts": len(contexts),
            "messages_sent": dict(self.courier.sent),
            "messages_received": dict(self.courier.received),
            "discovery_messages": self.smart.message_count(),
        }

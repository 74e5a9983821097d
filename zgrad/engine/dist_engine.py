"""The distributed backward engine of one worker (FAST mode; SMART lives in ``smart.py``).

The engine reaches the network only through a :class:`Messenger`, and is driven by
:meth:`DistEngine.receive`, so tests run it against an in-memory fake with any message order.

Messages (``body`` is a map of plain values, ``arrays`` the gradients; tasks, reports and
closing are explained in ``dist_pass.py``):

=================  =====================================================  ====================
kind               body                                                   answered by
=================  =====================================================  ====================
GRAD               ctx, pass, msg, root, retain, mode, task               GRAD_ACK, to the root
GRAD_ACK           ctx, pass, task, children ([[task, dst, msg], ...]),   -
                   error (str or None), open (bool), [grads] (GRADs for
                   the root riding in it: [[task, msg, n arrays], ...])
PASS_END           ctx, pass, seq                                         PASS_END_ACK
PASS_END_ACK       seq, unexecuted ([[msg, peer], ...])                   -
FAILURE            ctx, pass, error, seq                                  FAILURE_ACK
CONTEXT_RELEASE    ctx, seq                                               CONTEXT_RELEASE_ACK
*_ACK              seq (PASS_END_ACK, FAILURE_ACK, CONTEXT_RELEASE_ACK)   -
=================  =====================================================  ====================

FAST mode (SPEC §4): the root counts dependencies from the roots *and every send node of the
context*; a worker receiving its first GRAD of a pass does the same from all its send nodes. A
recv node that runs sends its gradients (GRAD) to the worker holding the matching send node; the
run that GRAD starts there reports to the root (GRAD_ACK) as soon as it has ended, naming the
GRADs it sent in turn (a GRAD for the root that is the last thing a run does rides in the
report). The root knows that the whole pass has finished, everywhere, when every task announced
has reported (``dist_root.Tracker``); backward returns then, or raises the first error a report
carried ("Error on Node N: ...") after failing the pass everywhere (FAILURE).

Completion without an extra round. A worker closes the pass by itself when its last run has
ended with every send node fed, and its report says so. If every worker closed it and every send
node of the root was fed, the pass succeeded and nothing more is sent. Otherwise some send node
never got a gradient (an RPC result the loss does not use): the root ends the pass on every
participant (PASS_END, answered with the send nodes that never got a gradient) and fails it naming
them, suggesting mode="smart". It does not hang: the runs end regardless. The context is released
(CONTEXT_RELEASE) in the background: the ``with`` block's exit does not wait for the answers.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from typing import Any, Callable, Protocol, Sequence

from zgrad.engine.context import ContextContainer, DistAutogradContext, make_id_generator
from zgrad.engine.dist_pass import Activation, Completion, PassState
from zgrad.engine.dist_root import REPORT_KINDS, WORK, RootPasses
from zgrad.engine.graph import Edge
from zgrad.engine.send_recv import RecvNode, recv_sender
from zgrad.errors import AutogradError

__all__ = ["Messenger", "DistEngine", "MODES"]

log = logging.getLogger("zgrad.engine")

MODES = ("fast", "smart")
BROADCAST_RETRIES = 3
ACK_KINDS = ("PASS_END_ACK", "FAILURE_ACK", "CONTEXT_RELEASE_ACK")
INLINE_KINDS = frozenset(ACK_KINDS) | {"GRAD_ACK", "PASS_END"}  # cheap, never block: handled where received
ROOT_WORK_KINDS = ("GRAD", "DISCOVER", "DISCOVER_ACK")  # may run on the root's waiting caller thread


class Messenger(Protocol):
    """What the engine needs from the network (implemented by the RPC agent, or a test fake)."""

    rank: int

    def send(self, dst: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> None:
        """Send one message; may raise if ``dst`` is known to be unreachable."""

    def worker_name(self, rank: int) -> str:
        """The name of worker ``rank`` (unquoted)."""

    def submit(self, work: Callable[[], None]) -> None:
        """Run ``work()`` on a worker thread (the callee pool), soon; never blocks."""


ReplyHandler = Callable[[int, dict[str, Any], Sequence[Any]], None]


class DistEngine:
    """One worker's distributed backward engine. Thread-safe; handlers never block."""

    def __init__(self, contexts: ContextContainer, messenger: Messenger) -> None:
        self.rank = contexts.rank
        self.contexts = contexts
        self.messenger = messenger
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._pass_ids = make_id_generator(self.rank)
        self._task_ids = make_id_generator(self.rank)
        self._awaiting: dict[int, tuple[int, ReplyHandler]] = {}
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self._handlers: dict[str, Callable[[int, dict[str, Any], Sequence[Any]], None]] = {
            "GRAD": self.on_grad, "PASS_END": self._on_pass_end, "FAILURE": self._on_failure,
            "CONTEXT_RELEASE": self._on_release,
        }
        self.roots = RootPasses(self)
        from zgrad.engine.smart import SmartDiscovery

        self.smart = SmartDiscovery(self)

    # --- messaging ------------------------------------------------------------------------------

    def send(self, dst: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> None:
        self.sent[kind] += 1
        self.messenger.send(dst, kind, body, arrays)

    def request(self, dst: int, kind: str, body: dict[str, Any], on_reply: ReplyHandler,
                arrays: Sequence[Any] = ()) -> None:
        """Send a message whose ``*_ACK`` (matched by ``seq``) goes to ``on_reply``; a lost peer
        answers with ``{"error": ...}``."""
        seq = next(self._seq)
        with self._lock:
            self._awaiting[seq] = (dst, on_reply)
        try:
            self.send(dst, kind, {**body, "seq": seq}, arrays)
        except Exception as exc:  # noqa: BLE001 - an unreachable peer answers with an error
            self._answer(seq, dst, {"seq": seq, "error": f"cannot reach worker {self.messenger.worker_name(dst)!r}: {exc}"}, ())

    def reply(self, dst: int, kind: str, request: dict[str, Any], body: dict[str, Any], arrays: Sequence[Any] = ()) -> None:
        try:
            self.send(dst, kind, {**body, "seq": request["seq"]}, arrays)
        except Exception:  # noqa: BLE001 - the requester is gone; nobody waits for this
            log.debug("worker %s: could not answer %s to rank %s", self.rank, kind, dst)

    def _answer(self, seq: Any, src: int, body: dict[str, Any], arrays: Sequence[Any]) -> None:
        with self._lock:
            entry = self._awaiting.get(seq)
            if entry is None or entry[0] != src:
                return
            del self._awaiting[seq]
        entry[1](src, body, arrays)

    def new_task_id(self) -> int:
        return next(self._task_ids)

    def start_task(self, state: PassState, dst: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> int:
        """Send a message that starts a task of ``state``'s pass on ``dst``; returns the task's id.

        Raises:
            AutogradError: "cannot reach worker ...": the message could not be sent.
        """
        task_id = self.new_task_id()
        with state.lock:
            state.participants.add(dst)
        try:
            self.send(dst, kind, {**body, "ctx": state.ctx.context_id, "pass": state.pass_id, "root": state.root,
                                  "task": task_id}, arrays)
        except Exception as exc:  # noqa: BLE001 - the task fails with this
            raise AutogradError(f"cannot reach worker {self.messenger.worker_name(dst)!r}: {exc}") from exc
        return task_id

    def report(self, root: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> None:
        """Report a task that ended (GRAD_ACK, DISCOVER_ACK) to the pass's root."""
        if root == self.rank:
            self.roots.on_report(self.rank, kind, body, arrays)
            return
        try:
            self.send(root, kind, body, arrays)
        except Exception:  # noqa: BLE001 - the root is gone; nobody waits for this
            log.debug("worker %s: could not report %s to rank %s", self.rank, kind, root)

    def receive(self, src: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> None:
        """Handle one message from ``src`` (the messenger's inbound path, e.g. the I/O thread).

        Acknowledgements, GRAD_ACK (unless GRADs ride in it) and PASS_END are handled at once
        (cheap, never block). The rest runs graph work or may free a context: it goes to the pool,
        or, for a pass rooted here, to the thread waiting for it (see
        :class:`~zgrad.engine.dist_pass.Completion`).
        """
        self.received[kind] += 1
        if kind in ACK_KINDS:
            self._answer(body.get("seq"), src, body, arrays)
            return
        handler = self._handler(kind)
        if kind in INLINE_KINDS and "grads" not in body:  # a GRAD_ACK with GRADs in it runs them
            handler(src, body, arrays)
            return

        def work() -> None:
            try:
                handler(src, body, arrays)
            except Exception as exc:  # noqa: BLE001 - whatever thread runs it (a caller in backward) must go on
                log.exception("worker %s: handling %s from rank %s failed", self.rank, kind, src)
                self._report_crash(src, kind, body, exc)

        if (kind in ROOT_WORK_KINDS or kind in REPORT_KINDS) and body.get("root", self.rank) == self.rank \
                and self.roots.post(body.get("pass"), work):
            return
        self.messenger.submit(work)

    def _report_crash(self, src: int, kind: str, body: dict[str, Any], exc: Exception) -> None:
        """A task's message could not be handled (an engine bug): fail the pass at once rather
        than let the root wait for ``backward_timeout_s``."""
        report = {"GRAD": ("GRAD_ACK", "open"), "DISCOVER": ("DISCOVER_ACK", "held"), "START": ("GRAD_ACK", "open")}.get(kind)
        if report is None or not isinstance(body.get("task"), int):
            return
        self.report(body.get("root", src), report[0], {"ctx": body.get("ctx"), "pass": body.get("pass"), "task": body["task"],
                                                       "children": [], "error": self.node_error(exc), report[1]: False})

    def _handler(self, kind: str) -> Callable[[int, dict[str, Any], Sequence[Any]], None]:
        if kind in REPORT_KINDS:
            return lambda src, body, arrays: self.roots.on_report(src, kind, body, arrays)
        handler = self._handlers.get(kind) or self.smart.handlers.get(kind)
        if handler is None:
            raise AutogradError(f"unknown distributed autograd message kind {kind!r}")
        return handler

    def peer_lost(self, rank: int, reason: str) -> None:
        """Fail everything waiting on ``rank``."""
        error = f"worker {self.messenger.worker_name(rank)!r} (rank {rank}) is unavailable: {reason}"
        with self._lock:
            lost = [seq for seq, (dst, _) in self._awaiting.items() if dst == rank]
        for seq in lost:
            self._answer(seq, rank, {"seq": seq, "error": error, "lost": True}, ())
        self.roots.peer_lost(rank, error)

    # --- running a pass -------------------------------------------------------------------------

    def node_error(self, exc: BaseException) -> str:
        text = str(exc)
        if text.startswith("Error on Node "):
            return text
        return f"Error on Node {self.rank}: {type(exc).__name__}: {text}"

    def run_activation(self, activation: Activation, send: Any = None, grads: list[Any] | None = None) -> None:
        """Run the pass's graph task in this thread until nothing is ready (first handing ``grads``
        to ``send``, emptying the list: the task holds them then, so a leaf may keep its gradient
        without a copy), then report the task."""
        state = activation.state
        previous = recv_sender.sender
        recv_sender.sender = lambda node, out: self._send_gradients(activation, node, out)
        try:
            if send is not None:
                state.task.feed(send, grads)
                grads.clear()
            state.task.run()
            state.task.run_final_callbacks()  # e.g. DDP's reducer, before this run reports
        except BaseException as exc:  # noqa: BLE001 - reported to the root
            activation.failed(self.node_error(exc))
        finally:
            recv_sender.sender = previous
            state.touch()
        closed = state.end_activation(ok=activation.error is None)
        if closed:
            self.forget_pass(state)
        body = {"ctx": state.ctx.context_id, "pass": state.pass_id, "task": activation.task_id,
                "children": activation.children, "error": activation.error, "open": not closed}
        arrays: list[Any] = []
        if activation.for_root:
            body["grads"] = [[task_id, msg, len(grads)] for task_id, msg, grads in activation.for_root]
            arrays = [array for _, _, grads in activation.for_root for array in grads]
        self.report(state.root, "GRAD_ACK", body, arrays)

    def _send_gradients(self, activation: Activation, node: RecvNode, grads: list[Any]) -> None:
        state = activation.state
        if node.peer == state.root != self.rank and state.task.running_last():
            # The task's report goes to the root right after this: the GRAD rides in it.
            with state.lock:
                state.participants.add(node.peer)
            activation.keep_for_root(self.new_task_id(), node.autograd_message_id, grads)
            return
        try:
            task_id = self.start_task(state, node.peer, "GRAD", {"msg": node.autograd_message_id,
                                                                 "retain": state.retain_graph, "mode": state.mode}, grads)
        except AutogradError as exc:
            activation.failed(str(exc))
            return
        activation.started(task_id, node.peer, node.autograd_message_id)

    def pass_state(self, ctx: DistAutogradContext, pass_id: int, root: int, retain: bool, mode: str,
                   root_edges: Sequence[Edge] | None = None, root_grads: Sequence[Any] = ()) -> PassState:
        """This worker's state of a pass, created on first use: dependencies counted (FAST) or
        the nodes several sources reach held (SMART); at the root, from ``root_edges`` too.

        A pass from the same root with a smaller id that is still here is over (a root runs one
        pass per context at a time): it is forgotten.

        Raises:
            AutogradError: the pass already ended or failed here, or another pass of the context runs.
        """
        with ctx.lock:
            if pass_id in ctx.ended_passes:
                raise AutogradError(f"backward pass {pass_id:#x} of autograd context {ctx.context_id} already ended on this worker")
            state = ctx.passes.get(pass_id)
            created = state is None
            if created:
                for older in [p for p in ctx.passes.values() if not p.is_root and p.root == root and p.pass_id < pass_id]:
                    del ctx.passes[older.pass_id]
                    ctx.ended_passes.add(older.pass_id)
                if ctx.passes:
                    raise AutogradError(
                        f"another backward pass is already running in autograd context {ctx.context_id}; "
                        "run one pass per context at a time")
                state = ctx.passes[pass_id] = PassState(ctx, pass_id, root, retain, mode, is_root=root == self.rank)
        if not created:
            state.wait_ready()
            return state
        try:
            sources = []
            if root_edges is not None:
                state.root_edges = list(root_edges)
                sources.append(state.task.start(root_edges, root_grads))
            if mode == "fast":
                state.task.add_roots(ctx.sends())
            else:
                self.smart.prepare(state, sources)
        finally:
            state.ready.open()
        return state

    def backward(self, context_id: int, root_edges: Sequence[Edge], root_grads: Sequence[Any],
                 retain_graph: bool = False, mode: str = "fast", caller_runs_work: bool = False) -> tuple[PassState, Completion]:
        """Start a pass rooted here; returns its state and the completion to wait on (with
        ``caller_runs_work``, the caller promises to wait on it, running the work it is given).

        Raises:
            AutogradError: unknown context, unknown mode, or a pass already running in the context.
        """
        if mode not in MODES:
            raise AutogradError(f"unknown distributed autograd mode {mode!r}; expected one of {', '.join(MODES)}")
        ctx = self.contexts.get(context_id)
        state = self.pass_state(ctx, next(self._pass_ids), self.rank, retain_graph, mode, root_edges, root_grads)
        completion = self.roots.start(state, caller_runs_work)
        run = Activation(state, self.new_task_id())
        state.tracker.announce(WORK, run.task_id, self.rank)
        if mode == "smart":
            self.smart.start_root(state)
        self.run_activation(run)
        return state, completion

    def forget_pass(self, state: PassState) -> None:
        with state.ctx.lock:
            state.ctx.passes.pop(state.pass_id, None)
            state.ctx.ended_passes.add(state.pass_id)

    # --- handlers -------------------------------------------------------------------------------

    def on_grad(self, src: int, body: dict[str, Any], arrays: Sequence[Any]) -> None:
        """A GRAD: run the send node it names (a task), with the gradients, which it takes over."""
        try:
            ctx = self.contexts.get(body["ctx"])
            state = self.pass_state(ctx, body["pass"], body["root"], bool(body["retain"]), body["mode"])
            send = ctx.send_functions.get(body["msg"])
            if send is None:
                raise AutogradError(
                    f"no send function with autograd_message_id {body['msg']:#x} in autograd context {ctx.context_id}")
            if state.mode == "smart":
                state.task.add_roots([send])  # it takes part: count what it reaches (see smart.py)
            activation = Activation(state, body["task"], send.autograd_message_id)
        except AutogradError as exc:
            self.report(body["root"], "GRAD_ACK", {"ctx": body["ctx"], "pass": body["pass"], "task": body["task"],
                                                   "children": [], "error": self.node_error(exc), "open": False})
            return
        state.touch()
        grads = list(arrays)
        if isinstance(arrays, list):
            arrays.clear()  # the message's list: nothing else holds the gradients then (see run_activation)
        self.run_activation(activation, send, grads)

    def _on_pass_end(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        unexecuted: list[list[int]] = []
        try:
            ctx = self.contexts.get(body["ctx"])
            with ctx.lock:
                state = ctx.passes.get(body["pass"])
            if state is not None:
                unexecuted = state.unexecuted_sends()
                self.forget_pass(state)
        except AutogradError:
            pass  # released meanwhile: nothing is left here
        self.reply(src, "PASS_END_ACK", body, {"unexecuted": unexecuted})

    def fail_pass(self, state: PassState, error: str, participants: set[int], done: Callable[[], None]) -> None:
        """End the pass here and tell every worker involved that it failed (recursively); ``done`` once all answered."""
        self.forget_pass(state)
        targets = (participants | state.participants | state.ctx.known_workers) - {self.rank}
        self._broadcast(targets, "FAILURE", {"ctx": state.ctx.context_id, "pass": state.pass_id, "error": error}, done)

    def _broadcast(self, targets: set[int], kind: str, body: dict[str, Any], done: Callable[[], None],
                   retries: int = BROADCAST_RETRIES) -> None:
        """Send ``kind`` to each target and call ``done`` once every one answered or was lost.

        A target that could not be sent to (but is not lost) is tried again, ``retries`` times.
        """
        remaining = {"n": len(targets)}
        lock = threading.Lock()

        def send_to(dst: int, attempts_left: int) -> None:
            def acked(_src: int, reply: dict[str, Any], _arrays: Sequence[Any]) -> None:
                if reply.get("error") and not reply.get("lost") and attempts_left > 0:
                    send_to(dst, attempts_left - 1)
                    return
                with lock:
                    remaining["n"] -= 1
                    last = remaining["n"] == 0
                if last:
                    done()

            self.request(dst, kind, body, acked)

        if not targets:
            done()
            return
        for dst in sorted(targets):
            send_to(dst, retries)

    def _on_failure(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        try:
            ctx = self.contexts.get(body["ctx"])
        except AutogradError:
            self.reply(src, "FAILURE_ACK", body, {})
            return
        with ctx.lock:
            first = body["pass"] not in ctx.ended_passes
            ctx.passes.pop(body["pass"], None)
            ctx.ended_passes.add(body["pass"])
            targets = set(ctx.known_workers) - {src, self.rank}
        if not first:
            self.reply(src, "FAILURE_ACK", body, {})
            return
        self._broadcast(targets, "FAILURE", {"ctx": body["ctx"], "pass": body["pass"], "error": body.get("error")},
                        lambda: self.reply(src, "FAILURE_ACK", body, {}))

    # --- contexts -------------------------------------------------------------------------------

    def release_context(self, context_id: int, done: Callable[[], None]) -> None:
        """Release the context here and on every worker it reached, recursively; ``done`` when all answered."""
        ctx = self.contexts.release(context_id)
        if ctx is None:
            done()
            return
        with ctx.lock:
            targets = set(ctx.known_workers) - {self.rank}
        self._broadcast(targets, "CONTEXT_RELEASE", {"ctx": context_id}, done)

    def _on_release(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        ctx = self.contexts.release(body["ctx"])
        if ctx is None:
            self.reply(src, "CONTEXT_RELEASE_ACK", body, {})
            return
        with ctx.lock:
            targets = set(ctx.known_workers) - {src, self.rank}
        self._broadcast(targets, "CONTEXT_RELEASE", {"ctx": body["ctx"]},
                        lambda: self.reply(src, "CONTEXT_RELEASE_ACK", body, {}))

    # --- introspection --------------------------------------------------------------------------

    def debug_info(self) -> dict[str, Any]:
        contexts = self.contexts.all()
        return {
            "num_current_backward_passes": sum(len(c.passes) for c in contexts),
            "num_autograd_contexts": len(contexts),
            "messages_sent": dict(self.sent),
            "messages_received": dict(self.received),
            "discovery_messages": self.smart.message_count(),
        }

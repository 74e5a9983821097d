"""The distributed backward engine of one worker (FAST mode; SMART lives in ``smart.py``).

The engine reaches the network only through a :class:`Messenger`, and is driven by
:meth:`DistEngine.receive`, so tests run it against an in-memory fake with any message order.

Messages (``body`` is a map of plain values, ``arrays`` the gradients):

===================  ==============================================  ========================
kind                 body                                            answered by
===================  ==============================================  ========================
GRAD                 ctx, pass, msg, root, retain, mode, seq         GRAD_ACK
GRAD_ACK             seq, error (str or None), participants          -
PASS_END             ctx, pass, seq                                  PASS_END_ACK
PASS_END_ACK         seq, unexecuted ([[msg, peer], ...])            -
FAILURE              ctx, pass, error, seq                           FAILURE_ACK
CONTEXT_RELEASE      ctx, seq                                        CONTEXT_RELEASE_ACK
*_ACK                seq                                             -
===================  ==============================================  ========================

FAST mode (SPEC §4): the root counts dependencies from the roots *and every send node of the
context*; a worker receiving its first GRAD of a pass does the same from all its send nodes;
each GRAD is acknowledged once the work it caused is done (see ``dist_pass.py``). When the
root's own run is done the whole pass is quiescent; the root then ends the pass on every
participant (PASS_END), which reports the send nodes that never got a gradient: in FAST mode
that means an RPC result the loss does not use, and the pass fails naming them.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from typing import Any, Callable, Protocol, Sequence

from zgrad.engine.context import ContextContainer, DistAutogradContext, make_id_generator, unknown_context
from zgrad.engine.dist_pass import Activation, Completion, PassState
from zgrad.engine.graph import Edge
from zgrad.engine.send_recv import RecvNode, recv_sender
from zgrad.errors import AutogradError

__all__ = ["Messenger", "DistEngine", "MODES"]

log = logging.getLogger("zgrad.engine")

MODES = ("fast", "smart")
BROADCAST_RETRIES = 3
ACK_KINDS = ("GRAD_ACK", "PASS_END_ACK", "FAILURE_ACK", "CONTEXT_RELEASE_ACK", "DISCOVER_ACK", "START_ACK")


class Messenger(Protocol):
    """What the engine needs from the network (implemented by the RPC agent, or a test fake)."""

    rank: int

    def send(self, dst: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> None:
        """Send one message; may raise if ``dst`` is known to be unreachable."""

    def worker_name(self, rank: int) -> str:
        """The name of worker ``rank`` (unquoted)."""


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
        self._awaiting: dict[int, tuple[int, ReplyHandler]] = {}
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self._handlers: dict[str, Callable[[int, dict[str, Any], Sequence[Any]], None]] = {
            "GRAD": self._on_grad, "PASS_END": self._on_pass_end, "FAILURE": self._on_failure,
            "CONTEXT_RELEASE": self._on_release,
        }
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

    def receive(self, src: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> None:
        """Handle one message from ``src`` (the messenger's inbound path; any thread)."""
        self.received[kind] += 1
        if kind in ACK_KINDS:
            self._answer(body.get("seq"), src, body, arrays)
            return
        handler = self._handlers.get(kind) or self.smart.handlers.get(kind)
        if handler is None:
            raise AutogradError(f"unknown distributed autograd message kind {kind!r}")
        handler(src, body, arrays)

    def peer_lost(self, rank: int, reason: str) -> None:
        """Fail everything waiting on ``rank``."""
        with self._lock:
            lost = [seq for seq, (dst, _) in self._awaiting.items() if dst == rank]
        error = f"worker {self.messenger.worker_name(rank)!r} (rank {rank}) is unavailable: {reason}"
        for seq in lost:
            self._answer(seq, rank, {"seq": seq, "error": error, "lost": True}, ())

    # --- running a pass -------------------------------------------------------------------------

    def node_error(self, exc: BaseException) -> str:
        text = str(exc)
        if text.startswith("Error on Node "):
            return text
        return f"Error on Node {self.rank}: {type(exc).__name__}: {text}"

    def run_activation(self, activation: Activation, feed: tuple[Any, Sequence[Any]] | None = None) -> None:
        """Run the pass's graph task in this thread until nothing is ready, then report the run's end."""
        state = activation.state
        previous = recv_sender.sender
        recv_sender.sender = lambda node, grads: self._send_gradients(activation, node, grads)
        error = None
        try:
            if feed is not None:
                state.task.feed(*feed)
            state.task.run()
        except BaseException as exc:  # noqa: BLE001 - reported along the ack chain
            error = self.node_error(exc)
        finally:
            recv_sender.sender = previous
            state.touch()
        activation.run_ended(error)

    def _send_gradients(self, activation: Activation, node: RecvNode, grads: list[Any]) -> None:
        state = activation.state
        body = {"ctx": state.ctx.context_id, "pass": state.pass_id, "msg": node.autograd_message_id,
                "root": state.root, "retain": state.retain_graph, "mode": state.mode}
        activation.message_sent(node.peer)
        with state.lock:
            state.participants.add(node.peer)

        def acked(src: int, reply: dict[str, Any], _arrays: Sequence[Any]) -> None:
            state.touch()
            participants = {p for p in reply.get("participants", ()) if isinstance(p, int)}
            activation.message_acked(reply.get("error"), participants)

        self.request(node.peer, "GRAD", body, acked, grads)

    def pass_state(self, ctx: DistAutogradContext, pass_id: int, root: int, retain: bool, mode: str) -> PassState:
        """This worker's state of a pass, created (with FAST dependencies) on first use.

        Raises:
            AutogradError: the pass already ended or failed here, or another pass of the context runs.
        """
        with ctx.lock:
            if pass_id in ctx.ended_passes:
                raise AutogradError(f"backward pass {pass_id:#x} of autograd context {ctx.context_id} already ended on this worker")
            state = ctx.passes.get(pass_id)
            if state is None:
                if ctx.passes:
                    raise AutogradError(
                        f"another backward pass is already running in autograd context {ctx.context_id}; "
                        "run one pass per context at a time")
                state = ctx.passes[pass_id] = PassState(ctx, pass_id, root, retain, mode)
                created = True
            else:
                created = False
        if created and mode == "fast":
            state.task.add_roots(ctx.sends())
        return state

    def backward(self, context_id: int, root_edges: Sequence[Edge], root_grads: Sequence[Any],
                 retain_graph: bool = False, mode: str = "fast") -> tuple[PassState, Completion]:
        """Start a pass rooted here; returns its state and the completion to wait on.

        Raises:
            AutogradError: unknown context, unknown mode, or a pass already running in the context.
        """
        if mode not in MODES:
            raise AutogradError(f"unknown distributed autograd mode {mode!r}; expected one of {', '.join(MODES)}")
        ctx = self.contexts.get(context_id)
        state = self.pass_state(ctx, next(self._pass_ids), self.rank, retain_graph, mode)
        state.root_edges = list(root_edges)
        state.task.start(root_edges, root_grads)
        completion = Completion()
        if mode == "smart":
            self.smart.start_root(state, completion)
        else:
            self.run_activation(Activation(state, lambda error, parts: self._root_done(state, completion, error, parts)))
        return state, completion

    def _root_done(self, state: PassState, completion: Completion, error: str | None, participants: set[int]) -> None:
        if error is not None:
            self.fail_pass(state, error, participants, lambda: completion.set_done(AutogradError(error)))
            return
        self.end_pass(state, participants, completion)

    def end_pass(self, state: PassState, participants: set[int], completion: Completion,
                 among: Callable[[PassState], list] | None = None) -> None:
        """The pass is quiescent: end it everywhere, failing it if a send node never ran (FAST)."""
        others = sorted((participants | state.participants) - {self.rank})
        unexecuted = [[msg, peer, self.rank] for msg, peer in state.unexecuted_sends(among(state) if among else None)]
        waiting = {"n": len(others)}
        lock = threading.Lock()
        errors: list[str] = []

        def finish() -> None:
            self._forget_pass(state)
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
            self.request(dst, "PASS_END", {"ctx": state.ctx.context_id, "pass": state.pass_id}, acked)

    def _stuck_message(self, state: PassState, unexecuted: list[list[int]]) -> str:
        described = ", ".join(
            f"autograd_message_id {msg:#x} on {self.messenger.worker_name(holder)!r} (RPC with {self.messenger.worker_name(peer)!r})"
            for msg, peer, holder in unexecuted[:10])
        more = f" and {len(unexecuted) - 10} more" if len(unexecuted) > 10 else ""
        return (
            f"FAST mode could not complete the backward pass of autograd context {state.ctx.context_id}: "
            f"{len(unexecuted)} send function(s) never received a gradient: {described}{more}. This happens when "
            "the result of an RPC made in the context is not used by the roots. Use mode=\"smart\" "
            "(dist_autograd.backward(..., mode=\"smart\") or [engine] mode = \"smart\"), which finds the "
            "RPCs that take part before running."
        )

    def _forget_pass(self, state: PassState) -> None:
        with state.ctx.lock:
            state.ctx.passes.pop(state.pass_id, None)
            state.ctx.ended_passes.add(state.pass_id)

    # --- handlers -------------------------------------------------------------------------------

    def _on_grad(self, src: int, body: dict[str, Any], arrays: Sequence[Any]) -> None:
        try:
            ctx = self.contexts.get(body["ctx"])
            state = self.pass_state(ctx, body["pass"], body["root"], bool(body["retain"]), body["mode"])
            send = ctx.send_functions.get(body["msg"])
            if send is None:
                raise AutogradError(
                    f"no send function with autograd_message_id {body['msg']:#x} in autograd context {ctx.context_id}")
        except AutogradError as exc:
            self.reply(src, "GRAD_ACK", body, {"error": self.node_error(exc), "participants": [self.rank]})
            return
        if state.mode == "smart":
            self.smart.ensure_started(state)
        with state.lock:
            state.executed_sends.add(send.autograd_message_id)
        state.touch()

        def done(error: str | None, participants: set[int]) -> None:
            self.reply(src, "GRAD_ACK", body, {"error": error, "participants": sorted(participants | {self.rank})})

        self.run_activation(Activation(state, done), feed=(send, list(arrays)))

    def _on_pass_end(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        unexecuted: list[list[int]] = []
        try:
            ctx = self.contexts.get(body["ctx"])
            with ctx.lock:
                state = ctx.passes.get(body["pass"])
            if state is not None:
                unexecuted = state.unexecuted_sends(self.smart.marked_sends(state) if state.mode == "smart" else None)
                self._forget_pass(state)
        except AutogradError:
            pass  # released meanwhile: nothing is left here
        self.reply(src, "PASS_END_ACK", body, {"unexecuted": unexecuted})

    def fail_pass(self, state: PassState, error: str, participants: set[int], done: Callable[[], None]) -> None:
        """Mark the pass failed here and tell every worker involved (recursively); ``done`` once all answered."""
        with state.lock:
            state.failed = error
        self._forget_pass(state)
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
            state = ctx.passes.pop(body["pass"], None)
            ctx.ended_passes.add(body["pass"])
            targets = set(ctx.known_workers) - {src, self.rank}
        if state is not None:
            state.failed = str(body.get("error"))
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

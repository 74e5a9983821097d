"""SMART mode: find the send nodes that take part in a pass before running it.

1. The root walks its local graph from the roots; for every recv node it reaches it sends
   DISCOVER(ctx, pass, msg) to the worker holding the matching send node.
2. That worker marks the send as taking part, walks its graph from it (skipping what this pass
   already walked there), sends DISCOVER for every new recv it reaches, and answers
   DISCOVER_ACK once all of its own DISCOVERs are answered. A send already marked is answered
   at once, so cycles across workers end.
3. With every DISCOVER answered, discovery is complete: the root sends START to every worker
   reached and runs the pass as in FAST mode, but with dependencies counted from the roots and
   the *marked* sends only; a worker counts them on START or on its first GRAD, whichever comes
   first. Nothing waits for a send that was not discovered, so unused RPC results are fine.

Improvement over a START/START_ACK round: the root starts executing without waiting for START
acknowledgements. That is safe because every marking happened before discovery completed, and
no GRAD is sent before that; a GRAD that overtakes START (it comes from another worker) finds
the marks in place and triggers the same dependency count. See ``docs/smart-mode.md``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from zgrad.engine.dist_pass import Activation, Completion, PassState
from zgrad.engine.graph import Node
from zgrad.engine.send_recv import RecvNode, SendNode
from zgrad.errors import AutogradError

if TYPE_CHECKING:
    from zgrad.engine.dist_engine import DistEngine

__all__ = ["SmartDiscovery", "SmartPassState"]


class SmartPassState:
    """Discovery state of one pass on one worker."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.marked: set[int] = set()
        self.visited: set[Node] = set()
        self.discovered_recvs: set[int] = set()
        self.reached: set[int] = set()
        self.started = False


class SmartDiscovery:
    """The SMART-mode half of a :class:`DistEngine`."""

    def __init__(self, engine: "DistEngine") -> None:
        self.engine = engine
        self.handlers = {"DISCOVER": self._on_discover, "START": self._on_start}

    @staticmethod
    def _smart(state: PassState) -> SmartPassState:
        with state.lock:
            if state.smart is None:
                state.smart = SmartPassState()
            return state.smart

    def message_count(self) -> int:
        engine = self.engine
        return sum(engine.sent[k] for k in ("DISCOVER", "DISCOVER_ACK", "START"))

    def marked_sends(self, state: PassState) -> list[SendNode]:
        smart = self._smart(state)
        with smart.lock:
            marked = set(smart.marked)
        return [s for s in state.ctx.sends() if s.autograd_message_id in marked]

    def _walk(self, smart: SmartPassState, starts: Iterable[Node | None]) -> list[RecvNode]:
        """Recv nodes reachable from ``starts`` not yet walked in this pass on this worker."""
        found: list[RecvNode] = []
        with smart.lock:
            stack = [n for n in starts if n is not None and n not in smart.visited]
            smart.visited.update(stack)
            while stack:
                node = stack.pop()
                if isinstance(node, RecvNode) and node.autograd_message_id not in smart.discovered_recvs:
                    smart.discovered_recvs.add(node.autograd_message_id)
                    found.append(node)
                for edge in node.next_edges:
                    if edge is not None and edge.node not in smart.visited:
                        smart.visited.add(edge.node)
                        stack.append(edge.node)
        return found

    def _discover(self, state: PassState, recvs: Sequence[RecvNode], done: Any) -> None:
        """DISCOVER each recv's send; ``done(error, reached)`` once all are answered."""
        if not recvs:
            done(None, set())
            return
        lock = threading.Lock()
        pending = {"n": len(recvs), "error": None, "reached": set()}

        def acked(src: int, reply: dict[str, Any], _arrays: Sequence[Any]) -> None:
            state.touch()
            with lock:
                pending["n"] -= 1
                pending["reached"] |= {src} | {r for r in reply.get("reached", ()) if isinstance(r, int)}
                if reply.get("error") and pending["error"] is None:
                    pending["error"] = str(reply["error"])
                last = pending["n"] == 0
            if last:
                done(pending["error"], pending["reached"])

        body = {"ctx": state.ctx.context_id, "pass": state.pass_id, "root": state.root, "retain": state.retain_graph}
        for recv in recvs:
            self.engine.request(recv.peer, "DISCOVER", {**body, "msg": recv.autograd_message_id}, acked)

    def ensure_started(self, state: PassState) -> None:
        """Count dependencies from the marked sends (once per pass on this worker)."""
        smart = self._smart(state)
        with smart.lock:
            if smart.started:
                return
            smart.started = True
        state.task.add_roots(self.marked_sends(state))

    # --- root -----------------------------------------------------------------------------------

    def start_root(self, state: PassState, completion: Completion) -> None:
        engine = self.engine
        smart = self._smart(state)
        recvs = self._walk(smart, [edge.node for edge in state.root_edges if edge is not None])

        def discovered(error: str | None, reached: set[int]) -> None:
            if error is not None:
                engine.fail_pass(state, error, reached, lambda: completion.set_done(AutogradError(error)))
                return
            with smart.lock:
                smart.reached |= reached
            others = sorted(reached - {engine.rank})
            for dst in others:
                try:
                    engine.send(dst, "START", {"ctx": state.ctx.context_id, "pass": state.pass_id})
                except Exception as exc:  # noqa: BLE001 - a lost worker fails the pass
                    message = f"cannot reach worker {engine.messenger.worker_name(dst)!r} to start the pass: {exc}"
                    engine.fail_pass(state, message, reached, lambda: completion.set_done(AutogradError(message)))
                    return
            self.ensure_started(state)

            def root_done(run_error: str | None, participants: set[int]) -> None:
                if run_error is not None:
                    engine.fail_pass(state, run_error, participants | reached,
                                     lambda: completion.set_done(AutogradError(run_error)))
                    return
                engine.end_pass(state, participants | reached, completion, among=self.marked_sends)

            engine.run_activation(Activation(state, root_done))

        self._discover(state, recvs, discovered)

    # --- handlers -------------------------------------------------------------------------------

    def _on_discover(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        engine = self.engine
        try:
            ctx = engine.contexts.get(body["ctx"])
            state = engine.pass_state(ctx, body["pass"], body["root"], bool(body["retain"]), "smart")
            send = ctx.send_functions.get(body["msg"])
            if send is None:
                raise AutogradError(
                    f"no send function with autograd_message_id {body['msg']:#x} in autograd context {ctx.context_id}")
        except AutogradError as exc:
            engine.reply(src, "DISCOVER_ACK", body, {"error": engine.node_error(exc), "reached": [engine.rank]})
            return
        state.touch()
        smart = self._smart(state)
        with smart.lock:
            first = send.autograd_message_id not in smart.marked
            smart.marked.add(send.autograd_message_id)
        if not first:
            engine.reply(src, "DISCOVER_ACK", body, {"error": None, "reached": [engine.rank]})
            return
        recvs = self._walk(smart, [e.node for e in send.next_edges if e is not None])

        def done(error: str | None, reached: set[int]) -> None:
            with state.lock:
                state.participants |= reached - {engine.rank}
            engine.reply(src, "DISCOVER_ACK", body, {"error": error, "reached": sorted(reached | {engine.rank})})

        self._discover(state, recvs, done)

    def _on_start(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        engine = self.engine
        try:
            ctx = engine.contexts.get(body["ctx"])
            with ctx.lock:
                state = ctx.passes.get(body["pass"])
        except AutogradError:
            return
        if state is not None:
            self.ensure_started(state)

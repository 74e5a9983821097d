"""SMART mode: find the send nodes that take part in a pass while it runs.

1. *Discovery.* The root walks its local graph from the roots; for every recv node it reaches it
   sends DISCOVER(ctx, pass, msg) to the worker holding the matching send node. That worker
   *marks* the send as taking part and, the first time, walks its graph from it (skipping what
   this pass already walked there), sends DISCOVER for every new recv node it reaches, and
   reports to the root (DISCOVER_ACK, naming the DISCOVERs it sent). Each send is walked from at
   most once per pass, so cycles across workers end. Discovery is over when every DISCOVER has
   reported (``dist_root.Tracker``).
2. *Execution runs meanwhile.* A node's dependency count is final once every *source* that
   reaches it is known to take part or not; a source is the roots (on the root) or a send node
   of the context. The nodes that a single source reaches depend on it alone, so they need no
   discovery: the root runs from the roots at once, and a worker counts what a send reaches when
   its GRAD arrives (a GRAD means that send takes part) and runs it. The nodes that several
   sources reach are *held* until discovery is over.
3. *End of discovery.* The root counts from its marked sends, releases its held nodes and runs
   them, and sends START to every other worker reached. A worker that holds nodes does the same on
   START and reports that run to the root, which waits for it; to the others START only says that
   their marks are final, so they close the pass once every marked send got its gradient.
Nothing ever waits for a send that was not marked, so RPC results the roots do not use are fine.
See ``docs/smart-mode.md``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from zgrad.engine.dist_pass import Activation, PassState
from zgrad.engine.dist_root import DISCOVERY, WORK
from zgrad.engine.graph import Node
from zgrad.engine.send_recv import RecvNode, SendNode
from zgrad.errors import AutogradError

if TYPE_CHECKING:
    from zgrad.engine.dist_engine import DistEngine

__all__ = ["SmartDiscovery", "SmartPassState", "shared_nodes"]


def shared_nodes(sources: Sequence[Node]) -> set[Node]:
    """The nodes that more than one of ``sources`` reaches (each node is walked at most twice)."""
    owner: dict[Node, int] = {}  # node -> the first source that reached it
    shared: set[Node] = set()
    for i, source in enumerate(sources):
        stack: list[tuple[Node, bool]] = [(source, False)]
        while stack:
            node, below_shared = stack.pop()
            for edge in node.next_edges:
                if edge is None:
                    continue
                child = edge.node
                first_seen = child not in owner
                if first_seen:
                    owner[child] = i
                if below_shared or owner[child] != i:
                    if child not in shared:
                        shared.add(child)
                        stack.append((child, True))
                elif first_seen:
                    stack.append((child, False))
    return shared


class SmartPassState:
    """Discovery state of one pass on one worker."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.visited: set[Node] = set()
        self.discovered_recvs: set[int] = set()


class SmartDiscovery:
    """The SMART-mode half of a :class:`DistEngine`."""

    def __init__(self, engine: "DistEngine") -> None:
        self.engine = engine
        self.handlers = {"DISCOVER": self._on_discover, "START": self._on_start}

    def message_count(self) -> int:
        engine = self.engine
        return sum(engine.sent[k] for k in ("DISCOVER", "DISCOVER_ACK", "START"))

    def prepare(self, state: PassState, sources: Sequence[Node]) -> None:
        """Hold the nodes that several sources reach (once, when the pass is created here)."""
        state.smart = SmartPassState()
        held = shared_nodes(list(sources) + state.ctx.sends())
        if held:
            state.task.hold(held)
            state.held = True

    def marked_sends(self, state: PassState) -> list[SendNode]:
        with state.lock:
            marked = set(state.marked)
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

    def _discover(self, state: PassState, task_id: int, starts: Iterable[Node | None]) -> None:
        """Walk from ``starts``, DISCOVER the send of every new recv node, report the task to the root.

        A DISCOVER for the root itself rides in the report, which goes there at the same moment.
        """
        engine = self.engine
        children: list[list[int]] = []
        for_root: list[list[int]] = []
        error = None
        for recv in self._walk(state.smart, starts):
            msg = recv.autograd_message_id
            if recv.peer == state.root != engine.rank:
                child = engine.new_task_id()
                for_root.append([child, msg])
            else:
                try:
                    child = engine.start_task(state, recv.peer, "DISCOVER", {"msg": msg, "retain": state.retain_graph})
                except AutogradError as exc:
                    error = str(exc)
                    break
            children.append([child, recv.peer, msg])
        self._report(state.root, state.ctx.context_id, state.pass_id, task_id, children, error, state.held, for_root)

    def _report(self, root: int, context_id: int, pass_id: int, task_id: int, children: list, error: str | None,
                held: bool, for_root: list | None = None) -> None:
        body = {"ctx": context_id, "pass": pass_id, "task": task_id, "children": children, "error": error, "held": held}
        if for_root:
            body["discover"] = for_root
        self.engine.report(root, "DISCOVER_ACK", body)

    def discover_here(self, state: PassState, src: int, for_root: list[list[int]]) -> None:
        """Run the DISCOVERs for this (root) worker that came inside a DISCOVER_ACK from ``src``."""
        for task_id, msg in for_root:
            self._on_discover(src, {"ctx": state.ctx.context_id, "pass": state.pass_id, "msg": msg, "root": state.root,
                                    "retain": state.retain_graph, "task": task_id}, ())

    def _release(self, state: PassState) -> None:
        """The marks are final: count from the marked sends, then let the held nodes run."""
        state.task.add_roots(self.marked_sends(state))
        state.task.release()

    # --- root -----------------------------------------------------------------------------------

    def start_root(self, state: PassState) -> None:
        """Start discovery from the roots (the root's run starts right after, without waiting)."""
        walk = self.engine.new_task_id()
        state.tracker.announce(DISCOVERY, walk, self.engine.rank)
        self._discover(state, walk, [edge.node for edge in state.root_edges if edge is not None])

    def discovered(self, state: PassState) -> None:
        """Discovery of a pass rooted here is over: START the other workers that hold nodes (a task
        the root waits for), then run what was held here."""
        engine, tracker = self.engine, state.tracker
        with tracker.lock:
            held, release = sorted(tracker.held - {engine.rank}), tracker.release_task
        for dst in held:
            task_id = engine.new_task_id()
            tracker.announce(WORK, task_id, dst)
            try:
                engine.send(dst, "START", {"ctx": state.ctx.context_id, "pass": state.pass_id, "task": task_id})
            except Exception as exc:  # noqa: BLE001 - a lost worker fails the pass
                engine.roots.fail(state, f"cannot reach worker {engine.messenger.worker_name(dst)!r} to start the pass: {exc}")
                return
        activation = Activation(state, release)
        self._release(state)
        engine.run_activation(activation)

    def finished(self, state: PassState) -> None:
        """A pass rooted here succeeded: START (as clean-up) the workers reached that had no held
        nodes, so they close it."""
        engine, tracker = self.engine, state.tracker
        with tracker.lock:
            others = sorted(tracker.reached - tracker.held - {engine.rank})
        for dst in others:
            try:
                engine.send(dst, "START", {"ctx": state.ctx.context_id, "pass": state.pass_id})
            except Exception:  # noqa: BLE001 - it is gone; its state went with it
                pass

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
            self._report(body["root"], body["ctx"], body["pass"], body["task"], [], engine.node_error(exc), False)
            return
        state.touch()
        starts = [e.node for e in send.next_edges if e is not None] if state.mark(send.autograd_message_id) else []
        self._discover(state, body["task"], starts)

    def _on_start(self, src: int, body: dict[str, Any], _arrays: Sequence[Any]) -> None:
        engine = self.engine
        task_id = body.get("task")
        try:
            ctx = engine.contexts.get(body["ctx"])
            with ctx.lock:
                state = ctx.passes.get(body["pass"])
        except AutogradError:
            state = None
        if state is None:  # failed meanwhile; the root only needs its answer
            if task_id is not None:
                engine.report(src, "GRAD_ACK", {"ctx": body["ctx"], "pass": body["pass"], "task": task_id,
                                                "children": [], "error": None, "open": False})
            return
        state.wait_ready()
        if task_id is None:
            if state.finalize_marks():
                engine.forget_pass(state)
            return
        activation = Activation(state, task_id)
        state.finalize_marks()  # cannot close it: the activation runs
        self._release(state)
        engine.run_activation(activation)

"""SMART mode's discovery on one worker: which send functions take part in a pass, found while it runs.

1. *Discovery.* The root walks its local graph from the roots; for every recv node it reaches it
   sends DISCOVER(msg) to the worker holding the matching send node. That worker *marks* the send
   as taking part and, the first time, walks its graph from it (skipping what this pass already
   walked there), sends DISCOVER for every new recv node it reaches, and reports to the root
   (DISCOVER_ACK, naming the DISCOVERs it sent). Each send is walked from at most once per pass,
   so cycles across workers end. Discovery is over when every DISCOVER has reported
   (``root.Tracker``).
2. *Execution runs meanwhile.* A node's dependency count is final once every *source* that
   reaches it is known to take part or not; a source is the roots (on the root) or a send node
   of the context. The nodes that a single source reaches depend on it alone, so they need no
   discovery: the root runs from the roots at once, and a worker counts what a send reaches when
   its GRAD arrives (a GRAD means that send takes part) and runs it. The nodes that several
   sources reach are *held* (:func:`shared_nodes`) until discovery is over.
3. *End of discovery.* The root counts from its marked sends, releases its held nodes and runs
   them, and sends START to every other worker reached. A worker that holds nodes does the same on
   START and reports that run to the root, which waits for it; to the others START only says that
   their marks are final, so they close the pass once every marked send got its gradient.
Nothing ever waits for a send that was not marked, so RPC results the roots do not use are fine.
See ``docs/smart-mode.md``.
"""

from __future__ import annotations

import threading
from typing import Iterable, Sequence

from zgrad.engine.graph import Node
from zgrad.engine.send_recv import RecvNode, SendNode

__all__ = ["Discovery", "shared_nodes"]


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


class Discovery:
    """SMART: the send functions of a pass that take part on this worker (the *marked* ones, final
    once discovery is over) and what discovery walked here. Thread-safe.

    It answers, for the pass's closing, which sends must get their gradient here; ``held`` says
    that some nodes wait for the end of discovery here.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.visited: set[Node] = set()
        self._discovered_recvs: set[int] = set()
        self._marked: set[int] = set()
        self.final = False
        self.held = False

    def mark(self, send_id: int) -> bool:
        """Send ``send_id`` takes part; True the first time."""
        with self._lock:
            first = send_id not in self._marked
            self._marked.add(send_id)
            return first

    def finalize(self) -> None:
        """Discovery is over: the marks are final."""
        with self._lock:
            self.final = True

    def marked(self) -> set[int]:
        """A snapshot of the marked send ids."""
        with self._lock:
            return set(self._marked)

    def takes_part(self, send: SendNode) -> bool:
        with self._lock:
            return send.autograd_message_id in self._marked

    def all_fed(self, executed: set[int], context_sends: int) -> bool:
        """Every marked send got its gradient, and the marks are final."""
        with self._lock:
            return self.final and self._marked <= executed

    def walk(self, starts: Iterable[Node | None]) -> list[RecvNode]:
        """Recv nodes reachable from ``starts`` not yet walked in this pass on this worker."""
        found: list[RecvNode] = []
        with self._lock:
            stack = [n for n in starts if n is not None and n not in self.visited]
            self.visited.update(stack)
            while stack:
                node = stack.pop()
                if isinstance(node, RecvNode) and node.autograd_message_id not in self._discovered_recvs:
                    self._discovered_recvs.add(node.autograd_message_id)
                    found.append(node)
                for edge in node.next_edges:
                    if edge is not None and edge.node not in self.visited:
                        self.visited.add(edge.node)
                        stack.append(edge.node)
        return found

    def reached(self, node: Node) -> bool:
        """``node`` takes part in the pass as far as discovery found: walked, or a marked send."""
        with self._lock:
            return node in self.visited or (isinstance(node, SendNode) and node.autograd_message_id in self._marked)

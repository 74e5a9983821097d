"""A graph task: the state of one backward pass over a local graph, and its execution loop.

The task counts, for every node reachable from its roots, how many gradients the node will
receive; a node becomes ready when all of them have arrived (summed in its input buffer).
Roots are the :class:`GraphRoot` of a local ``backward`` and, for distributed passes, extra
roots such as send functions whose gradients arrive later through :meth:`GraphTask.feed`.

Thread-safety: counters, buffers and the ready queue are guarded by one lock; node bodies run
outside it, so several threads may feed and run the same task.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable, Iterable, Sequence

from zgrad.engine.graph import AccumulateGrad, Edge, GraphRoot, Node
from zgrad.engine.validate import validate_gradients
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch

__all__ = ["GraphTask", "LeafSink", "run_backward"]

LeafSink = Callable[[Any, Any], None]
"""``sink(variable, grad)``: where leaf gradients go instead of ``.grad`` (distributed contexts)."""


class GraphTask:
    """One backward pass over the local graph.

    Args:
        retain_graph: keep saved forward values so the graph can be run again.
        leaf_sink: if given, leaf gradients are handed to it instead of accumulating into
            ``.grad`` (leaf hooks still run first).
    """

    def __init__(self, *, retain_graph: bool = False, leaf_sink: LeafSink | None = None) -> None:
        self.retain_graph = retain_graph
        self.leaf_sink = leaf_sink
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._seen: set[Node] = set()
        self._dependencies: dict[Node, int] = {}
        self._buffers: dict[Node, list[Any]] = {}
        self._ready: deque[tuple[Node, list[Any]]] = deque()
        self._running = 0
        self.nodes_run = 0

    # --- set-up ---------------------------------------------------------------------------------

    def add_roots(self, nodes: Iterable[Node]) -> None:
        """Count dependencies of everything reachable from ``nodes`` (idempotent per node)."""
        with self._lock:
            stack = [n for n in nodes if n not in self._seen]
            self._seen.update(stack)
            for n in stack:
                self._dependencies.setdefault(n, 0)
            while stack:
                node = stack.pop()
                for edge in node.next_edges:
                    if edge is None:
                        continue
                    child = edge.node
                    self._dependencies[child] = self._dependencies.get(child, 0) + 1
                    if child not in self._seen:
                        self._seen.add(child)
                        stack.append(child)

    def start(self, root_edges: Sequence[Edge], root_grads: Sequence[Any]) -> None:
        """Add a :class:`GraphRoot` feeding ``root_grads`` along ``root_edges`` and make it ready."""
        root = GraphRoot(root_edges, root_grads)
        self.add_roots([root])
        with self._lock:
            self._ready.append((root, []))

    def feed(self, node: Node, grads: Sequence[Any]) -> None:
        """Hand gradients that arrived from elsewhere (the network) to root ``node`` and make it ready.

        Raises:
            AutogradError: ``node`` is not a root of this task, or the gradients do not match its
                input metadata.
        """
        if node not in self._seen:
            raise AutogradError(f"{node.name} is not part of this backward pass")
        grads = validate_gradients(node, [Edge(node, i) for i in range(len(node.input_metadata))], grads)
        with self._lock:
            self._ready.append((node, grads))

    # --- state ----------------------------------------------------------------------------------

    def is_idle(self) -> bool:
        """Nothing is ready and nothing is running: only gradients from elsewhere could add work."""
        with self._lock:
            return not self._ready and self._running == 0

    def waiting_nodes(self) -> list[Node]:
        """Nodes that are still waiting for some of their gradients."""
        with self._lock:
            return [n for n, d in self._dependencies.items() if d > 0]

    # --- execution ------------------------------------------------------------------------------

    def run(self) -> None:
        """Run ready nodes in the calling thread until none is ready.

        Raises:
            BaseException: whatever a node raised; the task keeps it in ``error`` and stops.
        """
        while True:
            with self._lock:
                if self.error is not None:
                    raise self.error
                if not self._ready:
                    return
                node, inputs = self._ready.popleft()
                self._running += 1
            try:
                outputs = self._execute(node, inputs)
                self._route(node, outputs)
            except BaseException as exc:
                with self._lock:
                    self._running -= 1
                    if self.error is None:
                        self.error = exc
                raise
            with self._lock:
                self._running -= 1
                self.nodes_run += 1

    def _execute(self, node: Node, inputs: list[Any]) -> Sequence[Any]:
        if not isinstance(node, GraphRoot):
            if all(g is None for g in inputs) and not node.always_run:
                return [None] * len(node.next_edges)
            inputs = [m.zeros() if g is None else g for g, m in zip(inputs, node.input_metadata)]
            for index, hooks in node.pre_hooks.items():
                for hook in hooks:
                    result = hook(inputs[index])
                    if result is not None:
                        inputs[index] = result
        if isinstance(node, AccumulateGrad) and self.leaf_sink is not None:
            self.leaf_sink(node.variable, inputs[0])
            return ()
        outputs = node.apply(inputs)
        if not self.retain_graph:
            node.release_variables()
        return validate_gradients(node, node.next_edges, outputs)

    def _route(self, node: Node, outputs: Sequence[Any]) -> None:
        with self._lock:
            for edge, grad in zip(node.next_edges, outputs):
                if edge is None:
                    continue
                child = edge.node
                buffer = self._buffers.get(child)
                if buffer is None:
                    buffer = self._buffers[child] = [None] * len(child.input_metadata)
                if grad is not None:
                    held = buffer[edge.input_nr]
                    buffer[edge.input_nr] = grad if held is None else dispatch.binary("add", held, grad)
                remaining = self._dependencies[child] - 1
                self._dependencies[child] = remaining
                if remaining == 0:
                    self._ready.append((child, self._buffers.pop(child)))


def run_backward(root_edges: Sequence[Edge], root_grads: Sequence[Any], *, retain_graph: bool = False,
                 leaf_sink: LeafSink | None = None) -> GraphTask:
    """Run a complete local backward pass in the calling thread and return its finished task.

    Blocks until done. Raises whatever a node raised.
    """
    task = GraphTask(retain_graph=retain_graph, leaf_sink=leaf_sink)
    task.start(root_edges, root_grads)
    task.run()
    return task

"""A graph task: the state of one backward pass over a local graph, and its execution loop.

The task counts, for every node reachable from its roots, how many gradients the node will
receive; a node becomes ready when all of them have arrived (summed in its input buffer).
Roots are the :class:`GraphRoot` of a local ``backward`` and, for distributed passes, extra
roots such as send functions whose gradients arrive later through :meth:`GraphTask.feed`. Roots
may be added while the task runs, as long as no node they reach has run yet; nodes whose count
is not final yet can be *held* (SMART mode: see :meth:`GraphTask.hold`).

Thread-safety: counters, buffers and the ready queue are guarded by one lock; node bodies run
outside it, so several threads may feed and run the same task. An ``observer`` (a traced
distributed pass) hears of every node run with its start and end (``time.perf_counter_ns``).

Hooks for code that rides on a backward pass (DDP's reducer): a leaf's ``post_hooks`` run once
its gradient has been accumulated; while a thread runs a task's nodes, :func:`current_graph_task`
returns that task, whose :meth:`GraphTask.queue_callback` schedules work for the end of the run
(PyTorch's ``queue_callback``) and whose :meth:`GraphTask.leaf_gradient` /
:meth:`GraphTask.set_leaf_gradient` read and replace a leaf's gradient wherever the pass puts it
(``.grad``, or a distributed autograd context).

Leaf gradients handed to a sink that keeps them (``sink_keeps=True``, distributed contexts) are
copied only when something else may still hold them or their memory: as PyTorch's
AccumulateGrad does with a tensor's use count, the task looks at the array's reference count
(measured against a calibrated baseline, like ``zgrad/transport/pool.py``) and at its ``base``
chain. A gradient a node just computed, or one that arrived in its own receive buffer, is kept
as is; a 4 MB gradient copy on fresh pages costs up to a millisecond. The same test lets a node's
input buffer add a second gradient into the first in place (a residual connection's two
gradients) instead of into a new array.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from typing import Any, Callable, Iterable, Protocol, Sequence

import numpy as np

from zgrad.engine.anomaly_mode import ANOMALY, report_failure, run_node
from zgrad.engine.graph import AccumulateGrad, Edge, GraphRoot, Node
from zgrad.engine.validate import GraphGradients, validate_gradients
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch
from zgrad.kernels.host_memory import tune_for_training

__all__ = ["GraphTask", "LeafSink", "LeafStore", "current_graph_task", "run_backward"]

LeafSink = Callable[[Any, Any], None]
"""``sink(variable, grad)``: where leaf gradients go instead of ``.grad`` (distributed contexts)."""


class LeafStore(Protocol):
    """Where a task with a leaf sink keeps leaf gradients (a distributed autograd context)."""

    def leaf_gradient(self, variable: Any) -> Any:
        """The gradient array kept for ``variable``, or None."""

    def set_leaf_gradient(self, variable: Any, grad: Any) -> None:
        """Replace the gradient kept for ``variable`` by the array ``grad``."""


class _Current(threading.local):
    task: "GraphTask | None" = None


_current = _Current()


def current_graph_task() -> "GraphTask | None":
    """The graph task whose nodes (or final callbacks) the calling thread is running, else None."""
    return _current.task


def _reference_counts(array: Any) -> tuple[list[int], Any]:
    """Reference counts of ``array`` and of every ndarray in its ``base`` chain, as seen from here,
    and the chain's last ``base`` (None, or the buffer the memory belongs to; None for a device array)."""
    counts = [sys.getrefcount(array)]
    base = getattr(array, "base", None)
    while isinstance(base, np.ndarray):
        counts.append(sys.getrefcount(base))
        base = base.base
    return counts, base


def _measure(grad: np.ndarray) -> tuple[int, int]:
    # Looks at ``grad`` exactly as `_private` does (one frame, then `_reference_counts`).
    counts, _ = _reference_counts(grad)
    return counts[0], counts[1]


def _baseline() -> tuple[int, int]:
    # Measured, not hard-coded: an array held by one local name of its caller (as ``grad`` in
    # GraphTask._execute), viewing a base that only it holds.
    grad = np.empty(4).reshape(2, 2)
    return _measure(grad)


_ARRAY_REFS, _BASE_REFS = _baseline()


def _private(grad: Any) -> bool:
    """Only the caller's one name holds ``grad``, nothing else views its memory (it owns it, or
    it is a receive buffer's), and it may be written: a leaf sink may keep it."""
    if not isinstance(grad, np.ndarray):  # a device array: the backend knows what views its memory
        counts, _ = _reference_counts(grad)
        return counts[0] <= _ARRAY_REFS and dispatch.is_sole_view(grad)
    if not (grad.flags.writeable and grad.flags.c_contiguous):
        return False
    counts, base = _reference_counts(grad)
    return (counts[0] <= _ARRAY_REFS and all(c <= _BASE_REFS for c in counts[1:])
            and (base is None or (isinstance(base, memoryview) and isinstance(base.obj, bytearray))))


def _sum(held: Any, grad: Any, owned: bool) -> Any:
    """``held + grad``: added into ``held`` in place where the pass ``owned`` it (nothing else
    holds or views it: PyTorch's input buffer does the same) and the sum has its layout, else new."""
    if owned and type(held) is type(grad) and held.shape == grad.shape and held.dtype == grad.dtype:
        return dispatch.add_inplace(held, grad)
    return dispatch.binary("add", held, grad)


def _has_missing(inputs: list[Any]) -> bool:
    # A function of its own, so no name of the caller's frame is left holding a gradient.
    for g in inputs:
        if g is None:
            return True
    return False


class GraphTask:
    """One backward pass over the local graph.

    Args:
        retain_graph: keep saved forward values so the graph can be run again.
        leaf_sink: if given, leaf gradients are handed to it instead of accumulating into
            ``.grad`` (leaf hooks still run first).
        sink_keeps: the sink may keep and modify the arrays it gets: the task hands it a copy of a
            gradient unless nothing else holds that gradient (see the module docstring).
        leaf_store: where the sink keeps the gradients, for :meth:`leaf_gradient` (with a sink).
        graph_gradients: record the pass itself (``create_graph=True``): gradients are tensors,
            handled by this arithmetic, and nodes run through its ``apply``.
    """

    def __init__(self, *, retain_graph: bool = False, leaf_sink: LeafSink | None = None, sink_keeps: bool = False,
                 leaf_store: LeafStore | None = None, graph_gradients: GraphGradients | None = None) -> None:
        self.retain_graph = retain_graph
        self.graph_gradients = graph_gradients
        self.leaf_sink = leaf_sink
        self.sink_keeps = sink_keeps
        self.leaf_store = leaf_store
        self._final_callbacks: list[Callable[[], None]] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._seen: set[Node] = set()
        self._dependencies: dict[Node, int] = {}
        self._buffers: dict[Node, list[Any]] = {}
        self._ready: deque[tuple[Node, list[Any]]] = deque()
        self._held: set[Node] = set()
        self._running = 0
        self._wanted: set[Node] | None = None  # with targets: the nodes gradients are routed to
        self._stops: set[Node] = set()  # targets that capture their gradients and go no further
        self._boundaries: frozenset[Node] = frozenset()  # nodes whose incoming gradients are kept, not run
        self.captured: dict[tuple[Node, int], Any] = {}  # (boundary node, input_nr) -> summed gradient
        self.nodes_run = 0
        self.observer: Callable[[Node, int, int], None] | None = None  # hears of every node run (traces)

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

    def start(self, root_edges: Sequence[Edge], root_grads: Sequence[Any]) -> GraphRoot:
        """Add a :class:`GraphRoot` feeding ``root_grads`` along ``root_edges``, make it ready, return it."""
        root = GraphRoot(root_edges, root_grads)
        self.add_roots([root])
        with self._lock:
            self._ready.append((root, []))
        return root

    def restrict_to(self, targets: Iterable[Node], run_targets: bool = False) -> None:
        """Run only what leads to ``targets`` (PyTorch's exec_info, for ``autograd.grad`` and
        ``backward(inputs=...)``): gradients reach only nodes with a path to a target. A target
        runs its per-input hooks (where ``autograd.grad`` captures its gradient) and stops there,
        unless it leads on to another target or ``run_targets`` (then it runs, as
        ``backward(inputs=...)`` runs it in PyTorch: a leaf's accumulator accumulates). Call after
        the roots are added."""
        with self._lock:
            parents: dict[Node, list[Node]] = {}
            for node in self._seen:
                for edge in node.next_edges:
                    if edge is not None:
                        parents.setdefault(edge.node, []).append(node)
            wanted = {t for t in targets if t in self._seen}
            stack = list(wanted)
            while stack:
                for parent in parents.get(stack.pop(), ()):
                    if parent not in wanted:
                        wanted.add(parent)
                        stack.append(parent)
            self._wanted = wanted
            self._stops = set() if run_targets else {
                n for n in wanted if not any(e is not None and e.node in wanted for e in n.next_edges)}

    def stop_at(self, boundaries: Iterable[Node]) -> None:
        """Run only what leads to ``boundaries`` and run none of them: every gradient sent to one is
        added into :attr:`captured` under (node, input_nr), raw (no hook of the node runs). For a
        pass nested in another that runs those nodes itself (a checkpoint's recomputation). Call
        after the roots are added."""
        self.restrict_to(boundaries, run_targets=True)
        self._boundaries = frozenset(boundaries)

    @property
    def restricted(self) -> bool:
        """Whether this pass runs only what leads to some targets (``autograd.grad``,
        ``backward(inputs=...)``): see :meth:`restrict_to`."""
        return self._wanted is not None

    def hold(self, nodes: Iterable[Node]) -> None:
        """Keep ``nodes`` from running until :meth:`release`, whatever reaches them meanwhile (one
        extra dependency each): for nodes whose dependency count is not final yet."""
        with self._lock:
            for node in nodes:
                if node not in self._held:
                    self._held.add(node)
                    self._dependencies[node] = self._dependencies.get(node, 0) + 1

    def release(self) -> None:
        """Drop every hold: a held node whose gradients have all arrived becomes ready; one that no
        root reaches is not part of the pass and is forgotten."""
        with self._lock:
            for node in self._held:
                if node not in self._seen:
                    del self._dependencies[node]
                    continue
                remaining = self._dependencies[node] - 1
                self._dependencies[node] = remaining
                if remaining == 0:
                    self._ready.append((node, self._buffers.pop(node, None) or [None] * len(node.input_metadata)))
            self._held.clear()

    def feed(self, node: Node, grads: Sequence[Any]) -> None:
        """Hand gradients that arrived from elsewhere (the network) to root ``node`` and make it ready.

        Raises:
            AutogradError: ``node`` is not a root of this task, or the gradients do not match its
                input metadata.
        """
        if node not in self._seen:
            raise AutogradError(f"{node.name} is not part of this backward pass")
        # Gradients from the network arrive in host memory: each goes to the device its input expects.
        moved = [g is not None and meta.device_type != "cpu" and dispatch.device_type_of(g) != meta.device_type
                 for g, meta in zip(grads, node.input_metadata)]
        grads = [dispatch.to_device(g, meta.device_type) if move else g
                 for g, meta, move in zip(grads, node.input_metadata, moved)]
        for device_type in {meta.device_type for meta, move in zip(node.input_metadata, moved) if move}:
            dispatch.backend(device_type).synchronize()  # copied on this thread's stream; the engine's thread reads them
        grads = validate_gradients(node, [Edge(node, i) for i in range(len(node.input_metadata))], grads)
        with self._lock:
            self._ready.append((node, grads))

    # --- state ----------------------------------------------------------------------------------

    def is_idle(self) -> bool:
        """Nothing is ready and nothing is running: only gradients from elsewhere could add work."""
        with self._lock:
            return not self._ready and self._running == 0

    def running_last(self) -> bool:
        """Nothing is ready and only the calling node runs: when it returns, the run ends (unless
        gradients come from elsewhere meanwhile)."""
        with self._lock:
            return not self._ready and self._running == 1

    def waiting_nodes(self) -> list[Node]:
        """Nodes that are still waiting for some of their gradients (or are held)."""
        with self._lock:
            return [n for n, d in self._dependencies.items() if d > 0 and n in self._seen]

    # --- execution ------------------------------------------------------------------------------

    def run(self) -> None:
        """Run ready nodes in the calling thread until none is ready.

        Raises:
            BaseException: whatever a node raised; the task keeps it in ``error`` and stops.
        """
        previous, _current.task = _current.task, self
        try:
            self._run()
        finally:
            _current.task = previous

    def _run(self) -> None:
        lock = self._lock
        node: Node | None = None
        inputs: list[Any] | None = None
        outputs: Sequence[Any] | None = None
        while True:
            with lock:  # one acquisition per node: route the outputs of the last one, take the next
                if node is not None:
                    try:
                        self._route(node, outputs)
                    except BaseException as exc:  # a failed accumulation fails the task like a failed node
                        if self.error is None:
                            self.error = exc
                        raise
                    finally:
                        outputs = None  # no name keeps them: a gradient routed to a leaf is held by its buffer only
                        self._running -= 1
                        self.nodes_run += 1
                if self.error is not None:
                    raise self.error
                if not self._ready:
                    return
                node, inputs = self._ready.popleft()
                self._running += 1
            try:
                observer = self.observer
                started = 0 if observer is None else time.perf_counter_ns()
                if ANOMALY.enabled and type(node) is not GraphRoot:
                    outputs = run_node(self._execute, node, inputs, self.graph_gradients)
                else:
                    outputs = self._execute(node, inputs)
                inputs = None
                if observer is not None:
                    observer(node, started, time.perf_counter_ns())
            except BaseException as exc:
                if ANOMALY.enabled:
                    report_failure(node)
                with lock:
                    self._running -= 1
                    if self.error is None:
                        self.error = exc
                raise

    def _execute(self, node: Node, inputs: list[Any]) -> Sequence[Any]:
        graph = self.graph_gradients
        missing: Sequence[bool] = ()  # where no gradient arrived, for the node hooks (which see None there)
        if type(node) is not GraphRoot:
            if node.node_prehooks or node.node_posthooks:
                missing = [g is None for g in inputs]
            if _has_missing(inputs):
                if not node.always_run and all(g is None for g in inputs):
                    return [None] * len(node.next_edges)
                if node.materialize_grads:
                    inputs[:] = [g if g is not None else m.zeros() if graph is None else graph.zeros(*m)
                                 for g, m in zip(inputs, node.input_metadata)]
            if node.pre_hooks:
                for index, hooks in node.pre_hooks.items():
                    for hook in hooks:
                        if inputs[index] is None:  # not materialized: nothing to hook
                            break
                        result = hook(inputs[index])
                        if result is not None:
                            inputs[index] = result
            if self._stops and node in self._stops:
                return ()
            if node.node_prehooks:
                seen = [None if gone else g for g, gone in zip(inputs, missing)]
                for hook in list(node.node_prehooks.values()):
                    result = hook(seen)
                    if result is not None:
                        seen = list(result)
                inputs[:] = [g if g is not None or not node.materialize_grads else m.zeros() if graph is None
                             else graph.zeros(*m) for g, m in zip(seen, node.input_metadata)]
        if type(node) is AccumulateGrad:
            incoming = (inputs[0],) if node.node_posthooks else ()
            if self.leaf_sink is not None:
                grad = inputs.pop()  # the caller's list is this one: now only ``grad`` holds it
                if self.sink_keeps and not _private(grad):
                    grad = dispatch.cast(grad, grad.dtype)
                self.leaf_sink(node.variable, grad)
            elif graph is not None:
                grad = inputs.pop()
                graph.accumulate(node.variable, grad)
            else:
                grad = inputs.pop()
                owned = _private(grad)  # a statement of its own: as an argument, grad would be on the stack twice
                node.accumulate(grad, owned)
            del grad
            for hook in node.post_hooks:
                hook(node.variable)
            if node.node_posthooks:
                for hook in list(node.node_posthooks.values()):
                    hook((), incoming)
            return ()
        incoming = tuple(None if gone else g for g, gone in zip(inputs, missing)) if node.node_posthooks else ()
        outputs = node.apply(inputs) if graph is None else graph.apply(node, inputs)
        if not self.retain_graph:
            node.release_variables()
        outputs = validate_gradients(node, node.next_edges, outputs, graph)
        if node.node_posthooks:  # after the check, as PyTorch's: they see gradients summed to the inputs' shapes
            for hook in list(node.node_posthooks.values()):  # (and may not change a size or a type)
                result = hook(outputs, incoming)
                if result is not None:
                    outputs = result
        return outputs

    # --- riders: final callbacks and leaf gradients ----------------------------------------------

    def queue_callback(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` once this task's run is over: when the thread that leaves the task
        idle (nothing ready, nothing running) returns from :meth:`run` and calls
        :meth:`run_final_callbacks`. Thread-safe."""
        with self._lock:
            self._final_callbacks.append(callback)

    def run_final_callbacks(self) -> None:
        """Run the queued callbacks in the calling thread, in order, if the task is idle (else the
        thread that makes it idle runs them). Blocks while they run.

        Raises:
            BaseException: what a callback raised (kept as the task's error; the rest are dropped).
        """
        with self._lock:
            if not self._final_callbacks or self._ready or self._running:
                return
            callbacks, self._final_callbacks = self._final_callbacks, []
        previous, _current.task = _current.task, self
        try:
            for callback in callbacks:
                callback()
        except BaseException as exc:
            with self._lock:
                if self.error is None:
                    self.error = exc
            raise
        finally:
            _current.task = previous

    def leaf_gradient(self, variable: Any) -> Any:
        """The gradient array this pass has for leaf ``variable`` so far (``.grad``'s, or the
        context's), or None."""
        if self.leaf_store is not None:
            return self.leaf_store.leaf_gradient(variable)
        grad = variable.grad
        return None if grad is None else grad._data

    def set_leaf_gradient(self, variable: Any, grad: Any) -> None:
        """Replace the gradient of leaf ``variable`` where this pass keeps it by array ``grad``
        (without a store: ``variable.grad`` becomes a tensor over ``grad``)."""
        if self.leaf_store is not None:
            self.leaf_store.set_leaf_gradient(variable, grad)
        else:
            variable._set_grad_array(grad)

    def _route(self, node: Node, outputs: Sequence[Any]) -> None:
        """Add ``outputs`` into the buffers of ``node``'s children; queue those now complete.
        Called with the lock held."""
        buffers, dependencies = self._buffers, self._dependencies
        graph = self.graph_gradients
        wanted = self._wanted
        for edge, grad in zip(node.next_edges, outputs):
            if edge is None or (wanted is not None and edge.node not in wanted):
                continue
            child = edge.node
            if child in self._boundaries:
                if grad is not None:
                    key = (child, edge.input_nr)
                    held = self.captured.get(key)
                    self.captured[key] = grad if held is None else graph.add(held, grad) if graph is not None \
                        else dispatch.binary("add", held, grad)
                continue
            buffer = buffers.get(child)
            if buffer is None:
                buffer = buffers[child] = [None] * len(child.input_metadata)
            if grad is not None:
                held = buffer[edge.input_nr]
                if held is None:
                    buffer[edge.input_nr] = grad
                elif graph is not None:
                    buffer[edge.input_nr] = graph.add(held, grad)
                else:
                    buffer[edge.input_nr] = None  # now only ``held`` holds it
                    owned = _private(held)  # a statement of its own, as in _execute
                    buffer[edge.input_nr] = _sum(held, grad, owned)
                    del held
            remaining = dependencies[child] - 1
            dependencies[child] = remaining
            if remaining == 0:
                self._ready.append((child, buffers.pop(child)))


local_pass_observer: Callable[[Node, int, int], None] | None = None
"""The observer of every local pass :func:`run_backward` runs (None: none); the profiler sets it."""


def run_backward(root_edges: Sequence[Edge], root_grads: Sequence[Any], *, retain_graph: bool = False,
                 leaf_sink: LeafSink | None = None, graph_gradients: GraphGradients | None = None,
                 targets: Iterable[Node] | None = None, run_targets: bool = False,
                 boundaries: Iterable[Node] | None = None) -> GraphTask:
    """Run a complete local backward pass in the calling thread and return its finished task
    (recording it, with tensor gradients, when ``graph_gradients`` is given: create_graph; only
    the nodes that lead to ``targets`` when given: :meth:`GraphTask.restrict_to`; up to
    ``boundaries``, whose gradients the task's ``captured`` holds: :meth:`GraphTask.stop_at`).

    Blocks until done, final callbacks included. Raises whatever a node or callback raised. The
    process's first pass tunes the host allocator for training (:func:`tune_for_training`).
    """
    tune_for_training()
    task = GraphTask(retain_graph=retain_graph, leaf_sink=leaf_sink, graph_gradients=graph_gradients)
    task.observer = local_pass_observer
    task.start(root_edges, root_grads)
    if targets is not None:
        task.restrict_to(targets, run_targets)
    if boundaries is not None:
        task.stop_at(boundaries)
    task.run()
    task.run_final_callbacks()
    return task

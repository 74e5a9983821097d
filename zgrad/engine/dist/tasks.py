"""This worker's share of a distributed backward pass: setting the pass up and running its tasks.

A pass is set up on a worker by its first message there (at the root: by ``backward``): its graph
task counts dependencies as the pass's mode says (``dist/modes.py``). Then each task runs:

* a *run* of the local graph (the root's run, the run a GRAD starts at a send node, the run of
  what SMART held back): ready nodes run in the calling thread until none is ready; every recv
  node that runs sends its gradients at once (GRAD) to the worker holding the matching send node,
  starting a task there; a GRAD for the root that is the run's last act rides in its report;
* a SMART *discovery step* (DISCOVER): mark the send, walk from it, DISCOVER every new recv node's
  send; DISCOVERs for the root ride in the report.

Each returns its report (GRAD_ACK, DISCOVER_ACK) for the engine to route to the pass's root: this
module sends the messages that start tasks, never the reports, and never calls the root's side.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple, Sequence

from zgrad.engine.dist.context import ContextContainer, DistAutogradContext, make_id_generator
from zgrad.engine.dist.modes import MODE_NAMES, Mode, SmartMode, discovery_of
from zgrad.engine.dist.messaging import Courier
from zgrad.engine.dist.passes import PassState, TaskRun
from zgrad.engine.dist.protocol import GRAD, START, Discover, DiscoveryReport, Grad, Message, Report, Start, \
    WorkReport
from zgrad.engine.dist.trace import TraceRecorder, clock_ns
from zgrad.engine.graph import Edge, Node
from zgrad.engine.send_recv import RecvNode, SendNode, recv_sender
from zgrad.errors import AutogradError

__all__ = ["TaskRunner", "ReportForRoot", "node_error"]


class ReportForRoot(NamedTuple):
    """A task's report, the root it goes to, and the gradients riding in it."""

    root: int
    report: Report
    arrays: list[Any]


def node_error(rank: int, exc: BaseException) -> str:
    """``Error on Node <rank>: <Type>: <message>``, unless ``exc`` already names its node."""
    text = str(exc)
    if text.startswith("Error on Node "):
        return text
    return f"Error on Node {rank}: {type(exc).__name__}: {text}"


def _no_send(ctx: DistAutogradContext, autograd_message_id: int) -> AutogradError:
    return AutogradError(f"no send function with autograd_message_id {autograd_message_id:#x} "
                         f"in autograd context {ctx.context_id}")


class TaskRunner:
    """Runs the tasks of distributed backward passes on one worker. Thread-safe; never blocks
    (beyond a pass's set-up by another thread, ``PassState.wait_ready``)."""

    def __init__(self, contexts: ContextContainer, courier: Courier, modes: Sequence[Mode], recorder: TraceRecorder) -> None:
        self.rank = contexts.rank
        self.contexts = contexts
        self.courier = courier
        self.modes = {mode.name: mode for mode in modes}
        self.recorder = recorder
        self._task_ids = make_id_generator(self.rank)

    def new_task_id(self) -> int:
        return next(self._task_ids)

    def mode(self, name: str) -> Mode:
        """The mode called ``name``.

        Raises:
            AutogradError: no such mode.
        """
        mode = self.modes.get(name)
        if mode is None:
            raise AutogradError(f"unknown distributed autograd mode {name!r}; expected one of {', '.join(MODE_NAMES)}")
        return mode

    # --- set-up ---------------------------------------------------------------------------------

    def open_pass(self, ctx: DistAutogradContext, pass_id: int, root: int, retain_graph: bool, mode: Mode,
                  traced: bool, root_edges: Sequence[Edge] | None = None, root_grads: Sequence[Any] = ()) -> PassState:
        """This worker's state of a pass, set up on first use: dependencies counted (or held) as
        ``mode`` says; at the root, from ``root_edges`` too. ``traced``: record the pass here.

        Raises:
            AutogradError: the pass already ended here, or another pass of the context runs.
        """
        def make() -> PassState:
            recording = self.recorder.record(ctx.context_id, pass_id) if traced else None
            return PassState(ctx, pass_id, root, retain_graph, mode, is_root=root == self.rank, recording=recording)

        state, created = ctx.pass_table.open(pass_id, root, make)
        if not created:
            state.wait_ready()
            return state
        try:
            sources: list[Node] = []
            if root_edges is not None:
                ctx.root_nodes = [edge.node for edge in root_edges if edge is not None]
                sources.append(state.task.start(root_edges, root_grads))
            ctx.last_selection = state.sends
            mode.count(state.task, state.sends, ctx.sends(), sources)
        finally:
            state.ready.open()
        return state

    def start_task(self, state: PassState, dst: int, message: Message, arrays: Sequence[Any] = ()) -> None:
        """Send a message that starts a task of ``state``'s pass on ``dst`` (GRAD, DISCOVER, START):
        from the root's waiting thread as a request (``Courier.post``), so that the task's report
        answers it there.

        Raises:
            AutogradError: "cannot reach worker ...": the message could not be sent.
        """
        state.add_participant(dst)
        try:
            if state.posting_thread is not None and state.posting_thread == threading.get_ident():
                state.posted_replies.setdefault(dst, set()).add(self.courier.post(dst, message, arrays))
            else:
                self.courier.send(dst, message, arrays)
        except Exception as exc:  # noqa: BLE001 - the task fails with this
            raise AutogradError(f"cannot reach worker {self.courier.worker_name(dst)!r}: {exc}") from exc

    # --- runs of the local graph ----------------------------------------------------------------

    def run(self, task: TaskRun, send: SendNode | None = None, grads: list[Any] | None = None) -> ReportForRoot:
        """Run the pass's graph task in this thread until nothing is ready (first handing ``grads``
        to ``send``, emptying the list: the task holds them then, so a leaf may keep its gradient
        without a copy); returns the task's report."""
        state = task.state
        started = clock_ns() if state.recording is not None else 0
        previous = recv_sender.sender
        recv_sender.sender = lambda node, out: self._send_gradients(task, node, out)
        try:
            if send is not None:
                state.task.feed(send, grads)
                grads.clear()
            state.task.run()
            state.task.run_final_callbacks()  # e.g. DDP's reducer, before this run reports
        except BaseException as exc:  # noqa: BLE001 - reported to the root
            task.failed(node_error(self.rank, exc))
        finally:
            recv_sender.sender = previous
            state.touch()
        if state.recording is not None:
            state.recording.span("task", task.label, started, clock_ns(), {"task": task.task_id, "cause": task.cause})
        closed = state.end_task(ok=task.error is None)
        if closed:
            state.ctx.pass_table.end(state.pass_id)
        riding = [[task_id, msg, len(grads)] for task_id, msg, grads in task.for_root]
        report = WorkReport(state.ctx.context_id, state.pass_id, task.task_id, task.children, task.error, not closed,
                            riding)
        return ReportForRoot(state.root, report, [array for _, _, grads in task.for_root for array in grads])

    def _send_gradients(self, task: TaskRun, node: RecvNode, grads: list[Any]) -> None:
        state = task.state
        if node.peer == state.root != self.rank and state.task.running_last():
            # The task's report goes to the root right after this: the GRAD rides in it.
            state.add_participant(node.peer)
            task.keep_for_root(self.new_task_id(), node.autograd_message_id, grads)
            return
        task_id = self.new_task_id()
        grad = Grad(state.ctx.context_id, state.pass_id, node.autograd_message_id, state.root, state.retain_graph,
                    state.mode.name, task_id, state.recording is not None)
        try:
            self.start_task(state, node.peer, grad, grads)
        except AutogradError as exc:
            task.failed(str(exc))
            return
        task.started(task_id, node.peer, node.autograd_message_id)

    def grad(self, src: int, grad: Grad, arrays: Sequence[Any]) -> ReportForRoot:
        """A GRAD: run the send node it names (a task), with the gradients, which it takes over."""
        try:
            ctx = self.contexts.get(grad.context_id)
            state = self.open_pass(ctx, grad.pass_id, grad.root, grad.retain_graph, self.mode(grad.mode), grad.trace)
            send = ctx.send_functions.get(grad.autograd_message_id)
            if send is None:
                raise _no_send(ctx, grad.autograd_message_id)
            state.mode.fed(state.task, send)
            task = TaskRun(state, grad.task_id, send.autograd_message_id, f"{GRAD} from rank {src}",
                           (GRAD, src, grad.task_id))
        except AutogradError as exc:
            return ReportForRoot(grad.root, WorkReport(grad.context_id, grad.pass_id, grad.task_id, [],
                                                       node_error(self.rank, exc), False), [])
        state.touch()
        grads = list(arrays)
        if isinstance(arrays, list):
            arrays.clear()  # the message's list: nothing else holds the gradients then (see run)
        return self.run(task, send, grads)

    # --- SMART ----------------------------------------------------------------------------------

    def discover(self, state: PassState, task_id: int, starts: Sequence[Node | None]) -> ReportForRoot:
        """A discovery step: walk from ``starts``, DISCOVER the send of every new recv node, report.

        A DISCOVER for the root itself rides in the report, which goes there at the same moment.
        """
        started = clock_ns() if state.recording is not None else 0
        discovery = discovery_of(state.sends)
        children: list[list[int]] = []
        for_root: list[list[int]] = []
        error = None
        for recv in discovery.walk(starts):
            msg = recv.autograd_message_id
            child = self.new_task_id()
            if recv.peer == state.root != self.rank:
                for_root.append([child, msg])
            else:
                try:
                    self.start_task(state, recv.peer, Discover(state.ctx.context_id, state.pass_id, msg, state.root,
                                                           state.retain_graph, child, state.recording is not None))
                except AutogradError as exc:
                    error = str(exc)
                    break
            children.append([child, recv.peer, msg])
        if state.recording is not None:
            state.recording.span("task", "discovery", started, clock_ns(), {"task": task_id})
        return ReportForRoot(state.root, DiscoveryReport(state.ctx.context_id, state.pass_id, task_id, children, error,
                                                         discovery.held, for_root), [])

    def on_discover(self, src: int, discover: Discover) -> ReportForRoot:
        """A DISCOVER: mark the send it names; the first time, walk from it."""
        try:
            ctx = self.contexts.get(discover.context_id)
            state = self.open_pass(ctx, discover.pass_id, discover.root, discover.retain_graph, self.modes[SmartMode.name],
                                   discover.trace)
            send = ctx.send_functions.get(discover.autograd_message_id)
            if send is None:
                raise _no_send(ctx, discover.autograd_message_id)
            discovery = discovery_of(state.sends)
        except AutogradError as exc:
            return ReportForRoot(discover.root, DiscoveryReport(discover.context_id, discover.pass_id, discover.task_id,
                                                                [], node_error(self.rank, exc), False), [])
        state.touch()
        first = discovery.mark(send.autograd_message_id)
        return self.discover(state, discover.task_id, [e.node for e in send.next_edges if e is not None] if first else [])

    def release_held(self, state: PassState) -> None:
        """The marks are final: count from the marked sends, then let the held nodes run."""
        marked = discovery_of(state.sends).marked()
        state.task.add_roots([s for s in state.ctx.sends() if s.autograd_message_id in marked])
        state.task.release()

    def on_start(self, src: int, start: Start) -> ReportForRoot | None:
        """A START: the marks here are final. With a task: release the held nodes and run them."""
        try:
            state = self.contexts.get(start.context_id).pass_table.get(start.pass_id)
        except AutogradError:
            state = None
        if state is None:  # failed meanwhile; the root only needs its answer
            if start.task_id is None:
                return None
            return ReportForRoot(src, WorkReport(start.context_id, start.pass_id, start.task_id, [], None, False), [])
        state.wait_ready()
        if start.task_id is None:
            if state.finalize_marks():
                state.ctx.pass_table.end(state.pass_id)
            return None
        task = TaskRun(state, start.task_id, label=START, cause=(START, src, start.task_id))
        state.finalize_marks()  # cannot close it: the task runs
        self.release_held(state)
        return self.run(task)

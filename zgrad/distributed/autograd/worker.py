"""Distributed autograd on one worker: its contexts, its engine, and the call hooks of the RPC agent.

:class:`DistAutogradWorker` is given to every agent by ``init_rpc``. It registers the engine's
message handlers (through :class:`~zgrad.distributed.autograd.messenger.RpcMessenger`), a listener
for lost workers, and itself as the agent's call hooks (``rpc/hooks.py``): the agent calls them to
record send and recv nodes for every RPC made inside a context, and to run a call's target in
the caller's context.

Releases: a context released here is released on the workers it reached by riding in the next
call to each (``releases.py``), or by CONTEXT_RELEASE when no call comes soon.

Threads: every engine message is received on the agent's I/O thread (checked and decoded there,
which is cheap); :meth:`DistEngine.receive` handles acknowledgements, reports and PASS_END right
there (they never block) and hands the rest, which runs graph work or frees contexts, to the
callee pool, or, for a pass rooted on this worker, to the thread waiting in ``backward``. That
saves a hand-off to the pool on every hop of a pass.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol, Sequence

from zgrad.distributed.autograd.messenger import MessengerAgent, RpcMessenger
from zgrad.distributed.autograd.recording import record_recv, record_send
from zgrad.distributed.autograd.releases import RELEASED_KEY, PendingReleases, released_ids
from zgrad.distributed.rpc.hooks import CallHooks
from zgrad.config import Config
from zgrad.distributed.rpc.state import current_agent
from zgrad.engine.dist.context import ContextContainer, DistAutogradContext
from zgrad.engine.dist.engine import DistEngine
from zgrad.errors import AutogradError
from zgrad.tensor import Tensor

__all__ = ["DistAutogradWorker", "current_worker"]


class AutogradCaller(Protocol):
    """What distributed autograd needs from the agent's caller side (as well as the messenger's)."""

    def send(self, dst: int, kind: int, meta: Any, buffers: Any = (), request_id: int = 0) -> None: ...

    def call(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1) -> Any: ...


class AutogradAgent(MessengerAgent, Protocol):
    """What distributed autograd needs from the RPC agent."""

    name: str
    config: Config
    caller: AutogradCaller

    def add_peer_lost_listener(self, listener: Callable[[int, str], None]) -> None: ...

    def register_call_hooks(self, hooks: CallHooks) -> None: ...

    def schedule(self, delay_s: float, callback: Callable[[], None]) -> None: ...


class DistAutogradWorker:
    """Contexts and engine of one worker, wired to its agent; the agent's :class:`CallHooks`."""

    def __init__(self, agent: AutogradAgent) -> None:
        self.agent = agent
        self.contexts = ContextContainer(agent.rank)
        self.engine = DistEngine(self.contexts, RpcMessenger(agent, self._receive))
        self._releases = threading.Condition()
        self._releasing = 0  # releases waiting to ride, or sent and not answered everywhere yet
        self._pending = PendingReleases()
        self.before_shutdown: list[Callable[[], None]] = []  # run by :meth:`drain` (e.g. writing the job's trace)
        agent.add_peer_lost_listener(self.engine.peer_lost)
        agent.register_call_hooks(self)

    def _receive(self, src: int, kind: str, body: dict[str, Any], arrays: list[Any], reply: Any = None) -> None:
        self.engine.receive(src, kind, body, arrays, reply)

    def release(self, context_id: int) -> None:
        """Release a context here at once, and in the background on every worker it reached
        (recursively: riding in the next call to each, or by CONTEXT_RELEASE with the engine's
        retries; a lost worker counts as answered). Never waits for an answer; ``rpc.shutdown``
        waits for the releases still under way."""
        targets = self.engine.release_here(context_id)
        if targets:
            self._release_on(context_id, targets)

    def _release_on(self, context_id: int, targets: set[int]) -> None:
        """Release ``context_id`` on ``targets``: waiting for a call to ride in where it may."""
        now = set()
        for dst in targets:
            if self.agent.caller.requests_in_flight(dst, context_id):
                now.add(dst)
                continue
            self._count_releases(+1)
            if self._pending.add(dst, context_id, time.monotonic()):
                self.agent.schedule(self._pending.delay_s, self._flush)
        if now:
            self._broadcast(context_id, now)

    def _broadcast(self, context_id: int, targets: set[int]) -> None:
        self._count_releases(+1)
        self.engine.broadcast_release(context_id, targets, lambda: self._count_releases(-1))

    def _count_releases(self, delta: int) -> None:
        with self._releases:
            self._releasing += delta
            if not self._releasing:
                self._releases.notify_all()

    def _flush(self) -> None:
        """The releases that waited too long for a call go out as CONTEXT_RELEASE (timer thread)."""
        due, next_s = self._pending.take_due(time.monotonic())
        self._send_waiting(due)
        if next_s is not None:
            self.agent.schedule(next_s, self._flush)

    def _send_waiting(self, waiting: list[tuple[int, int]]) -> None:
        for dst, context_id in waiting:
            self._broadcast(context_id, {dst})
            self._count_releases(-1)  # no longer waiting: counted as sent

    def _released_by(self, src: int, context_ids: list[int]) -> None:
        """Contexts released by ``src`` (riding in its call): release them here, then pass them on."""
        for context_id in context_ids:
            targets = self.engine.release_here(context_id, src)
            if targets:
                self._release_on(context_id, targets)

    # --- call hooks (rpc/hooks.py) --------------------------------------------------------------

    def outgoing_call(self, dst: int, tensors: Sequence[Tensor]) -> dict[str, Any]:
        """Metadata to add to a CALL or RREF_FETCH made by this thread (records the send node)."""
        released = self._pending.take(dst)
        if released:
            self._count_releases(-len(released))
        ctx = self.contexts.current()
        if ctx is None:
            return {RELEASED_KEY: released} if released else {}
        extra: dict[str, Any] = {"context": ctx.context_id}
        if released:
            extra[RELEASED_KEY] = released
        message_id = record_send(self.contexts, ctx, dst, tensors)
        if message_id is not None:
            extra["grad_msg"] = message_id
        return extra

    def call_failed(self, dst: int, meta: dict[str, Any]) -> None:
        """The releases that rode in a call that failed without an answer go by CONTEXT_RELEASE
        (a release that did arrive is released again there: a no-op; a lost worker answers at once)."""
        released = meta.get(RELEASED_KEY) if isinstance(meta, dict) else None
        for context_id in released or ():
            self._broadcast(context_id, {dst})

    def incoming_call(self, src: int, meta: dict[str, Any], tensors: Sequence[Tensor]) -> DistAutogradContext | None:
        """The context a received CALL runs in (created lazily), with its recv node recorded;
        first, the contexts released by ``src`` that ride in it are released here.

        Raises:
            AutogradError: the context was already released here.
            ProtocolError: a malformed list of released contexts.
        """
        released = meta.get(RELEASED_KEY)
        if released is not None:
            self._released_by(src, released_ids(released))
        context_id = meta.get("context")
        if context_id is None:
            return None
        ctx = self.contexts.get_or_create(context_id)
        record_recv(ctx, src, meta.get("grad_msg"), tensors)
        return ctx

    def result_meta(self, ctx: DistAutogradContext | None, dst: int, tensors: Sequence[Tensor]) -> dict[str, Any]:
        """Metadata for the RESULT of a call that ran in ``ctx`` (records the send node)."""
        if ctx is None:
            return {}
        message_id = record_send(self.contexts, ctx, dst, tensors)
        return {} if message_id is None else {"grad_msg": message_id}

    def incoming_result(self, context_id: int | None, src: int, meta: dict[str, Any], tensors: Sequence[Tensor]) -> None:
        """Record the recv node for a RESULT of a call made in ``context_id``. A result with no
        tensor requiring grad needs no context: it is the caller's even after the context was
        released (an ``rpc_async`` waited for after its ``with`` block, as in PyTorch, where
        such a reply carries no autograd metadata).

        Raises:
            AutogradError: the result carries gradients to record and the context is gone.
        """
        if context_id is None:
            return
        message_id = meta.get("grad_msg")
        if message_id is None:
            ctx = self.contexts.find(context_id)
            if ctx is not None:
                ctx.add_known_worker(src)
            return
        record_recv(self.contexts.get(context_id), src, message_id, tensors)

    def run_in_context(self, context: DistAutogradContext | None, func: Callable[..., Any], args: list,
                       kwargs: dict) -> Any:
        """Run a call's target with ``context`` as this thread's current context."""
        if context is None:
            return func(*args, **kwargs)
        previous = self.contexts.set_current(context)
        try:
            return func(*args, **kwargs)
        finally:
            self.contexts.set_current(previous)

    def drain(self, timeout_s: float | None) -> bool:
        """Run the :attr:`before_shutdown` work, send the releases still waiting for a call, then
        block until every release started here was answered everywhere (at most ``timeout_s``
        for the releases). A worker that waits in the shutdown barrier meanwhile still serves:
        the releases it passes on later ride in its calls or go out with the flush."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for work in self.before_shutdown:
            work()
        self._send_waiting(self._pending.take_all())
        with self._releases:
            return self._releases.wait_for(
                lambda: self._releasing == 0, None if deadline is None else max(0.0, deadline - time.monotonic()))


def current_worker() -> DistAutogradWorker:
    """The distributed autograd of the calling thread's RPC agent.

    Raises:
        ZgradError: RPC is not initialized (the message says how to fix it).
    """
    worker = current_agent().call_hooks
    if not isinstance(worker, DistAutogradWorker):
        raise AutogradError("distributed autograd is not attached to this RPC agent (rpc.init_rpc attaches it)")
    return worker

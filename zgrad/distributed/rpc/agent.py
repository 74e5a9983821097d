"""The RPC agent of one worker: it builds the parts and wires them, and owns their lifecycle.

The parts: the mesh (``zgrad/transport``), the caller side (``caller.py``: requests, their
replies, the calls in flight), the callee side (``callee.py``: inbound dispatch, the early
queue, running calls), the RRef context (``rref_context.py``: forks, wire form, pins), the
callee pool (``pool.py``), the timer (``timer.py``) and the shutdown barrier (``shutdown.py``).
The layers above make requests through ``agent.caller``.

Threads (``docs/architecture.md``, Threading model): the agent starts and closes the parts on
the thread that runs ``init_rpc`` and ``shutdown``; the mesh reports a lost peer on the I/O
thread (:meth:`RpcAgent._on_peer_lost`), after that peer's early messages. The threads of the
callee pool and of the I/O role are bound to this agent when they start.

A layer built on RPC (distributed autograd) extends the agent through three declared points:
message handlers for its own kinds (:meth:`RpcAgent.register_handler`), listeners for lost peers
(:meth:`RpcAgent.add_peer_lost_listener`) and call hooks (:meth:`RpcAgent.register_call_hooks`,
``hooks.py``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Callable

from zgrad.distributed.rpc.callee import Callee, Handler
from zgrad.distributed.rpc.caller import Caller
from zgrad.distributed.rpc.env import InitPlan
from zgrad.distributed.rpc.hooks import CallHooks, NoCallHooks
from zgrad.distributed.rpc.messages import KIND_NAMES, REPLY_KINDS, VALID_KINDS, Kind
from zgrad.distributed.rpc.pool import CalleePool
from zgrad.distributed.rpc.rref_context import RRefContext
from zgrad.distributed.rpc.shutdown import ShutdownBarrier
from zgrad.distributed.rpc.targets import name_resolver
from zgrad.distributed.rpc.timer import DeadlineTimer
from zgrad.distributed.rpc.worker_info import WorkerInfo, WorkerTable
from zgrad.futures import blocking_hooks
from zgrad.transport import create_mesh

__all__ = ["RpcAgent"]

log = logging.getLogger("zgrad.rpc")


class RpcAgent:
    """One worker's RPC endpoint. Built and started by ``init_rpc``; stopped by ``shutdown``.
    Its requests go through :attr:`caller` (:class:`~zgrad.distributed.rpc.caller.Caller`)."""

    def __init__(self, plan: InitPlan) -> None:
        self.name = plan.name
        self.rank = plan.rank
        self.world_size = plan.world_size
        self.config = plan.config
        self._plan = plan
        self.workers = WorkerTable(plan.rank)
        # This worker's message counts (the caller counts what it sends and the replies it reads;
        # the callee what it receives, rejects and replies).
        self.sent = Counter()
        self.received = Counter()
        self.rejected = Counter()
        self._peer_lost_listeners: list[Callable[[int, str], None]] = []
        self.call_hooks: CallHooks = NoCallHooks()
        self.pool = CalleePool(f"zgrad-{plan.name}", plan.config.rpc.num_worker_threads, on_thread_start=self._bind_thread)
        self.timer = DeadlineTimer(f"zgrad-{plan.name}")
        self._resolve_name = name_resolver(plan.config.rpc.allowed_modules, plan.name)
        self.caller = Caller(plan.name, plan.config.rpc.default_timeout_s, plan.config.rpc.device_maps, self.workers,
                             self.timer, self._resolve_name, self.sent, self.received, self.rejected)
        self.rref_context = RRefContext(plan.rank, plan.name, plan.world_size, self.caller, self.sent)
        self.callee = Callee(plan.name, plan.config.transport.inline_budget_ms / 1000, self.pool, self.timer,
                             self.rref_context, self._resolve_name, self.sent, self.received, self.rejected)
        self.callee.register_handler(Kind.RESULT, self.caller.on_reply)
        self.callee.register_handler(Kind.ERROR, self.caller.on_reply)
        self.shutdown_barrier = ShutdownBarrier(self)
        self.mesh = create_mesh(
            plan.config, plan.rank, plan.world_size, plan.name,
            on_message=self.callee.on_message, on_peer_lost=self._on_peer_lost,
            valid_kinds=VALID_KINDS, master_addr=plan.master_addr, master_port=plan.master_port,
            on_thread_start=self._bind_io_thread, max_in_handlers=plan.config.rpc.num_worker_threads,
            on_late_reply=self.rref_context.release_late_pins, reply_kinds=REPLY_KINDS,
        )
        self.callee.attach(self.mesh)
        self.rref_context.attach(self.mesh)
        self.caller.attach(self.mesh, self.rref_context, self.callee.allow_takeover)

    # --- lifecycle ------------------------------------------------------------------------------

    def _bind_thread(self) -> None:
        from zgrad.distributed.rpc.state import bind_thread

        bind_thread(self)

    def _bind_io_thread(self) -> None:
        """A thread of the mesh's I/O role runs calls itself: bind it, and let it hand the role
        on before any future's wait (nested calls and waits never hold up inbound messages)."""
        self._bind_thread()
        blocking_hooks.enter = self.mesh.role.hand_off

    def start(self) -> None:
        """Join the mesh (bounded by ``connect_timeout_s``), then start serving.

        Messages that arrive before the worker table is known here wait, in arrival order, and
        run once it is (:meth:`Callee.hold_early`): no handler ever sees a half-started agent.
        """
        self.timer.start()
        try:
            self.mesh.start()
        except BaseException:
            self.timer.stop()
            self.pool.close()
            raise
        self.workers.fill([WorkerInfo(entry.name, entry.rank) for entry in self.mesh.workers])
        self.pool.start()
        self.callee.start()

    def close(self) -> None:
        """Stop everything this agent started; pending calls fail. Idempotent."""
        if not self.caller.close():
            return
        self.mesh.close()
        self.timer.stop()
        self.pool.close()
        self.rref_context.clear()

    # --- extension points (distributed autograd, the shutdown barrier) --------------------------

    def register_handler(self, kind: int, handler: Handler) -> None:
        """Route messages of ``kind`` to ``handler`` (:meth:`Callee.register_handler`: it runs on
        the thread that received the message, after the messages that arrived before it). Call
        before :meth:`start`."""
        self.callee.register_handler(kind, handler)

    def add_peer_lost_listener(self, listener: Callable[[int, str], None]) -> None:
        """Call ``listener(rank, reason)`` (on the I/O thread) when worker ``rank`` is lost."""
        self._peer_lost_listeners.append(listener)

    def register_call_hooks(self, hooks: CallHooks) -> None:
        """Tell ``hooks`` of every call and reply this agent carries (one set; call before :meth:`start`)."""
        self.call_hooks = hooks
        self.caller.call_hooks = hooks
        self.callee.call_hooks = hooks

    # --- workers --------------------------------------------------------------------------------

    def worker_info(self, to: "str | int | WorkerInfo | None" = None) -> WorkerInfo:
        """Resolve a worker name, rank or WorkerInfo (None = this worker).

        Raises:
            ValueError: no such worker, listing the known names.
        """
        return self.workers.resolve(to)

    # --- receiving ------------------------------------------------------------------------------

    def reject(self, src: int, reason: str) -> None:
        """Count and log (once per peer and reason) a message that was dropped (:meth:`Callee.reject`)."""
        self.callee.reject(src, reason)

    def allow_takeover(self) -> None:
        """What a handler must do in arrival order is done (:meth:`Callee.allow_takeover`)."""
        self.callee.allow_takeover()

    # --- failures -------------------------------------------------------------------------------

    def _on_peer_lost(self, rank: int, reason: str) -> None:
        """The mesh lost ``rank`` (on the I/O thread). A loss comes after that peer's messages:
        those still waiting in the early queue run first."""
        if not self.callee.hold_early(lambda: self._peer_lost(rank, reason)):
            self._peer_lost(rank, reason)

    def _peer_lost(self, rank: int, reason: str) -> None:
        self.caller.peer_lost(rank, reason)
        for listener in self._peer_lost_listeners:
            try:
                listener(rank, reason)
            except Exception:  # noqa: BLE001
                log.exception("a peer-lost listener raised")

    def schedule(self, delay_s: float, callback: Callable[[], None]) -> None:
        """Run ``callback()`` on the agent's timer thread in ``delay_s`` seconds (keep it short)."""
        self.timer.schedule(delay_s, callback)

    def debug_info(self) -> dict[str, Any]:
        """Counters of this worker: calls in flight, messages by kind, rejects, RRefs owned."""
        return {
            "name": self.name,
            "rank": self.rank,
            "calls_in_flight": self.caller.pending_count(),
            "callee_tasks_in_flight": self.pool.in_flight() + self.callee.calls_running(),
            "callee_threads_peak": self.pool.peak_threads,
            "messages_sent": {KIND_NAMES.get(k, str(k)): n for k, n in self.sent.items()},
            "messages_received": {KIND_NAMES.get(k, str(k)): n for k, n in self.received.items()},
            "rejects": sum(self.rejected.values()),
            "rejects_by_reason": dict(self.rejected),
            "rrefs_owned": len(self.rref_context),
            "dead_workers": [self.workers.name_of(r) for r in self.caller.dead_workers()],
            "transport": self.mesh.stats(),
        }


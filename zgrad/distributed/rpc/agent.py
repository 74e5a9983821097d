"""The RPC agent of one worker: the mesh, pending calls, the callee pool, timeouts, RRefs.

Threads (``docs/architecture.md``, Threading model): the thread holding the mesh's inbound socket
(the I/O role's leader, ``transport/loop/role.py``) calls :meth:`RpcAgent._on_message` and runs the
handler itself: a call's target, RRef accounting, completing futures, engine messages. Before a handler blocks in a wait
the role passes to a standby thread (``blocking_hooks``); one that runs long is taken over, but
only once it has done what must follow arrival order (:meth:`RpcAgent.allow_takeover`: before a
call's target runs, a reply completes its future, a fetch is answered or engine work runs). A
thread that calls ``rpc_sync`` or ``to_here`` sends on its own socket and waits there for the
reply (``Mesh.call``): no timer entry, its own deadline. ``rpc_async`` and ``remote``
go through the mesh; their futures are completed where the reply lands and the timer thread fails
those that run past their timeout. The callee pool runs the engine's background work and, in
arrival order, the messages that arrived before the agent had started.

A layer built on RPC (distributed autograd) extends the agent through three declared points:
message handlers for its own kinds (:meth:`RpcAgent.register_handler`), listeners for lost peers
(:meth:`RpcAgent.add_peer_lost_listener`) and call hooks (:meth:`RpcAgent.register_call_hooks`,
``hooks.py``).
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
import types
from collections import Counter
from typing import Any, Callable

from zgrad.distributed.rpc.codec import decode_value, encode_value
from zgrad.distributed.rpc.device_maps import inverse
from zgrad.distributed.rpc.env import InitPlan
from zgrad.distributed.rpc.functions import DeferredResult, deferred_future, is_async_execution
from zgrad.distributed.rpc.hooks import CallHooks, NoCallHooks
from zgrad.distributed.rpc.messages import KIND_NAMES, REPLY_KINDS, SCHEMAS, VALID_KINDS, Kind, check_meta
from zgrad.distributed.rpc.pool import CalleePool
from zgrad.distributed.rpc.remote_errors import error_meta, remote_error_from_meta
from zgrad.distributed.rpc.rref import OwnerTable, RRef
from zgrad.distributed.rpc.shutdown import ShutdownBarrier
from zgrad.distributed.rpc.targets import resolve_target, target_name
from zgrad.distributed.rpc.timer import DeadlineTimer
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import ProtocolError, TransportError, WorkerUnavailableError, ZgradError, ZgradTimeoutError
from zgrad.futures import Future, blocking_hooks
from zgrad.transport import Envelope, create_mesh

__all__ = ["RpcAgent"]

log = logging.getLogger("zgrad.rpc")

Handler = Callable[[Envelope], None]
# Call targets remembered per agent (a peer naming ever new ones must not grow memory).
_TARGET_CACHE_SIZE = 4096


class _Pending:
    """A call in flight. ``future`` is None for a caller-direct one (its thread waits for the reply)."""

    __slots__ = ("future", "dst", "what", "timer", "decode", "context", "pins")

    def __init__(self, future: Future | None, dst: int, what: str, decode: bool, context: int | None,
                 pins: list | None = None) -> None:
        self.future, self.dst, self.what, self.decode, self.context = future, dst, what, decode, context
        self.timer: int | None = None
        self.pins = pins  # RRefs sent to their owner in this call, kept alive until it is answered


class DirectCall:
    """A call made by :meth:`RpcAgent.call_direct`, for :meth:`RpcAgent.collect_direct`."""

    __slots__ = ("dst", "what", "meta", "pins", "deadline_s", "request_id", "value", "error", "finished")

    def __init__(self, dst: int, what: str, meta: dict[str, Any], pins: list, deadline_s: float | None) -> None:
        self.dst, self.what, self.meta, self.pins, self.deadline_s = dst, what, meta, pins, deadline_s
        self.request_id = 0
        self.value: Any = None
        self.error: BaseException | None = None
        self.finished = False


class RpcAgent:
    """One worker's RPC endpoint. Built and started by ``init_rpc``; stopped by ``shutdown``."""

    def __init__(self, plan: InitPlan) -> None:
        self.name = plan.name
        self.rank = plan.rank
        self.world_size = plan.world_size
        self.config = plan.config
        self._plan = plan
        self._device_maps = plan.config.rpc.device_maps  # peer name -> {device here: device there}
        self._reply_maps: dict[int, dict[str, str] | None] = {}  # peer id -> the inverse, for replies
        self._lock = threading.Lock()
        self._no_pending = threading.Condition(self._lock)
        self._no_pending_waiters = 0  # threads in wait_no_pending (the last call out wakes them)
        self._request_ids = itertools.count(1)
        # Calls running here: started minus finished (two C-level counters: no lock per call).
        self._calls_started = itertools.count()
        self._calls_finished = itertools.count()
        self._pending: dict[int, _Pending] = {}
        # Calls that timed out carrying RRefs to their owner: request id -> (owner, the RRefs),
        # kept until the late reply comes or the owner is lost (see _encode_rref).
        self._late_pins: dict[int, tuple[int, list]] = {}
        self._dead: dict[int, str] = {}
        self._names: dict[str, int] = {}
        self._targets: dict[str, tuple[Callable[..., Any], str, bool]] = {}  # name -> (target, description, async)
        self._call_names: dict[tuple[int, Any], tuple[str, str]] = {}  # (dst, func) -> (name, description)
        self._infos: list[WorkerInfo] = []
        self.sent = Counter()
        self.received = Counter()
        self.rejected = Counter()
        self._logged_rejects: set[tuple[int, str]] = set()
        self.rrefs = OwnerTable(plan.rank, plan.name)
        self._handlers: dict[int, Handler] = {}
        # Messages received before start() (and peers lost meanwhile), in arrival order; None once they have all run.
        self._early: collections.deque[Callable[[], None]] | None = collections.deque()
        self._early_lock = threading.Lock()
        self._early_running = False  # a thread runs the queue (_run_early); others only add to it
        self._early_turn = 0  # counts the queue's handlers run; a take-over moves it past the running one
        self._early_runner = threading.local()  # .arm: starts the take-over clock of the early message it runs
        self._peer_lost_listeners: list[Callable[[int, str], None]] = []
        self._closed = False
        self._started = False
        self.call_hooks: CallHooks = NoCallHooks()
        self.pool = CalleePool(f"zgrad-{plan.name}", plan.config.rpc.num_worker_threads, on_thread_start=self._bind_thread)
        self.timer = DeadlineTimer(f"zgrad-{plan.name}")
        self._register_rpc_handlers()
        self.shutdown_barrier = ShutdownBarrier(self)
        self.mesh = create_mesh(
            plan.config, plan.rank, plan.world_size, plan.name,
            on_message=self._on_message, on_peer_lost=self._on_peer_lost,
            valid_kinds=VALID_KINDS, master_addr=plan.master_addr, master_port=plan.master_port,
            on_thread_start=self._bind_io_thread, max_in_handlers=plan.config.rpc.num_worker_threads,
            on_late_reply=self._release_late_pins, reply_kinds=REPLY_KINDS,
        )

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
        run once it is (:meth:`_hold_early`): no handler ever sees a half-started agent.
        """
        self.timer.start()
        try:
            self.mesh.start()
        except BaseException:
            self.timer.stop()
            self.pool.close()
            raise
        self._infos = [WorkerInfo(entry.name, entry.rank) for entry in self.mesh.workers]
        self._names = {info.name: info.id for info in self._infos}
        self.pool.start()
        with self._early_lock:
            self._started = True
            if not self._early:
                self._early = None
                return
            self._early_running = True
        self.pool.submit(self._run_early)

    def close(self) -> None:
        """Stop everything this agent started; pending calls fail. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending, self._pending = self._pending, {}
            self._late_pins = {}
        for p in pending.values():
            if p.future is not None:
                p.future.set_exception(ZgradError(f"RPC agent of {self.name!r} shut down before {p.what} completed"))
        self.mesh.close()
        self.timer.stop()
        self.pool.close()
        self.rrefs.clear()

    # --- extension points (distributed autograd, the shutdown barrier) --------------------------

    def register_handler(self, kind: int, handler: Handler) -> None:
        """Route messages of ``kind`` to ``handler``, which runs on the thread that received the
        message (the mesh's I/O leader; see ``transport/loop/role.py``). Messages that arrive before
        this agent has started wait for it, every kind in one queue, and run in arrival order
        before any later one (:meth:`_hold_early`). Call before :meth:`start`."""
        self._handlers[kind] = handler

    def add_peer_lost_listener(self, listener: Callable[[int, str], None]) -> None:
        """Call ``listener(rank, reason)`` (on the I/O thread) when worker ``rank`` is lost."""
        self._peer_lost_listeners.append(listener)

    def register_call_hooks(self, hooks: CallHooks) -> None:
        """Tell ``hooks`` of every call and reply this agent carries (one set; call before :meth:`start`)."""
        self.call_hooks = hooks

    # --- workers --------------------------------------------------------------------------------

    def worker_info(self, to: "str | int | WorkerInfo | None" = None) -> WorkerInfo:
        """Resolve a worker name, rank or WorkerInfo (None = this worker).

        Raises:
            ValueError: no such worker, listing the known names.
        """
        if to is None:
            return self._infos[self.rank]
        if isinstance(to, WorkerInfo):
            to = to.id
        if isinstance(to, bool) or not isinstance(to, (int, str)):
            raise TypeError(f"a worker is named by a name, a rank or a WorkerInfo, got {type(to).__name__}")
        if isinstance(to, int):
            if 0 <= to < len(self._infos):
                return self._infos[to]
            raise ValueError(f"unknown worker rank {to}; ranks are 0..{len(self._infos) - 1}")
        rank = self._names.get(to)
        if rank is None:
            raise ValueError(f"unknown worker name {to!r}; known workers: {', '.join(self._names)}")
        return self._infos[rank]

    # --- sending --------------------------------------------------------------------------------

    def timeout_s(self, timeout: float) -> float:
        """-1 = the configured default, 0 = none, else seconds."""
        if timeout is None or timeout < 0:
            return self.config.rpc.default_timeout_s
        return float(timeout)

    def next_request_id(self) -> int:
        """A request id unique on this worker (for a request sent outside :meth:`request`)."""
        return next(self._request_ids)

    def send(self, dst: int, kind: int, meta: Any, buffers: Any = (), request_id: int = 0) -> None:
        """Send one message (no reply expected). Raises WorkerUnavailableError for a dead peer."""
        self.mesh.send(dst, kind, request_id, meta, buffers)
        self.sent[kind] += 1

    def request(self, dst: int, kind: int, meta: Any, buffers: Any, timeout_s: float, what: str,
                decode: bool = True, pins: list | None = None) -> Future:
        """Send a message that expects RESULT or ERROR; return the future of the (decoded) reply.
        ``pins``: objects kept alive until the reply (or a failure other than a timeout)."""
        future = Future(what)
        request_id = next(self._request_ids)
        context = meta.get("context") if isinstance(meta, dict) else None
        pending = _Pending(future, dst, what, decode, context, pins or None)
        with self._lock:
            if self._closed:
                raise ZgradError(f"RPC agent of {self.name!r} is shut down; call init_rpc again")
            dead = self._dead.get(dst)
            if dead is None:
                self._pending[request_id] = pending
        if dead is not None:
            future.set_exception(self._unavailable(dst, dead))
            return future
        if timeout_s > 0:
            pending.timer = self.timer.schedule(timeout_s, lambda: self._expire(request_id, timeout_s))
        try:
            self.send(dst, kind, meta, buffers, request_id)
        except ZgradError as exc:
            self._finish(request_id, error=exc)
            self.call_hooks.call_failed(dst, meta)
        return future

    def _call_message(self, dst: int, func: Callable[..., Any], args: Any, kwargs: Any, timeout_s: float,
                      rref: tuple[int, int] | None = None) -> tuple[dict[str, Any], Any, str, list]:
        """The metadata and buffers of a CALL of ``func`` to ``dst``, the call's description, and
        the RRefs it sends to their owner ``dst`` (to keep alive until it is answered)."""
        target, what = self._names_of_call(dst, func)
        pins: list = []
        encoded = encode_value([list(args), dict(kwargs) if kwargs else {}],
                               encode_rref=lambda rref: self._encode_rref(rref, dst, pins),
                               device_map=self._device_maps.get(self._infos[dst].name) if self._device_maps else None)
        meta: dict[str, Any] = {"target": target, "payload": encoded.payload, "timeout_s": timeout_s}
        if rref is not None:
            meta["rref"], meta["fork"] = rref
        extra = self.call_hooks.outgoing_call(dst, encoded.tensors)
        if extra:
            meta.update(extra)
        return meta, encoded.buffers, what, pins

    def _names_of_call(self, dst: int, func: Callable[..., Any]) -> tuple[str, str]:
        """The wire name of ``func`` and the description of a call of it to ``dst``.

        Remembered for functions and classes only: a bound method (made anew at each attribute
        access) would keep its object alive in the memo.
        """
        remembered = isinstance(func, (types.FunctionType, type))
        names = self._call_names.get((dst, func)) if remembered else None
        if names is None:
            target = target_name(func)
            names = (target, f"RPC to {self._infos[dst].name!r} calling {target!r}")
            if remembered and len(self._call_names) < _TARGET_CACHE_SIZE:
                self._call_names[(dst, func)] = names
        return names

    def call(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1,
             rref: tuple[int, int] | None = None) -> Future:
        """Start ``func(*args, **kwargs)`` on worker ``to``; the future holds its result."""
        info = self.worker_info(to)
        timeout_s = self.timeout_s(timeout)
        meta, buffers, what, pins = self._call_message(info.id, func, args, kwargs, timeout_s, rref)
        return self.request(info.id, Kind.CALL, meta, buffers, timeout_s, what, pins=pins)

    def call_sync(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1) -> Any:
        """Run ``func(*args, **kwargs)`` on worker ``to`` and return its result. Blocks: the calling
        thread waits for the reply itself (``Mesh.call``, which picks the route)."""
        info = self.worker_info(to)
        timeout_s = self.timeout_s(timeout)
        meta, buffers, what, pins = self._call_message(info.id, func, args, kwargs, timeout_s)
        return self._request_sync(info.id, Kind.CALL, meta, buffers, timeout_s, what, pins)

    def _register_sync(self, dst: int, meta: dict[str, Any], what: str) -> int:
        """The id of a request to ``dst`` whose reply the calling thread reads itself, registered
        as in flight. Raises for a closed agent or a lost ``dst``."""
        request_id = next(self._request_ids)
        with self._lock:
            if self._closed:
                raise ZgradError(f"RPC agent of {self.name!r} is shut down; call init_rpc again")
            dead = self._dead.get(dst)
            if dead is None:
                self._pending[request_id] = _Pending(None, dst, what, True, meta.get("context"))
        if dead is not None:
            self.call_hooks.call_failed(dst, meta)
            raise self._unavailable(dst, dead)
        return request_id

    def _sync_reply_value(self, envelope: Envelope, context: int | None, what: str) -> Any:
        """The value of a reply the calling thread read itself (see :meth:`_reply_value`)."""
        self.received[envelope.kind] += 1
        if envelope.kind not in (Kind.RESULT, Kind.ERROR):
            raise ProtocolError(f"the reply to {what} has kind {KIND_NAMES.get(envelope.kind, envelope.kind)}; expected RESULT or ERROR")
        check_meta(envelope.kind, envelope.meta)
        return self._reply_value(envelope, True, context, what)

    def _request_sync(self, dst: int, kind: int, meta: dict[str, Any], buffers: Any, timeout_s: float, what: str,
                      pins: list | None = None) -> Any:
        """Send a request to ``dst`` and return its decoded reply, read by this thread (``Mesh.call``).
        ``pins``: as for :meth:`request` (the caller's own reference keeps them until the reply)."""
        request_id = self._register_sync(dst, meta, what)
        hooks = blocking_hooks
        if hooks.enter is not None and not self.mesh.role.leads():  # a leader hands its role on lazily (Mesh.call)
            hooks.enter()
        try:
            self.sent[kind] += 1
            envelope = self.mesh.call(dst, kind, request_id, meta, buffers, timeout_s)
        except (ZgradTimeoutError, TransportError) as exc:
            if isinstance(exc, ZgradTimeoutError):
                self._keep_late_pins(request_id, dst, pins)
            self.call_hooks.call_failed(dst, meta)
            raise self._sync_error(exc, what, timeout_s) from exc
        finally:
            if hooks.exit is not None:
                hooks.exit()
            self._forget(request_id)
        return self._sync_reply_value(envelope, meta.get("context"), what)

    def call_direct(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None,
                    timeout: float = -1) -> "DirectCall":
        """Start ``func(*args, **kwargs)`` on worker ``to`` and return at once; :meth:`collect_direct`,
        called by the same thread, waits for the results there (``Mesh.post`` and ``Mesh.collect``,
        which pick the route: no hand-off to the I/O thread on this side for a small call).
        Raises only for a bad ``to``: a call that could not be sent carries its error to
        :meth:`collect_direct`."""
        info = self.worker_info(to)
        timeout_s = self.timeout_s(timeout)
        meta, buffers, what, pins = self._call_message(info.id, func, args, kwargs, timeout_s)
        call = DirectCall(info.id, what, meta, pins, time.monotonic() + timeout_s if timeout_s > 0 else None)
        try:
            call.request_id = self._register_sync(info.id, meta, what)
        except ZgradError as exc:
            call.error, call.finished = exc, True
            return call
        try:
            self.sent[Kind.CALL] += 1
            self.mesh.post(info.id, Kind.CALL, call.request_id, meta, buffers)
        except ZgradError as exc:
            self._fail_direct(call, self._sync_error(exc, what, timeout_s))
        return call

    def collect_direct(self, calls: "list[DirectCall]") -> list[tuple[Any, BaseException | None]]:
        """Wait, on the calling thread, for the results of ``calls`` (made by this
        thread with :meth:`call_direct`: every such call must be collected, by it); return
        ``(value, None)`` or ``(None, error)`` for each, in order. Each ends by its reply, its
        timeout (the late reply is dropped), the loss of its worker, the end of this thread's
        connection to it, or this agent's shutdown."""
        waiting = {call.request_id: call for call in calls if not call.finished}
        expected: dict[int, set[int]] = {}
        for call in waiting.values():
            expected.setdefault(call.dst, set()).add(call.request_id)
        hooks = blocking_hooks
        if waiting and hooks.enter is not None:
            hooks.enter()
        try:
            while waiting:
                deadlines = [call.deadline_s for call in waiting.values() if call.deadline_s is not None]
                wait_s = min(deadlines) - time.monotonic() if deadlines else float("inf")  # one slice at most
                for envelope in self.mesh.collect(expected, None, max(0.0, wait_s)):
                    call = waiting.pop(envelope.request_id)
                    try:
                        call.value = self._sync_reply_value(envelope, call.meta.get("context"), call.what)
                    except Exception as exc:  # noqa: BLE001 - a remote error or a malformed reply: the caller's
                        call.error = exc
                    call.finished = True
                    self._forget(call.request_id)
                self._end_stalled(waiting, expected)
        finally:
            if hooks.exit is not None:
                hooks.exit()
        return [(call.value, call.error) for call in calls]

    def _end_stalled(self, waiting: "dict[int, DirectCall]", expected: dict[int, set[int]]) -> None:
        """End the direct calls that can no longer be answered: their worker was lost, its
        connection ended, this agent shut down, or their deadline passed."""
        now_s = time.monotonic()
        for request_id, call in list(waiting.items()):
            dead = self._dead.get(call.dst)
            if dead is not None:
                error: BaseException = self._unavailable(call.dst, dead)
            elif self._closed:
                error = ZgradError(f"RPC agent of {self.name!r} shut down before {call.what} completed")
            elif not self.mesh.awaits(call.dst, request_id):
                error = WorkerUnavailableError(f"{call.what} failed: the connection of this call ended")
            elif call.deadline_s is not None and now_s >= call.deadline_s:
                self._keep_late_pins(request_id, call.dst, call.pins)
                error = ZgradTimeoutError(f"{call.what} ran past {call.meta['timeout_s']:g} seconds")
            else:
                continue
            del waiting[request_id]
            expected[call.dst].discard(request_id)
            self._fail_direct(call, error)

    def _fail_direct(self, call: "DirectCall", error: BaseException) -> None:
        call.error = error
        call.finished = True
        self.call_hooks.call_failed(call.dst, call.meta)
        if call.request_id:
            self._forget(call.request_id)

    def _sync_error(self, exc: ZgradError, what: str, timeout_s: float) -> ZgradError:
        """The error a caller sees for a request on its own socket that failed with ``exc``."""
        if isinstance(exc, ZgradTimeoutError):
            return ZgradTimeoutError(f"{what} ran past {timeout_s:g} seconds")
        if isinstance(exc, TransportError):
            if self._closed:
                return ZgradError(f"RPC agent of {self.name!r} shut down before {what} completed")
            return ZgradError(f"{what} failed: {exc}")
        return exc

    def _forget(self, request_id: int) -> None:
        with self._lock:
            self._pending.pop(request_id, None)
            if not self._pending and self._no_pending_waiters:
                self._no_pending.notify_all()

    def remote(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1) -> RRef:
        """Start ``func`` on ``to`` and return an RRef (owned by ``to``) to its result."""
        info = self.worker_info(to)
        rref_id, fork_id = self.rrefs.new_id(), self.rrefs.new_id()
        created = self.call(info.id, func, args, kwargs, timeout, rref=(rref_id, fork_id))
        return RRef(_agent=self, _rref_id=rref_id, _owner=info.id, _fork_id=fork_id, _created=created)

    def fetch_rref(self, rref: RRef, timeout: float) -> Any:
        """The value of ``rref`` fetched from its owner (``to_here``). Blocks, caller-direct."""
        owner = self.worker_info(rref._owner)
        timeout_s = self.timeout_s(timeout)
        meta: dict[str, Any] = {"rref": rref.rref_id}
        meta.update(self.call_hooks.outgoing_call(owner.id, ()))
        return self._request_sync(owner.id, Kind.RREF_FETCH, meta, (), timeout_s,
                                  f"to_here() of an RRef owned by {owner.name!r}")

    # --- RRef forks -----------------------------------------------------------------------------

    def _encode_rref(self, rref: RRef, dst: int | None = None, pins: list | None = None) -> list:
        """The fields of a new fork of ``rref`` sent to ``dst``. The fork is registered:

        - now, if this worker owns ``rref``;
        - by the owner when it decodes the message, if it is a call (``pins`` given) to the owner
          itself; ``rref`` then goes into ``pins`` and stays alive until the call is answered,
          so this worker's own fork, and with it the value, outlives the decoding (its
          RREF_DELETE travels on the link, maybe not on the call's path);
        - else by RREF_FORK to the owner on the link, sent first. A caller-direct message with
          the fork may still reach a third worker, and a delete of the fork reach the owner,
          before that RREF_FORK: the owner remembers such a delete (``OwnerTable``), and the
          value stays owned meanwhile, as this worker's RREF_DELETE of its own fork follows the
          RREF_FORK on the same link.
        """
        fork_id = self.rrefs.new_id()
        owner = rref._owner
        if owner == self.rank:
            self.rrefs.add_fork(rref.rref_id, fork_id)
        elif owner == dst and pins is not None:
            pins.append(rref)
            return [rref.rref_id, owner, fork_id, 1]
        else:
            self.send(owner, Kind.RREF_FORK, {"rref": rref.rref_id, "fork": fork_id})
        return [rref.rref_id, owner, fork_id]

    def _decode_rref(self, fields: list) -> RRef:
        """An RRef from its fields: ``[rref id, owner, fork id]``, or with a fourth field ``1``
        when this worker owns it and registers the fork now (see :meth:`_encode_rref`)."""
        if len(fields) not in (3, 4) or not all(isinstance(f, int) and not isinstance(f, bool) for f in fields) \
                or not 0 <= fields[1] < self.world_size or (len(fields) == 4 and (fields[3] != 1 or fields[1] != self.rank)):
            raise ProtocolError("malformed RRef reference")
        rref_id, owner, fork_id = fields[:3]
        if len(fields) == 4:
            self.rrefs.add_fork(rref_id, fork_id)
        return RRef(_agent=self, _rref_id=rref_id, _owner=owner, _fork_id=fork_id)

    def _keep_late_pins(self, request_id: int, dst: int, pins: list | None) -> None:
        """A call that carried RRefs to their owner ``dst`` timed out: it may still arrive and be
        decoded there, so they stay alive until its late reply or ``dst``'s loss."""
        if pins:
            with self._lock:
                if dst not in self._dead and not self._closed:
                    self._late_pins[request_id] = (dst, pins)

    def _release_late_pins(self, src: int, request_id: int) -> None:
        """The late reply to ``request_id`` came from ``src``: the RRefs its call kept may go."""
        with self._lock:
            entry = self._late_pins.get(request_id)
            if entry is None or entry[0] != src:
                return
            del self._late_pins[request_id]
        del entry  # the RRefs' finalizers run here, outside the lock

    def release_fork(self, rref_id: int, owner: int, fork_id: int) -> None:
        """An RRef object died: drop its fork (finalizer; never blocks, never raises)."""
        if self._closed:
            return
        if owner == self.rank:
            self.rrefs.delete_fork(rref_id, fork_id)
            return
        try:
            self.send(owner, Kind.RREF_DELETE, {"rref": rref_id, "fork": fork_id})
        except ZgradError:
            pass  # the owner is gone or we are shutting down: nothing left to free

    # --- receiving ------------------------------------------------------------------------------

    def _register_rpc_handlers(self) -> None:
        self.register_handler(Kind.RESULT, self._on_reply)
        self.register_handler(Kind.ERROR, self._on_reply)
        self.register_handler(Kind.CALL, self._on_call)
        self.register_handler(Kind.RREF_FETCH, self._on_fetch)
        self.register_handler(Kind.RREF_FORK, lambda e: self.rrefs.add_fork(e.meta["rref"], e.meta["fork"]))
        self.register_handler(Kind.RREF_DELETE, lambda e: self.rrefs.delete_fork(e.meta["rref"], e.meta["fork"]))

    def reject(self, src: int, reason: str) -> None:
        """Count and log (once per peer and reason) a message that was dropped."""
        self.rejected[reason] += 1
        key = (src, reason)
        if key not in self._logged_rejects:
            self._logged_rejects.add(key)
            log.warning("%s dropped a message from rank %s: %s", self.name, src, reason)

    def _on_message(self, envelope: Envelope) -> None:
        kind = envelope.kind
        self.received[kind] += 1
        handler = self._handlers.get(kind)
        if handler is None:
            self.reject(envelope.src, f"no handler for message kind {KIND_NAMES.get(kind, kind)}")
            return
        try:
            if kind in SCHEMAS:
                check_meta(kind, envelope.meta)
        except ProtocolError as exc:
            self.reject(envelope.src, str(exc))
            if kind in (Kind.CALL, Kind.RREF_FETCH) and envelope.request_id:
                self._reply_error(envelope, exc)
            return
        if kind == Kind.CALL and envelope.meta.get("rref") is not None:
            # Register the creator's fork now, in arrival order, before any DELETE from it.
            self.rrefs.add_fork(envelope.meta["rref"], envelope.meta["fork"])
        if self._early is not None and self._hold_early(lambda: self._run_handler(handler, envelope)):
            return
        self._run_handler(handler, envelope)

    def _hold_early(self, step: Callable[[], None]) -> bool:
        """Queue a message's handling (or a peer's loss) that arrives before :meth:`start`
        finished, or while messages that arrived before it have not all run (so that it cannot
        overtake them: a CONTEXT_RELEASE its CALL, an RREF_DELETE its fork, a peer's loss its
        SHUTDOWN_GO); False once they have all run: run it now. Once started, the calling
        thread runs the queue unless a thread already does."""
        with self._early_lock:
            early = self._early
            if early is None:
                return False
            early.append(step)
            run = self._started and not self._early_running
            if run:
                self._early_running = True
        if run:
            self._run_early()
        return True

    def _run_early(self) -> None:
        """Run the queued early messages one at a time, in arrival order, until none is left (the
        calling thread is the queue's runner). Like the I/O leader's turns: a handler that
        allowed it (:meth:`allow_takeover`) and runs past ``transport.inline_budget_ms`` is
        left to finish on its thread while a pool thread runs the rest of the queue."""
        budget_s = self.config.transport.inline_budget_ms / 1000
        while True:
            with self._early_lock:
                if not self._early:
                    self._early, self._early_running = None, False
                    return
                step = self._early.popleft()
                self._early_turn += 1
                turn = self._early_turn
            began_s, timers = time.monotonic(), []
            self._early_runner.arm = lambda: timers.append(self.timer.schedule(
                max(0.0, began_s + budget_s - time.monotonic()), lambda: self._take_over_early(turn)))
            try:
                step()
            finally:
                self._early_runner.arm = None
                for timer in timers:
                    self.timer.cancel(timer)
            with self._early_lock:
                if self._early_turn != turn:
                    return  # taken over: a pool thread runs the queue now

    def _take_over_early(self, turn: int) -> None:
        """The early handler ``turn`` ran past the budget: a pool thread runs the rest of the queue."""
        with self._early_lock:
            if self._early_turn != turn:
                return  # it has returned; its runner went on
            self._early_turn += 1
        self.pool.submit(self._run_early)

    def allow_takeover(self) -> None:
        """Called by a message handler once what it must do in arrival order is done (a
        context's registration, an RRef's fork, a reply's decoding): if it then runs past
        ``transport.inline_budget_ms``, the next messages are handled meanwhile on another
        thread (``Mesh.allow_takeover``; for the early messages, :meth:`_run_early`'s queue)."""
        arm = getattr(self._early_runner, "arm", None)
        if arm is not None:
            self._early_runner.arm = None
            arm()
        self.mesh.role.allow_takeover()

    def _run_handler(self, handler: Handler, envelope: Envelope) -> None:
        try:
            handler(envelope)
        except ProtocolError as exc:
            self.reject(envelope.src, str(exc))
        except Exception:  # noqa: BLE001 - a broken handler must not kill the I/O thread or pool
            log.exception("%s: handling %s from rank %s failed", self.name, KIND_NAMES.get(envelope.kind), envelope.src)

    def _on_reply(self, envelope: Envelope) -> None:
        with self._lock:
            pending = self._pending.get(envelope.request_id)
            if pending is None or pending.dst != envelope.src or pending.future is None:
                pending = None
        if pending is None:
            self.rejected["late or unknown reply"] += 1
            self._release_late_pins(envelope.src, envelope.request_id)
            return
        try:
            value = self._reply_value(envelope, pending.decode, pending.context, pending.what)
        except Exception as exc:  # noqa: BLE001 - a remote error, or a malformed reply: the caller's to see
            self.allow_takeover()
            self._finish(envelope.request_id, error=exc)
            return
        self.allow_takeover()  # the future's callbacks are the user's code
        self._finish(envelope.request_id, value=value)

    def _reply_value(self, envelope: Envelope, decode: bool, context: int | None, what: str) -> Any:
        """The value a RESULT carries (the envelope itself unless ``decode``), or raise what an ERROR carries."""
        if envelope.kind == Kind.ERROR:
            raise remote_error_from_meta(envelope.meta)
        if not decode:
            return envelope
        try:
            decoded = decode_value(envelope.meta["payload"], envelope.buffers, self._decode_rref, self._resolve_name,
                                   self._reply_map(envelope.src))
            self.call_hooks.incoming_result(context, envelope.src, envelope.meta, decoded.tensors)
        except ZgradError as exc:
            raise ProtocolError(f"the reply to {what} is malformed: {exc}") from None
        return decoded.value

    def _reply_map(self, peer: int) -> dict[str, str] | None:
        """Where tensors in ``peer``'s replies land: the inverse of this worker's map for it."""
        if not self._device_maps:
            return None
        if peer not in self._reply_maps:
            self._reply_maps[peer] = inverse(self._device_maps.get(self.worker_info(peer).name))
        return self._reply_maps[peer]

    def _finish(self, request_id: int, value: Any = None, error: BaseException | None = None) -> None:
        with self._lock:
            pending = self._pending.pop(request_id, None)
            if not self._pending and self._no_pending_waiters:
                self._no_pending.notify_all()
        if pending is None:
            return
        if pending.timer is not None:
            self.timer.cancel(pending.timer)
        # Let go of the pinned RRefs first: whoever waits on the future then finds the deletes
        # of those nobody else holds already sent, ahead of anything it sends next.
        pending.pins = None
        if error is not None:
            pending.future.set_exception(error)
        else:
            pending.future.set_result(value)

    def _expire(self, request_id: int, timeout_s: float) -> None:
        with self._lock:
            pending = self._pending.get(request_id)
        if pending is not None:
            self._keep_late_pins(request_id, pending.dst, pending.pins)
            self._finish(request_id, error=ZgradTimeoutError(f"{pending.what} ran past {timeout_s:g} seconds"))

    def _reply(self, envelope: Envelope, value: Any, context: Any = None) -> None:
        src = envelope.src
        encoded = encode_value(value, encode_rref=self._encode_rref)
        meta: dict[str, Any] = {"payload": encoded.payload}
        extra = self.call_hooks.result_meta(context, src, encoded.tensors)
        if extra:
            meta.update(extra)
        self.mesh.reply(envelope, Kind.RESULT, meta, encoded.buffers)
        self.sent[Kind.RESULT] += 1

    def _reply_error(self, envelope: Envelope, exc: BaseException) -> None:
        try:
            self.mesh.reply(envelope, Kind.ERROR, error_meta(exc, self.name))
            self.sent[Kind.ERROR] += 1
        except ZgradError:
            pass  # the caller is gone; nobody is waiting

    def _resolve_name(self, name: str, what: str) -> Any:
        """A function or class named in a received value, under this worker's allow-list."""
        return resolve_target(name, self.config.rpc.allowed_modules, self.name, what)

    def _resolve_call_target(self, name: Any) -> tuple[Callable[..., Any], str, bool]:
        """A CALL's target, its description and whether it is ``async_execution``, resolved once
        per name (a name that failed is checked again each time)."""
        resolved = self._targets.get(name) if isinstance(name, str) else None
        if resolved is None:
            func = resolve_target(name, self.config.rpc.allowed_modules, self.name)
            resolved = (func, f"RPC target {name!r}", is_async_execution(func))
            if len(self._targets) < _TARGET_CACHE_SIZE:
                self._targets[name] = resolved
        return resolved

    def _on_call(self, envelope: Envelope) -> None:
        next(self._calls_started)
        meta = envelope.meta
        context = None
        try:
            try:
                func, described, marked_async = self._resolve_call_target(meta["target"])
                try:
                    decoded = decode_value(meta["payload"], envelope.buffers, self._decode_rref, self._resolve_name)
                except ProtocolError as exc:
                    self.reject(envelope.src, f"undecodable CALL payload: {exc}")
                    raise
                args, kwargs = _call_arguments(decoded.value)
                context = self.call_hooks.incoming_call(envelope.src, meta, decoded.tensors)
                self.allow_takeover()
                result = self.call_hooks.run_in_context(context, func, args, kwargs)
                deferred = deferred_future(func, result, described) if marked_async or type(result) is DeferredResult else None
            except BaseException as exc:  # noqa: BLE001 - travels back to the caller as data
                self._answer_call(envelope, context, error=exc)
                return
            if deferred is None:
                self._answer_call(envelope, context, value=result)
                return
            # async_execution: no thread waits; whoever completes the future sends the answer.
            deferred.add_done_callback(lambda done: self._answer_call(
                envelope, context, value=None if done.exception() else done.value(), error=done.exception()))
        finally:
            next(self._calls_finished)

    def _answer_call(self, envelope: Envelope, context: Any, value: Any = None, error: BaseException | None = None) -> None:
        """Reply to a CALL with its value or error; a ``remote()`` call also settles its value here."""
        rref_id = envelope.meta.get("rref")
        if rref_id is not None:
            remote_error = None if error is None else remote_error_from_meta(error_meta(error, self.name))
            if not self.rrefs.settle(rref_id, envelope.meta["target"], value, remote_error):
                self.reject(envelope.src, f"a second CALL creating RRef {rref_id:#x}")
                return
            value, context = None, None
        if error is not None:
            self._reply_error(envelope, error)
            return
        try:
            self._reply(envelope, value, context)
        except Exception as exc:  # noqa: BLE001 - e.g. an unsendable result: tell the caller why
            self._reply_error(envelope, exc)

    def _on_fetch(self, envelope: Envelope) -> None:
        try:
            context = self.call_hooks.incoming_call(envelope.src, envelope.meta, ())
        except Exception as exc:  # noqa: BLE001 - e.g. a released context: the caller's to see
            self._reply_error(envelope, exc)
            return
        value = self.rrefs.read(envelope.meta["rref"])
        self.allow_takeover()

        def answer(done: Future) -> None:
            error = done.exception()
            if error is not None:
                self._reply_error(envelope, error)
                return
            try:
                self._reply(envelope, done.value(), context)
            except Exception as exc:  # noqa: BLE001
                self._reply_error(envelope, exc)

        if value.done():  # the common case: answered by the thread that received the fetch
            answer(value)
        else:  # completed later by whichever thread settles the value: answer from the pool
            value.add_done_callback(lambda done: self.pool.submit(lambda: answer(done)))

    # --- failures -------------------------------------------------------------------------------

    def _unavailable(self, rank: int, reason: str) -> WorkerUnavailableError:
        name = self._infos[rank].name if rank < len(self._infos) else f"rank {rank}"
        return WorkerUnavailableError(f"worker {name!r} (rank {rank}) is unavailable: {reason}")

    def _on_peer_lost(self, rank: int, reason: str) -> None:
        """The mesh lost ``rank`` (on the I/O thread). A loss comes after that peer's messages:
        those still waiting in the early queue run first."""
        if self._early is not None and self._hold_early(lambda: self._peer_lost(rank, reason)):
            return
        self._peer_lost(rank, reason)

    def _peer_lost(self, rank: int, reason: str) -> None:
        with self._lock:
            self._dead[rank] = reason
            lost = [rid for rid, p in self._pending.items() if p.dst == rank and p.future is not None]
            unpinned = [self._late_pins.pop(rid) for rid, (dst, _) in list(self._late_pins.items()) if dst == rank]
        del unpinned  # their owner is gone: the RRefs go, outside the lock
        for request_id in lost:
            self._finish(request_id, error=self._unavailable(rank, reason))
        for listener in self._peer_lost_listeners:
            try:
                listener(rank, reason)
            except Exception:  # noqa: BLE001
                log.exception("a peer-lost listener raised")

    def _calls_running(self) -> int:
        finished = self._calls_finished.__reduce__()[1][0]  # read without counting
        return self._calls_started.__reduce__()[1][0] - finished

    def requests_in_flight(self, dst: int, context_id: int) -> bool:
        """Whether a call (or fetch) to ``dst`` made in autograd context ``context_id`` awaits its reply."""
        with self._lock:
            return any(p.dst == dst and p.context == context_id for p in self._pending.values())

    def schedule(self, delay_s: float, callback: Callable[[], None]) -> None:
        """Run ``callback()`` on the agent's timer thread in ``delay_s`` seconds (keep it short)."""
        self.timer.schedule(delay_s, callback)

    def dead_workers(self) -> dict[int, str]:
        with self._lock:
            return dict(self._dead)

    def pending_count(self) -> int:
        with self._lock:
            return len(self._pending)

    def wait_no_pending(self, timeout_s: float) -> bool:
        """Block until none of this worker's calls is in flight (at most ``timeout_s``)."""
        with self._no_pending:
            self._no_pending_waiters += 1
            try:
                return self._no_pending.wait_for(lambda: not self._pending, timeout_s)
            finally:
                self._no_pending_waiters -= 1

    def debug_info(self) -> dict[str, Any]:
        """Counters of this worker: calls in flight, messages by kind, rejects, RRefs owned."""
        return {
            "name": self.name,
            "rank": self.rank,
            "calls_in_flight": self.pending_count(),
            "callee_tasks_in_flight": self.pool.in_flight() + self._calls_running(),
            "callee_threads_peak": self.pool.peak_threads,
            "messages_sent": {KIND_NAMES.get(k, str(k)): n for k, n in self.sent.items()},
            "messages_received": {KIND_NAMES.get(k, str(k)): n for k, n in self.received.items()},
            "rejects": sum(self.rejected.values()),
            "rejects_by_reason": dict(self.rejected),
            "rrefs_owned": len(self.rrefs),
            "dead_workers": [self._infos[r].name for r in self.dead_workers()],
            "transport": self.mesh.stats(),
        }


def _call_arguments(value: Any) -> tuple[list, dict]:
    if not (type(value) is list and len(value) == 2 and type(value[0]) is list and type(value[1]) is dict
            and (not value[1] or all(type(k) is str for k in value[1]))):
        raise ProtocolError("CALL payload must be [args list, kwargs map with string keys]")
    return value[0], value[1]

"""The RPC agent of one worker: it builds and wires the parts, and is the caller side.

The parts: the mesh (``zgrad/transport``), the callee side (``callee.py``: inbound dispatch, the
early queue, running calls), the RRef context (``rref_context.py``: forks, wire form, pins), the
callee pool (``pool.py``), the timer (``timer.py``) and the shutdown barrier (``shutdown.py``). The
agent itself makes requests and keeps the calls in flight.

Threads (``docs/architecture.md``, Threading model): inbound messages are handled by the thread
holding the mesh's inbound socket (see ``callee.py``), which also completes the futures of
replies (:meth:`RpcAgent._on_reply`); a thread of the I/O role hands its role on before any
future's wait (``blocking_hooks``). A thread that calls ``rpc_sync`` or ``to_here`` sends on its
own socket and waits there for the reply (``Mesh.call``): no timer entry, its own
deadline. ``rpc_async`` and ``remote`` go through the mesh; their futures are completed where
the reply lands and the timer thread fails those that run past their timeout.

A layer built on RPC (distributed autograd) extends the agent through three declared points:
message handlers for its own kinds (:meth:`RpcAgent.register_handler`), listeners for lost peers
(:meth:`RpcAgent.add_peer_lost_listener`) and call hooks (:meth:`RpcAgent.register_call_hooks`,
``hooks.py``).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import types
from collections import Counter
from typing import Any, Callable

from zgrad.distributed.rpc.callee import Callee, Handler
from zgrad.distributed.rpc.codec import decode_value, encode_value
from zgrad.distributed.rpc.device_maps import inverse
from zgrad.distributed.rpc.env import InitPlan
from zgrad.distributed.rpc.hooks import CallHooks, NoCallHooks
from zgrad.distributed.rpc.messages import KIND_NAMES, REPLY_KINDS, VALID_KINDS, Kind, check_meta
from zgrad.distributed.rpc.pool import CalleePool
from zgrad.distributed.rpc.remote_errors import remote_error_from_meta
from zgrad.distributed.rpc.rref import RRef
from zgrad.distributed.rpc.rref_context import RRefContext
from zgrad.distributed.rpc.shutdown import ShutdownBarrier
from zgrad.distributed.rpc.targets import NAMES_REMEMBERED, name_resolver, target_name
from zgrad.distributed.rpc.timer import DeadlineTimer
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import ProtocolError, TransportError, WorkerUnavailableError, ZgradError, ZgradTimeoutError
from zgrad.futures import Future, blocking_hooks
from zgrad.transport import Envelope, create_mesh

__all__ = ["RpcAgent"]

log = logging.getLogger("zgrad.rpc")


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
        self._pending: dict[int, _Pending] = {}
        self._dead: dict[int, str] = {}
        self._names: dict[str, int] = {}
        self._call_names: dict[tuple[int, Any], tuple[str, str]] = {}  # (dst, func) -> (name, description)
        self._infos: list[WorkerInfo] = []
        # This worker's message counts (the callee counts what it receives, rejects and replies).
        self.sent = Counter()
        self.received = Counter()
        self.rejected = Counter()
        self._peer_lost_listeners: list[Callable[[int, str], None]] = []
        self._closed = False
        self.call_hooks: CallHooks = NoCallHooks()
        self.pool = CalleePool(f"zgrad-{plan.name}", plan.config.rpc.num_worker_threads, on_thread_start=self._bind_thread)
        self.timer = DeadlineTimer(f"zgrad-{plan.name}")
        self._resolve_name = name_resolver(plan.config.rpc.allowed_modules, plan.name)
        self.rref_context = RRefContext(plan.rank, plan.name, plan.world_size, send=self.send, caller=self)
        self.callee = Callee(plan.name, plan.config.transport.inline_budget_ms / 1000, self.pool, self.timer,
                             self.rref_context, self._resolve_name, self.sent, self.received, self.rejected)
        self.callee.register_handler(Kind.RESULT, self._on_reply)
        self.callee.register_handler(Kind.ERROR, self._on_reply)
        self.shutdown_barrier = ShutdownBarrier(self)
        self.mesh = create_mesh(
            plan.config, plan.rank, plan.world_size, plan.name,
            on_message=self.callee.on_message, on_peer_lost=self._on_peer_lost,
            valid_kinds=VALID_KINDS, master_addr=plan.master_addr, master_port=plan.master_port,
            on_thread_start=self._bind_io_thread, max_in_handlers=plan.config.rpc.num_worker_threads,
            on_late_reply=self.rref_context.release_late_pins, reply_kinds=REPLY_KINDS,
        )
        self.callee.attach(self.mesh)

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
        self._infos = [WorkerInfo(entry.name, entry.rank) for entry in self.mesh.workers]
        self._names = {info.name: info.id for info in self._infos}
        self.pool.start()
        self.callee.start()

    def close(self) -> None:
        """Stop everything this agent started; pending calls fail. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending, self._pending = self._pending, {}
        self.rref_context.close()
        for p in pending.values():
            if p.future is not None:
                p.future.set_exception(ZgradError(f"RPC agent of {self.name!r} shut down before {p.what} completed"))
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
        self.callee.call_hooks = hooks

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
                               encode_rref=lambda rref: self.rref_context.encode(rref, dst, pins),
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
            if remembered and len(self._call_names) < NAMES_REMEMBERED:
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
        rref_id, fork_id = self.rref_context.new_id(), self.rref_context.new_id()
        created = self.call(info.id, func, args, kwargs, timeout, rref=(rref_id, fork_id))
        return RRef(_context=self.rref_context, _rref_id=rref_id, _owner=info.id, _fork_id=fork_id, _created=created)

    def fetch_rref(self, rref: RRef, timeout: float) -> Any:
        """The value of ``rref`` fetched from its owner (``to_here``). Blocks, caller-direct."""
        owner = self.worker_info(rref._owner)
        timeout_s = self.timeout_s(timeout)
        meta: dict[str, Any] = {"rref": rref.rref_id}
        meta.update(self.call_hooks.outgoing_call(owner.id, ()))
        return self._request_sync(owner.id, Kind.RREF_FETCH, meta, (), timeout_s,
                                  f"to_here() of an RRef owned by {owner.name!r}")

    def _keep_late_pins(self, request_id: int, dst: int, pins: list | None) -> None:
        """A call carrying RRefs to their owner ``dst`` timed out (:meth:`RRefContext.keep_late_pins`)."""
        self.rref_context.keep_late_pins(request_id, dst, pins)

    # --- receiving ------------------------------------------------------------------------------

    def reject(self, src: int, reason: str) -> None:
        """Count and log (once per peer and reason) a message that was dropped (:meth:`Callee.reject`)."""
        self.callee.reject(src, reason)

    def allow_takeover(self) -> None:
        """What a handler must do in arrival order is done (:meth:`Callee.allow_takeover`)."""
        self.callee.allow_takeover()

    def _on_reply(self, envelope: Envelope) -> None:
        with self._lock:
            pending = self._pending.get(envelope.request_id)
            if pending is None or pending.dst != envelope.src or pending.future is None:
                pending = None
        if pending is None:
            self.rejected["late or unknown reply"] += 1
            self.rref_context.release_late_pins(envelope.src, envelope.request_id)
            return
        try:
            value = self._reply_value(envelope, pending.decode, pending.context, pending.what)
        except Exception as exc:  # noqa: BLE001 - a remote error, or a malformed reply: the caller's to see
            self.callee.allow_takeover()
            self._finish(envelope.request_id, error=exc)
            return
        self.callee.allow_takeover()  # the future's callbacks are the user's code
        self._finish(envelope.request_id, value=value)

    def _reply_value(self, envelope: Envelope, decode: bool, context: int | None, what: str) -> Any:
        """The value a RESULT carries (the envelope itself unless ``decode``), or raise what an ERROR carries."""
        if envelope.kind == Kind.ERROR:
            raise remote_error_from_meta(envelope.meta)
        if not decode:
            return envelope
        try:
            decoded = decode_value(envelope.meta["payload"], envelope.buffers, self.rref_context.decode, self._resolve_name,
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

    # --- failures -------------------------------------------------------------------------------

    def _unavailable(self, rank: int, reason: str) -> WorkerUnavailableError:
        name = self._infos[rank].name if rank < len(self._infos) else f"rank {rank}"
        return WorkerUnavailableError(f"worker {name!r} (rank {rank}) is unavailable: {reason}")

    def _on_peer_lost(self, rank: int, reason: str) -> None:
        """The mesh lost ``rank`` (on the I/O thread). A loss comes after that peer's messages:
        those still waiting in the early queue run first."""
        if not self.callee.hold_early(lambda: self._peer_lost(rank, reason)):
            self._peer_lost(rank, reason)

    def _peer_lost(self, rank: int, reason: str) -> None:
        with self._lock:
            self._dead[rank] = reason
            lost = [rid for rid, p in self._pending.items() if p.dst == rank and p.future is not None]
        self.rref_context.peer_lost(rank)
        for request_id in lost:
            self._finish(request_id, error=self._unavailable(rank, reason))
        for listener in self._peer_lost_listeners:
            try:
                listener(rank, reason)
            except Exception:  # noqa: BLE001
                log.exception("a peer-lost listener raised")

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
            "callee_tasks_in_flight": self.pool.in_flight() + self.callee.calls_running(),
            "callee_threads_peak": self.pool.peak_threads,
            "messages_sent": {KIND_NAMES.get(k, str(k)): n for k, n in self.sent.items()},
            "messages_received": {KIND_NAMES.get(k, str(k)): n for k, n in self.received.items()},
            "rejects": sum(self.rejected.values()),
            "rejects_by_reason": dict(self.rejected),
            "rrefs_owned": len(self.rref_context),
            "dead_workers": [self._infos[r].name for r in self.dead_workers()],
            "transport": self.mesh.stats(),
        }


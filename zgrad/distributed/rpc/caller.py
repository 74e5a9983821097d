"""The caller side of one worker: its requests and their replies, behind one interface.

Two request lifecycles, one object (:class:`Caller`): :meth:`Caller.call`, :meth:`Caller.remote`
and :meth:`Caller.request` return a future, completed where the reply lands; in
:meth:`Caller.call_sync`, :meth:`Caller.fetch` and :meth:`Caller.start_call` /
:meth:`Caller.collect` the calling thread waits for its reply itself. One table holds both
kinds of call in flight (``pending.py``).

Threads (``docs/architecture.md``, Threading model): the thread holding the mesh's inbound
socket hands RESULT and ERROR to :meth:`Caller.on_reply` (a handler of the callee side), which
completes their futures; a thread of the I/O role hands its role on before any future's wait
(``blocking_hooks``). ``rpc_sync`` and ``to_here`` send on the calling thread's own socket and
wait there (``Mesh.call``): no timer entry, their own deadline. ``rpc_async`` and ``remote`` go
through the mesh; the timer thread fails those past their timeout, the I/O thread those to a
worker it lost.
"""

from __future__ import annotations

import time
import types
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from zgrad.distributed.rpc.codec import NameResolver, decode_value, encode_value
from zgrad.distributed.rpc.device_maps import inverse
from zgrad.distributed.rpc.hooks import CallHooks, NoCallHooks
from zgrad.distributed.rpc.messages import KIND_NAMES, Kind, check_meta
from zgrad.distributed.rpc.pending import CallsInFlight, DirectCall, Pending
from zgrad.distributed.rpc.remote_errors import remote_error_from_meta
from zgrad.distributed.rpc.rref import RRef
from zgrad.distributed.rpc.targets import NAMES_REMEMBERED, target_name
from zgrad.distributed.rpc.timer import DeadlineTimer
from zgrad.distributed.rpc.worker_info import WorkerInfo, WorkerTable
from zgrad.errors import ProtocolError, TransportError, WorkerUnavailableError, ZgradError, ZgradTimeoutError
from zgrad.futures import Future, blocking_hooks
from zgrad.transport import Envelope, Mesh

if TYPE_CHECKING:
    from zgrad.distributed.rpc.rref_context import RRefContext

__all__ = ["Caller", "DirectCall"]


class Caller:
    """The requests of one worker. Built by the agent, which gives it the mesh, the RRef context
    and the callee's ``allow_takeover`` once they exist (:meth:`attach`).

    Args:
        name: this worker's name (for errors).
        default_timeout_s: ``[rpc] default_timeout_s``, for a call whose timeout is -1.
        device_maps: ``[rpc] device_maps`` (peer name -> {device here: device there}).
        workers: the job's workers (filled once the agent joined the mesh).
        timer: the agent's timer (fails futures that run past their timeout).
        resolve_name: ``resolve(name, what)``: a class named in a reply, under this worker's allow-list.
        sent, received, rejected: the worker's message counters, counted into here.
    """

    def __init__(self, name: str, default_timeout_s: float, device_maps: dict[str, dict[str, str]],
                 workers: WorkerTable, timer: DeadlineTimer, resolve_name: NameResolver, sent: Counter,
                 received: Counter, rejected: Counter) -> None:
        self.name = name
        self._default_timeout_s = default_timeout_s
        self._device_maps = device_maps
        self._reply_maps: dict[int, dict[str, str] | None] = {}  # peer id -> the inverse, for replies
        self._workers = workers
        self._timer = timer
        self._resolve_name = resolve_name
        self._sent, self._received, self._rejected = sent, received, rejected
        self._calls = CallsInFlight(name, timer)
        self._call_names: dict[tuple[int, Any], tuple[str, str]] = {}  # (dst, func) -> (name, description)
        self.call_hooks: CallHooks = NoCallHooks()
        self._mesh: Mesh | None = None
        self._rrefs: RRefContext | None = None
        self._allow_takeover: Callable[[], None] | None = None

    def attach(self, mesh: Mesh, rrefs: "RRefContext", allow_takeover: Callable[[], None]) -> None:
        """Send through ``mesh``; encode and decode RRefs with ``rrefs``; call ``allow_takeover``
        (:meth:`Callee.allow_takeover`) once a reply is decoded, before its future completes."""
        self._mesh, self._rrefs, self._allow_takeover = mesh, rrefs, allow_takeover

    # --- the verbs ------------------------------------------------------------------------------

    def call(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1,
             rref: tuple[int, int] | None = None) -> Future:
        """Start ``func(*args, **kwargs)`` on worker ``to``; the future holds its result. Does not block.
        ``rref``: the ids of the RRef (and its first fork) the result becomes (:meth:`remote`)."""
        info = self._workers.resolve(to)
        timeout_s = self.timeout_s(timeout)
        meta, buffers, what, pins = self._call_message(info.id, func, args, kwargs, timeout_s, rref)
        return self.request(info.id, Kind.CALL, meta, buffers, timeout_s, what, pins=pins)

    def call_sync(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1) -> Any:
        """Run ``func(*args, **kwargs)`` on worker ``to`` and return its result. Blocks: the calling
        thread waits for the reply itself (``Mesh.call``, which picks the route)."""
        info = self._workers.resolve(to)
        timeout_s = self.timeout_s(timeout)
        meta, buffers, what, pins = self._call_message(info.id, func, args, kwargs, timeout_s)
        return self._request_sync(info.id, Kind.CALL, meta, buffers, timeout_s, what, pins)

    def start_call(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None,
                   timeout: float = -1) -> DirectCall:
        """Start ``func(*args, **kwargs)`` on worker ``to`` and return at once; :meth:`collect`,
        called by the same thread, waits for the results there (``Mesh.post`` and ``Mesh.collect``,
        which pick the route: no hand-off to the I/O thread on this side for a small call).
        Raises only for a bad ``to``: a call that could not be sent carries its error to :meth:`collect`."""
        info = self._workers.resolve(to)
        timeout_s = self.timeout_s(timeout)
        meta, buffers, what, pins = self._call_message(info.id, func, args, kwargs, timeout_s)
        call = DirectCall(info.id, what, meta, pins, time.monotonic() + timeout_s if timeout_s > 0 else None)
        try:
            call.request_id = self._register_sync(info.id, meta, what)
        except ZgradError as exc:
            call.error, call.finished = exc, True
            return call
        try:
            self._sent[Kind.CALL] += 1
            self._mesh.post(info.id, Kind.CALL, call.request_id, meta, buffers)
        except ZgradError as exc:
            self._fail_direct(call, self._sync_error(exc, what, timeout_s))
        return call

    def collect(self, calls: list[DirectCall]) -> list[tuple[Any, BaseException | None]]:
        """Wait, on the calling thread, for the results of ``calls`` (started by this thread with
        :meth:`start_call`: every such call must be collected, by it); return ``(value, None)`` or
        ``(None, error)`` for each, in order. Each ends by its reply, its timeout (the late reply
        is dropped), the loss of its worker, the end of this thread's connection to it, or this
        agent's shutdown."""
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
                for envelope in self._mesh.collect(expected, None, max(0.0, wait_s)):
                    call = waiting.pop(envelope.request_id)
                    try:
                        call.value = self._sync_reply_value(envelope, call.meta.get("context"), call.what)
                    except Exception as exc:  # noqa: BLE001 - a remote error or a malformed reply: the caller's
                        call.error = exc
                    call.finished = True
                    self._calls.pop(call.request_id)
                self._end_stalled(waiting, expected)
        finally:
            if hooks.exit is not None:
                hooks.exit()
        return [(call.value, call.error) for call in calls]

    def remote(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1) -> RRef:
        """Start ``func`` on ``to`` and return an RRef (owned by ``to``) to its result. Does not block."""
        info = self._workers.resolve(to)
        rref_id, fork_id = self._rrefs.new_id(), self._rrefs.new_id()
        created = self.call(info.id, func, args, kwargs, timeout, rref=(rref_id, fork_id))
        return RRef(_context=self._rrefs, _rref_id=rref_id, _owner=info.id, _fork_id=fork_id, _created=created)

    def fetch(self, rref: RRef, timeout: float) -> Any:
        """The value of ``rref`` fetched from its owner (``to_here``). Blocks, caller-direct."""
        owner = self._workers.resolve(rref._owner)
        timeout_s = self.timeout_s(timeout)
        meta: dict[str, Any] = {"rref": rref.rref_id}
        meta.update(self.call_hooks.outgoing_call(owner.id, ()))
        return self._request_sync(owner.id, Kind.RREF_FETCH, meta, (), timeout_s,
                                  f"to_here() of an RRef owned by {owner.name!r}")

    def request(self, dst: int, kind: int, meta: Any, buffers: Any, timeout_s: float, what: str,
                decode: bool = True, pins: list | None = None) -> Future:
        """Send a message that expects RESULT or ERROR; return the future of the (decoded) reply.
        ``pins``: objects kept alive until the reply (or a failure other than a timeout).

        Raises:
            ZgradError: the agent is shut down (a lost ``dst`` fails the future instead).
        """
        future = Future(what)
        context = meta.get("context") if isinstance(meta, dict) else None
        pending = Pending(future, dst, what, decode, context, pins or None)
        request_id, dead = self._calls.add(dst, pending)
        if dead is not None:
            future.set_exception(self._unavailable(dst, dead))
            return future
        if timeout_s > 0:
            pending.timer = self._timer.schedule(timeout_s, lambda: self._expire(request_id, timeout_s))
        try:
            self.send(dst, kind, meta, buffers, request_id)
        except ZgradError as exc:
            self._calls.finish(request_id, error=exc)
            self.call_hooks.call_failed(dst, meta)
        return future

    def send(self, dst: int, kind: int, meta: Any, buffers: Any = (), request_id: int = 0) -> None:
        """Send one message (no reply expected). Raises WorkerUnavailableError for a dead peer."""
        self._mesh.send(dst, kind, request_id, meta, buffers)
        self._sent[kind] += 1

    def post(self, dst: int, kind: int, meta: Any, buffers: Any = ()) -> int:
        """Send one message whose answer comes back to the calling thread (``Mesh.post``, which
        picks the route), for :meth:`collect_posted`; the request id to wait for."""
        request_id = self._calls.next_id()
        self._mesh.post(dst, kind, request_id, meta, buffers)
        self._sent[kind] += 1
        return request_id

    def collect_posted(self, expected: dict[int, set[int]], wake_fd: int | None, timeout_s: float) -> list[Envelope]:
        """The answers to :meth:`post` messages that arrived (``expected``: rank -> request ids,
        updated), waiting on this thread until some did, ``wake_fd`` is readable or ``timeout_s``
        (at most one wait slice) passed."""
        answers = self._mesh.collect(expected, wake_fd, timeout_s)
        for envelope in answers:
            self._received[envelope.kind] += 1
        return answers

    def worker_info(self, to: "str | int | WorkerInfo | None" = None) -> WorkerInfo:
        """Resolve a worker name, rank or WorkerInfo (None = this worker); see :meth:`WorkerTable.resolve`."""
        return self._workers.resolve(to)

    def timeout_s(self, timeout: float) -> float:
        """-1 = the configured default, 0 = none, else seconds."""
        if timeout is None or timeout < 0:
            return self._default_timeout_s
        return float(timeout)

    # --- the calls in flight --------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the agent has shut down (no request starts)."""
        return self._calls.closed

    def requests_in_flight(self, dst: int, context_id: int) -> bool:
        """Whether a call (or fetch) to ``dst`` made in autograd context ``context_id`` awaits its reply."""
        return self._calls.in_context(dst, context_id)

    def pending_count(self) -> int:
        """How many of this worker's calls await their reply."""
        return len(self._calls)

    def wait_no_pending(self, timeout_s: float | None) -> bool:
        """Block until none of this worker's calls is in flight (at most ``timeout_s``; None: no bound)."""
        return self._calls.wait_empty(timeout_s)

    def dead_workers(self) -> dict[int, str]:
        """The workers lost so far: rank -> why."""
        return self._calls.dead_workers()

    def peer_lost(self, rank: int, reason: str) -> None:
        """Worker ``rank`` is lost: no call to it starts from now on, the RRef context lets go of
        what it kept for it, then the calls to it fail."""
        lost = self._calls.lose(rank, reason)
        self._rrefs.peer_lost(rank)
        for request_id in lost:
            self._calls.finish(request_id, error=self._unavailable(rank, reason))

    def close(self) -> bool:
        """The agent shuts down: no request starts from now on; the RRef context closes (so the
        failed futures' callbacks release no fork over the wire), then the calls in flight fail.
        Returns False if closed already."""
        pending = self._calls.close()
        if pending is None:
            return False
        self._rrefs.close()
        for p in pending:
            if p.future is not None:
                p.future.set_exception(ZgradError(f"RPC agent of {self.name!r} shut down before {p.what} completed"))
        return True

    # --- building a call ------------------------------------------------------------------------

    def _call_message(self, dst: int, func: Callable[..., Any], args: Any, kwargs: Any, timeout_s: float,
                      rref: tuple[int, int] | None = None) -> tuple[dict[str, Any], Any, str, list]:
        """The metadata and buffers of a CALL of ``func`` to ``dst``, the call's description, and
        the RRefs it sends to their owner ``dst`` (to keep alive until it is answered)."""
        target, what = self._names_of_call(dst, func)
        pins: list = []
        encoded = encode_value([list(args), dict(kwargs) if kwargs else {}],
                               encode_rref=lambda rref: self._rrefs.encode(rref, dst, pins),
                               device_map=self._device_maps.get(self._workers.infos[dst].name) if self._device_maps else None)
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
            names = (target, f"RPC to {self._workers.infos[dst].name!r} calling {target!r}")
            if remembered and len(self._call_names) < NAMES_REMEMBERED:
                self._call_names[(dst, func)] = names
        return names

    # --- replies to futures (the thread that received them) -------------------------------------

    def on_reply(self, envelope: Envelope) -> None:
        """Complete the future of the request a RESULT or ERROR answers (the callee's handler)."""
        pending = self._calls.get(envelope.request_id)
        if pending is None or pending.dst != envelope.src or pending.future is None:
            self._rejected["late or unknown reply"] += 1
            self._rrefs.release_late_pins(envelope.src, envelope.request_id)
            return
        try:
            value = self._reply_value(envelope, pending.decode, pending.context, pending.what)
        except Exception as exc:  # noqa: BLE001 - a remote error, or a malformed reply: the caller's to see
            self._allow_takeover()
            self._calls.finish(envelope.request_id, error=exc)
            return
        self._allow_takeover()  # the future's callbacks are the user's code
        self._calls.finish(envelope.request_id, value=value)

    def _reply_value(self, envelope: Envelope, decode: bool, context: int | None, what: str) -> Any:
        """The value a RESULT carries (the envelope itself unless ``decode``), or raise what an ERROR carries."""
        if envelope.kind == Kind.ERROR:
            raise remote_error_from_meta(envelope.meta)
        if not decode:
            return envelope
        try:
            decoded = decode_value(envelope.meta["payload"], envelope.buffers, self._rrefs.decode, self._resolve_name,
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
            self._reply_maps[peer] = inverse(self._device_maps.get(self._workers.infos[peer].name))
        return self._reply_maps[peer]

    def _expire(self, request_id: int, timeout_s: float) -> None:
        pending = self._calls.get(request_id)
        if pending is not None:
            self._rrefs.keep_late_pins(request_id, pending.dst, pending.pins)
            self._calls.finish(request_id, error=ZgradTimeoutError(f"{pending.what} ran past {timeout_s:g} seconds"))

    # --- replies read by the calling thread -----------------------------------------------------

    def _register_sync(self, dst: int, meta: dict[str, Any], what: str) -> int:
        """The id of a request to ``dst`` whose reply the calling thread reads itself, registered
        as in flight. Raises for a closed agent or a lost ``dst``."""
        request_id, dead = self._calls.add(dst, Pending(None, dst, what, True, meta.get("context")))
        if dead is not None:
            self.call_hooks.call_failed(dst, meta)
            raise self._unavailable(dst, dead)
        return request_id

    def _request_sync(self, dst: int, kind: int, meta: dict[str, Any], buffers: Any, timeout_s: float, what: str,
                      pins: list | None = None) -> Any:
        """Send a request to ``dst`` and return its decoded reply, read by this thread (``Mesh.call``).
        ``pins``: as for :meth:`request` (the caller's own reference keeps them until the reply)."""
        request_id = self._register_sync(dst, meta, what)
        hooks = blocking_hooks
        if hooks.enter is not None and not self._mesh.role.leads():  # a leader hands its role on lazily (Mesh.call)
            hooks.enter()
        try:
            self._sent[kind] += 1
            envelope = self._mesh.call(dst, kind, request_id, meta, buffers, timeout_s)
        except (ZgradTimeoutError, TransportError) as exc:
            if isinstance(exc, ZgradTimeoutError):
                self._rrefs.keep_late_pins(request_id, dst, pins)
            self.call_hooks.call_failed(dst, meta)
            raise self._sync_error(exc, what, timeout_s) from exc
        finally:
            if hooks.exit is not None:
                hooks.exit()
            self._calls.pop(request_id)
        return self._sync_reply_value(envelope, meta.get("context"), what)

    def _sync_reply_value(self, envelope: Envelope, context: int | None, what: str) -> Any:
        """The value of a reply the calling thread read itself (see :meth:`_reply_value`)."""
        self._received[envelope.kind] += 1
        if envelope.kind not in (Kind.RESULT, Kind.ERROR):
            raise ProtocolError(f"the reply to {what} has kind {KIND_NAMES.get(envelope.kind, envelope.kind)}; expected RESULT or ERROR")
        check_meta(envelope.kind, envelope.meta)
        return self._reply_value(envelope, True, context, what)

    def _end_stalled(self, waiting: dict[int, DirectCall], expected: dict[int, set[int]]) -> None:
        """End the direct calls that can no longer be answered: their worker was lost, its
        connection ended, this agent shut down, or their deadline passed."""
        now_s = time.monotonic()
        for request_id, call in list(waiting.items()):
            dead = self._calls.dead.get(call.dst)
            if dead is not None:
                error: BaseException = self._unavailable(call.dst, dead)
            elif self._calls.closed:
                error = ZgradError(f"RPC agent of {self.name!r} shut down before {call.what} completed")
            elif not self._mesh.awaits(call.dst, request_id):
                error = WorkerUnavailableError(f"{call.what} failed: the connection of this call ended")
            elif call.deadline_s is not None and now_s >= call.deadline_s:
                self._rrefs.keep_late_pins(request_id, call.dst, call.pins)
                error = ZgradTimeoutError(f"{call.what} ran past {call.meta['timeout_s']:g} seconds")
            else:
                continue
            del waiting[request_id]
            expected[call.dst].discard(request_id)
            self._fail_direct(call, error)

    def _fail_direct(self, call: DirectCall, error: BaseException) -> None:
        call.error = error
        call.finished = True
        self.call_hooks.call_failed(call.dst, call.meta)
        if call.request_id:
            self._calls.pop(call.request_id)

    def _sync_error(self, exc: ZgradError, what: str, timeout_s: float) -> ZgradError:
        """The error a caller sees for a request on its own socket that failed with ``exc``."""
        if isinstance(exc, ZgradTimeoutError):
            return ZgradTimeoutError(f"{what} ran past {timeout_s:g} seconds")
        if isinstance(exc, TransportError):
            if self._calls.closed:
                return ZgradError(f"RPC agent of {self.name!r} shut down before {what} completed")
            return ZgradError(f"{what} failed: {exc}")
        return exc

    def _unavailable(self, rank: int, reason: str) -> WorkerUnavailableError:
        return WorkerUnavailableError(f"worker {self._workers.name_of(rank)!r} (rank {rank}) is unavailable: {reason}")

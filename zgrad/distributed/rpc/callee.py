"""The callee side of one worker: inbound dispatch by kind, the early queue, and running calls.

Threads (``docs/architecture.md``, Threading model): the thread holding the mesh's inbound socket
(the I/O role's leader, ``transport/loop/role.py``) calls :meth:`Callee.on_message` and runs the
handler itself: a call's target, an RRef fetch, RRef accounting, completing a reply's future
(the caller side's handler), engine messages. Before a handler blocks in a wait the role passes to a
standby thread (the agent's ``blocking_hooks``); one that runs long is taken over, but only once
it has done what must follow arrival order (:meth:`Callee.allow_takeover`: before a call's
target runs, a reply completes its future, a fetch is answered or engine work runs).

Messages that arrive before the agent has started (and peers lost meanwhile) wait in one queue,
in arrival order; once it has started the callee pool runs them (:meth:`Callee.hold_early`), and
everything that arrives while some still wait queues behind them. ``async_execution`` calls and
fetches of values not yet settled are answered by whichever thread completes their future (a
fetch's answer from the pool).
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from zgrad.distributed.rpc.codec import NameResolver, decode_value, encode_value
from zgrad.distributed.rpc.functions import DeferredResult, deferred_future, is_async_execution
from zgrad.distributed.rpc.hooks import CallHooks, NoCallHooks
from zgrad.distributed.rpc.messages import KIND_NAMES, SCHEMAS, Kind, check_meta
from zgrad.distributed.rpc.pool import CalleePool
from zgrad.distributed.rpc.remote_errors import error_meta, remote_error_from_meta
from zgrad.distributed.rpc.targets import NAMES_REMEMBERED
from zgrad.distributed.rpc.timer import DeadlineTimer
from zgrad.errors import ProtocolError, ZgradError
from zgrad.futures import Future
from zgrad.transport import Envelope, Mesh

if TYPE_CHECKING:
    from zgrad.distributed.rpc.rref_context import RRefContext

__all__ = ["Callee", "Handler"]

log = logging.getLogger("zgrad.rpc")

Handler = Callable[[Envelope], None]


class Callee:
    """The receiving side of one worker: every inbound message goes through :meth:`on_message`.
    Built by the agent, which gives it the mesh once that exists (:meth:`attach`).

    Args:
        name: this worker's name (for logs and the errors sent back).
        inline_budget_s: ``[transport] inline_budget_ms`` in seconds: how long an early message's
            handler runs before the rest of the queue moves on without it.
        pool: the callee pool (runs the early queue, and answers late fetches).
        timer: the agent's timer (starts the early queue's take-over clock).
        rrefs: this worker's RRef context (decodes and encodes RRefs, owns values).
        resolve_name: ``resolve(name, what)``: a function or class named by a peer, under this
            worker's allow-list.
        sent, received, rejected: the worker's message counters, counted into here.
    """

    def __init__(self, name: str, inline_budget_s: float, pool: CalleePool, timer: DeadlineTimer,
                 rrefs: "RRefContext", resolve_name: NameResolver, sent: Counter, received: Counter,
                 rejected: Counter) -> None:
        self.name = name
        self._inline_budget_s = inline_budget_s
        self._pool = pool
        self._timer = timer
        self._rrefs = rrefs
        self._resolve_name = resolve_name
        self._sent, self._received, self._rejected = sent, received, rejected
        self._mesh: Mesh | None = None
        self.call_hooks: CallHooks = NoCallHooks()
        self._handlers: dict[int, Handler] = {}
        self._logged_rejects: set[tuple[int, str]] = set()
        self._targets: dict[str, tuple[Callable[..., Any], str, bool]] = {}  # name -> (target, description, async)
        # Calls running here: started minus finished (two C-level counters: no lock per call).
        self._calls_started = itertools.count()
        self._calls_finished = itertools.count()
        # Messages received before start() (and peers lost meanwhile), in arrival order; None once they have all run.
        self._early: collections.deque[Callable[[], None]] | None = collections.deque()
        self._early_lock = threading.Lock()
        self._started = False
        self._early_running = False  # a thread runs the queue (_run_early); others only add to it
        self._early_turn = 0  # counts the queue's handlers run; a take-over moves it past the running one
        self._early_runner = threading.local()  # .arm: starts the take-over clock of the early message it runs
        self.register_handler(Kind.CALL, self._on_call)
        self.register_handler(Kind.RREF_FETCH, self._on_fetch)
        self.register_handler(Kind.RREF_FORK, rrefs.on_fork)
        self.register_handler(Kind.RREF_DELETE, rrefs.on_delete)

    def attach(self, mesh: Mesh) -> None:
        """Reply and allow take-overs through ``mesh`` (built with :meth:`on_message` as its handler)."""
        self._mesh = mesh

    def register_handler(self, kind: int, handler: Handler) -> None:
        """Route messages of ``kind`` to ``handler``, which runs on the thread that received the
        message (the mesh's I/O leader; see ``transport/loop/role.py``). Messages that arrive before
        the agent has started wait for it, every kind in one queue, and run in arrival order
        before any later one (:meth:`hold_early`). Call before the agent starts."""
        self._handlers[kind] = handler

    def start(self) -> None:
        """The agent has started: run the messages that waited for it, on the pool (then new
        ones run where they arrive)."""
        with self._early_lock:
            self._started = True
            if not self._early:
                self._early = None
                return
            self._early_running = True
        self._pool.submit(self._run_early)

    def calls_running(self) -> int:
        """How many calls run here now (for debug info; read without counting)."""
        finished = self._calls_finished.__reduce__()[1][0]
        return self._calls_started.__reduce__()[1][0] - finished

    # --- dispatch -------------------------------------------------------------------------------

    def reject(self, src: int, reason: str) -> None:
        """Count and log (once per peer and reason) a message that was dropped."""
        self._rejected[reason] += 1
        key = (src, reason)
        if key not in self._logged_rejects:
            self._logged_rejects.add(key)
            log.warning("%s dropped a message from rank %s: %s", self.name, src, reason)

    def on_message(self, envelope: Envelope) -> None:
        """Check one inbound message and run its handler (the mesh's ``on_message``)."""
        kind = envelope.kind
        self._received[kind] += 1
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
            self._rrefs.owned.add_fork(envelope.meta["rref"], envelope.meta["fork"])
        if self._early is not None and self.hold_early(lambda: self._run_handler(handler, envelope)):
            return
        self._run_handler(handler, envelope)

    def _run_handler(self, handler: Handler, envelope: Envelope) -> None:
        try:
            handler(envelope)
        except ProtocolError as exc:
            self.reject(envelope.src, str(exc))
        except Exception:  # noqa: BLE001 - a broken handler must not kill the I/O thread or pool
            log.exception("%s: handling %s from rank %s failed", self.name, KIND_NAMES.get(envelope.kind), envelope.src)

    # --- the early queue ------------------------------------------------------------------------

    def hold_early(self, step: Callable[[], None]) -> bool:
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
        budget_s = self._inline_budget_s
        while True:
            with self._early_lock:
                if not self._early:
                    self._early, self._early_running = None, False
                    return
                step = self._early.popleft()
                self._early_turn += 1
                turn = self._early_turn
            began_s, timers = time.monotonic(), []
            self._early_runner.arm = lambda: timers.append(self._timer.schedule(
                max(0.0, began_s + budget_s - time.monotonic()), lambda: self._take_over_early(turn)))
            try:
                step()
            finally:
                self._early_runner.arm = None
                for timer in timers:
                    self._timer.cancel(timer)
            with self._early_lock:
                if self._early_turn != turn:
                    return  # taken over: a pool thread runs the queue now

    def _take_over_early(self, turn: int) -> None:
        """The early handler ``turn`` ran past the budget: a pool thread runs the rest of the queue."""
        with self._early_lock:
            if self._early_turn != turn:
                return  # it has returned; its runner went on
            self._early_turn += 1
        self._pool.submit(self._run_early)

    def allow_takeover(self) -> None:
        """Called by a message handler once what it must do in arrival order is done (a
        context's registration, an RRef's fork, a reply's decoding): if it then runs past
        ``transport.inline_budget_ms``, the next messages are handled meanwhile on another
        thread (``mesh.role.allow_takeover()``; for the early messages, :meth:`_run_early`'s queue)."""
        arm = getattr(self._early_runner, "arm", None)
        if arm is not None:
            self._early_runner.arm = None
            arm()
        self._mesh.role.allow_takeover()

    # --- calls and fetches ----------------------------------------------------------------------

    def _resolve_call_target(self, name: Any) -> tuple[Callable[..., Any], str, bool]:
        """A CALL's target, its description and whether it is ``async_execution``, resolved once
        per name (a name that failed is checked again each time)."""
        resolved = self._targets.get(name) if isinstance(name, str) else None
        if resolved is None:
            func = self._resolve_name(name, "RPC target")
            resolved = (func, f"RPC target {name!r}", is_async_execution(func))
            if len(self._targets) < NAMES_REMEMBERED:
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
                    decoded = decode_value(meta["payload"], envelope.buffers, self._rrefs.decode, self._resolve_name)
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
            if not self._rrefs.owned.settle(rref_id, envelope.meta["target"], value, remote_error):
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
        value = self._rrefs.owned.read(envelope.meta["rref"])
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
            value.add_done_callback(lambda done: self._pool.submit(lambda: answer(done)))

    def reply(self, envelope: Envelope, kind: int, meta: Any, buffers: Any = ()) -> None:
        """Answer ``envelope`` where its sender waits (``Mesh.reply``). Raises ``ZgradError`` if
        the sender is gone."""
        self._mesh.reply(envelope, kind, meta, buffers)
        self._sent[kind] += 1

    def _reply(self, envelope: Envelope, value: Any, context: Any = None) -> None:
        src = envelope.src
        encoded = encode_value(value, encode_rref=self._rrefs.encode)
        meta: dict[str, Any] = {"payload": encoded.payload}
        extra = self.call_hooks.result_meta(context, src, encoded.tensors)
        if extra:
            meta.update(extra)
        self.reply(envelope, Kind.RESULT, meta, encoded.buffers)

    def _reply_error(self, envelope: Envelope, exc: BaseException) -> None:
        try:
            self.reply(envelope, Kind.ERROR, error_meta(exc, self.name))
        except ZgradError:
            pass  # the caller is gone; nobody is waiting


def _call_arguments(value: Any) -> tuple[list, dict]:
    if not (type(value) is list and len(value) == 2 and type(value[0]) is list and type(value[1]) is dict
            and (not value[1] or all(type(k) is str for k in value[1]))):
        raise ProtocolError("CALL payload must be [args list, kwargs map with string keys]")
    return value[0], value[1]

"""Leader/follower: which thread holds the mesh's sockets and runs its I/O loop now.

One thread at a time, the *leader*, holds the role: it polls the inbound socket, runs the
I/O loop's turns and hands each inbound message to ``on_message`` itself, so a cheap call is
answered by the thread that received it, on the socket it holds, with no hand-off between
threads (``docs/architecture.md``, "Callees answer where the call lands"). Standby threads wait
for the role. The leader gives it up:

- explicitly, before it blocks in a handler (a future's wait, a nested call that is not answered
  within a moment, see ``IoLoop.wait_as_leader``): :meth:`hand_off`;
- or, when a handler that allowed it (:meth:`allow_takeover`) has run longer than
  ``inline_budget_s`` since it began (user code computing, or blocked on a lock), the first
  standby, which watches the leader while handlers run, takes the role over.

Either way a standby becomes the leader and inbound traffic, heartbeats and calls back into
this worker go on; the old leader finishes its handler as an ordinary thread (its sends go
through the outbox to the new leader) and then waits as a standby, or ends if enough do.

Order: the leader hands out one message at a time, so handlers begin in arrival order, and a
handler runs alone until its thread loses the role. A handler is never taken over before it
calls :meth:`allow_takeover`: what it does before (the bookkeeping that must follow arrival
order, such as registering what a later message refers to) is done before the next message is
handled, however long the thread is descheduled. What it does after may overlap the handlers of
later messages.

Moving the sockets between threads goes through :attr:`lock`, the memory barrier ZeroMQ asks
for: the role changes hands under it, and a handler that sends on the leader's sockets
(:meth:`acquire_if_leader`) holds it, so a take-over never lands in the middle of a send. The
leader's own turns run without it: the role is only taken over while a handler runs.

The watching standby sleeps without a timeout while no handler has run for ``_WATCH_IDLE_S``;
the leader wakes it when the next handler allows a take-over. While handlers run it looks every
``inline_budget_s``: no busy polling.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["IoRole", "MeshRole"]

# How long the watcher keeps looking after the last handler, before it sleeps until woken.
_WATCH_IDLE_S = 1.0
# Longest sleep of a thread that is not watching (it looks whether the loop is over).
_STANDBY_SLEEP_S = 30.0
# The leader until the first thread has claimed the role (no thread has id 0).
_STARTING = 0
# Standby threads kept; more end when they lose the role.
_MAX_STANDBY = 2
# How often the watcher looks while no take-over is allowed (max_in_handlers threads are busy).
_CAPPED_LOOK_S = 0.05


class IoRole:
    """The leader role of one mesh and the threads that take turns at it.

    Args:
        name: prefix of the thread names.
        lead: runs the I/O loop's turns on the calling thread while it leads; returns True when
            the loop is over for good, False when the role was handed off or taken over.
        inline_budget_s: how long a handler may run on the leader before a standby takes over.
        max_in_handlers: no take-over while this many threads that lost the role still run their
            handlers (then the leader's handler holds up inbound messages, and back-pressure
            reaches the senders); an explicit :meth:`hand_off` (a thread about to block in a
            wait) is never refused, so nested calls cannot deadlock.
        on_thread_start: called first in every thread of the role (e.g. to bind an RPC agent).
        on_leader: called under :attr:`lock` with the new leader's thread id (None: no leader).
        logger: where a failing thread is logged.
    """

    def __init__(self, name: str, lead: Callable[[], bool], inline_budget_s: float, max_in_handlers: int,
                 on_thread_start: Callable[[], None] | None, on_leader: Callable[[int | None], None],
                 logger: logging.Logger) -> None:
        self._name = name
        self._lead = lead
        self._budget_s = inline_budget_s
        self._max_in_handlers = max_in_handlers
        self._on_thread_start = on_thread_start
        self._on_leader = on_leader
        self._log = logger
        self.lock = threading.Lock()
        self._changed = threading.Condition(self.lock)
        self.leader: int | None = None
        self.busy_since_s: float | None = None  # set while a handler that may be taken over runs
        self._handler_began_s: float | None = None  # when the leader's running handler began
        self._handlers_run = 0
        self._watch_asleep = False
        self._standby: list[int] = []  # idle threads, the watcher first
        self._threads: set[threading.Thread] = set()
        self._fresh: set[threading.Thread] = set()  # started, not yet leading or waiting as a standby
        self._spawned: list[threading.Thread] = []  # every thread of the role that may still run
        self._ended_by: threading.Thread | None = None  # the thread that ran the loop's last turn
        self._serial = 0
        self._over = False
        self.handoffs = 0
        self.takeovers = 0

    # -- threads ----------------------------------------------------------------------------

    def start(self, first: Callable[[], bool]) -> threading.Thread:
        """Start the first thread, the leader from the outset: it runs ``first()`` (start-up, then
        turns; same contract as ``lead``), then serves as any thread of the role."""
        with self.lock:
            self.leader = _STARTING  # held for the first thread: the standby must not take it
            thread = self._spawn(first)
            self._spawn(None)  # the first standby, which watches the leader
            return thread

    def _spawn(self, first: Callable[[], bool] | None) -> threading.Thread:
        self._serial += 1
        thread = threading.Thread(target=self._serve, args=(first,), name=f"{self._name}-{self._serial}", daemon=True)
        self._threads.add(thread)
        self._fresh.add(thread)
        self._spawned = [t for t in self._spawned if t.is_alive()]
        self._spawned.append(thread)
        thread.start()
        return thread

    def _serve(self, first: Callable[[], bool] | None) -> None:
        me = threading.current_thread()
        try:
            if self._on_thread_start is not None:
                self._on_thread_start()
            if first is not None:
                with self.lock:
                    self._fresh.discard(me)
                    self._take(threading.get_ident())
                if first():
                    self._finish()
                    return
            while self._await_role():
                if self._lead():
                    self._finish()
                    return
        except BaseException:  # noqa: BLE001 - logged; the role passes on
            self._log.exception("thread %s of the mesh I/O role failed", me.name)
            self.hand_off()
        finally:
            with self.lock:
                self._threads.discard(me)

    def _take(self, ident: int) -> None:
        self.leader = ident
        self.busy_since_s = self._handler_began_s = None
        self._on_leader(ident)

    def _finish(self) -> None:
        with self.lock:
            self._over = True
            self._ended_by = threading.current_thread()
            self.leader = None
            self._on_leader(None)
            self._changed.notify_all()

    def _await_role(self) -> bool:
        """Wait as a standby until this thread leads (True) or should end (False)."""
        me = threading.get_ident()
        seen = -1
        quiet_since_s = time.monotonic()
        with self.lock:
            self._fresh.discard(threading.current_thread())
            self._standby.append(me)
            try:
                while True:
                    if self._over:
                        return False
                    if self.leader is None:
                        self._take(me)
                        return True
                    if self._standby[0] != me:
                        if len(self._standby) > _MAX_STANDBY:
                            return False
                        self._changed.wait(_STANDBY_SLEEP_S)
                        continue
                    now_s = time.monotonic()
                    since_s = self.busy_since_s
                    capped = self._in_handlers() >= self._max_in_handlers
                    if since_s is not None and now_s - since_s >= self._budget_s and not capped:
                        self.takeovers += 1
                        self._take(me)
                        return True
                    if self._handlers_run != seen:
                        seen, quiet_since_s = self._handlers_run, now_s
                    if since_s is not None:
                        timeout_s = _CAPPED_LOOK_S if capped else max(since_s + self._budget_s - now_s, 0.0005)
                    elif now_s - quiet_since_s < _WATCH_IDLE_S:
                        timeout_s = self._budget_s
                    else:
                        # Asleep until a handler allows a take-over (allow_takeover wakes us); the
                        # flag is set before busy_since_s is read again, so one of the two sees the other.
                        self._watch_asleep = True
                        if self.busy_since_s is not None:
                            self._watch_asleep = False
                            continue
                        timeout_s = _STANDBY_SLEEP_S
                    self._changed.wait(timeout_s)
                    self._watch_asleep = False
            finally:
                was_watcher = self._standby[0] == me
                self._standby.remove(me)
                if not self._standby and not self._over and self.leader is not None:
                    self._spawn(None)  # there is always a standby to take over
                elif was_watcher and self._standby:
                    self._changed.notify_all()  # the next one watches now: it must stop its long sleep

    def _in_handlers(self) -> int:
        """Threads running a handler after losing the role (lock held)."""
        return len(self._threads) - len(self._standby) - (self.leader is not None)

    # -- the leader -------------------------------------------------------------------------

    def begin_handler(self, now_s: float) -> None:
        """The leader starts a handler; it is not taken over before it calls :meth:`allow_takeover`."""
        self._handlers_run += 1
        self._handler_began_s = now_s

    def allow_takeover(self) -> None:
        """Called by a handler running on the leader once what it must do in arrival order is
        done: from now on a standby takes the role over when the handler has run
        ``inline_budget_s`` since it began (at once if it already has). No-op on other threads,
        and outside a handler."""
        if self.leader != threading.get_ident() or self._handler_began_s is None or self.busy_since_s is not None:
            return
        self.busy_since_s = self._handler_began_s
        if self._watch_asleep:  # set by the watcher before it reads busy_since_s: one sees the other
            with self.lock:
                self._changed.notify_all()

    def end_handler(self) -> bool:
        """The handler returned: whether this thread still leads (else it must leave the loop)."""
        with self.lock:
            if self.leader != threading.get_ident():
                return False  # taken over: the handler state is the new leader's now
            self.busy_since_s = self._handler_began_s = None
            return True

    def leads(self) -> bool:
        """Whether the calling thread is the leader."""
        return self.leader == threading.get_ident()

    def acquire_if_leader(self) -> bool:
        """Take :attr:`lock` if the calling thread leads, and keep it (the caller releases it):
        True; False, without the lock, if it does not lead (checked again under the lock)."""
        me = threading.get_ident()
        if self.leader != me:
            return False
        self.lock.acquire()
        if self.leader != me:
            self.lock.release()
            return False
        return True

    def hand_off(self) -> None:
        """If the calling thread leads, give the role to a standby now (before it blocks). Any thread."""
        me = threading.get_ident()
        if self.leader != me:
            return
        with self.lock:
            if self.leader != me:
                return
            self.handoffs += 1
            self.leader = None
            self.busy_since_s = self._handler_began_s = None
            self._on_leader(None)
            if self._standby:
                self._changed.notify_all()
            elif not self._over:
                self._spawn(None)

    def join(self, timeout_s: float) -> list[threading.Thread]:
        """Once the loop is over: wait for the threads that are not running a handler (not the
        calling one) to end — the one that ran the loop's last turn, the standbys and those that
        were just started — and return those still alive. Threads still running a handler end
        when it returns."""
        deadline_s = time.monotonic() + timeout_s
        with self.lock:
            # The loop's last turn is over before its thread leaves the role: wait for that.
            while not self._over and (remaining_s := deadline_s - time.monotonic()) > 0:
                self._changed.wait(remaining_s)
            self._changed.notify_all()
            idle = set(self._standby)
            in_handlers = {t for t in self._threads
                           if t.ident not in idle and t not in self._fresh and t is not self._ended_by}
            me = threading.current_thread()
            threads = [t for t in self._spawned if t not in in_handlers and t is not me]
        for thread in threads:
            thread.join(max(0.0, deadline_s - time.monotonic()))
        return [t for t in threads if t.is_alive()]

    def is_role_thread(self) -> bool:
        """Whether the calling thread is one of the role's."""
        return threading.current_thread() in self._threads


class MeshRole:
    """The I/O role as the layer above sees it (``Mesh.role``): whether the calling thread
    leads, and the two things a handler tells the role. Not about sending: the mesh's verbs
    are ``send``, ``call``, ``post``/``collect`` and ``reply``. Every method is thread-safe
    and a no-op (or False) before the mesh started."""

    __slots__ = ("_role",)

    def __init__(self) -> None:
        self._role: IoRole | None = None

    def bind(self, role: IoRole) -> None:
        """Act on ``role`` from now on (the mesh, when it starts its loop)."""
        self._role = role

    def leads(self) -> bool:
        """Whether the calling thread holds the I/O role now (it is running ``on_message``)."""
        role = self._role
        return role is not None and role.leader == threading.get_ident()

    def hand_off(self) -> None:
        """Called by a thread about to block: if it is the I/O role's leader (running a handler),
        a standby takes the role now, so that inbound messages do not wait for it."""
        role = self._role
        if role is not None:
            role.hand_off()

    def allow_takeover(self) -> None:
        """Called by ``on_message`` once what it must do in arrival order is done: from then on,
        if it runs past ``transport.inline_budget_ms`` (counted from its start), a standby thread
        takes the I/O role over and handles the next messages while it goes on, so what it does
        afterwards is not ordered with them. No-op outside ``on_message``."""
        role = self._role
        if role is not None:
            role.allow_takeover()

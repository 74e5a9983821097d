"""The I/O loop's upkeep (``io_loop.py``): housekeeping when it is due (heartbeats, silence,
handshake failures, start-up progress), closing, losing a peer, and the teardown.

:class:`Upkeep` holds methods of :class:`~zgrad.transport.loop.io_loop.IoLoop`, split off by
job; the state is the loop's. Only the leader of the I/O role runs them.

Closing: the I/O thread sends what is still queued, waits (bounded) until peers reported done
every buffer it offered them by ticket, then sends GOODBYE to every live peer, and runs
until each has answered GOODBYE_ACK, said goodbye itself, or been lost (bounded by the close
timeout). Each pair's messages arrive in order, so an answer means everything sent before it
has arrived; only then are the sockets closed (LINGER 0 loses nothing that mattered).
"""

from __future__ import annotations

import time

import zmq
from zmq.utils.monitor import recv_monitor_message

from zgrad.errors import TransportError
from zgrad.transport import frames as fr

__all__ = ["MAX_POLL_MS", "Upkeep"]

MAX_POLL_MS = 1000
# How long rank 0 keeps running after aborting start-up, so that its ABORT messages leave.
_ABORT_GRACE_S = 0.5


class Upkeep:
    """The I/O loop's housekeeping, closing and loss methods (a base of ``IoLoop``)."""

    def _tickets_returned(self, now_s: float) -> bool:
        """Closing: whether every buffer this worker offered by ticket was reported done, so that
        its memory may go (a peer that defers its reads may still be reading it). Waits at most
        half the close timeout, then goes on (the rest is for the goodbye)."""
        tickets = self._tickets
        if tickets is None or tickets.open_count == 0 or self.table is None:
            return True
        if self._drain_until_s is None:
            self._drain_until_s = now_s + self.close_timeout_s / 2
            self._due_s = min(self._due_s, self._drain_until_s)
        return now_s >= self._drain_until_s

    def _begin_goodbye(self) -> bool:
        """Start the goodbye exchange; False if there is nobody to say it to (not started)."""
        if self.table is None:
            return False
        # The outbox refuses new messages now; what it still holds was sent before close().
        for item in self._outbox.take_all(woken=False):
            self._send(*item)
        live = {r for r in range(self._world_size) if r != self._me.rank and r not in self._dead}
        for rank in live:
            self.send_control(rank, fr.KIND_GOODBYE, None)
        self._awaiting_goodbye = live
        self._stop_at_s = time.monotonic() + self.close_timeout_s
        self._due_s = 0.0
        return True

    def _housekeeping(self, now_s: float) -> None:
        """Heartbeats, silence, handshake failures, start-up progress; then set when it is due again."""
        # Housekeeping comes round at least every MAX_POLL_MS in a loop that runs: a longer gap
        # is time this worker was not listening (what its peers sent meanwhile is still unread),
        # so their silence is judged as it stood at the last housekeeping.
        expected_s = MAX_POLL_MS / 1000 + self._transport.heartbeat_interval_s
        if self._housekept_s is not None and now_s - self._housekept_s > expected_s:
            self._liveness.stalled(now_s - self._housekept_s)
        self._housekept_s = now_s
        for rank in self._liveness.heartbeats_due(now_s):
            self._links.send(rank, self._heartbeat, accounted=False)
            # Due again in an interval even if it waits behind a backlog or its link failed
            # (else every turn would find it due: a busy loop).
            self._liveness.sent_to(rank, now_s)
            self._stats.add("heartbeats_out")
        silent = self._liveness.silent(now_s)
        if silent:
            # Messages still queued in our socket may be from these peers: only declare them
            # lost once the socket is empty, or when they are silent for twice the timeout.
            backlog = self._sockets.inbound.get(zmq.EVENTS) & zmq.POLLIN or self._loopback
            limit_s = self._transport.heartbeat_timeout_s
            for rank, silent_s in silent:
                if not backlog or silent_s > 2 * limit_s:
                    self._lose(rank, f"no message for {silent_s:.1f} s (transport.heartbeat_timeout_s = {limit_s})")
        self._drain_monitor()
        if self._streams is not None and self._streams.connections:
            self._streams.expire(now_s)
        if not self.settled.is_set():
            rv = self._rendezvous
            rv.check_deadline(now_s)
            if rv.error is not None:
                self.error = rv.error
                self.settled.set()
                self._stop_at_s = now_s + _ABORT_GRACE_S
            elif rv.ready and self._cma.settled(give_up=now_s >= rv.deadline_s):
                self.settled.set()
        due = [self._liveness.next_due_s(), self._stop_at_s, now_s + MAX_POLL_MS / 1000]
        if not self.settled.is_set():
            due.append(self._rendezvous.deadline_s)
        self._due_s = min(d for d in due if d is not None)

    def _drain_monitor(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self._sockets.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            self._stats.add("handshake_failed")
            endpoint = event["endpoint"].decode(errors="replace")
            self._stats.warn_once("a client", "handshake_failed", f"event {int(event['event']):#x} on {endpoint}; connection dropped")

    def _on_auth_denied(self, address: str, detail: str) -> None:
        self._stats.add("auth_denied")
        self._stats.warn_once(f"client {address}", "auth_denied", f"{detail}; connection refused")

    def _lose(self, rank: int, reason: str, close_link: bool = True) -> None:
        if rank in self._dead:
            return
        self._dead[rank] = reason
        self._liveness.lose(rank)
        self._outbox.mark_dead(rank, reason)
        self._cma.lost(rank)  # after mark_dead: no ticket for it can be issued and sent later
        self._stats.add("dropped", self._links.drop(rank, close=close_link))
        if self._streams is not None:
            self._streams.drop_rank(rank)
        if self._awaiting_goodbye is not None:
            self._awaiting_goodbye.discard(rank)
        self._stats.add("peers_lost")
        name = self.table[rank].name if self.table is not None else f"rank {rank}"
        log = self._log.info if not close_link else self._log.warning
        log("worker %r: lost peer %r (rank %d): %s", self._me.name, name, rank, reason)
        try:
            self._on_peer_lost(rank, reason)
        except Exception:
            self._log.exception("worker %r: on_peer_lost raised for rank %d", self._me.name, rank)

    def _fail_all(self, reason: str, exc: BaseException) -> None:
        self._outbox.close(reason)
        if not self.settled.is_set():
            self.error = exc
            self.settled.set()
        if self.table is not None:
            for rank in range(self._world_size):
                if rank != self._me.rank:
                    self._lose(rank, reason)

    def _teardown(self) -> None:
        self._outbox.close(f"the mesh of worker {self._me.name!r} is closed")
        self._outbox.detach()
        if not self.settled.is_set():
            self.error = self.error or TransportError(f"the mesh of worker {self._me.name!r} was closed during start-up")
            self.settled.set()
        if self._streams is not None:
            self._streams.close_all()
        self._links.close_all()
        self._sockets.close()
        self._cma.close()
        self.pool.clear()
        self._release()
        self.finished.set()

"""The inbound half of the I/O loop (``io_loop.py``): read one message, check it, and run it.

:class:`Inbound` holds methods of :class:`~zgrad.transport.loop.io_loop.IoLoop`, split off by
job; the state is the loop's. Only the leader of the I/O role runs them.

Inbound checks, in order: peer (routing id names a rank of this job; with CURVE the key's rank
must be that rank; the peer is not lost; once the table is known the session must match), then
the frames (``frames.decode``), then control messages against the rendezvous state.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import zmq

from zgrad.transport import frames as fr
from zgrad.transport.caller_sockets import DIRECT_ID, DIRECT_MAGIC
from zgrad.transport.cma import CMA_KINDS
from zgrad.transport.envelope import Envelope
from zgrad.transport.loop.stream_inbound import StreamConnection

__all__ = ["Inbound", "ROUTING_ID", "routing_id"]

ROUTING_ID = struct.Struct("!4sIQ")
_ROUTING_MAGIC = b"zgid"
GOODBYE_KINDS = frozenset({fr.KIND_GOODBYE, fr.KIND_GOODBYE_ACK})
_AFTER_TABLE_KINDS = GOODBYE_KINDS | CMA_KINDS


def routing_id(rank: int, session: int) -> bytes:
    """Return the routing id a worker's links announce: magic, rank, session."""
    return ROUTING_ID.pack(_ROUTING_MAGIC, rank, session)


class Inbound:
    """The I/O loop's inbound methods (a base of ``IoLoop``)."""

    def _receive(self) -> bool:
        """Receive one message; return whether it was a wake-up."""
        recv = self._sockets.inbound.recv
        try:
            frame = recv(zmq.NOBLOCK, copy=False)
        except zmq.Again:  # readiness can be stale; nothing lost
            return False
        parts = [frame]
        while frame.more:  # the rest of a multipart message is already here (atomic delivery)
            frame = recv(zmq.NOBLOCK, copy=False)
            parts.append(frame)
        ident = parts[0].bytes
        if len(parts) == 2 and ident == self._sockets.wake_id:
            return True
        self._on_inbound(parts, ident)
        return False

    def _on_inbound(self, parts: list, ident: bytes) -> None:
        rank = None
        try:
            rank, session, reply_to = self._identify(parts, ident)
            self._accept(rank, session, reply_to, parts[1:])
        except fr.Rejected as rejected:
            self._stats.reject("an unknown peer" if rank is None else f"rank {rank}", rejected.reason, rejected.detail)

    def _on_link_message(self, connection: StreamConnection, parts: list) -> None:
        """A message read from a peer's stream link, in its turn: as if it came from its DEALER
        (a bad one is dropped alone, as there: the stream itself was well formed)."""
        try:
            self._accept(connection.rank, connection.session, None, parts)
        except fr.Rejected as rejected:
            self._stats.reject(f"rank {connection.rank}", rejected.reason, rejected.detail)

    def _accept(self, rank: int, session: int, reply_to: Any, frames: list) -> None:
        """Decode and handle one message of an identified peer: control here, the layer's to
        ``on_message``.

        Raises:
            Rejected: the frames are malformed, the peer is lost, or the message is out of place.
        """
        kind, flags, request_id, meta, buffers = fr.decode(
            frames, valid_kinds=self._valid_kinds, max_message_bytes=self._max_bytes, take_buffer=self.pool.take,
            remote=self._cma.readers.get(rank), defer_remote=self._defer_cma_reads,
        )
        if rank in self._dead:
            if rank in self._departed and kind in GOODBYE_KINDS:
                return  # the other half of a simultaneous goodbye
            raise fr.Rejected("dead_peer", f"rank {rank} was declared lost: {self._dead[rank]}")
        if kind in fr.RESERVED_KINDS:
            self._on_control(rank, session, kind, meta)
        elif self.table is None:
            raise fr.Rejected("not_ready", f"message kind {kind:#x} before this worker has the worker table")
        else:
            self._deliver(self._arrived(rank, kind, flags, request_id, meta, buffers, reply_to))
            return
        self._liveness.heard_from(rank, time.monotonic())

    def _arrived(self, rank: int, kind: int, flags: int, request_id: int, meta: Any, buffers: tuple,
                 reply_to: Any) -> Envelope:
        """Count a checked message of the layer above and make its envelope."""
        nbytes = 0
        for buffer in buffers:
            nbytes += buffer.nbytes
        self._stats.add_message("messages_in", "bytes_in", nbytes)
        if rank != self._me.rank:
            self._liveness.heard_from(rank, time.monotonic())
        return Envelope(rank, kind, flags, request_id, meta, buffers, self._keys is not None, reply_to)

    def _on_stream(self, fd: int) -> None:
        """A stream socket is readable: take new connections, or read one and queue its complete
        messages to run (the hello first: it binds the connection to a rank, checked like a
        routing id, and says whether it is the peer's link or a caller-direct connection). A
        link's messages are checked in their turn, as a DEALER's; on a caller-direct connection
        anything malformed closes it (a caller waits for its reply, which will not come)."""
        streams = self._streams
        if fd == streams.listen_fd:
            streams.accept()
            return
        connection, messages = streams.receive(fd)
        for parts in messages:
            try:
                if connection.rank is None:
                    self._on_hello(connection, parts)
                    continue
                if connection.link:
                    self._loopback.append((connection, parts))
                    continue
                rank = connection.rank
                if rank in self._dead:
                    raise fr.Rejected("dead_peer", f"rank {rank} was declared lost: {self._dead[rank]}")
                kind, flags, request_id, meta, buffers = fr.decode(
                    parts, valid_kinds=self._valid_kinds, max_message_bytes=self._max_bytes, take_buffer=self.pool.take,
                )
                if kind in fr.RESERVED_KINDS:
                    raise fr.Rejected("bad_control", f"control message kind {kind:#x} on a stream connection")
                self._loopback.append(self._arrived(rank, kind, flags, request_id, meta, buffers, connection))
            except fr.Rejected as rejected:
                streams.reject(connection, rejected)
                return

    def _on_hello(self, connection: StreamConnection, parts: list) -> None:
        ident = bytes(parts[0]) if len(parts) == 1 else b""
        if len(ident) not in (DIRECT_ID.size, ROUTING_ID.size):
            raise fr.Rejected("unknown_peer", f"stream hello {ident[:24].hex()} is not a zgrad worker's")
        rank, session, reply_to = self._identify(parts, ident)
        if rank in self._dead:
            raise fr.Rejected("dead_peer", f"rank {rank} was declared lost: {self._dead[rank]}")
        link = reply_to is None
        if link and any(c.link and c.rank == rank for c in self._streams.connections.values()):
            raise fr.Rejected("unknown_peer", f"a second link from rank {rank} (a stale process, or another one claiming its rank?)")
        connection.rank, connection.session, connection.link = rank, session, link
        if link:
            self._stats.add("stream_links")

    def _on_control(self, rank: int, session: int, kind: int, meta: Any) -> None:
        if kind == fr.KIND_HEARTBEAT:
            self._stats.add("heartbeats_in")
            return
        if kind in _AFTER_TABLE_KINDS and self.table is None:
            raise fr.Rejected("bad_control", f"message kind {kind:#x} before the worker table")
        if kind in CMA_KINDS:
            self._cma.on_control(rank, session, kind, meta)
            if not self.settled.is_set():
                self._due_s = 0.0  # look at start-up progress in this turn
            return
        if kind == fr.KIND_GOODBYE:
            self.send_control(rank, fr.KIND_GOODBYE_ACK, None)
            self._departed.add(rank)
            self._lose(rank, "it closed its mesh (shut down)", close_link=False)
        elif kind == fr.KIND_GOODBYE_ACK:
            if self._awaiting_goodbye is not None:
                self._awaiting_goodbye.discard(rank)
        else:
            self._rendezvous.on_control(rank, session, kind, meta)
            if self.table is None and self._rendezvous.table is not None:
                self.table = self._rendezvous.table
            if kind == fr.KIND_HELLO_ACK:
                self._cma.on_hello_ack(rank)
            self._due_s = 0.0  # look at start-up progress in this turn
        self._stats.add("control_in")

    def _identify(self, parts: list, ident: bytes) -> tuple[int, int, bytes | None]:
        """The sender's rank, session, and the routing id to answer on (a caller-direct socket's) or
        None; ``ident`` is the routing-id frame's bytes."""
        reply_to = None
        if len(ident) == ROUTING_ID.size and ident.startswith(_ROUTING_MAGIC):
            _, rank, session = ROUTING_ID.unpack(ident)
        elif len(ident) == DIRECT_ID.size and ident.startswith(DIRECT_MAGIC):
            _, rank, session, _ = DIRECT_ID.unpack(ident)
            reply_to = ident
        else:
            raise fr.Rejected("unknown_peer", f"routing id {ident[:24].hex()} is not a zgrad worker's")
        if rank >= self._world_size or (rank == self._me.rank and reply_to is None):
            raise fr.Rejected("unknown_peer", f"routing id claims rank {rank}; peers are ranks 0..{self._world_size - 1} but {self._me.rank}")
        if self._keys is not None:
            try:
                user_id = parts[0].get("User-Id")
            except zmq.ZMQError:
                user_id = None
            if user_id != str(rank):
                raise fr.Rejected("unauthenticated", f"routing id claims rank {rank} but the CURVE key is rank {user_id}'s")
        if self.table is not None and self.table[rank].session != session:
            raise fr.Rejected("unknown_peer", f"rank {rank} session {session:#x} is not the one in the worker table (a stale process?)")
        if reply_to is not None and self.table is None:
            raise fr.Rejected("not_ready", "a caller-direct message before this worker has the worker table")
        return rank, session, reply_to

    def _deliver(self, envelope: Envelope) -> None:
        """Run ``on_message`` on this thread, the leader, which may be taken over meanwhile:
        afterwards, the caller leaves the loop unless ``role.leads()``. A reply awaited by a
        thread of this worker (``link_replies.py``) goes to that thread instead."""
        replies = self._link_replies
        if envelope.kind in replies.kinds and envelope.reply_to is None and replies.deliver(envelope):
            return  # the reply to a request that went over the link: its thread waits for it
        role = self.role
        role.begin_handler(time.monotonic())
        try:
            self._on_message(envelope)
        except Exception as exc:
            self._stats.add("callback_errors")
            self._log.error("worker %r: on_message raised %r for kind %#x from rank %d", self._me.name, exc, envelope.kind, envelope.src, exc_info=True)
        finally:
            role.end_handler()

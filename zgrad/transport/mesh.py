"""The send surface of the transport, and the route each message takes: :class:`Mesh`.

The layers above say only *send this* (:meth:`Mesh.send`), *call and wait* (:meth:`Mesh.call`),
*send a request whose reply this thread collects* (:meth:`Mesh.post`, :meth:`Mesh.collect`) and
*reply* (:meth:`Mesh.reply`). The route is decided here, in one place, from the message and the
configuration: a request (``call``/``post``) with less than ``transport.direct_max_kb`` of
buffers goes on the calling thread's own socket (caller-direct, ``caller_sockets.py``); with
more, and every ``send``, on the peer's link, whose kind the mesh picks too (a stream with CURVE
off over tcp and ipc and ``transport.direct_streams``, else a ZeroMQ DEALER), and a buffer of
``transport.cma_min_kb`` or more to a peer on this host that passed the start-up probe goes by
single copy (``cma.py``). The message paths (``docs/transport.md``, Message paths):

============================  =====================================  ============================  ==========================  =============================
message                       path                                   written by                    read by                     copies of a buffer's bytes
============================  =====================================  ============================  ==========================  =============================
small request (``call``,      the calling thread's own stream to     the calling thread            the callee's I/O leader     inline ones (up to 16 KiB):
``post``), peer with a        the callee's stream listener                                         (``stream_inbound.py``)     one into the head frame, one
stream socket                                                                                                              more when the message (16 KiB
                                                                                                                           at most) is joined for one
                                                                                                                           write, one out of the reader's
                                                                                                                           64 KiB scratch buffer; bigger:
                                                                                                                           none (gathered ``sendmsg``,
                                                                                                                           read straight into place)
its reply (``reply``)         back on that connection                whichever callee thread       the calling thread          as above
                                                                     answers, under its lock
small request, no stream      the thread's own DEALER to the         the calling thread            the callee's I/O leader     inline ones: one; frames under
(CURVE, inproc, plugins,      callee's ROUTER                                                                              64 KiB: one (pyzmq), bigger:
``direct_streams = false``)                                                                                                none; inproc: every frame one
its reply                     the callee's ROUTER to that            the callee's leader (another  the calling thread          as above
                              routing id                             thread: outbox, then leader)
``send``; a request of        the outbox and the peer's link         the sending thread on an      the peer's I/O leader       as for the link's kind; to a
``direct_max_kb`` or more;    (stream or DEALER)                     idle stream link with         (``on_message``)            peer on this host, buffers of
a reply to a message that                                            nothing waiting                                           ``cma_min_kb`` or more: one
came on a link                                                       (``StreamLink.write``), else                              (the reader's
                                                                     the I/O leader                                            ``process_vm_readv``), none on
                                                                                                                           the socket
the reply to a request that   the callee's link back                 as ``send``                   this worker's leader, which as above
took the link                                                                                      hands it to the waiting
                                                                                                   thread (``link_replies.py``)
a message to this worker      the outbox, then the loop's loopback   queued by the sender          the I/O leader              one (value semantics)
itself
heartbeats, HELLO, GOODBYE,   the link                               the I/O leader                the peer's I/O leader       none
CMA control
============================  =====================================  ============================  ==========================  =============================

Order: what ``send`` carries between two workers arrives in the order sent; requests are not
ordered with ``send`` (see ``docs/transport.md``, Order).

Example (two workers as threads of one process, over inproc)::

    from zgrad.config import parse_config
    from zgrad.transport import create_mesh

    config = parse_config({"transport": {"kind": "inproc"}})

    def make(rank):
        return create_mesh(config, rank, 2, f"w{rank}", on_message=print,
                           on_peer_lost=lambda r, why: None, valid_kinds={1})

    a, b = make(0), make(1)
    # start() blocks until every worker is up, so start the two concurrently
    threading.Thread(target=b.start).start(); a.start()
    a.send(1, kind=1, request_id=7, meta={"hello": "world"}, buffers=[b"raw bytes"])
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import zmq

from zgrad.errors import TransportError
from zgrad.transport import frames as fr
from zgrad.transport.caller_sockets import WAIT_SLICE_S
from zgrad.transport.envelope import Envelope, WorkerEntry
from zgrad.transport.lifecycle import MeshLifecycle
from zgrad.transport.loop.stream_inbound import StreamConnection

__all__ = ["Mesh"]

_POLLIN = int(zmq.POLLIN)


class Mesh(MeshLifecycle):
    """One worker's place in the broker-less mesh: an inbound socket, one link per peer, the
    I/O role's threads, and the calling threads' own sockets.

    Created by :func:`~zgrad.transport.create.create_mesh`. Lifecycle (``lifecycle.py``):
    ``bind()`` (optional) -> ``start()`` -> the verbs -> ``close()``; also a context manager
    that closes on exit. The verbs: :meth:`send`, :meth:`call`, :meth:`post` with
    :meth:`collect`, :meth:`reply`; the I/O role (leader/follower threads) is :attr:`role`.
    All methods are thread-safe.
    """

    def send(
        self,
        dst_rank: int,
        kind: int,
        request_id: int,
        meta: Any = None,
        buffers: Sequence[Any] = (),
        flags: int = 0,
    ) -> None:
        """Queue one message to ``dst_rank`` (this worker's own rank included). Thread-safe.

        Messages from one worker to another arrive in the order ``send`` was called (for calls
        from one thread; calls from several threads arrive in the order they took the queue).
        Buffers are not copied (except over inproc): do not modify them after sending. A buffer
        of at least ``transport.cma_min_kb`` to a peer on this host is read by the peer's I/O
        thread straight from this memory (cross-memory attach), so that window lasts until the
        peer has received the message.

        Args:
            dst_rank: the receiver's rank.
            kind: one of this mesh's ``valid_kinds``.
            request_id: unsigned 64-bit value handed to the receiver as is.
            meta: any msgpack-serializable value.
            buffers: buffer-protocol objects (bytes, bytearray, memoryview, C-contiguous arrays).
            flags: unsigned 16-bit value handed to the receiver as is.

        Blocks only while ``dst_rank`` has ``transport.high_water_mark`` messages waiting,
        at most ``transport.send_timeout_s``; never on the I/O thread.

        Raises:
            WorkerUnavailableError: ``dst_rank`` is known to be dead (at once).
            TransportError: the mesh is not started or closed, or the message exceeds
                ``transport.max_message_mb``.
            ZgradTimeoutError: no room for ``dst_rank`` within ``transport.send_timeout_s``.
            ValueError: bad ``dst_rank``, ``kind``, ``request_id`` or ``flags``.
            TypeError: ``meta`` is not msgpack-serializable or a buffer is not a contiguous buffer.
        """
        started = self._loop is not None and self._loop.table is not None
        views, meta_bytes, nbytes = self._checked(dst_rank, kind, meta, buffers, started)
        self._put(dst_rank, kind, flags, request_id, meta_bytes, views, nbytes)

    def _put(self, dst_rank: int, kind: int, flags: int, request_id: int, meta_bytes: bytes, views: list,
             nbytes: int) -> None:
        """Encode a checked message (big buffers to a peer on this host by ticket) into the outbox."""
        tickets = self._tickets
        issued = None
        try:
            if tickets is not None and views:
                views, issued = tickets.attach(dst_rank, views)
            frames = fr.encode(kind, flags, request_id, meta_bytes, views, self._chunk_bytes)
            self._outbox.put(dst_rank, (dst_rank, frames, nbytes, None))
        except BaseException:
            if issued:
                tickets.cancel(issued)
            raise

    def _frames(self, dst_rank: int, kind: int, request_id: int, meta: Any, buffers: Sequence[Any]) -> tuple[list, int]:
        """Check and encode one message that goes without cross-memory attach; (frames, buffer bytes)."""
        views, meta_bytes, nbytes = self._checked(dst_rank, kind, meta, buffers, self._callers_ready())
        return fr.encode(kind, 0, request_id, meta_bytes, views, self._chunk_bytes), nbytes

    def _callers_ready(self) -> bool:
        return self._callers is not None and self._loop.table is not None

    def _checked(self, dst_rank: int, kind: int, meta: Any, buffers: Sequence[Any],
                 started: bool) -> tuple[list, bytes, int]:
        """Check a message to send and encode its metadata: (buffer views, meta bytes, buffer bytes)."""
        if kind not in self._valid_kinds:
            raise ValueError(f"message kind {kind!r} is not in this mesh's valid_kinds {sorted(self._valid_kinds)}")
        if not 0 <= dst_rank < self.world_size:
            raise ValueError(f"dst_rank {dst_rank!r} is out of range 0..{self.world_size - 1}")
        if not started:
            raise TransportError(f"the mesh of worker {self.name!r} is not started: call start() first")
        views = []
        nbytes = 0
        for buffer in buffers:
            view = fr.as_byte_view(buffer)
            views.append(view)
            nbytes += view.nbytes
        meta_bytes = fr.encode_meta(meta)
        if nbytes + len(meta_bytes) > self._max_bytes:
            raise TransportError(
                f"message to {self.describe(dst_rank)} is {nbytes + len(meta_bytes)} bytes; the cap is "
                f"{self._max_bytes} (transport.max_message_mb): split it or raise the cap on every worker"
            )
        return views, meta_bytes, nbytes

    def call(self, dst_rank: int, kind: int, request_id: int, meta: Any, buffers: Sequence[Any],
             timeout_s: float) -> Envelope:
        """Send one request to ``dst_rank`` and wait on the calling thread for its reply, which
        the callee sends with :meth:`reply`. Blocks. Thread-safe.

        The route is the mesh's (see the module's table): with less than
        ``transport.direct_max_kb`` of buffers, the calling thread's own socket, where the reply
        comes back (no I/O thread on this side); with more, the link, where the request and its
        reply may go by same-host single copy, and the leader hands the reply to this thread.
        Either way the request is not ordered with the messages of :meth:`send`.

        Args:
            dst_rank, kind, request_id, meta, buffers: as for :meth:`send`; ``request_id`` must
                be unique among this worker's requests in flight.
            timeout_s: longest wait for the reply; 0 waits as long as the peer lives.

        Returns:
            The reply, an :class:`Envelope` with the same ``request_id``.

        Raises:
            WorkerUnavailableError: ``dst_rank`` is (or, while waiting, was declared) lost.
            ZgradTimeoutError: no reply within ``timeout_s`` (a later reply is dropped and counted).
            TransportError: the mesh is not started or closed, or the message is over the cap.
            ValueError, TypeError: as for :meth:`send`.
        """
        views, meta_bytes, nbytes = self._checked(dst_rank, kind, meta, buffers, self._callers_ready())
        deadline_s = time.monotonic() + timeout_s if timeout_s > 0 else None
        if nbytes < self._direct_max_bytes:
            frames = fr.encode(kind, 0, request_id, meta_bytes, views, self._chunk_bytes)
            return self._callers.call(dst_rank, request_id, frames, deadline_s)
        inbox = self._link_replies.expect(dst_rank, request_id)
        try:
            self._put(dst_rank, kind, 0, request_id, meta_bytes, views, nbytes)
            self.role.hand_off()
            expected = {dst_rank: {request_id}}
            while True:
                replies = self._take_routed(inbox, expected)
                if replies:
                    return replies[0]
                wait_s = WAIT_SLICE_S if deadline_s is None else min(WAIT_SLICE_S, deadline_s - time.monotonic())
                if wait_s <= 0 or not zmq.zmq_poll([(inbox.fd, _POLLIN)], int(wait_s * 1000) + 1):
                    self._callers.check_waiting(dst_rank, deadline_s)
        finally:
            self._link_replies.forget(dst_rank, request_id)

    def post(self, dst_rank: int, kind: int, request_id: int, meta: Any, buffers: Sequence[Any]) -> None:
        """Send one request to ``dst_rank`` and return at once: the calling thread collects its
        reply with :meth:`collect` (it must: replies to it go nowhere else). Routed as
        :meth:`call` routes; not ordered with :meth:`send`. Blocks only while the socket is not
        connected yet or the peer has no room, at most ``transport.send_timeout_s``.
        Thread-safe; raises as :meth:`send` does."""
        views, meta_bytes, nbytes = self._checked(dst_rank, kind, meta, buffers, self._callers_ready())
        if nbytes < self._direct_max_bytes:
            frames = fr.encode(kind, 0, request_id, meta_bytes, views, self._chunk_bytes)
            self._callers.post(dst_rank, frames, self._config.transport.send_timeout_s)
            return
        self._link_replies.expect(dst_rank, request_id)
        try:
            self._put(dst_rank, kind, 0, request_id, meta_bytes, views, nbytes)
        except BaseException:
            self._link_replies.forget(dst_rank, request_id)
            raise

    def collect(self, expected: dict[int, set[int]], wake_fd: int | None, timeout_s: float) -> list[Envelope]:
        """Collect replies to the calling thread's :meth:`post` requests. Blocks at most
        ``timeout_s`` (and at most one wait slice, 50 ms). Thread-safe (each thread its own).

        Args:
            expected: rank -> the request ids awaited from it; the ids of the replies returned
                are removed from it. A reply to another request is dropped (``late_replies``).
            wake_fd: also return (maybe with nothing) when this file descriptor is readable.
            timeout_s: longest wait.

        Returns:
            The replies that arrived, in no particular order; maybe none.
        """
        inbox = self._link_replies.mine()
        if inbox is None:
            return self._callers.collect(expected, [] if wake_fd is None else [wake_fd], timeout_s)
        replies = self._take_routed(inbox, expected)
        if replies:
            return replies
        replies = self._callers.collect(expected, [inbox.fd] if wake_fd is None else [inbox.fd, wake_fd], timeout_s)
        return replies + self._take_routed(inbox, expected)

    def _take_routed(self, inbox: Any, expected: dict[int, set[int]]) -> list[Envelope]:
        """The replies routed from the link to the calling thread's ``inbox`` that ``expected``
        awaits (removed from it); the others are late (their waiter gave up): dropped, counted."""
        replies = []
        for reply in self._link_replies.take(inbox):
            ids = expected.get(reply.src)
            if ids is not None and reply.request_id in ids:
                ids.discard(reply.request_id)
                replies.append(reply)
                continue
            self._routed_late += 1
            if self._on_late_reply is not None:
                self._on_late_reply(reply.src, reply.request_id)
        return replies

    def awaits(self, dst_rank: int, request_id: int) -> bool:
        """Whether the reply to the calling thread's :meth:`post` request ``request_id`` to
        ``dst_rank`` can still arrive (False once the connection it went on ended or the peer
        was lost). Thread-safe."""
        if self._link_replies.awaits(dst_rank, request_id):
            return True
        return self._callers is not None and self._callers.has_socket(dst_rank)

    def reply(self, to: Envelope, kind: int, meta: Any = None, buffers: Sequence[Any] = ()) -> None:
        """Answer the message ``to`` where its sender waits: on the caller-direct socket it came
        from, else as :meth:`send` to its sender (with ``to.request_id``). Thread-safe; raises as
        :meth:`send` does."""
        if to.reply_to is None:
            self.send(to.src, kind, to.request_id, meta, buffers)
            return
        frames, nbytes = self._frames(to.src, kind, to.request_id, meta, buffers)
        if type(to.reply_to) is StreamConnection:
            # Written by this thread, whichever it is; dropped if the caller's connection is gone.
            to.reply_to.reply(frames)
            return
        self._outbox.check(to.src)
        if not self._loop.reply_now(to.src, to.reply_to, frames, nbytes):
            self._outbox.put(to.src, (to.src, frames, nbytes, to.reply_to))


    @property
    def workers(self) -> tuple[WorkerEntry, ...]:
        """The worker table, by rank. Available once start-up has the table.

        Raises:
            TransportError: the mesh has not been started.
        """
        table = self._loop.table if self._loop is not None else None
        if table is None:
            raise TransportError(f"the worker table of {self.name!r} is not known yet: call start() first")
        return table

    def rank_of(self, name: str) -> int:
        """Return the rank of the worker called ``name``.

        Raises:
            KeyError: no worker has that name (the message lists them).
            TransportError: the mesh has not been started.
        """
        for entry in self.workers:
            if entry.name == name:
                return entry.rank
        raise KeyError(f"no worker named {name!r}; workers: {', '.join(e.name for e in self.workers)}")

    def is_alive(self, rank: int) -> bool:
        """Whether ``rank`` has not been declared lost. Thread-safe."""
        return self._outbox.dead_reason(rank) is None

    def stats(self) -> dict:
        """Return a snapshot of the counters. Thread-safe.

        Keys (absent until non-zero): ``messages_out``, ``bytes_out``, ``messages_in``,
        ``bytes_in`` (buffer bytes of user messages; loopback ones included, also counted in
        ``loopback``; replies received on caller-direct sockets included), ``heartbeats_out``,
        ``heartbeats_in``, ``control_in`` (start-up messages accepted), ``peers_lost``, ``dropped``
        (messages to a lost peer), ``callback_errors``, ``handshake_failed``, ``auth_denied``,
        ``direct_requests`` and ``late_replies`` (caller-direct requests made here, and replies
        to them that came after their caller gave up), ``link_thread_writes`` (messages, also in
        ``messages_out``, that a thread other than the I/O thread wrote on a stream link itself), ``cma_sent``/``cma_bytes_out`` (buffers sent by ticket), ``cma_received``/``cma_bytes_in``
        (buffers read from peers), ``cma_no_ticket`` (big buffers sent inline: the table was
        full or ``high_water_mark`` tickets were open to that peer), ``cma_peers_readable``
        (peers this worker reads); always present: ``rejected`` (reason -> count),
        ``rejected_total``, ``pool_reused``, ``pool_allocated``,
        ``cma_peers`` (peers that read this worker's tickets), ``cma_tickets_open`` (tickets not
        yet reported done; back to 0 when every message was received).
        """
        out = self._stats.snapshot()
        tickets = self._tickets
        out["cma_peers"] = len(tickets.readers) if tickets is not None else 0
        out["cma_tickets_open"] = tickets.open_count if tickets is not None else 0
        if tickets is not None:
            for key, value in (("cma_sent", tickets.sent), ("cma_bytes_out", tickets.bytes_out),
                               ("cma_no_ticket", tickets.no_ticket)):
                if value:
                    out[key] = value
        direct = self._callers
        if direct is not None:
            for key, value in (("direct_requests", direct.requests), ("late_replies", direct.late_replies + self._routed_late)):
                if value:
                    out[key] = value
            for key, value in (("messages_in", direct.replies_in), ("bytes_in", direct.reply_bytes_in)):
                if value:
                    out[key] = out.get(key, 0) + value
        if self._loop is not None:
            writes, nbytes = self._loop.link_thread_writes()
            if writes:
                out["link_thread_writes"] = writes
                out["messages_out"] = out.get("messages_out", 0) + writes
                if nbytes:
                    out["bytes_out"] = out.get("bytes_out", 0) + nbytes
        pool = self._loop.pool if self._loop is not None else None
        out["pool_reused"] = pool.reused if pool is not None else 0
        out["pool_allocated"] = pool.allocated if pool is not None else 0
        return out

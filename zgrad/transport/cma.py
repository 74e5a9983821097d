"""Same-host single-copy transfer of large buffers: tickets read with Linux cross-memory attach.

Loopback TCP and Unix sockets copy every byte twice through the kernel; ``process_vm_readv``
copies once, from the sender's memory into the receiver's, several times faster
(``bench/transport.py``). The receiver must be allowed to read the sender (same host, same pid
namespace, ptrace permission); whether it is, is found out at start-up, per pair and per
direction, and anything that fails keeps the normal frames.

Protocol (transport-reserved kinds, see ``frames.py``), once both sides have the worker table::

    A -> B  CMA_OFFER  {pid, table, slots, nonce}  A's ticket table: sent when B acknowledges A's hello
    B -> A  CMA_READY  {readable: bool}            B read the 16-byte nonce at ``table`` in ``pid``
                                                   (and has cma on): A may send B tickets from now on
    A -> B  a message whose buffer length has ``REMOTE_BIT`` set and whose frame is a descriptor
            (slot, generation) instead of the bytes
    B -> A  CMA_DONE   [slot, generation, ...]     the tickets B is done with, batched: at once
                                                   from 16 tickets or 8 MiB, else within 1 ms

The ticket table (``cma_tickets.py``) lives in the sender's memory: a nonce, then ``slots``
tickets of ``=QQQQII`` (address, length, generation, receiver session, receiver rank, state). This
module is the rest: the probe (CMA_OFFER, CMA_READY), the reads and the done reports
(:class:`CmaPeers`, :class:`PeerReader`, :class:`RemoteRead`). Before sending, A writes
a ticket naming B and keeps a reference to the buffer; B reads the ticket from A's memory and
accepts it only if it is issued, of the descriptor's generation and length, and names B (rank
and session). A peer can therefore make B read only memory the real sender offered to B: a
forged descriptor reaches nothing else of the sender. B then reads the bytes into a pooled
buffer and reads the ticket again: if the sender took it back meanwhile (it was released, so
the memory may be gone) the message is rejected as ``bad_cma``. Either way B reports the ticket
done, and A clears it and drops the buffer. A's tickets to a lost peer, and all of them when
the mesh closes, are taken back by A's I/O thread.

Deferred reads (meshes made with ``defer_cma_reads=True``, the process group's): the I/O thread
does not read remote buffers; it hands the layer above a :class:`RemoteRead` per buffer, which
the consumer's own thread reads straight into the memory where the bytes belong (the checks are
the same) or releases. A handle reports its ticket done when read, released or dropped, waking
the I/O thread to send the CMA_DONE. That takes the bulk copy off the I/O thread (one busy thread
per worker instead of two) and saves the copy out of a receive buffer.

Threads: :class:`TicketTable` is shared (any thread issues, the I/O thread takes back; one
lock); :class:`CmaPeers` and :class:`PeerReader` belong to the I/O thread, except that reads and
releases of deferred buffers come from any thread (the readers' pending reports are under a
lock shared with :meth:`CmaPeers.flush`).
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from zgrad.errors import TransportError
from zgrad.transport import cma_sys
from zgrad.transport import frames as fr
from zgrad.transport.cma_tickets import MAX_SLOTS, NONCE_BYTES, TICKET, TICKET_ISSUED, TicketTable
from zgrad.transport.envelope import WorkerEntry
from zgrad.transport.stats import TransportStats

__all__ = ["CmaPeers", "PeerReader", "RemoteRead", "CMA_KINDS"]

CMA_KINDS = frozenset({fr.KIND_CMA_OFFER, fr.KIND_CMA_READY, fr.KIND_CMA_DONE})
_MAX_PID = 1 << 31
# CMA_DONE batching: each one costs both I/O threads a message, as much as reading a 64 KiB
# buffer, so a peer is told at once only when this many tickets or bytes are pending, and
# otherwise within DONE_DELAY_S (the sender's buffers are held that much longer).
DONE_BATCH_TICKETS = 16
DONE_BATCH_BYTES = 8 << 20
DONE_DELAY_S = 0.001


class PeerReader:
    """Reads one peer's tickets and the buffers they name (the I/O thread; deferred reads and
    releases from any thread, see :class:`RemoteRead`).

    Args:
        lock: guards ``pending`` and the shared ``dirty`` list (one per :class:`CmaPeers`).
        wake: called after a release from another thread, so the I/O thread sends the CMA_DONE.
    """

    def __init__(self, read: cma_sys.Reader, read_small: cma_sys.Reader, pid: int, table: int, slots: int,
                 me: WorkerEntry, rank: int, dirty: list[int], stats: TransportStats, lock: threading.Lock,
                 wake: Callable[[], None]):
        self._read = read
        self._read_small = read_small
        self._peer = rank
        self.pending: list[int] = []
        self.pending_bytes = 0
        self.since_s = 0.0
        self._dirty = dirty
        self._lock = lock
        self._wake = wake
        self.pid = pid
        self._table = table
        self._slots = slots
        self._rank = me.rank
        self._session = me.session
        self._stats = stats

    def release(self, slot: int, generation: int, nbytes: int = 0, wake: bool = False) -> None:
        """Report ``(slot, generation)`` done to the sender (batched, see :meth:`CmaPeers.flush`);
        ``nbytes`` read from it count toward the batch. ``wake``: called off the I/O thread."""
        with self._lock:
            first = not self.pending
            if first:
                self._dirty.append(self._peer)
                self.since_s = time.monotonic()
            self.pending += (slot, generation)
            self.pending_bytes += nbytes
        if wake and first:  # the I/O thread then sends it within DONE_DELAY_S, with what follows
            self._wake()

    def read(self, slot: int, generation: int, nbytes: int, take_buffer: Callable[[int], memoryview]) -> memoryview:
        """Check the ticket, read its ``nbytes`` into a buffer from ``take_buffer``, check it again.

        Raises:
            frames.Rejected: ``bad_cma`` — no such slot, a ticket not issued to this worker for
                this generation and length, or the memory could not be read.
        """
        out = self._check_and_read(slot, generation, nbytes, take_buffer)
        self._stats.add("cma_received")
        self._stats.add("cma_bytes_in", nbytes)
        with self._lock:
            self.pending_bytes += nbytes
        return out

    def defer(self, slot: int, generation: int, nbytes: int) -> "RemoteRead":
        """A handle reading ticket ``(slot, generation)`` later (see :class:`RemoteRead`)."""
        return RemoteRead(self, slot, generation, nbytes)

    def _check_and_read(self, slot: int, generation: int, nbytes: int, take_buffer: Callable[[int], Any]) -> Any:
        if not 0 <= slot < self._slots:
            raise fr.Rejected("bad_cma", f"ticket slot {slot} is outside the sender's table of {self._slots}")
        where = self._table + NONCE_BYTES + slot * TICKET.size
        ticket = self._ticket(where)
        address, length, issued_generation, session, rank, state = ticket
        if state != TICKET_ISSUED or issued_generation != generation or rank != self._rank or session != self._session:
            raise fr.Rejected("bad_cma", f"ticket {slot} generation {generation} is not one the sender issued to this worker")
        if length != nbytes:
            raise fr.Rejected("bad_cma", f"ticket {slot} offers {length} bytes; the message says {nbytes}")
        out = take_buffer(nbytes)
        try:
            cma_sys.read_into(self._read, self.pid, address, out)
        except OSError as exc:
            raise fr.Rejected("bad_cma", f"reading ticket {slot} ({nbytes} bytes) from pid {self.pid} failed: {exc}") from None
        if self._ticket(where) != ticket:
            raise fr.Rejected("bad_cma", f"ticket {slot} was taken back by the sender while it was being read")
        return out

    def _ticket(self, where: int) -> tuple[int, ...]:
        scratch = bytearray(TICKET.size)  # per call: deferred reads come from several threads
        try:
            got = self._read_small(self.pid, where, ctypes.addressof(ctypes.c_char.from_buffer(scratch)), TICKET.size)
        except OSError as exc:
            raise fr.Rejected("bad_cma", f"the sender's ticket table at pid {self.pid} cannot be read: {exc}") from None
        if got != TICKET.size:
            raise fr.Rejected("bad_cma", f"short read of a ticket: {got} of {TICKET.size} bytes")
        return TICKET.unpack(scratch)


class RemoteRead:
    """A received buffer still in the sender's memory (meshes with ``defer_cma_reads``).

    Read it once, on any thread, with :meth:`read_into` (straight into its destination) or
    :meth:`read`, or give it up with :meth:`release`; dropping it unread releases it too. The
    sender keeps the memory until then, so read or release it soon.

    Attributes:
        nbytes: the buffer's size.
    """

    __slots__ = ("_reader", "_slot", "_generation", "nbytes", "_open")

    def __init__(self, reader: PeerReader, slot: int, generation: int, nbytes: int) -> None:
        self._reader = reader
        self._slot = slot
        self._generation = generation
        self.nbytes = nbytes
        self._open = True

    def read_into(self, out: Any) -> None:
        """Copy the bytes into the writable C-contiguous buffer ``out`` of exactly :attr:`nbytes`
        (one ``process_vm_readv``, GIL released), after the same checks as an eager read.

        Raises:
            TransportError: already read or released, a size mismatch, or the ticket failed its
                checks or could not be read (the sender is gone, or it was forged).
        """
        view = memoryview(out).cast("B") if not isinstance(out, memoryview) or out.format != "B" else out
        if view.nbytes != self.nbytes:
            raise TransportError(f"a remote buffer of {self.nbytes} bytes cannot be read into {view.nbytes} bytes")
        if not self._open:
            raise TransportError("this remote buffer was already read or released")
        reader = self._reader
        try:
            reader._check_and_read(self._slot, self._generation, self.nbytes, lambda _n: view)
        except fr.Rejected as exc:
            raise TransportError(f"reading a remote buffer from rank {reader._peer} failed: {exc.detail}") from None
        finally:
            self.release()
        with reader._lock:  # stats are otherwise the I/O thread's alone
            reader._stats.add("cma_received")
            reader._stats.add("cma_bytes_in", self.nbytes)

    def read(self) -> memoryview:
        """The bytes, in a new writable buffer (see :meth:`read_into`)."""
        out = memoryview(bytearray(self.nbytes))
        self.read_into(out)
        return out

    def release(self) -> None:
        """Let the sender take its memory back without reading it (idempotent)."""
        if self._open:
            self._open = False
            self._reader.release(self._slot, self._generation, self.nbytes, wake=True)

    def __del__(self) -> None:
        if getattr(self, "_open", False):
            try:
                self.release()
            except Exception:  # noqa: BLE001 - interpreter or mesh shutting down: nothing to tell
                pass

    def __repr__(self) -> str:
        return f"<RemoteRead {self.nbytes} bytes from rank {self._reader._peer}{'' if self._open else ' (done)'}>"


class CmaPeers:
    """The I/O thread's side of cross-memory attach: offers, probes, readers, releases.

    Args:
        send_control: queues a transport message to a rank (the I/O loop's).
        tickets: this worker's table, or ``None`` when it neither offers nor reads.
        me: this worker's table entry.
        stats: the mesh counters.
        logger: where the one-line reasons for falling back go (debug).
    """

    def __init__(self, send_control: Callable[[int, int, Any], None], tickets: TicketTable | None, me: WorkerEntry,
                 stats: TransportStats, logger: logging.Logger, wake: Callable[[], None] = lambda: None):
        self._send_control = send_control
        self._wake = wake
        self._lock = threading.Lock()
        self._tickets = tickets
        self._me = me
        self._stats = stats
        self._log = logger
        self._read = cma_sys.libc_reader() if tickets is not None else None
        self._read_small = cma_sys.libc_reader(hold_gil=True) if tickets is not None else None
        self.readers: dict[int, PeerReader] = {}
        # Peers with tickets to report done; the I/O loop calls flush() when this is non-empty.
        self.dirty: list[int] = []
        self._offered: set[int] = set()
        self._answered: set[int] = set()

    def on_hello_ack(self, rank: int) -> None:
        """``rank`` has the table and answered our hello: offer it our tickets (once)."""
        if self._tickets is not None and rank not in self._offered:
            self._offered.add(rank)
            self._send_control(rank, fr.KIND_CMA_OFFER, self._tickets.offer())

    def settled(self, give_up: bool) -> bool:
        """Whether every offer was answered; with ``give_up``, stop waiting for the others."""
        missing = self._offered - self._answered
        if missing and give_up:
            self._log.warning("worker %r: no CMA answer from ranks %s; sending them inline frames",
                              self._me.name, sorted(missing))
            self._answered |= missing
            missing = set()
        return not missing

    def on_control(self, rank: int, session: int, kind: int, meta: Any) -> None:
        """Handle CMA_OFFER, CMA_READY or CMA_DONE from ``rank`` (the table is known).

        Raises:
            frames.Rejected: ``bad_control`` for a malformed or unexpected message.
        """
        if kind == fr.KIND_CMA_OFFER:
            readable = self._accept_offer(rank, meta)
            self._send_control(rank, fr.KIND_CMA_READY, {"readable": readable})
        elif kind == fr.KIND_CMA_READY:
            readable = meta.get("readable") if isinstance(meta, dict) else None
            if rank not in self._offered or not isinstance(readable, bool):
                raise fr.Rejected("bad_control", f"CMA_READY {meta!r} from rank {rank}, which was not offered tickets")
            self._answered.add(rank)
            if readable:
                self._tickets.readers[rank] = session
        else:
            self._on_done(rank, meta)

    def _accept_offer(self, rank: int, meta: Any) -> bool:
        fields = [meta.get(k) for k in ("pid", "table", "slots", "nonce")] if isinstance(meta, dict) else [None] * 4
        pid, table, slots, nonce = fields
        if not (all(type(f) is int for f in (pid, table, slots)) and isinstance(nonce, bytes)
                and 0 < pid < _MAX_PID and 0 < table < 1 << 64 and 0 < slots <= MAX_SLOTS and len(nonce) == NONCE_BYTES):
            raise fr.Rejected("bad_control", f"CMA_OFFER from rank {rank} is malformed: {meta!r}")
        if self._read is None:
            return False
        probe = bytearray(NONCE_BYTES)
        try:
            got = self._read_small(pid, table, ctypes.addressof(ctypes.c_char.from_buffer(probe)), NONCE_BYTES)
        except OSError as exc:
            self._log.debug("worker %r: cannot read rank %d (pid %d): %s; inline frames", self._me.name, rank, pid, exc)
            return False
        if got != NONCE_BYTES or bytes(probe) != nonce:
            self._log.debug("worker %r: rank %d's nonce is not at pid %d; inline frames", self._me.name, rank, pid)
            return False
        old = self.readers.get(rank)
        reader = PeerReader(self._read, self._read_small, pid, table, slots, self._me, rank, self.dirty, self._stats,
                            self._lock, self._wake)
        if old is not None:  # a repeated offer: keep what is still to be reported
            reader.pending = old.pending
        self.readers[rank] = reader
        self._stats.add("cma_peers_readable")
        return True

    def _on_done(self, rank: int, meta: Any) -> None:
        if (self._tickets is None or not isinstance(meta, list) or len(meta) % 2
                or not all(type(x) is int for x in meta)):
            raise fr.Rejected("bad_control", f"CMA_DONE from rank {rank} is malformed or unexpected")
        bad = self._tickets.release(rank, meta)
        if bad:
            raise fr.Rejected("bad_cma", f"CMA_DONE from rank {rank} names {bad} ticket(s) not issued to it")

    def flush(self) -> float | None:
        """Send CMA_DONE to each peer with enough pending tickets, or whose oldest waited long enough.

        Returns:
            when the remaining ones are due (monotonic seconds), or ``None`` if none remain.
        """
        now_s = time.monotonic()
        due_s = None
        waiting = []
        ready = []
        with self._lock:
            for rank in self.dirty:
                reader = self.readers.get(rank)
                if reader is None or not reader.pending:
                    continue
                if (len(reader.pending) < 2 * DONE_BATCH_TICKETS and reader.pending_bytes < DONE_BATCH_BYTES
                        and now_s < reader.since_s + DONE_DELAY_S):
                    waiting.append(rank)
                    due_s = min(due_s or now_s + DONE_DELAY_S, reader.since_s + DONE_DELAY_S)
                    continue
                ready.append((rank, reader.pending))
                reader.pending = []
                reader.pending_bytes = 0
            self.dirty[:] = waiting
        for rank, pending in ready:
            self._send_control(rank, fr.KIND_CMA_DONE, pending)
        return due_s

    def lost(self, rank: int) -> None:
        """``rank`` is gone: stop reading it and take back every ticket issued to it."""
        self.readers.pop(rank, None)
        if self._tickets is not None:
            self._tickets.release_rank(rank)

    def close(self) -> None:
        """The mesh closed: take back every ticket."""
        self.readers.clear()
        if self._tickets is not None:
            self._tickets.release_all()

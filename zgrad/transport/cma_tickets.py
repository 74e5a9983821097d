"""This worker's cross-memory-attach tickets: the table in its own memory that names the buffers
it offers each reader, and the references that keep those buffers alive until the reader reports
them done (the protocol, the probe and the reads are ``cma.py``'s).

The table is a nonce, then ``slots`` tickets of ``=QQQQII`` (address, length, generation,
receiver session, receiver rank, state). Threads: any thread issues tickets, the I/O thread
takes them back; one lock.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import struct
import threading
from collections.abc import Sequence
from typing import Any

from zgrad.transport import cma_sys
from zgrad.transport import frames as fr

__all__ = ["TicketTable", "make_ticket_table", "TICKET", "TICKET_ISSUED", "NONCE_BYTES", "DEFAULT_SLOTS", "MAX_SLOTS"]

NONCE_BYTES = 16
TICKET = struct.Struct("=QQQQII")  # address, nbytes, generation, receiver session, receiver rank, state
TICKET_ISSUED = 1
_FREE_TICKET = bytes(TICKET.size)
DEFAULT_SLOTS = 4096
MAX_SLOTS = 1 << 20


class TicketTable:
    """This worker's offers to its readers: a table in its own memory, and the buffers it names.

    A descriptor is a few bytes, so ZeroMQ's and the kernel's buffers no longer bound how many
    big buffers wait for a slow peer; ``per_peer`` does: beyond it, buffers go inline again and
    meet the usual back-pressure.

    Args:
        min_bytes: buffers at least this big go by ticket (``transport.cma_min_kb``).
        per_peer: most tickets open to one peer (``transport.high_water_mark``).
        slots: tickets in the table; beyond them buffers go inline.
    """

    def __init__(self, min_bytes: int, per_peer: int, slots: int = DEFAULT_SLOTS):
        self.min_bytes = min_bytes
        self.per_peer = per_peer
        self.slots = slots
        self._memory = (ctypes.c_char * (NONCE_BYTES + slots * TICKET.size))()
        self._view = memoryview(self._memory).cast("B")
        self.address = ctypes.addressof(self._memory)
        self.nonce = secrets.token_bytes(NONCE_BYTES)
        self._view[:NONCE_BYTES] = self.nonce
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._free = list(range(slots - 1, -1, -1))
        self._held: list[tuple[memoryview, int] | None] = [None] * slots
        self._generation = [0] * slots
        self._open_to: dict[int, int] = {}
        # rank -> session of the peers that said they read this table (written by the I/O thread).
        self.readers: dict[int, int] = {}
        self.sent = 0
        self.bytes_out = 0
        self.no_ticket = 0

    def offer(self) -> dict:
        """Return the CMA_OFFER metadata: where a peer finds this table and how to check it."""
        return {"pid": self.pid, "table": self.address, "slots": self.slots, "nonce": self.nonce}

    @property
    def open_count(self) -> int:
        """Tickets issued and not yet taken back."""
        return self.slots - len(self._free)

    def attach(self, dst: int, views: Sequence[Any]) -> tuple[Sequence[Any], list[int] | None]:
        """Replace each big view in ``views`` by a ticket for ``dst`` (any thread).

        Returns:
            ``(views, slots)``: ``views`` with :class:`frames.RemoteBuffer` in place of the buffers
            now offered by ticket, and the slots issued (``None`` if none; pass them to
            :meth:`cancel` if the message is not sent after all).
        """
        session = self.readers.get(dst)
        if session is None:
            return views, None
        out = None
        issued: list[int] = []
        for i, view in enumerate(views):
            nbytes = view.nbytes
            if nbytes < self.min_bytes:
                continue
            ticket = self._issue(dst, session, view)
            if ticket is None:
                break
            if out is None:
                out = list(views)
            out[i] = fr.RemoteBuffer(nbytes, fr.DESCRIPTOR.pack(*ticket))
            issued.append(ticket[0])
        return (views, None) if out is None else (out, issued)

    def _issue(self, dst: int, session: int, view: memoryview) -> tuple[int, int] | None:
        address = cma_sys.buffer_address(view)
        with self._lock:
            open_to = self._open_to.get(dst, 0)
            if not self._free or open_to >= self.per_peer:
                self.no_ticket += 1
                return None
            self._open_to[dst] = open_to + 1
            slot = self._free.pop()
            generation = self._generation[slot] + 1
            self._generation[slot] = generation
            self._held[slot] = (view, dst)
            where = NONCE_BYTES + slot * TICKET.size
            TICKET.pack_into(self._view, where, address, view.nbytes, generation, session, dst, TICKET_ISSUED)
            self.sent += 1
            self.bytes_out += view.nbytes
        return slot, generation

    def cancel(self, slots: Sequence[int]) -> None:
        """Take back tickets whose message was never handed to the transport (any thread)."""
        with self._lock:
            dropped = [self._clear(slot) for slot in slots]
        del dropped  # the buffers are let go outside the lock

    def release(self, src: int, pairs: Sequence[int]) -> int:
        """Take back the tickets ``[slot, generation, ...]`` that ``src`` is done with (I/O thread).

        Returns:
            how many pairs did not name a ticket issued to ``src`` (ignored).
        """
        bad = 0
        dropped = []
        with self._lock:
            for i in range(0, len(pairs), 2):
                slot, generation = pairs[i], pairs[i + 1]
                held = self._held[slot] if 0 <= slot < self.slots else None
                if held is None or held[1] != src or self._generation[slot] != generation:
                    bad += 1
                    continue
                dropped.append(self._clear(slot))
        del dropped
        return bad

    def release_rank(self, rank: int) -> None:
        """Take back every ticket issued to ``rank`` (lost or gone)."""
        self.readers.pop(rank, None)
        with self._lock:
            dropped = [self._clear(s) for s, held in enumerate(self._held) if held is not None and held[1] == rank]
        del dropped

    def release_all(self) -> None:
        """Take back every ticket (the mesh closed)."""
        self.readers.clear()
        with self._lock:
            dropped = [self._clear(s) for s, held in enumerate(self._held) if held is not None]
        del dropped

    def _clear(self, slot: int) -> Any:
        # The ticket is wiped before the buffer is let go, so a reader that checks the ticket
        # again after reading knows whether the memory was still held throughout.
        start = NONCE_BYTES + slot * TICKET.size
        self._view[start : start + TICKET.size] = _FREE_TICKET
        held, self._held[slot] = self._held[slot], None
        self._free.append(slot)
        self._open_to[held[1]] -= 1
        return held


def make_ticket_table(config: Any, shares_memory: bool) -> TicketTable | None:
    """Return this worker's ticket table, or ``None`` when cross-memory attach is not to be used.

    Off with ``[transport] cma = "off"``, for transports whose workers share one process
    (inproc), and where the system has no ``process_vm_readv``.
    """
    if config.cma == "off" or shares_memory or cma_sys.libc_reader() is None:
        return None
    return TicketTable(config.cma_min_kb << 10, config.high_water_mark)

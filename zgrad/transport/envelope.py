"""The values the mesh hands to the layer above: an inbound message and a worker-table entry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["Envelope", "WorkerEntry"]


class Envelope(NamedTuple):
    """One inbound message, as passed to ``on_message`` (immutable; a NamedTuple because one is
    built per message on the I/O thread and that is several times cheaper than a frozen dataclass).

    Attributes:
        src: rank of the sender. With CURVE it is the rank bound to the sender's public key
            (authenticated); without, the rank in the sender's routing id, checked against the
            session the worker table recorded for it at start-up.
        kind: the message kind (one of the ``valid_kinds`` given to the mesh).
        flags: 16 bits of the sender's choosing.
        request_id: 64 bits of the sender's choosing.
        meta: the decoded msgpack metadata (lists, dicts, str, bytes, numbers, ``None``).
        buffers: one writable ``memoryview`` of unsigned bytes per sent buffer, no copy made
            after receipt; the views stay valid as long as they are referenced. On a mesh made
            with ``defer_cma_reads``, a buffer that came by cross-memory attach is a
            :class:`~zgrad.transport.cma.RemoteRead` instead (read it or release it).
        authenticated: ``True`` when ``src`` was proven by CURVE.
        reply_to: where the sender waits for the answer, for :meth:`Mesh.reply`: the routing id
            of the caller-direct socket the message came from (``caller_sockets.py``), or the stream
            connection it came on (``stream_inbound.StreamConnection``); None for the sender's link.
    """

    src: int
    kind: int
    flags: int
    request_id: int
    meta: Any
    buffers: tuple[memoryview, ...]
    authenticated: bool = False
    reply_to: Any = None


@dataclass(frozen=True, slots=True)
class WorkerEntry:
    """One worker of the mesh, from the table rank 0 handed out at start-up.

    Attributes:
        rank: the worker's rank, ``0 .. world_size - 1``.
        name: the worker's unique name.
        endpoint: the ZeroMQ endpoint its inbound socket is bound at, e.g. ``tcp://10.0.0.2:29500``.
        session: a random 64-bit number identifying this run of the worker (internal: it lets
            the mesh drop messages from a stale process that claims the same rank).
        stream: the address of its stream socket for caller-direct requests (``streams.py``),
            e.g. ``tcp://10.0.0.2:41234``; "" when it has none (CURVE, inproc, turned off).
    """

    rank: int
    name: str
    endpoint: str
    session: int
    stream: str = ""

"""Start-up: rank 0 collects every worker's endpoint, hands out the table, and all say hello.

The protocol (transport-reserved kinds, see ``frames.py``)::

    rank r != 0 -> rank 0   REGISTER  {rank, name, endpoint, stream, world_size, transport, curve}
    rank 0 -> every rank    TABLE     {workers: [[name, endpoint, session, stream], ...]}   (by rank)
                            ABORT     {reason}        (rank 0 gave up; everyone fails with it)
    every rank -> each peer HELLO     None            (sent once the table is known)
    peer -> sender          HELLO_ACK None            (sent once the peer knows the table)

A worker is ready once every peer acknowledged its hello: then each link works both ways
and every peer has the table, so traffic is peer to peer and rank 0 is an ordinary worker.
The session of each worker (a random 64-bit number in its routing id) is recorded in the
table, so a stale process claiming a rank is told apart. ``stream`` is the worker's stream
socket (``streams.py``), or "" when it has none: links are dialled there when it is known (rank
0's from REGISTER, the others' from the table; a peer's link to rank 0, which carried REGISTER,
moves there on the table), and caller-direct requests go there.

Pure logic over a :class:`Link` (the I/O loop), so it is tested without sockets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from zgrad.errors import TransportError, ZgradTimeoutError
from zgrad.transport.envelope import WorkerEntry
from zgrad.transport.frames import (
    KIND_ABORT,
    KIND_HELLO,
    KIND_HELLO_ACK,
    KIND_REGISTER,
    KIND_TABLE,
    Rejected,
)

__all__ = ["Link", "Rendezvous"]


class Link(Protocol):
    """What the rendezvous needs from the I/O loop."""

    def connect_peer(self, rank: int, endpoint: str, session: int | None, stream: str = "") -> None:
        """Open the outbound connection to ``rank`` (idempotent), on its stream socket ``stream``
        where it has one; a link opened before the stream was known moves to it."""

    def send_control(self, rank: int, kind: int, meta: Any) -> None:
        """Queue a transport message to ``rank``."""


def _field(meta: Any, key: str, tp: type, kind: str) -> Any:
    value = meta.get(key) if isinstance(meta, dict) else None
    if not isinstance(value, tp) or isinstance(value, bool) and tp is not bool:
        raise Rejected("bad_control", f"{kind} field {key!r} is {value!r}; expected {tp.__name__}")
    return value


def _stream_field(address: str, what: str) -> str:
    if address and not address.startswith(("tcp://", "ipc://")):
        raise Rejected("bad_control", f"{what} is {address!r}; expected tcp://host:port, ipc://path or \"\"")
    return address


class Rendezvous:
    """The start-up state of one worker.

    Args:
        link: the I/O loop.
        me: this worker's table entry.
        world_size: number of workers.
        rank0_endpoint: where rank 0 listens (unused on rank 0).
        job: facts every worker must agree on (transport name, whether CURVE is on).
        names: worker names known from the config, by rank, for error messages.
        timeout_s: ``transport.connect_timeout_s``, for error messages.
        deadline_s: monotonic time by which the worker must be ready.
    """

    def __init__(
        self,
        link: Link,
        me: WorkerEntry,
        world_size: int,
        rank0_endpoint: str | None,
        job: dict,
        names: Sequence[str],
        timeout_s: float,
        deadline_s: float,
    ):
        self._link = link
        self._me = me
        self._world_size = world_size
        self._rank0_endpoint = rank0_endpoint
        self._job = job
        self._names = names
        self._timeout_s = timeout_s
        self._registered: dict[int, WorkerEntry] = {me.rank: me}
        self._early_hellos: dict[int, int] = {}
        self._acked: set[int] = set()
        self.table: tuple[WorkerEntry, ...] | None = None
        self.error: Exception | None = None
        self.deadline_s = deadline_s

    @property
    def ready(self) -> bool:
        """Whether every peer has acknowledged this worker's hello."""
        return self.table is not None and len(self._acked) == self._world_size - 1

    def begin(self) -> None:
        """Send the first messages (rank != 0: REGISTER to rank 0)."""
        if self._me.rank == 0:
            self._maybe_publish()
            return
        self._link.connect_peer(0, self._rank0_endpoint, None)
        meta = {"rank": self._me.rank, "name": self._me.name, "endpoint": self._me.endpoint, "stream": self._me.stream,
                "world_size": self._world_size}
        self._link.send_control(0, KIND_REGISTER, meta | self._job)

    def on_control(self, src: int, session: int, kind: int, meta: Any) -> None:
        """Handle one rendezvous message from rank ``src`` (already checked to be a peer rank).

        Raises:
            Rejected: the message is malformed or out of place.
        """
        if kind == KIND_REGISTER:
            self._on_register(src, session, meta)
        elif kind == KIND_TABLE:
            self._on_table(src, session, meta)
        elif kind == KIND_ABORT:
            if src != 0 or self.table is not None:
                raise Rejected("bad_control", f"ABORT from rank {src} after start-up or not from rank 0")
            reason = _field(meta, "reason", str, "ABORT")
            self.error = TransportError(f"worker {self._me.name!r} (rank {self._me.rank}): rank 0 aborted start-up: {reason}")
        elif kind == KIND_HELLO:
            if self.table is None:
                self._early_hellos[src] = session
            else:
                self._link.send_control(src, KIND_HELLO_ACK, None)
        elif kind == KIND_HELLO_ACK:
            if self.table is None:
                raise Rejected("bad_control", f"HELLO_ACK from rank {src} before the worker table")
            self._acked.add(src)

    def _on_register(self, src: int, session: int, meta: Any) -> None:
        if self._me.rank != 0 or self.table is not None:
            raise Rejected("bad_control", f"REGISTER from rank {src} sent to rank {self._me.rank} after start-up or not to rank 0")
        rank = _field(meta, "rank", int, "REGISTER")
        name = _field(meta, "name", str, "REGISTER")
        endpoint = _field(meta, "endpoint", str, "REGISTER")
        stream = _stream_field(_field(meta, "stream", str, "REGISTER"), "REGISTER field 'stream'")
        world_size = _field(meta, "world_size", int, "REGISTER")
        if rank != src:
            raise Rejected("bad_control", f"REGISTER claims rank {rank} from a connection of rank {src}")
        old = self._registered.get(rank)
        if old is None:
            self._link.connect_peer(rank, endpoint, session, stream)  # also lets an ABORT reach it
        job = {k: meta.get(k) for k in self._job}
        if world_size != self._world_size or job != self._job:
            self._fail(
                f"worker {name!r} (rank {rank}) runs with world_size={world_size}, {job}; rank 0 runs with "
                f"world_size={self._world_size}, {self._job}: start every worker from the same config",
                also=rank,
            )
            return
        if old is not None and old.session != session:
            self._fail(f"rank {rank} was registered twice: by {old.name!r} at {old.endpoint} and by {name!r} at {endpoint}; ranks must be unique")
            return
        clash = [e for e in self._registered.values() if e.name == name and e.rank != rank]
        if clash:
            self._fail(f"worker name {name!r} is used by rank {clash[0].rank} and rank {rank}; names must be unique", also=rank)
            return
        self._registered[rank] = WorkerEntry(rank, name, endpoint, session, stream)
        self._maybe_publish()

    def _maybe_publish(self) -> None:
        if len(self._registered) < self._world_size:
            return
        table = tuple(self._registered[r] for r in range(self._world_size))
        rows = [[e.name, e.endpoint, e.session, e.stream] for e in table]
        for rank in range(1, self._world_size):
            self._link.send_control(rank, KIND_TABLE, {"workers": rows})
        self._set_table(table)

    def _on_table(self, src: int, session: int, meta: Any) -> None:
        if src != 0 or self.table is not None or self._me.rank == 0:
            raise Rejected("bad_control", f"TABLE from rank {src}; only rank 0 sends it, once")
        rows = _field(meta, "workers", list, "TABLE")
        if len(rows) != self._world_size:
            raise Rejected("bad_control", f"TABLE lists {len(rows)} workers; expected {self._world_size}")
        entries = []
        for rank, row in enumerate(rows):
            if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], str) and isinstance(row[1], str)
                    and isinstance(row[2], int) and not isinstance(row[2], bool) and isinstance(row[3], str)):
                raise Rejected("bad_control", f"TABLE row {rank} is {row!r}; expected [name, endpoint, session, stream]")
            entries.append(WorkerEntry(rank, row[0], row[1], row[2], _stream_field(row[3], f"TABLE row {rank}'s stream")))
        if entries[0].session != session or entries[self._me.rank] != self._me:
            raise Rejected("bad_control", "TABLE does not match its sender or this worker's registration")
        for entry in entries:  # rank 0's link moves to its stream: all sent on it before was answered
            if entry.rank != self._me.rank:
                self._link.connect_peer(entry.rank, entry.endpoint, entry.session, entry.stream)
        self._set_table(tuple(entries))

    def _set_table(self, table: tuple[WorkerEntry, ...]) -> None:
        self.table = table
        for entry in table:
            if entry.rank != self._me.rank:
                self._link.send_control(entry.rank, KIND_HELLO, None)
        for rank, session in self._early_hellos.items():
            if table[rank].session == session:
                self._link.send_control(rank, KIND_HELLO_ACK, None)
        self._early_hellos.clear()

    def _fail(self, reason: str, also: int | None = None) -> None:
        for rank in {*self._registered, also} - {self._me.rank, None}:
            self._link.send_control(rank, KIND_ABORT, {"reason": reason})
        self.error = TransportError(f"worker {self._me.name!r} (rank 0): start-up failed: {reason}")

    def check_deadline(self, now_s: float) -> None:
        """Set :attr:`error` to a timeout naming the missing workers if the deadline has passed."""
        if self.ready or self.error is not None or now_s < self.deadline_s:
            return
        me = f"worker {self._me.name!r} (rank {self._me.rank})"
        if self.table is None and self._me.rank != 0:
            what = f"the worker table from rank 0 at {self._rank0_endpoint} (is rank 0 running and reachable?)"
        elif self.table is None:
            missing = [r for r in range(self._world_size) if r not in self._registered]
            what = f"{len(missing)} worker(s) to register: {self._describe(missing)}"
        else:
            missing = [r for r in range(self._world_size) if r != self._me.rank and r not in self._acked]
            what = f"hello acknowledgements from {self._describe(missing)}"
        self.error = ZgradTimeoutError(
            f"{me} timed out after {self._timeout_s} s (transport.connect_timeout_s) waiting for {what}; "
            "start every worker, check their addresses, or raise the timeout"
        )

    def _describe(self, ranks: list[int]) -> str:
        def one(r: int) -> str:
            if self.table is not None:
                return f"{self.table[r].name!r} (rank {r} at {self.table[r].endpoint})"
            return f"{self._names[r]!r} (rank {r})" if r < len(self._names) else f"rank {r}"

        return ", ".join(one(r) for r in ranks)

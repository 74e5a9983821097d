"""One worker's RRef state (PyTorch's RRefContext): ids, the values it owns and their forks, the
wire form of an RRef, and the RRefs kept alive for calls that carried them.

Every ``RRef`` object is one *fork*: a reference with its own 64-bit fork id, known to the
owner. The owner keeps a value while at least one fork is alive, anywhere:

- ``RRef(value)`` on the owner and ``remote()`` create the first fork (``remote`` names it in
  its CALL, so the owner registers it on receipt);
- sending an RRef to another worker creates a new fork: the owner registers it directly; a
  user calling the owner itself (``rpc_sync``, ``rpc_async``, ``remote``, a proxy's method)
  marks the fork for the owner to register when it decodes the call, and keeps its own RRef
  alive until the call is answered (after a timeout, until the late reply or the owner's loss),
  so the value outlives the decoding with no message of its own; any other user first sends
  RREF_FORK to the owner, *before* the message carrying the RRef. Because messages between a
  pair arrive in order on its link, the owner sees that FORK before the sender's own
  RREF_DELETE, so the count never drops to zero early;
- when an RRef object is garbage collected its fork is released (RREF_DELETE, or locally on the
  owner). A DELETE that overtakes its FORK (they travel on different pairs) is remembered and
  cancels the FORK when it comes.

Owner entries are created on first sight (a CALL, a FETCH or a FORK may arrive first), and their
value is a :class:`Future` completed when the creating call finishes. If that call failed and
nobody ever read the value (``to_here``, ``local_value``, a proxy call), the error is logged with
the worker and the class when the entry is freed or the owner shuts down, instead of vanishing.

Threads: every method is thread-safe. The thread that receives an RREF_FORK or RREF_DELETE (the
I/O leader) registers it; RRef finalizers run wherever the last reference goes and never block.
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass, field
from collections import Counter
from typing import Any, Callable, Protocol

from zgrad.distributed.rpc.messages import Kind
from zgrad.distributed.rpc.rref import RRef
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import ProtocolError, ZgradError
from zgrad.futures import Future
from zgrad.transport import Envelope, Mesh

__all__ = ["RRefContext", "RRefCaller", "OwnerTable"]

log = logging.getLogger("zgrad.rpc")

_ID_BITS = 48



@dataclass
class _OwnerEntry:
    value: Future
    forks: set[int] = field(default_factory=set)
    early_deletes: set[int] = field(default_factory=set)
    created_by: str = ""  # the target of the remote() call that makes the value
    observed: bool = False  # someone read the value (or its error)


class OwnerTable:
    """The values this worker owns, with their live forks. Thread-safe."""

    def __init__(self, rank: int, worker: str = "") -> None:
        self._rank = rank
        self._worker = worker
        self._lock = threading.Lock()
        self._entries: dict[int, _OwnerEntry] = {}
        self._counter = itertools.count(1)

    def new_id(self) -> int:
        """A globally unique 64-bit id: this worker's rank above, a counter below."""
        return (self._rank << _ID_BITS) | next(self._counter)

    def entry(self, rref_id: int) -> Future:
        """The value future of ``rref_id``, creating a pending entry on first sight."""
        with self._lock:
            return self._get_or_create(rref_id).value

    def read(self, rref_id: int) -> Future:
        """Like :meth:`entry`, for a reader of the value: its error, if any, has been seen."""
        with self._lock:
            entry = self._get_or_create(rref_id)
            entry.observed = True
            return entry.value

    def settle(self, rref_id: int, created_by: str, value: Any = None, error: BaseException | None = None) -> bool:
        """Complete the value of ``rref_id`` made by a ``remote()`` call of ``created_by``; False
        if it was complete already (a repeated CALL: the first one stands)."""
        with self._lock:
            entry = self._get_or_create(rref_id)
            entry.created_by = created_by
        return entry.value._complete(value, error)

    def _get_or_create(self, rref_id: int) -> _OwnerEntry:
        entry = self._entries.get(rref_id)
        if entry is None:
            entry = self._entries[rref_id] = _OwnerEntry(Future(f"RRef {rref_id:#x}"))
        return entry

    def add_fork(self, rref_id: int, fork_id: int) -> None:
        """Register fork ``fork_id`` of ``rref_id`` (or let it cancel the DELETE that overtook it)."""
        with self._lock:
            entry = self._get_or_create(rref_id)
            if fork_id in entry.early_deletes:
                entry.early_deletes.discard(fork_id)
                self._maybe_free(rref_id, entry)
            else:
                entry.forks.add(fork_id)

    def delete_fork(self, rref_id: int, fork_id: int) -> None:
        """Drop fork ``fork_id`` of ``rref_id`` (freeing the value with its last fork), or
        remember a DELETE that overtook its FORK."""
        with self._lock:
            entry = self._entries.get(rref_id)
            if entry is None:
                return
            if fork_id in entry.forks:
                entry.forks.discard(fork_id)
                self._maybe_free(rref_id, entry)
            else:
                entry.early_deletes.add(fork_id)

    def _maybe_free(self, rref_id: int, entry: _OwnerEntry) -> None:
        if not entry.forks and not entry.early_deletes:
            del self._entries[rref_id]
            self._report_unobserved(entry)

    def _report_unobserved(self, entry: _OwnerEntry) -> None:
        error = entry.value.exception()
        if error is not None and not entry.observed:
            log.warning("%s: rpc.remote() of %s failed on this worker and nobody fetched its result: %s",
                        self._worker, entry.created_by or "a value", error)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        """Forget every value (the owner shuts down), logging failures nobody observed."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            self._report_unobserved(entry)


class RRefCaller(Protocol):
    """The requests an RRef makes through its worker's caller side (``caller.py``): fetching
    its value, calls on its owner (proxies), and naming workers."""

    def worker_info(self, to: Any = None) -> WorkerInfo: ...

    def fetch(self, rref: RRef, timeout: float) -> Any: ...

    def call(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1) -> Future: ...

    def call_sync(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1) -> Any: ...

    def remote(self, to: Any, func: Callable[..., Any], args: Any = (), kwargs: Any = None, timeout: float = -1) -> RRef: ...


class RRefContext:
    """The RRefs of one worker: what every :class:`RRef` it makes holds. Built by the agent.

    Args:
        rank, name, world_size: this worker and its job's size.
        caller: where an RRef's own requests go (``to_here``, proxies). The context only hands it
            to its RRefs; its own messages (RREF_FORK, RREF_DELETE) go straight to the mesh
            given to :meth:`attach`, so the caller side, which encodes RRefs here, is never
            called back.
        sent: the agent's count of messages sent, by kind.
    """

    def __init__(self, rank: int, name: str, world_size: int, caller: RRefCaller, sent: Counter) -> None:
        self.rank = rank
        self.name = name
        self.world_size = world_size
        self.caller = caller
        self.owned = OwnerTable(rank, name)
        self._sent = sent
        self._mesh: Mesh | None = None
        self._lock = threading.Lock()
        # Calls that timed out carrying RRefs to their owner: request id -> (owner, the RRefs),
        # kept until the late reply comes or the owner is lost (see encode).
        self._late_pins: dict[int, tuple[int, list]] = {}
        self._lost: set[int] = set()
        self._closed = False

    def attach(self, mesh: Mesh) -> None:
        """Send forks and deletes through ``mesh`` (built after this context: its handlers are ours)."""
        self._mesh = mesh

    def _send(self, dst: int, kind: int, meta: dict[str, Any]) -> None:
        """One message on the link to ``dst``; raises ``ZgradError`` for a lost peer or a closed mesh."""
        self._mesh.send(dst, kind, 0, meta, ())
        self._sent[kind] += 1

    def __len__(self) -> int:
        """How many values this worker owns."""
        return len(self.owned)

    def own(self, value: Any) -> tuple[int, int]:
        """Make this worker the owner of ``value``: the new RRef id and its first fork's id."""
        rref_id, fork_id = self.owned.new_id(), self.owned.new_id()
        self.owned.add_fork(rref_id, fork_id)
        self.owned.entry(rref_id).set_result(value)
        return rref_id, fork_id

    def new_id(self) -> int:
        """A new RRef or fork id, unique in the job."""
        return self.owned.new_id()

    # --- the wire form --------------------------------------------------------------------------

    def encode(self, rref: RRef, dst: int | None = None, pins: list | None = None) -> list:
        """The fields of a new fork of ``rref`` sent to ``dst``. The fork is registered:

        - now, if this worker owns ``rref``;
        - by the owner when it decodes the message, if it is a call (``pins`` given) to the owner
          itself; ``rref`` then goes into ``pins`` and stays alive until the call is answered,
          so this worker's own fork, and with it the value, outlives the decoding (its
          RREF_DELETE travels on the link, maybe not on the call's path);
        - else by RREF_FORK to the owner on the link, sent first. A caller-direct message with
          the fork may still reach a third worker, and a delete of the fork reach the owner,
          before that RREF_FORK: the owner remembers such a delete (``OwnerTable``), and the
          value stays owned meanwhile, as this worker's RREF_DELETE of its own fork follows the
          RREF_FORK on the same link.
        """
        fork_id = self.owned.new_id()
        owner = rref._owner
        if owner == self.rank:
            self.owned.add_fork(rref.rref_id, fork_id)
        elif owner == dst and pins is not None:
            pins.append(rref)
            return [rref.rref_id, owner, fork_id, 1]
        else:
            self._send(owner, Kind.RREF_FORK, {"rref": rref.rref_id, "fork": fork_id})
        return [rref.rref_id, owner, fork_id]

    def decode(self, fields: list) -> RRef:
        """An RRef from its fields: ``[rref id, owner, fork id]``, or with a fourth field ``1``
        when this worker owns it and registers the fork now (see :meth:`encode`).

        Raises:
            ProtocolError: malformed fields.
        """
        if len(fields) not in (3, 4) or not all(isinstance(f, int) and not isinstance(f, bool) for f in fields) \
                or not 0 <= fields[1] < self.world_size or (len(fields) == 4 and (fields[3] != 1 or fields[1] != self.rank)):
            raise ProtocolError("malformed RRef reference")
        rref_id, owner, fork_id = fields[:3]
        if len(fields) == 4:
            self.owned.add_fork(rref_id, fork_id)
        return RRef(_context=self, _rref_id=rref_id, _owner=owner, _fork_id=fork_id)

    # --- forks ----------------------------------------------------------------------------------

    def on_fork(self, envelope: Envelope) -> None:
        """Handler of RREF_FORK: another worker sent a fork of a value owned here."""
        self.owned.add_fork(envelope.meta["rref"], envelope.meta["fork"])

    def on_delete(self, envelope: Envelope) -> None:
        """Handler of RREF_DELETE: a fork of a value owned here died."""
        self.owned.delete_fork(envelope.meta["rref"], envelope.meta["fork"])

    def release_fork(self, rref_id: int, owner: int, fork_id: int) -> None:
        """An RRef object died: drop its fork (finalizer; never blocks, never raises)."""
        if self._closed:
            return
        if owner == self.rank:
            self.owned.delete_fork(rref_id, fork_id)
            return
        try:
            self._send(owner, Kind.RREF_DELETE, {"rref": rref_id, "fork": fork_id})
        except ZgradError:
            pass  # the owner is gone or we are shutting down: nothing left to free

    # --- pins of calls that timed out -----------------------------------------------------------

    def keep_late_pins(self, request_id: int, dst: int, pins: list | None) -> None:
        """A call that carried RRefs to their owner ``dst`` timed out: it may still arrive and be
        decoded there, so they stay alive until its late reply or ``dst``'s loss."""
        if pins:
            with self._lock:
                if dst not in self._lost and not self._closed:
                    self._late_pins[request_id] = (dst, pins)

    def release_late_pins(self, src: int, request_id: int) -> None:
        """The late reply to ``request_id`` came from ``src``: the RRefs its call kept may go."""
        with self._lock:
            entry = self._late_pins.get(request_id)
            if entry is None or entry[0] != src:
                return
            del self._late_pins[request_id]
        del entry  # the RRefs' finalizers run here, outside the lock

    def peer_lost(self, rank: int) -> None:
        """Worker ``rank`` is lost: the RRefs kept for its late replies go."""
        with self._lock:
            self._lost.add(rank)
            unpinned = [self._late_pins.pop(rid) for rid, (dst, _) in list(self._late_pins.items()) if dst == rank]
        del unpinned  # their owner is gone: the RRefs go, outside the lock

    def close(self) -> None:
        """The agent shuts down: forks are no longer released over the wire, kept RRefs go."""
        with self._lock:
            self._closed = True
            unpinned, self._late_pins = self._late_pins, {}
        del unpinned

    def clear(self) -> None:
        """Forget every value owned here (the agent has shut down)."""
        self.owned.clear()

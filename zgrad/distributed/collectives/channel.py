"""The messages of one running collective: send to a group rank, receive from one, with checks.

Every message the collective receives is compared with its own fingerprint first: a difference
means the ranks called different collectives (``Detected mismatch ...``), found at the first
message and before any data is used. Waits are bounded by the collective's deadline; a timeout
names the ranks it was still waiting for.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from zgrad.distributed.collectives.fingerprint import Fingerprint
from zgrad.distributed.collectives.group_state import DEPARTED, FAILED, GroupState, Inbound, mismatch_error
from zgrad.errors import WorkerUnavailableError, ZgradTimeoutError
from zgrad.transport import RemoteRead

__all__ = ["Channel", "SendFn", "as_array"]

SendFn = Callable[[int, list, Sequence[Any]], None]
"""``send(global_rank, meta, buffers)``: one DATA message on the process group's mesh."""

_EMPTY = np.empty(0, np.uint8)


def as_array(buffer: "memoryview | RemoteRead", dtype: np.dtype, count: int, scratch: np.ndarray | None = None) -> np.ndarray:
    """A received buffer of ``count`` elements of ``dtype`` as a 1-D array: a view of a local
    buffer, or a buffer still in the sender's memory read into ``scratch`` (at least ``count``
    elements; a new array without one)."""
    if type(buffer) is RemoteRead:
        out = scratch[:count] if scratch is not None else np.empty(count, dtype)
        buffer.read_into(out)
        return out
    return np.frombuffer(buffer, dtype) if count else np.empty(0, dtype)


# How long a failed send waits for the I/O thread to record why its peer is gone (it takes
# milliseconds; a peer that vanished without a word is reported when this runs out).
_CATCH_UP_S = 2.0


class Channel:
    """Send and receive for collective ``seq`` of ``group`` (used by one thread at a time).

    Args:
        send: puts one DATA message on the mesh.
        group: the group's state.
        seq: the collective's sequence number.
        fingerprint: what this rank called.
        inbox: the queue :meth:`GroupState.begin` returned.
        timeout_s: how long the whole collective may take.
        reject: counts a message dropped for ``reason`` (from global rank ``src``).
    """

    def __init__(self, send: SendFn, group: GroupState, seq: int, fingerprint: Fingerprint, inbox: queue.SimpleQueue,
                 timeout_s: float, reject: Callable[[str, int], None]) -> None:
        self.group = group
        self.rank = group.rank
        self.size = group.size
        self.seq = seq
        self.fingerprint = fingerprint
        self._send = send
        self._wire = fingerprint.to_wire()
        self._inbox = inbox
        self._timeout_s = timeout_s
        self._deadline_s = time.monotonic() + timeout_s
        self._reject = reject
        self._held: dict[tuple[int, int], memoryview] = {}

    # --- sending ----------------------------------------------------------------------------------

    def send(self, peer: int, tag: int, buffers: Sequence[Any] = ()) -> None:
        """Send ``buffers`` (at most one array) to group rank ``peer``. Does not block (the mesh
        queues it); the buffer must stay unmodified until ``peer`` has received it.

        Raises:
            WorkerUnavailableError: ``peer`` is known to be lost.
        """
        try:
            self._send(self.group.ranks[peer], [self.group.id, self.seq, tag, self._wire], buffers)
        except WorkerUnavailableError:
            # The sending socket can see the peer close before this rank's I/O thread has handed
            # on the peer's last messages (an ABORT naming why it left): let that catch up.
            self.group.await_news_of((peer,), min(_CATCH_UP_S, self._deadline_s - time.monotonic()))
            if self.group.failure is not None:
                raise self.group.failure from None
            gone = self.group.departed_among((peer,))
            if gone:  # it destroyed its process group: say so, as a receive would
                raise self.group.departure_error(gone) from None
            raise

    # --- receiving --------------------------------------------------------------------------------

    def recv(self, peer: int, tag: int, nbytes: int | None = None) -> "memoryview | RemoteRead":
        """Block until group rank ``peer``'s message ``tag`` arrives; return its buffer (empty
        when it carried none; a :class:`~zgrad.transport.RemoteRead` when it is still in the
        sender's memory). With ``nbytes``, a buffer of another size (a broken peer) is counted
        and dropped, and the wait goes on.

        Raises:
            CollectiveError: the ranks called different collectives, or the group failed.
            ZgradTimeoutError: the collective's deadline passed; names ``peer``.
        """
        return self.gather((peer,), tag, nbytes)[peer]

    def recv_array(self, peer: int, tag: int, dtype: np.dtype, count: int, scratch: np.ndarray | None = None) -> np.ndarray:
        """:meth:`recv` of ``count`` elements of ``dtype``, as a 1-D array (see :func:`as_array`)."""
        return as_array(self.recv(peer, tag, count * dtype.itemsize), dtype, count, scratch)

    def recv_into(self, peer: int, tag: int, out: np.ndarray) -> None:
        """:meth:`recv` of ``out.nbytes`` bytes, written into the C-contiguous ``out`` (a buffer
        still in the sender's memory is read straight into it)."""
        buffer = self.recv(peer, tag, out.nbytes)
        if type(buffer) is RemoteRead:
            buffer.read_into(out)
        elif out.size:
            np.copyto(out, np.frombuffer(buffer, out.dtype))

    def recv_forwardable(self, peer: int, tag: int, nbytes: int) -> memoryview:
        """:meth:`recv` of ``nbytes`` bytes, as bytes of this process (to pass on as they are)."""
        buffer = self.recv(peer, tag, nbytes)
        if type(buffer) is not RemoteRead:
            return buffer
        out = np.empty(nbytes, np.uint8)  # not read(): a bytearray would be zero-filled first
        buffer.read_into(out)
        return memoryview(out)

    def gather(self, peers: Iterable[int], tag: int, nbytes: int | None = None) -> dict[int, memoryview]:
        """Wait for message ``tag`` from each of ``peers``, in whatever order they come.

        Raises:
            CollectiveError: the ranks called different collectives, or the group failed.
            ZgradTimeoutError: the deadline passed; names every peer not heard from (also in
                its ``silent_ranks`` attribute, as global ranks).
        """
        got: dict[int, memoryview] = {}
        missing = []
        for peer in peers:
            held = self._held.pop((peer, tag), None)
            if held is not None and self._fits(held, nbytes, peer):
                got[peer] = held
            else:
                missing.append(peer)
        while missing:
            message = self._next(missing)
            key = (message.src, message.tag)
            if message.tag == tag and message.src in missing and message.src not in got:
                buffer = message.buffers[0] if message.buffers else memoryview(_EMPTY)
                if self._fits(buffer, nbytes, message.src):
                    got[message.src] = buffer
                    missing.remove(message.src)
                continue
            if key in self._held:
                self._reject("duplicate", self.group.ranks[message.src])
                continue
            self._held[key] = message.buffers[0] if message.buffers else memoryview(_EMPTY)
        return got

    def _fits(self, buffer: "memoryview | RemoteRead", nbytes: int | None, peer: int) -> bool:
        if nbytes is None or buffer.nbytes == nbytes:
            return True
        self._reject("bad_length", self.group.ranks[peer])
        return False

    def _next(self, awaiting: Sequence[int]) -> Inbound:
        inbox = self._inbox
        while True:
            gone = self.group.departed_among(awaiting)
            if gone:
                # A rank that closed its mesh said goodbye after everything it sent had arrived:
                # once none of it is queued, nothing more will come from it.
                try:
                    message = inbox.get_nowait()
                except queue.Empty:
                    raise self.group.departure_error(gone) from None
            else:
                remaining_s = self._deadline_s - time.monotonic()
                try:
                    message = inbox.get(timeout=remaining_s) if remaining_s > 0 else inbox.get_nowait()
                except queue.Empty:
                    raise self._timeout(awaiting) from None
            if message is DEPARTED:
                continue
            if message is FAILED:
                raise self.group.failure
            self._check(message)
            return message

    def _check(self, message: Inbound) -> None:
        if message.fingerprint != self.fingerprint:
            g = self.group
            raise mismatch_error(g.name, self.seq, g.ranks[g.rank], self.fingerprint, g.ranks[message.src], message.fingerprint)

    def _timeout(self, awaiting: Sequence[int]) -> ZgradTimeoutError:
        g = self.group
        silent = sorted(g.ranks[p] for p in awaiting)
        error = ZgradTimeoutError(
            f"Timed out after {self._timeout_s:g} s in {self.fingerprint.describe(self.seq)} of group {g.name} on rank "
            f"{g.ranks[g.rank]}: no message from rank(s) {', '.join(map(str, silent))}. Raise the timeout with "
            "init_process_group(timeout=...) or [ddp] timeout_s if they are only slow")
        error.silent_ranks = silent
        return error

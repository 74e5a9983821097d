"""The outbound side of the I/O thread: one DEALER per peer and the messages queued in front of it.

A message goes straight into ZeroMQ when nothing is queued before it for that peer; when the
peer's high-water mark is reached it waits here (in order) and the DEALER is polled for
POLLOUT until it drains. Nothing here blocks. Used by the I/O thread only.
"""

from __future__ import annotations

import collections
import time

import zmq

from zgrad.config import TransportConfig
from zgrad.transport.frames import Rejected
from zgrad.transport.liveness import Liveness
from zgrad.transport.outbox import Outbox
from zgrad.transport.security import CurveKeys
from zgrad.transport.sockets import MeshSockets, open_dealer, send_frames

__all__ = ["PeerLinks"]

# Frames at least this big go out zero-copy; smaller ones are cheaper to copy (pyzmq's own rule).


class PeerLinks:
    """Outbound links of one worker, by peer rank.

    Args:
        sockets: the mesh's sockets (the DEALERs live in ``sockets.dealers``).
        poller: the I/O thread's poller (a DEALER with a backlog is registered for POLLOUT).
        outbox: told when messages that came through it leave.
        liveness: told when something was sent to a peer.
        copy_buffers: copy every frame on send (the transport shares memory between workers).
        routing_id: this worker's routing id, announced on every link.
    """

    def __init__(
        self,
        sockets: MeshSockets,
        poller: zmq.Poller,
        outbox: Outbox,
        liveness: Liveness,
        config: TransportConfig,
        keys: CurveKeys | None,
        copy_buffers: bool,
        routing_id: bytes,
    ):
        self._sockets = sockets
        self._poller = poller
        self._outbox = outbox
        self._liveness = liveness
        self._config = config
        self._keys = keys
        self._copy = copy_buffers
        self._routing_id = routing_id
        self._queues: dict[int, collections.deque] = {}
        self._blocked: dict[zmq.Socket, int] = {}

    def open(self, rank: int, endpoint: str) -> None:
        """Dial ``rank`` at ``endpoint`` unless already dialled.

        Raises:
            Rejected: the endpoint (which came from a peer) cannot be dialled.
        """
        if rank in self._queues:
            return
        try:
            peer_key = self._keys.peers[rank] if self._keys is not None else None
            sock = open_dealer(self._sockets.context, endpoint, self._routing_id, self._config, self._keys, peer_key)
        except Exception as exc:  # a bad endpoint string from a peer must not end the loop
            raise Rejected("bad_control", f"cannot dial endpoint {endpoint!r} of rank {rank}: {exc}") from None
        self._sockets.dealers[rank] = sock
        self._queues[rank] = collections.deque()

    def send(self, dst: int, frames: list, accounted: bool) -> bool:
        """Send one message to ``dst`` or queue it behind earlier ones; False if there is no link.

        ``accounted``: the message came through the outbox (which is told when it leaves).
        """
        queue = self._queues.get(dst)
        if queue is None:
            return False
        queue.append((frames, accounted))
        if len(queue) == 1:
            self.flush(dst)
        return True

    def flush(self, dst: int) -> None:
        """Hand queued messages for ``dst`` to ZeroMQ until its high-water mark is reached."""
        queue = self._queues[dst]
        sock = self._sockets.dealers[dst]
        moved = accounted_moved = 0
        while queue:
            frames, accounted = queue[0]
            try:
                send_frames(sock, frames, self._copy)
            except zmq.Again:
                if sock not in self._blocked:
                    self._blocked[sock] = dst
                    self._poller.register(sock, zmq.POLLOUT)
                break
            queue.popleft()
            moved += 1
            accounted_moved += accounted
        if not queue and sock in self._blocked:
            del self._blocked[sock]
            self._poller.unregister(sock)
        if accounted_moved:
            self._outbox.handed_over(dst, accounted_moved)
        if moved:
            self._liveness.sent_to(dst, time.monotonic())

    def on_writable(self, sock: zmq.Socket) -> None:
        """Continue flushing the peer whose DEALER became writable."""
        dst = self._blocked.get(sock)
        if dst is not None:
            self.flush(dst)

    def drop(self, rank: int, close: bool) -> int:
        """Forget what is queued for ``rank`` (returns how many outbox messages that was).

        ``close``: also close the DEALER now; otherwise it stays open until teardown, so that
        what was already handed to ZeroMQ (a goodbye acknowledgement) can still leave.
        """
        queue = self._queues.pop(rank, collections.deque())
        dropped = sum(accounted for _, accounted in queue)
        if dropped:
            self._outbox.handed_over(rank, dropped)
        sock = self._sockets.dealers.get(rank)
        if sock is not None and sock in self._blocked:
            del self._blocked[sock]
            self._poller.unregister(sock)
        if sock is not None and close:
            del self._sockets.dealers[rank]
            sock.close(linger=0)
        return dropped

"""The outbound links of one worker, by peer rank: each peer's link is made once, a stream link
(``stream.py``) where CURVE is off and the peer announced a stream socket, else a DEALER
(``dealer.py``), and every call after that goes to the link's :class:`Link` interface
(``base.py``) whatever its kind.

Used by the I/O thread, except :meth:`PeerLinks.write` and :meth:`PeerLinks.thread_writes`,
which any thread may call.
"""

from __future__ import annotations

import logging
from typing import Any

import zmq

from zgrad.config import TransportConfig
from zgrad.transport.frames import Rejected
from zgrad.transport.liveness import Liveness
from zgrad.transport.loop.links.base import Link, LinkShared
from zgrad.transport.loop.links.dealer import DealerLink
from zgrad.transport.loop.links.stream import StreamLink
from zgrad.transport.loop.outbox import Outbox
from zgrad.transport.security import CurveKeys
from zgrad.transport.sockets import MeshSockets, open_dealer
from zgrad.transport.stats import TransportStats
from zgrad.transport.streams import connect_nonblocking

__all__ = ["PeerLinks"]

_log = logging.getLogger("zgrad.transport")


class PeerLinks:
    """Outbound links of one worker, by peer rank.

    Args:
        sockets: the mesh's sockets (the DEALERs live in ``sockets.dealers``).
        poller: the I/O thread's poller (a link with a backlog is registered for POLLOUT).
        outbox: told when messages that came through it leave.
        liveness: told when something was sent to a peer.
        stats: counts what a failed stream link drops.
        copy_buffers: copy every frame on send (the transport shares memory between workers).
        routing_id: this worker's routing id, announced on every link (a stream link's hello).
        use_streams: dial a peer's stream socket where it announced one (CURVE off).
    """

    def __init__(
        self,
        sockets: MeshSockets,
        poller: zmq.Poller,
        outbox: Outbox,
        liveness: Liveness,
        stats: TransportStats,
        config: TransportConfig,
        keys: CurveKeys | None,
        copy_buffers: bool,
        routing_id: bytes,
        use_streams: bool = False,
    ):
        self._sockets = sockets
        self._shared = LinkShared(poller, outbox, liveness, stats)
        self._config = config
        self._keys = keys
        self._copy = copy_buffers
        self._routing_id = routing_id
        self._use_streams = use_streams and keys is None
        self._links: dict[int, Link] = {}
        self._superseded: dict[int, Link] = {}  # a DEALER whose peer's link moved to its stream
        self.backlogged = self._shared.backlogged  # links a thread left a backlog on (to poll)
        self._closed_writes = [0, 0]  # thread writes of the links closed so far

    def open(self, rank: int, endpoint: str, stream: str = "") -> None:
        """Dial ``rank``: at its stream socket ``stream`` when there is one (and streams are
        used), else at its ZeroMQ ``endpoint``; nothing if already dialled. A rank already dialled
        over ZeroMQ moves to its stream once that is known (rank 0's, learnt from the table), as
        long as nothing waits in front of its DEALER: the messages sent there before (REGISTER,
        heartbeats) were answered or do not need an order. The DEALER stays open until the peer
        is dropped or teardown.

        Raises:
            Rejected: the endpoint (which came from a peer) cannot be dialled.
        """
        current = self._links.get(rank)
        if type(current) is StreamLink:
            return
        if stream and self._use_streams and (current is None or current.idle()):
            try:
                sock = connect_nonblocking(stream)
            except (OSError, ValueError) as exc:
                _log.warning("cannot dial the stream socket %s of rank %d (%s); its link uses ZeroMQ", stream, rank, exc)
            else:
                link = StreamLink(rank, self._shared, sock, self._routing_id)
                if current is not None:
                    self._superseded[rank] = current
                self._links[rank] = link  # a thread's write finds the hello waiting: it takes the outbox
                link.on_writable()  # write the hello
                return
        if current is not None:
            return
        try:
            peer_key = self._keys.peers[rank] if self._keys is not None else None
            sock = open_dealer(self._sockets.context, endpoint, self._routing_id, self._config, self._keys, peer_key)
        except Exception as exc:  # a bad endpoint string from a peer must not end the loop
            raise Rejected("bad_control", f"cannot dial endpoint {endpoint!r} of rank {rank}: {exc}") from None
        self._links[rank] = DealerLink(rank, self._shared, self._sockets, sock, self._copy)

    def send(self, dst: int, frames: list, accounted: bool) -> bool:
        """Send one message to ``dst`` or queue it behind earlier ones; False if there is no link
        (or it refuses messages). ``accounted``: the message came through the outbox (which is
        told when it leaves)."""
        link = self._links.get(dst)
        return link is not None and link.send(frames, accounted)

    def write(self, dst: int, frames: list, nbytes: int) -> bool:
        """Write one message to ``dst``'s link from the calling thread, any thread, where its
        link allows it (:meth:`Link.write`); False: it must take the outbox.

        Raises:
            WorkerUnavailableError, TransportError: as :meth:`Outbox.check`.
        """
        link = self._links.get(dst)
        return link is not None and link.write(frames, nbytes)

    def poll_backlogged(self) -> None:
        """Flush (and poll for room) the links that threads left a backlog on (I/O thread)."""
        backlogged = self.backlogged
        while backlogged:
            backlogged.pop().on_writable()

    def on_writable(self, sock: Any) -> bool:
        """Continue flushing the link whose socket or descriptor ``sock`` became writable (or
        failed); False if ``sock`` is no link polled for room."""
        link = self._shared.polled.get(sock)
        if link is None:
            return False
        link.on_writable()
        return True

    def thread_writes(self) -> tuple[int, int]:
        """Messages, and their buffer bytes, that other threads wrote on links themselves."""
        links = list(self._links.values())
        return (self._closed_writes[0] + sum(link.thread_writes for link in links),
                self._closed_writes[1] + sum(link.thread_bytes for link in links))

    def drop(self, rank: int, close: bool) -> int:
        """Forget what is queued for ``rank`` (returns how many outbox messages that was); see
        :meth:`Link.drop` for ``close``."""
        dropped = 0
        for links in (self._links, self._superseded):
            link = links.get(rank)
            if link is not None:
                dropped += link.drop(close)
                if close:
                    del links[rank]
                    self._closed_writes[0] += link.thread_writes
                    self._closed_writes[1] += link.thread_bytes
        return dropped

    def close_all(self) -> None:
        """Close every link (teardown; what the kernel holds still reaches the peer)."""
        for links in (self._links, self._superseded):
            for link in list(links.values()):
                link.close()

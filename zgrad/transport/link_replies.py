"""Replies to requests that went over the link, routed to the thread that waits for them.

A request too big for the caller's own socket (``transport.direct_max_kb`` of buffers or more,
``mesh.py``) travels on the link, like :meth:`Mesh.send`, so that it and its reply may go by
same-host single copy. Its reply then arrives on the link too, and the leader of the I/O role
reads it; instead of handing it to ``on_message`` the leader puts it in the waiting thread's
*inbox* here and wakes that thread through the inbox's eventfd. So :meth:`Mesh.call` and
:meth:`Mesh.collect` return a reply whichever way it came, and the layer above has one code
path.

A message is taken for such a reply only when its kind is one of the layer's ``reply_kinds``
(kinds that only ever answer a request: RPC's RESULT and ERROR, the engine's reports), it came
on a link (not on a caller-direct connection), and its sender and request id are those of a
request registered here: request ids are the requester's own, so a request *from* that peer
with the same id is never mistaken for the reply. A reply that finds no registration (its
waiter gave up, or the peer was lost meanwhile) goes to ``on_message`` as any other message.
"""

from __future__ import annotations

import collections
import os
import threading
import weakref

from zgrad.transport.envelope import Envelope

__all__ = ["LinkReplies"]


class _Inbox:
    """One thread's routed replies: a deque, and an eventfd the leader writes after appending."""

    __slots__ = ("replies", "fd", "__weakref__")

    def __init__(self) -> None:
        self.replies: collections.deque[Envelope] = collections.deque()
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)


def _close_fd(fd: int) -> None:
    os.close(fd)


class LinkReplies:
    """The requests of this mesh whose reply is awaited from the link, by (peer, request id).

    Args:
        reply_kinds: the layer's kinds that only answer requests; other kinds are never routed.
    """

    def __init__(self, reply_kinds: frozenset[int]) -> None:
        self.kinds = reply_kinds
        self._lock = threading.Lock()
        self._awaited: dict[tuple[int, int], _Inbox] = {}
        self._local = threading.local()

    def inbox(self) -> _Inbox:
        """The calling thread's inbox, made on first use (its eventfd closes when the thread ends)."""
        inbox = getattr(self._local, "inbox", None)
        if inbox is None:
            inbox = self._local.inbox = _Inbox()
            weakref.finalize(inbox, _close_fd, inbox.fd).atexit = False
        return inbox

    def mine(self) -> _Inbox | None:
        """The calling thread's inbox if it ever awaited a reply from the link, else None."""
        return getattr(self._local, "inbox", None)

    def expect(self, dst: int, request_id: int) -> _Inbox:
        """Route the reply to request ``request_id`` sent to ``dst`` to the calling thread."""
        inbox = self.inbox()
        with self._lock:
            self._awaited[(dst, request_id)] = inbox
        return inbox

    def forget(self, dst: int, request_id: int) -> None:
        """Stop routing that reply (its waiter gave up or the request could not be sent)."""
        with self._lock:
            self._awaited.pop((dst, request_id), None)

    def deliver(self, envelope: Envelope) -> bool:
        """If ``envelope`` is an awaited reply, hand it to its thread and return True (I/O role's
        leader; the caller has checked its kind and that it came on a link)."""
        if not self._awaited:
            return False
        with self._lock:
            inbox = self._awaited.pop((envelope.src, envelope.request_id), None)
            if inbox is None:
                return False
            inbox.replies.append(envelope)
        os.eventfd_write(inbox.fd, 1)
        return True

    def take(self, inbox: _Inbox) -> list[Envelope]:
        """Empty the calling thread's ``inbox``: what was routed to it since the last take."""
        try:
            os.eventfd_read(inbox.fd)
        except BlockingIOError:
            pass
        replies = []
        while inbox.replies:
            replies.append(inbox.replies.popleft())
        return replies

    def awaits(self, dst: int, request_id: int) -> bool:
        """Whether the reply to that request is still awaited here or waits in the calling
        thread's inbox."""
        key = (dst, request_id)
        inbox = self.mine()
        with self._lock:  # the leader appends under it
            return key in self._awaited or (
                inbox is not None and any((e.src, e.request_id) == key for e in inbox.replies))

    def lost(self, rank: int) -> None:
        """``rank`` was lost: nothing more comes from it (its waiters see the loss themselves)."""
        with self._lock:
            for key in [key for key in self._awaited if key[0] == rank]:
                del self._awaited[key]

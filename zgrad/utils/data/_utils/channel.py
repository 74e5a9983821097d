"""The link between the main process and one DataLoader worker: a Unix socket pair carrying
msgpack messages, each with the file descriptors of its shared-memory segments.

Framing: a header (payload length, number of descriptors), sent with the descriptors attached
(``SCM_RIGHTS``), then the payload. Messages (trees of :mod:`.codec`, ``fds``: the segments):

=============================================  =====================================================
main -> worker
``[FETCH, task, index, segments, freed,        fetch the batch for the sampler's ``index`` (a tree;
dropped]``                                     ``segments``: ``[id, used bytes]`` of its one-off
                                               segments, ``fds`` theirs); ``freed``: the worker's
                                               segments whose batches are gone, to fill again;
                                               ``dropped``: those to let go
``[RESUME]``                                   a new epoch (persistent workers): restart the dataset
worker -> main
``[BATCH, task, batch, segments, new]``        the batch (a tree); ``segments``: ``[id, used
                                               bytes]`` of each it uses; ``new``: the ids of those
                                               sent for the first time, ``fds`` theirs in order
``[ERROR, task, type, where, traceback]``      the fetch raised: ``type`` as ``"module:qualname"``
``[END, task]``                                the worker's ``IterableDataset`` is exhausted
``[RESUMED]``                                  the dataset restarted
=============================================  =====================================================

A worker ends when its socket closes; the main process learns of a worker's death from its
process sentinel (or end of file on the socket).
"""

from __future__ import annotations

import array
import os
import socket
import struct
from typing import Any, Sequence

import msgpack

__all__ = ["Channel", "channel_pair", "FETCH", "RESUME", "BATCH", "ERROR", "END", "RESUMED"]

FETCH, RESUME, BATCH, ERROR, END, RESUMED = range(6)

_HEADER = struct.Struct("<IH")  # payload bytes, file descriptors
# A message carries at most this many descriptors (Linux's SCM_MAX_FD is 253).
MAX_FDS = 250
_FD_BYTES = array.array("i").itemsize
# Both directions hold at most prefetch_factor * num_workers small messages; the larger buffer
# keeps a worker that returns big non-tensor data (lists of strings) from waiting on the socket.
_SOCKET_BUFFER_BYTES = 4 << 20


class Channel:
    """One end of the link (see the module docstring); ``fileno()`` makes it waitable with
    ``multiprocessing.connection.wait``. One thread at a time sends, and one receives."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: Any, fds: Sequence[int] = ()) -> None:
        """Send ``message`` (msgpack-able) and duplicates of ``fds``; blocks while the socket is full.

        Raises:
            ValueError: more than :data:`MAX_FDS` descriptors.
            OSError: the other end is closed (``BrokenPipeError``).
        """
        if len(fds) > MAX_FDS:
            raise ValueError(f"a DataLoader message carries at most {MAX_FDS} shared-memory segments, got {len(fds)}")
        payload = msgpack.packb(message, use_bin_type=True)
        data = _HEADER.pack(len(payload), len(fds)) + payload
        if fds:
            sent = self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            sent = self.sock.send(data)
        if sent < len(data):
            self.sock.sendall(memoryview(data)[sent:])

    def recv(self) -> tuple[Any, list[int]]:
        """The next message and the descriptors that came with it (the caller closes them);
        blocks until a whole message is there.

        Raises:
            EOFError: the other end closed (or died) before or during the message.
        """
        head, ancillary, flags, _ = self.sock.recvmsg(_HEADER.size, socket.CMSG_SPACE(MAX_FDS * _FD_BYTES))
        fds = array.array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % _FD_BYTES])
        if not head:
            _close_all(fds)
            raise EOFError("the DataLoader process at the other end closed its channel")
        try:
            head += self._exactly(_HEADER.size - len(head))
            length, count = _HEADER.unpack(head)
            if flags & socket.MSG_CTRUNC or count != len(fds):
                raise EOFError(f"a DataLoader message announced {count} shared-memory segments but {len(fds)} arrived")
            message = msgpack.unpackb(self._exactly(length), raw=False)
        except BaseException:
            _close_all(fds)
            raise
        return message, fds.tolist()

    def _exactly(self, nbytes: int) -> bytearray:
        buffer = bytearray(nbytes)
        view = memoryview(buffer)
        while view:
            received = self.sock.recv_into(view)
            if received == 0:
                raise EOFError("the DataLoader process at the other end closed its channel mid-message")
            view = view[received:]
        return buffer

    def close(self) -> None:
        self.sock.close()


def _close_all(fds: Sequence[int]) -> None:
    for fd in fds:
        os.close(fd)


def channel_pair() -> tuple[Channel, socket.socket]:
    """The main process's end of a new link, and the socket to hand to the worker."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for sock in (ours, theirs):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER_BYTES)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER_BYTES)
    return Channel(ours), theirs

"""Reused receive buffers for reassembling chunked messages.

A fresh multi-megabyte allocation costs a page fault per 4 KiB page on first touch, which
halves the receive rate of large buffers. The pool keeps the pages of buffers the
layer above has let go of and hands them out again.

A buffer is handed out only as a ``memoryview``; while any view of it (or an array built over
one) is alive, CPython holds a reference to the underlying ``bytearray``. The pool therefore
treats a ``bytearray`` whose reference count is back to the pool's own as free. Only the I/O
thread calls :meth:`BufferPool.take`; nothing here is thread-safe by design.
"""

from __future__ import annotations

import sys

__all__ = ["BufferPool"]

_GRANULE = 1 << 20


def _refcount(buf: bytearray) -> int:
    return sys.getrefcount(buf)


def _idle_refcount() -> int:
    # Measured, not hard-coded: the count seen for a buffer held only by a list, looked at from
    # a loop variable through `_refcount` -- exactly how the pool looks at its buffers.
    count = 0
    for buf in [bytearray(1)]:
        count = _refcount(buf)
    return count


_IDLE_REFS = _idle_refcount()


class BufferPool:
    """Writable buffers of at least a requested size, reusing pages that are no longer viewed.

    Args:
        capacity_bytes: most bytes kept in the pool; beyond it buffers are allocated unpooled
            (and freed normally when dropped).
    """

    def __init__(self, capacity_bytes: int):
        self._capacity_bytes = capacity_bytes
        self._buffers: list[bytearray] = []
        self._pooled_bytes = 0
        self.reused = 0
        self.allocated = 0

    def take(self, nbytes: int) -> memoryview:
        """Return a writable view of exactly ``nbytes`` bytes (contents undefined)."""
        if nbytes < _GRANULE:  # small pages are cheap; pooling pays off for big ones only
            return memoryview(bytearray(nbytes))
        best = None
        for buf in self._buffers:
            # Accept up to twice the size so that one big buffer does not serve tiny requests.
            if nbytes <= len(buf) <= 2 * nbytes + _GRANULE and _refcount(buf) <= _IDLE_REFS:
                if best is None or len(buf) < len(best):
                    best = buf
        if best is not None:
            self.reused += 1
            return memoryview(best)[:nbytes]
        self.allocated += 1
        size = -(-nbytes // _GRANULE) * _GRANULE
        self._make_room(size)
        buf = bytearray(size)
        if self._pooled_bytes + size <= self._capacity_bytes:
            self._buffers.append(buf)
            self._pooled_bytes += size
        return memoryview(buf)[:nbytes]

    def _make_room(self, size: int) -> None:
        if self._pooled_bytes + size <= self._capacity_bytes:
            return
        keep = []
        for buf in self._buffers:
            if self._pooled_bytes + size > self._capacity_bytes and _refcount(buf) <= _IDLE_REFS:
                self._pooled_bytes -= len(buf)
            else:
                keep.append(buf)
        self._buffers = keep

    def clear(self) -> None:
        """Forget every pooled buffer (views already handed out stay valid)."""
        self._buffers = []
        self._pooled_bytes = 0

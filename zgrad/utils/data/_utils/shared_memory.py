"""Shared memory that carries a batch's arrays between a DataLoader worker and the main process.

The sender builds a message's arrays in a :class:`BatchArena`: segments of anonymous shared
memory (``memfd_create`` on Linux; elsewhere a file in ``/dev/shm`` or the temp directory,
unlinked as soon as it is open), into which ``default_collate`` stacks samples directly and
other arrays are copied once. A segment's file descriptor travels with the first message that
uses it (``SCM_RIGHTS``, :mod:`.channel`); each side maps it (``mmap(2)`` through ctypes: Python's
``mmap`` module would keep a duplicate descriptor per mapping) and closes the descriptor. No
segment has a name that could be left behind: its memory goes with the last mapping.

Segments are reused. Writing fresh shared memory costs a page fault per 4 KiB, more than
building a batch of small images, so a worker keeps its segments (:class:`SegmentPool`) and
the main process keeps its mappings of them (:class:`ReceivedSegments`): the arrays of a batch are views of a per-batch
owner, and when the program drops the batch's last array the owner's finalizer marks the
segment free; the main process tells the worker with its next request, and the worker fills the
segment again. Beyond :data:`SPARE_SEGMENTS` free ones per worker, a freed segment is dropped on
both sides instead, so memory follows what the program holds.

The sampler's indices travel the other way in one-off segments (:func:`map_segment`): they
rarely hold an array at all.
"""

from __future__ import annotations

import collections
import ctypes
import mmap
import os
import tempfile
import weakref
from math import prod
from typing import Sequence

import numpy as np

__all__ = ["BatchArena", "SegmentPool", "ReceivedSegments", "map_segment", "SPARE_SEGMENTS"]

# Arrays start on 64-byte boundaries (a cache line; AVX-512 loads).
_ALIGN_BYTES = 64
# A segment is created this large (sparse: pages exist once written, and nothing reads the rest),
# so that one segment usually holds a whole batch; a larger array gets a segment of its own size.
_SEGMENT_BYTES = 64 << 20
# Free segments a worker keeps for the next batches: the prefetched ones and the one the loop
# holds come back one by one.
SPARE_SEGMENTS = 4
_SHM_DIR = "/dev/shm"
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value


def _anonymous_file(nbytes: int) -> int:
    """A new file descriptor of ``nbytes`` of shared memory that has no name."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("zgrad-dataloader", os.MFD_CLOEXEC)
    else:
        fd, path = tempfile.mkstemp(prefix="zgrad-dataloader-", dir=_SHM_DIR if os.path.isdir(_SHM_DIR) else None)
        os.unlink(path)
    try:
        os.ftruncate(fd, nbytes)
    except OSError:
        os.close(fd)
        raise
    return fd


class _Mapping:
    """``nbytes`` of a shared file mapped into this process, unmapped when this object is
    collected; ``np.asarray`` of it is a uint8 array over the whole mapping."""

    def __init__(self, fd: int, nbytes: int, populate: bool) -> None:
        flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
        address = _libc.mmap(None, nbytes, mmap.PROT_READ | mmap.PROT_WRITE, flags, fd, 0)
        if address == _MAP_FAILED:
            errno = ctypes.get_errno()
            raise OSError(errno, f"cannot map {nbytes} bytes of a DataLoader's shared memory: {os.strerror(errno)}")
        # Not at interpreter exit, when arrays on this memory may still be read by late
        # finalizers: the process's end unmaps it anyway.
        weakref.finalize(self, _libc.munmap, address, nbytes).atexit = False
        self.address = address
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}


class _Segment:
    """A sender's segment: its descriptor (until the receiver has its own) and its mapping,
    filled from the start by one batch at a time."""

    def __init__(self, segment_id: int, nbytes: int) -> None:
        self.id = segment_id
        self.fd: int | None = _anonymous_file(nbytes)
        self.mapping = _Mapping(self.fd, nbytes, populate=False)
        self.bytes = np.asarray(self.mapping)
        self.used = 0

    def take(self, nbytes: int) -> int | None:
        """The offset of ``nbytes`` more, or None if they do not fit."""
        offset = -(-self.used // _ALIGN_BYTES) * _ALIGN_BYTES
        if offset + nbytes > self.bytes.size:
            return None
        self.used = offset + nbytes
        return offset

    def close_fd(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class SegmentPool:
    """A worker's segments: free ones are filled again, new ones created when none fits."""

    def __init__(self) -> None:
        self._segments: dict[int, _Segment] = {}
        self._free: list[int] = []
        self._next_id = 0

    def take(self, nbytes: int) -> _Segment:
        """A segment with room for ``nbytes``, emptied: the most recently freed one that fits
        (its pages are the likeliest to be warm), else a new one."""
        for i in range(len(self._free) - 1, -1, -1):
            segment = self._segments[self._free[i]]
            if segment.bytes.size >= nbytes:
                del self._free[i]
                segment.used = 0
                return segment
        segment = _Segment(self._next_id, max(nbytes, _SEGMENT_BYTES))
        self._next_id += 1
        self._segments[segment.id] = segment
        return segment

    def give_back(self, segments: Sequence[_Segment]) -> None:
        """Segments a batch took but never sent (its fetch failed): free again."""
        self._free.extend(s.id for s in segments)

    def release(self, ids: Sequence[int]) -> None:
        """The main process dropped the batches that used ``ids``: they may be filled again."""
        self._free.extend(ids)

    def drop(self, ids: Sequence[int]) -> None:
        """The main process unmapped ``ids``: this side lets them go too."""
        for segment_id in ids:
            self._segments.pop(segment_id).close_fd()


class BatchArena:
    """The shared memory one message's arrays are placed in: segments of ``pool`` (a worker's
    batches), or one-off ones without a pool (the main process's indices). Not thread-safe: one
    thread builds one message."""

    def __init__(self, pool: SegmentPool | None = None) -> None:
        self._pool = pool
        self._segments: list[_Segment] = []

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialized C-contiguous array in shared memory (the ``empty`` of ``dispatch.stack``)."""
        dtype = np.dtype(dtype)
        nbytes = prod(shape) * dtype.itemsize
        if nbytes == 0:
            return np.empty(shape, dtype)
        segment, offset = self._place(nbytes)
        return segment.bytes[offset:offset + nbytes].view(dtype).reshape(shape)

    def _place(self, nbytes: int) -> tuple[_Segment, int]:
        if self._segments:
            offset = self._segments[-1].take(nbytes)
            if offset is not None:
                return self._segments[-1], offset
        if self._pool is not None:
            segment = self._pool.take(nbytes)
        else:
            segment = _Segment(len(self._segments), max(nbytes, _ALIGN_BYTES))
        self._segments.append(segment)
        return segment, segment.take(nbytes)  # type: ignore[return-value]

    def place(self, array: np.ndarray) -> tuple[int, int]:
        """(index among this message's segments, byte offset) of ``array``'s data: where it
        already lies (stacked there by ``default_collate``), else where it is copied to now. A
        zero-size array has no place: (-1, 0)."""
        if array.nbytes == 0:
            return -1, 0
        if array.flags.c_contiguous:
            address = array.__array_interface__["data"][0]
            for index, segment in enumerate(self._segments):
                start = segment.mapping.address
                if start <= address and address + array.nbytes <= start + segment.used:
                    return index, address - start
        copy = self.empty(array.shape, array.dtype)
        np.copyto(copy, array)
        return len(self._segments) - 1, copy.__array_interface__["data"][0] - self._segments[-1].mapping.address

    def export(self) -> tuple[list[list[int]], list[int], list[int]]:
        """For the message: ``[segment id, used bytes]`` per segment, the ids of those the
        receiver does not have yet, and their descriptors (in that order)."""
        new = [s for s in self._segments if s.fd is not None]
        return [[s.id, s.used] for s in self._segments], [s.id for s in new], [s.fd for s in new]  # type: ignore[misc]

    def sent(self) -> None:
        """The message went: the receiver has its own descriptors now; one-off segments are left
        to the receiver (their memory goes with its mapping)."""
        for segment in self._segments:
            segment.close_fd()
        self._segments = []

    def unsent(self) -> None:
        """The message was not sent (its fetch failed): the segments are free for the next."""
        if self._pool is not None:
            self._pool.give_back(self._segments)
        else:
            for segment in self._segments:
                segment.close_fd()
        self._segments = []


class _BatchView:
    """The owner of one batch's arrays in one segment (numpy's base of them: an object that is
    not an array ends numpy's base collapsing); its finalizer frees the segment for the worker."""

    def __init__(self, mapping: _Mapping, used: int) -> None:
        self.mapping = mapping
        self.__array_interface__ = {"data": (mapping.address, False), "shape": (used,), "typestr": "|u1", "version": 3}


class ReceivedSegments:
    """The main process's mappings of one worker's segments, and which of them batches still use.

    ``receive`` and ``collect`` run on the iterating thread; the finalizers that free segments
    run wherever a batch's last array is dropped, and only append to a deque.
    """

    def __init__(self) -> None:
        self._mapped: dict[int, _Mapping] = {}
        self._spare: set[int] = set()
        self._freed: collections.deque[int] = collections.deque()

    def receive(self, segments: list[list[int]], new_ids: list[int], fds: list[int]) -> list[np.ndarray]:
        """The byte arrays one message's arrays are decoded from (views of per-batch owners),
        mapping the segments that came with it and closing their descriptors."""
        try:
            for segment_id, fd in zip(new_ids, fds):
                self._mapped[segment_id] = _Mapping(fd, os.fstat(fd).st_size, populate=False)
        finally:
            for fd in fds:
                os.close(fd)
        views = []
        for segment_id, used in segments:
            self._spare.discard(segment_id)
            view = _BatchView(self._mapped[segment_id], used)
            weakref.finalize(view, self._freed.append, segment_id).atexit = False
            views.append(np.asarray(view))
        return views

    def collect(self) -> tuple[list[int], list[int]]:
        """(freed, dropped): segments whose batches are gone since the last call, split into
        those the worker may fill again and those beyond its spares, unmapped here."""
        freed, dropped = [], []
        while self._freed:
            segment_id = self._freed.popleft()
            if segment_id not in self._mapped:
                continue  # the pool was closed meanwhile
            if len(self._spare) < SPARE_SEGMENTS:
                self._spare.add(segment_id)
                freed.append(segment_id)
            else:
                del self._mapped[segment_id]
                dropped.append(segment_id)
        return freed, dropped

    def close(self) -> None:
        """Forget the mappings: each goes with the last batch that uses it."""
        self._mapped.clear()
        self._spare.clear()


def map_segment(fd: int, nbytes: int) -> np.ndarray:
    """A one-off segment of a received message (the sampler's indices): its first ``nbytes``,
    mapped with their pages present, as a uint8 array; ``fd`` is closed."""
    try:
        return np.asarray(_Mapping(fd, nbytes, populate=True))
    finally:
        os.close(fd)

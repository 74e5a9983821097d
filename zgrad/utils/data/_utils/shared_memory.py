"""Shared memory that carries a batch's arrays between a DataLoader worker and the main process.

The sender builds a message's arrays in a :class:`BatchArena`: segments of anonymous shared
memory (``memfd_create`` on Linux; elsewhere a file in ``/dev/shm`` or the temp directory,
unlinked as soon as it is open), into which ``default_collate`` stacks samples directly and
other arrays are copied once. The segments' file descriptors travel with the message
(``SCM_RIGHTS``, :mod:`.channel`); the receiver maps them (:func:`map_segment`) and the arrays it
decodes are views of those mappings, and the sender closes its side. The receiver maps with
``mmap(2)`` itself rather than Python's ``mmap`` module, which would keep a duplicate descriptor
open per mapping: a program that keeps a thousand batches would run out of descriptors. No segment ever has a name
that could be left behind: its memory is freed when the last mapping goes, that is when the
main process drops the batch's tensors. Segments live in the kernel's shared memory, so
``/dev/shm``'s size (64 MiB in a default Docker container) does not limit batches on Linux.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import tempfile
import weakref
from math import prod

import numpy as np

__all__ = ["BatchArena", "map_segment"]

# Arrays start on 64-byte boundaries (a cache line; AVX-512 loads).
_ALIGN_BYTES = 64
# A segment is created this large (sparse: pages exist once written, and the receiver maps only
# the used part), so that one segment usually holds a whole batch; a larger array gets its own.
_SEGMENT_BYTES = 64 << 20
_SHM_DIR = "/dev/shm"
# Map a received segment with its pages already present: one call instead of a fault per page.
_RECEIVE_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
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


class _Segment:
    """One shared file, mapped here, filled from the start."""

    def __init__(self, nbytes: int) -> None:
        self.fd = _anonymous_file(nbytes)
        self.memory = mmap.mmap(self.fd, nbytes)
        self.bytes = np.frombuffer(self.memory, dtype=np.uint8)
        self.address = self.bytes.__array_interface__["data"][0]
        self.used = 0

    def take(self, nbytes: int) -> int | None:
        """The offset of ``nbytes`` more, or None if they do not fit."""
        offset = -(-self.used // _ALIGN_BYTES) * _ALIGN_BYTES
        if offset + nbytes > self.bytes.size:
            return None
        self.used = offset + nbytes
        return offset


class BatchArena:
    """The shared memory one message's arrays are placed in (see the module docstring).

    Not thread-safe: one batch is built by one thread. Segments are created on first use, so an
    arena that receives no array costs nothing.
    """

    def __init__(self) -> None:
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
        segment = _Segment(max(nbytes, _SEGMENT_BYTES))
        self._segments.append(segment)
        return segment, segment.take(nbytes)  # type: ignore[return-value]

    def place(self, array: np.ndarray) -> tuple[int, int]:
        """(segment index, byte offset) of ``array``'s data in this arena: where it already lies
        (stacked there by ``default_collate``), else where it is copied to now. A zero-size array
        has no place: (-1, 0)."""
        if array.nbytes == 0:
            return -1, 0
        if array.flags.c_contiguous:
            address = array.__array_interface__["data"][0]
            for index, segment in enumerate(self._segments):
                if segment.address <= address and address + array.nbytes <= segment.address + segment.used:
                    return index, address - segment.address
        copy = self.empty(array.shape, array.dtype)
        np.copyto(copy, array)
        return len(self._segments) - 1, copy.__array_interface__["data"][0] - self._segments[-1].address

    def export(self) -> tuple[list[int], list[int]]:
        """The segments' file descriptors and used sizes in bytes, for the message."""
        return [s.fd for s in self._segments], [s.used for s in self._segments]

    def close(self) -> None:
        """Close this side's descriptors (the receiver holds its own); each mapping goes with the
        last array that views it."""
        for segment in self._segments:
            os.close(segment.fd)
        self._segments = []


class _Mapping:
    """A received segment mapped into this process: numpy's base of the arrays decoded from it
    (an object that is not an array ends numpy's base collapsing), unmapped with the last of them."""

    def __init__(self, fd: int, nbytes: int) -> None:
        address = _libc.mmap(None, nbytes, mmap.PROT_READ | mmap.PROT_WRITE, _RECEIVE_FLAGS, fd, 0)
        if address == _MAP_FAILED:
            errno = ctypes.get_errno()
            raise OSError(errno, f"cannot map a DataLoader batch's shared memory ({nbytes} bytes): {os.strerror(errno)}")
        weakref.finalize(self, _libc.munmap, address, nbytes)
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}


def map_segment(fd: int, nbytes: int) -> np.ndarray:
    """The first ``nbytes`` of a received segment, mapped, as a uint8 array; ``fd`` is closed:
    the mapping (held by this array and its views) is all that keeps the memory alive."""
    try:
        return np.asarray(_Mapping(fd, nbytes))
    finally:
        os.close(fd)

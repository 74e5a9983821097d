"""Host memory other processes can map: what ``Tensor.share_memory_`` moves a tensor into.

On Linux a block is an anonymous memory file (``memfd_create``) mapped shared: a child forked
later inherits the mapping, and a process that receives the file's descriptor (a child spawned
with the tensor among its arguments, or a queue's reader: ``zgrad.multiprocessing`` sends it)
maps the same pages, so every process sees every write. Where memory files are missing (or the
process is out of descriptors) a block is an anonymous shared mapping, which only forked
children see; :attr:`SharedBlock.fd` is then None.
"""

from __future__ import annotations

import mmap
import os
import weakref

__all__ = ["SharedBlock", "allocate_shared", "attach_shared", "block_of"]


class SharedBlock(mmap.mmap):
    """A shared mapping; ``fd`` is the descriptor of its memory file (None for an anonymous one),
    open as long as the block is alive."""

    fd: int | None


def _block(fd: int | None, nbytes: int) -> SharedBlock:
    block = SharedBlock(-1 if fd is None else fd, nbytes)
    block.fd = fd
    if fd is not None:
        weakref.finalize(block, os.close, fd)
    return block


def allocate_shared(nbytes: int) -> SharedBlock:
    """A new zeroed block of ``max(nbytes, 1)`` bytes."""
    nbytes = max(nbytes, 1)
    try:
        fd = os.memfd_create("zgrad-shared", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # not Linux, or no descriptor left: a block only forked children see
        return _block(None, nbytes)
    try:
        os.ftruncate(fd, nbytes)
        return _block(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise


def attach_shared(fd: int, nbytes: int) -> SharedBlock:
    """The block another process allocated, from a descriptor of its memory file (which the
    block now owns)."""
    return _block(fd, nbytes)


def block_of(buffer: object) -> SharedBlock | None:
    """The block a numpy array's ``base`` (``buffer``: the block, or a memoryview of it) lies in,
    or None."""
    if isinstance(buffer, memoryview):
        buffer = buffer.obj
    return buffer if isinstance(buffer, SharedBlock) else None

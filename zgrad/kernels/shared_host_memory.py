"""Host memory other processes can map: what ``Tensor.share_memory_`` moves a tensor into.

On Linux a block is an anonymous memory file (``memfd_create``) mapped shared: a child forked
later inherits the mapping, and a process that receives the file's descriptor (a child spawned
with the tensor among its arguments, or a queue's reader: ``zgrad.multiprocessing`` sends it)
maps the same pages, so every process sees every write. A block with a memory file holds two
descriptors (Python's mapping keeps its own copy); blocks get one while they use at most half the
open-files limit (raised to the hard limit on the first block, as PyTorch users are told to do).
Past that, or where memory files are missing, a block is an anonymous shared mapping, which only
forked children see; :attr:`SharedBlock.fd` is then None.
"""

from __future__ import annotations

import mmap
import os
import resource
import threading
import weakref

__all__ = ["SharedBlock", "allocate_shared", "attach_shared", "block_of"]


class SharedBlock(mmap.mmap):
    """A shared mapping; ``fd`` is the descriptor of its memory file (None for an anonymous one),
    open as long as the block is alive. ``handle`` is for :mod:`zgrad.multiprocessing`, which
    keeps there the one descriptor handle it sends per spawned child."""

    fd: int | None
    handle: tuple[object, object] | None


_files_lock = threading.Lock()
_open_files = 0  # blocks with a memory file: each holds two descriptors (its own and the mapping's)


def _file_budget() -> int:
    """How many blocks may have a memory file: a quarter of the open-files limit (their two
    descriptors each then take at most half), the soft limit raised to the hard one first."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    except (OSError, ValueError):
        soft = 1024
    return 1 << 30 if soft == resource.RLIM_INFINITY else soft // 4


def _forget_file(fd: int) -> None:
    global _open_files
    os.close(fd)
    with _files_lock:
        _open_files -= 1


def _block(fd: int | None, nbytes: int) -> SharedBlock:
    global _open_files
    block = SharedBlock(-1 if fd is None else fd, nbytes)  # mapping a file duplicates its descriptor
    block.fd, block.handle = fd, None
    if fd is not None:
        with _files_lock:
            _open_files += 1
        weakref.finalize(block, _forget_file, fd)
    return block


def allocate_shared(nbytes: int) -> SharedBlock:
    """A new zeroed block of ``max(nbytes, 1)`` bytes: with a memory file while the budget of
    descriptors allows, else anonymous (only forked children see it)."""
    nbytes = max(nbytes, 1)
    with _files_lock:
        within_budget = _open_files < _file_budget()
    fd = None
    if within_budget:
        try:
            fd = os.memfd_create("zgrad-shared", os.MFD_CLOEXEC)
            os.ftruncate(fd, nbytes)
            return _block(fd, nbytes)
        except (AttributeError, OSError):  # not Linux, or out of descriptors: an anonymous block
            if fd is not None:
                os.close(fd)
    return _block(None, nbytes)


def attach_shared(fd: int, nbytes: int) -> SharedBlock:
    """The block another process allocated, from a descriptor of its memory file (which the
    block now owns).

    Raises:
        OSError: the descriptor cannot be mapped (the process is out of descriptors).
    """
    try:
        return _block(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise


def block_of(buffer: object) -> SharedBlock | None:
    """The block a numpy array's ``base`` (``buffer``: the block, or a memoryview of it) lies in,
    or None."""
    if isinstance(buffer, memoryview):
        buffer = buffer.obj
    return buffer if isinstance(buffer, SharedBlock) else None

"""Where a checkpoint's bytes go and come from: atomic writes to a path, plain writes to a file
object, and exact reads into preallocated arrays.

A path is written to a temporary file in the same directory (so the rename below stays on one
file system), flushed and fsynced, renamed over the target, and the directory fsynced: a process
killed at any moment leaves the old file or the new one, never a mix (a killed writer may leave
its temporary ``.NAME.PID.XXXXXXXX.tmp`` behind). A file object is written in place, as given.

Two things keep a durable save near the disk's speed. The disk starts writing each part while
the next is copied into the page cache (``sync_file_range`` on Linux), so the final fsync waits
only for the tail instead of the whole file. And the replaced file stays open across the rename,
so the rename does not free its blocks on the caller's thread: a short-lived thread closes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import secrets
import stat
import threading
from typing import Any, Callable, Iterable, Iterator

__all__ = ["Source", "describe", "is_path", "open_source", "write_atomically", "write_to_file"]

WRITEBACK_STEP_BYTES = 8 << 20  # how much is copied before the disk is asked to start writing it
_SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Callable[[int, int, int], Any] | None:
    """Linux's ``sync_file_range(fd, offset, count, SYNC_FILE_RANGE_WRITE)``: start writing a
    range to disk without waiting; None where the C library has none."""
    function = getattr(ctypes.CDLL(None, use_errno=True), "sync_file_range", None)
    if function is None:
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
    return lambda fd, offset, count: function(fd, offset, count, _SYNC_FILE_RANGE_WRITE)


_START_WRITEBACK = _sync_file_range()


def is_path(f: Any) -> bool:
    return isinstance(f, (str, bytes, os.PathLike))


def describe(f: Any) -> str:
    """How errors name ``f``: the quoted path, the name of a file object that has one, else its type."""
    if is_path(f):
        return repr(os.fsdecode(os.fspath(f)))
    for attribute in ("path", "name"):  # fsspec files have .path, open() files .name
        name = getattr(f, attribute, None)
        if isinstance(name, str):
            return repr(name)
    return f"the {type(f).__name__} object"


def _write_all(write: Any, data: Any) -> None:
    """Write every byte of ``data``, looping over the short writes a raw file may make."""
    view = memoryview(data)
    while view.nbytes:
        written = write(view)
        if written is None or written >= view.nbytes:  # buffered writers take everything
            return
        view = view[written:]


def write_to_file(f: Any, chunks: Iterable[Any]) -> None:
    """Write ``chunks`` (buffers) to the binary file object ``f`` at its position; blocks.

    Raises:
        TypeError: ``f`` has no ``write`` method.
    """
    if not callable(getattr(f, "write", None)):
        raise TypeError(f"zgrad.save expects a path or a binary file object with write(), got {type(f).__name__}")
    for chunk in chunks:
        _write_all(f.write, chunk)
    if callable(getattr(f, "flush", None)):
        f.flush()


def write_atomically(path: Any, chunks: Iterable[Any]) -> None:
    """Replace the file at ``path`` (through a symlink, its target) by ``chunks`` atomically and
    durably; an existing file's permission bits are kept. Blocks until the data is on disk.

    Raises:
        RuntimeError: the parent directory does not exist (PyTorch's message).
        OSError: the directory cannot be written, the disk is full, ...; the temporary file is removed.
    """
    target = os.path.realpath(os.fsdecode(os.fspath(path)))
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        raise RuntimeError(f"Parent directory {directory} does not exist.")
    temp = os.path.join(directory, f".{os.path.basename(target)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    replaced = None
    try:
        with open(fd, "wb", buffering=0) as out:
            with contextlib.suppress(FileNotFoundError):
                os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
            written = started = 0
            for chunk in chunks:
                _write_all(out.write, chunk)
                written += memoryview(chunk).nbytes
                if _START_WRITEBACK is not None and written - started >= WRITEBACK_STEP_BYTES:
                    _START_WRITEBACK(fd, started, written - started)
                    started = written
            os.fsync(fd)
        with contextlib.suppress(OSError):
            replaced = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if replaced is not None:
            os.close(replaced)
        raise
    if replaced is not None:  # its last close frees its blocks: off this thread
        threading.Thread(target=os.close, args=(replaced,), name="zgrad-save-release", daemon=True).start()
    directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory_fd)  # the rename itself survives a crash
    finally:
        os.close(directory_fd)


class Source:
    """A checkpoint being read: from a path (opened here) or from a caller's file object, at its
    current position. ``remaining`` is the number of bytes left, or None when ``f`` cannot tell."""

    def __init__(self, f: Any, name: str) -> None:
        self.name = name
        self.file = f
        self.remaining: int | None = None
        with contextlib.suppress(AttributeError, OSError, ValueError, io.UnsupportedOperation):
            position = f.tell()
            end = f.seek(0, io.SEEK_END)
            end = f.tell() if end is None else end
            f.seek(position)
            self.remaining = end - position

    def read(self, count: int) -> bytes:
        """Up to ``count`` bytes (fewer only at the end of the file)."""
        parts, left = [], count
        while left:
            part = self.file.read(left)
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def read_into(self, view: memoryview) -> int:
        """Fill ``view`` from the file; returns the bytes read (fewer only at the end of the file)."""
        readinto = getattr(self.file, "readinto", None)
        done = 0
        while done < view.nbytes:
            if readinto is not None:
                count = readinto(view[done:])
            else:
                part = self.file.read(view.nbytes - done)
                count = len(part)
                view[done:done + count] = part
            if not count:
                break
            done += count
        return done


@contextlib.contextmanager
def open_source(f: Any) -> Iterator[Source]:
    """A :class:`Source` over ``f`` (a path is opened for the duration and closed after).

    Raises:
        FileNotFoundError: no file at the path.
        TypeError: ``f`` is neither a path nor a file object with ``read``.
    """
    if is_path(f):
        with open(os.fspath(f), "rb", buffering=0) as file:
            yield Source(file, describe(f))
        return
    if not callable(getattr(f, "read", None)):
        raise TypeError(f"zgrad.load expects a path or a binary file object with read(), got {type(f).__name__}")
    yield Source(f, describe(f))

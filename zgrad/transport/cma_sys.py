"""Linux cross-memory attach through ctypes: ``process_vm_readv`` and the address of a buffer.

``process_vm_readv(2)`` copies bytes straight from another process's memory into ours, one copy
in the kernel, no socket. It is allowed when this process may ptrace the other (same user, no
stricter Yama scope, no seccomp filter). Everything here fails softly: :func:`libc_reader`
returns ``None`` where the call does not exist, and reads raise :class:`OSError` with the errno.

A reader made with ``hold_gil=False`` releases the GIL for the duration of each call (for bulk
data); one with ``hold_gil=True`` keeps it (for reads of a few bytes, where handing the GIL to
another thread and waiting to get it back costs more than the call). Standard library only
(no numpy).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Callable

__all__ = ["Reader", "libc_reader", "buffer_address", "read_into"]

# A single process_vm_readv moves at most MAX_RW_COUNT (INT_MAX rounded down to a page) bytes;
# larger reads are issued in steps of this size.
_STEP_BYTES = 1 << 30
_PyBUF_SIMPLE = 0


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _PyBuffer(ctypes.Structure):
    # Py_buffer (part of the stable ABI since 3.11); only ``buf`` is read here.
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


# process_vm_readv(pid, local_iov, liovcnt, remote_iov, riovcnt, flags) -> ssize_t
Reader = Callable[[int, int, int, int], int]


def libc_reader(hold_gil: bool = False) -> Reader | None:
    """Return a function ``read(pid, remote_address, local_address, nbytes) -> bytes read``.

    The function returns what one ``process_vm_readv`` call moved (possibly fewer bytes than asked)
    and raises :class:`OSError` on failure. Returns ``None`` off Linux or when libc lacks the call.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = (ctypes.PyDLL if hold_gil else ctypes.CDLL)(None, use_errno=True)
        call = libc.process_vm_readv
    except (OSError, AttributeError):
        return None
    call.restype = ctypes.c_ssize_t
    call.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.c_ulong]

    def read(pid: int, remote_address: int, local_address: int, nbytes: int) -> int:
        local = _IoVec(local_address, nbytes)
        remote = _IoVec(remote_address, nbytes)
        got = call(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
        return got

    return read


def buffer_address(view: memoryview) -> int:
    """Return the address of the first byte of the C-contiguous ``view`` (read-only ones too).

    The address stays valid as long as ``view`` is alive and not released: a memoryview holds
    its own export of the underlying object, which pins the memory (a bytearray cannot resize).
    """
    if view.nbytes == 0:
        return 0
    if not view.readonly:
        return ctypes.addressof(ctypes.c_char.from_buffer(view))
    info = _PyBuffer()
    ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(view), ctypes.byref(info), _PyBUF_SIMPLE)
    try:
        return info.buf
    finally:
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(info))


def read_into(read: Reader, pid: int, remote_address: int, out: memoryview) -> None:
    """Fill the writable ``out`` with ``out.nbytes`` bytes of process ``pid`` from ``remote_address``.

    Raises:
        OSError: the kernel refused (errno set), or the remote range ended early (``EFAULT``).
    """
    nbytes = out.nbytes
    if nbytes == 0:
        return
    local = ctypes.addressof(ctypes.c_char.from_buffer(out))
    done = 0
    while done < nbytes:
        step = min(_STEP_BYTES, nbytes - done)
        got = read(pid, remote_address + done, local + done, step)
        if got <= 0:
            raise OSError(14, f"short read: {done} of {nbytes} bytes (the remote range ended)")
        done += got

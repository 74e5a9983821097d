"""The wire format of one mesh message: constants, encoding, and the ordered inbound checks.

A message is one ZeroMQ multipart message (atomic: all parts arrive or none)::

    frame 0   header   struct ``!4sHHHQII`` + ``nbuffers`` x ``!Q``
                       magic b"ZGRD", protocol version, kind, flags, request id,
                       chunk size in bytes, number of buffers, then each buffer's length
    frame 1   meta     msgpack (any msgpack-able value; ``None`` is one byte)
    frame 2.. buffers  each buffer as ceil(length / chunk) frames of exactly ``chunk`` bytes,
                       the last one shorter; an empty buffer is one empty frame; a *remote*
                       buffer (its length has bit 63 set) is one descriptor frame ``!IQ`` =
                       ticket slot, generation: the receiver reads the bytes from the sender's
                       memory (same-host cross-memory attach, see ``cma.py``)

On the inbound ROUTER socket a routing-id frame precedes frame 0; the mesh checks it (the
peer) before calling :func:`decode`, which checks the rest in a fixed order — frame count,
header length, magic, version, kind, chunk size, buffer count, total size, per-frame lengths,
remote buffers allowed, metadata, remote reads — and raises :class:`Rejected` with a short
reason at the first failure. Nothing is allocated for a buffer until every length has been
checked. See ``docs/transport.md``.

Standard library and msgpack only; buffers are anything that supports the buffer protocol.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import msgpack

__all__ = [
    "MAGIC",
    "PROTOCOL_VERSION",
    "HEADER",
    "MAX_BUFFERS",
    "MAX_USER_KIND",
    "KIND_REGISTER",
    "KIND_TABLE",
    "KIND_ABORT",
    "KIND_HELLO",
    "KIND_HELLO_ACK",
    "KIND_HEARTBEAT",
    "KIND_GOODBYE",
    "KIND_GOODBYE_ACK",
    "KIND_CMA_OFFER",
    "KIND_CMA_READY",
    "KIND_CMA_DONE",
    "RESERVED_KINDS",
    "REMOTE_BIT",
    "DESCRIPTOR",
    "Rejected",
    "RemoteBuffer",
    "RemoteSource",
    "as_byte_view",
    "encode_meta",
    "encode",
    "decode",
]

MAGIC = b"ZGRD"
# 2: remote (cross-memory attach) buffers and the CMA_* kinds; a worker waits for its CMA
# answers at start-up, so it cannot run with a version-1 peer.
PROTOCOL_VERSION = 2
HEADER = struct.Struct("!4sHHHQII")
_LENGTH = struct.Struct("!Q")
# A buffer length with this bit set describes a remote buffer of (length & ~REMOTE_BIT) bytes
# whose frame is a DESCRIPTOR: ticket slot (u32), ticket generation (u64).
REMOTE_BIT = 1 << 63
DESCRIPTOR = struct.Struct("!IQ")
MAX_BUFFERS = 65536
MAX_REQUEST_ID = 2**64 - 1
MAX_FLAGS = 2**16 - 1

# Kinds 0 .. MAX_USER_KIND belong to the layer above; 0xFF00 and up are the transport's own.
MAX_USER_KIND = 0xFEFF
KIND_REGISTER = 0xFF01
KIND_TABLE = 0xFF02
KIND_ABORT = 0xFF03
KIND_HELLO = 0xFF04
KIND_HELLO_ACK = 0xFF05
KIND_HEARTBEAT = 0xFF06
KIND_GOODBYE = 0xFF07
KIND_GOODBYE_ACK = 0xFF08
KIND_CMA_OFFER = 0xFF09
KIND_CMA_READY = 0xFF0A
KIND_CMA_DONE = 0xFF0B
RESERVED_KINDS = frozenset(
    {KIND_REGISTER, KIND_TABLE, KIND_ABORT, KIND_HELLO, KIND_HELLO_ACK, KIND_HEARTBEAT, KIND_GOODBYE, KIND_GOODBYE_ACK,
     KIND_CMA_OFFER, KIND_CMA_READY, KIND_CMA_DONE}
)

_EMPTY = memoryview(b"")


class Rejected(Exception):
    """An inbound message failed a check. Internal to the transport: it is counted, not raised.

    Attributes:
        reason: a short stable key used in the stats (``"bad_magic"``, ``"too_large"``, ...).
        detail: what was received and what was expected, for the log.
    """

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class RemoteBuffer(NamedTuple):
    """A buffer sent by reference: ``nbytes`` for the header and the descriptor frame."""

    nbytes: int
    descriptor: bytes


class RemoteSource(Protocol):
    """Reads the remote buffers of one peer (the I/O thread's cross-memory-attach reader)."""

    def release(self, slot: int, generation: int) -> None:
        """Note that the sender may take back ticket ``(slot, generation)`` (read or not)."""

    def read(self, slot: int, generation: int, nbytes: int, take_buffer: Callable[[int], memoryview]) -> memoryview:
        """Return the ``nbytes`` the ticket offers to this worker; raise :class:`Rejected` if it cannot."""

    def defer(self, slot: int, generation: int, nbytes: int) -> Any:
        """Return a handle that reads (or releases) the ticket later, on any thread, and reports
        it done then (or when the handle is dropped)."""


def as_byte_view(obj: Any) -> memoryview:
    """Return a flat unsigned-byte view over ``obj`` without copying.

    Raises:
        TypeError: ``obj`` does not support the buffer protocol or is not C-contiguous.
    """
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(
            f"a mesh buffer must support the buffer protocol (bytes, bytearray, memoryview, array); "
            f"got {type(obj).__name__}"
        ) from None
    if not view.c_contiguous:
        raise TypeError(
            f"a mesh buffer must be C-contiguous; got a non-contiguous {type(obj).__name__} of shape "
            f"{view.shape}: make a contiguous copy first (e.g. numpy.ascontiguousarray)"
        )
    if view.nbytes == 0:
        return _EMPTY
    if view.ndim == 1 and view.format == "B":
        return view
    return view.cast("B")


def encode_meta(meta: Any) -> bytes:
    """Pack ``meta`` with msgpack.

    Raises:
        TypeError: ``meta`` holds a value msgpack cannot encode.
    """
    try:
        return msgpack.packb(meta, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"mesh message metadata must be msgpack-serializable: {exc}") from None


def encode(
    kind: int,
    flags: int,
    request_id: int,
    meta_bytes: bytes,
    views: Sequence[memoryview],
    chunk_bytes: int,
) -> list:
    """Build the frames of one message from already-flat ``views`` (see :func:`as_byte_view`).

    A :class:`RemoteBuffer` in ``views`` goes as its descriptor frame, its length marked remote.

    Returns:
        ``[header, meta, chunk, ...]``; chunks are slices of ``views`` (no copy).

    Raises:
        ValueError: ``flags``, ``request_id`` or the number of buffers is out of range.
    """
    if not 0 <= flags <= MAX_FLAGS:
        raise ValueError(f"mesh flags must fit in 16 bits; got {flags}")
    if not 0 <= request_id <= MAX_REQUEST_ID:
        raise ValueError(f"mesh request_id must fit in an unsigned 64-bit integer; got {request_id}")
    if len(views) > MAX_BUFFERS:
        raise ValueError(f"a mesh message carries at most {MAX_BUFFERS} buffers; got {len(views)}")
    header = bytearray(HEADER.size + _LENGTH.size * len(views))
    HEADER.pack_into(header, 0, MAGIC, PROTOCOL_VERSION, kind, flags, request_id, chunk_bytes, len(views))
    frames: list = [b"", meta_bytes]
    offset = HEADER.size
    for view in views:
        n = view.nbytes
        if type(view) is RemoteBuffer:
            _LENGTH.pack_into(header, offset, n | REMOTE_BIT)
            offset += _LENGTH.size
            frames.append(view.descriptor)
            continue
        _LENGTH.pack_into(header, offset, n)
        offset += _LENGTH.size
        if n <= chunk_bytes:
            frames.append(view)
        else:
            frames.extend(view[i : i + chunk_bytes] for i in range(0, n, chunk_bytes))
    frames[0] = bytes(header)
    return frames


def decode(
    parts: Sequence[Any],
    *,
    valid_kinds: frozenset[int],
    max_message_bytes: int,
    take_buffer: Callable[[int], memoryview],
    copy_single: bool = False,
    remote: RemoteSource | None = None,
    defer_remote: bool = False,
) -> tuple[int, int, int, Any, tuple[memoryview, ...]]:
    """Check and unpack one message (without its routing-id frame), in the documented order.

    Args:
        parts: the frames (``zmq.Frame``, bytes or byte memoryviews) after the routing id.
        valid_kinds: kinds accepted besides the transport's reserved ones.
        max_message_bytes: cap on the sum of all frame lengths.
        take_buffer: returns a writable view of exactly ``n`` bytes to reassemble a chunked buffer.
        copy_single: copy one-frame buffers too (for frames that alias the sender's memory).
        remote: reads this sender's remote buffers; ``None``: a remote buffer is rejected.
        defer_remote: hand remote buffers out unread, as ``remote.defer`` handles.

    Returns:
        ``(kind, flags, request_id, meta, buffers)``; a one-frame buffer is a zero-copy view of
        its frame (unless ``copy_single``), a chunked or remote one a view of a buffer from
        ``take_buffer`` (a remote one with ``defer_remote``: a handle from ``remote.defer``).

    Raises:
        Rejected: at the first failed check.
    """
    if len(parts) < 2:
        raise Rejected("short_message", f"got {len(parts)} frame(s) after the routing id; expected at least 2")
    header = parts[0]
    header_bytes = len(header)
    if header_bytes < HEADER.size:
        raise Rejected("bad_header", f"header frame has {header_bytes} bytes; expected at least {HEADER.size}")
    magic, version, kind, flags, request_id, chunk_bytes, nbuffers = HEADER.unpack_from(header)
    if magic != MAGIC:
        raise Rejected("bad_magic", f"magic {magic!r}; expected {MAGIC!r}")
    if version != PROTOCOL_VERSION:
        raise Rejected("bad_version", f"protocol version {version}; this worker speaks {PROTOCOL_VERSION}")
    if kind not in valid_kinds and kind not in RESERVED_KINDS:
        raise Rejected("bad_kind", f"message kind {kind:#x} is not one this worker accepts")
    if chunk_bytes == 0:
        raise Rejected("bad_header", "chunk size 0")
    if nbuffers > MAX_BUFFERS:
        raise Rejected("bad_header", f"{nbuffers} buffers; at most {MAX_BUFFERS} allowed")
    if header_bytes != HEADER.size + _LENGTH.size * nbuffers:
        raise Rejected(
            "bad_header",
            f"header frame has {header_bytes} bytes; {nbuffers} buffers need {HEADER.size + _LENGTH.size * nbuffers}",
        )
    lengths = struct.unpack_from(f"!{nbuffers}Q", header, HEADER.size)
    biggest = max(lengths) if nbuffers else 0
    has_remote = biggest >= REMOTE_BIT
    sizes = tuple(n & ~REMOTE_BIT for n in lengths) if has_remote else lengths
    total = header_bytes + len(parts[1]) + sum(sizes)
    if total > max_message_bytes:
        raise Rejected("too_large", f"message of {total} bytes; the cap is {max_message_bytes} (transport.max_message_mb)")
    chunked = has_remote or biggest > chunk_bytes
    expected = 2 + (sum(_frames_for(n, chunk_bytes) for n in lengths) if chunked else nbuffers)
    if len(parts) != expected:
        raise Rejected("bad_frame_count", f"got {len(parts)} frames; the header describes {expected}")
    _check_lengths(parts, lengths, chunk_bytes)
    deferred = None
    if has_remote:
        if remote is None:
            raise Rejected("bad_cma", "a remote buffer from a peer this worker has not agreed to read from")
        # From here on the tickets are reported done whatever happens to the message: now, or
        # (deferred) by their handles, when read, released or dropped.
        deferred = _defer_remote(parts, lengths, chunk_bytes, remote) if defer_remote else \
            _release_remote(parts, lengths, chunk_bytes, remote)
    try:
        meta = msgpack.unpackb(parts[1], raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises many types on malformed input; all mean the same here
        raise Rejected("bad_metadata", f"metadata frame is not valid msgpack ({type(exc).__name__}: {exc})") from None
    if not chunked:
        if copy_single:
            return kind, flags, request_id, meta, tuple(memoryview(bytearray(memoryview(p))) for p in parts[2:])
        return kind, flags, request_id, meta, tuple(memoryview(p) for p in parts[2:])
    return kind, flags, request_id, meta, _reassemble(parts, lengths, chunk_bytes, take_buffer, copy_single, remote, deferred)


def _frames_for(length: int, chunk_bytes: int) -> int:
    if length >= REMOTE_BIT:
        return 1
    return max(1, -(-length // chunk_bytes))


def _check_lengths(parts: Sequence[Any], lengths: Sequence[int], chunk_bytes: int) -> None:
    index = 2
    for n in lengths:
        if n >= REMOTE_BIT:
            got = len(parts[index])
            if got != DESCRIPTOR.size:
                raise Rejected("bad_frame_length", f"remote buffer descriptor {index - 2} has {got} bytes; expected {DESCRIPTOR.size}")
            index += 1
            continue
        for start in range(0, max(n, 1), chunk_bytes):
            want = min(chunk_bytes, n - start)
            got = len(parts[index])
            if got != want:
                raise Rejected("bad_frame_length", f"buffer frame {index - 2} has {got} bytes; expected {want}")
            index += 1


def _release_remote(parts: Sequence[Any], lengths: Sequence[int], chunk_bytes: int, remote: RemoteSource) -> None:
    """Hand every descriptor of a well-formed message back for release, before anything can fail."""
    index = 2
    for n in lengths:
        if n >= REMOTE_BIT:
            remote.release(*DESCRIPTOR.unpack(parts[index]))
        index += _frames_for(n, chunk_bytes)


def _defer_remote(parts: Sequence[Any], lengths: Sequence[int], chunk_bytes: int, remote: RemoteSource) -> list[Any]:
    """A read-later handle per remote buffer of a well-formed message (before anything can fail:
    a handle dropped unread releases its ticket)."""
    handles = []
    index = 2
    for n in lengths:
        if n >= REMOTE_BIT:
            slot, generation = DESCRIPTOR.unpack(parts[index])
            handles.append(remote.defer(slot, generation, n & ~REMOTE_BIT))
        index += _frames_for(n, chunk_bytes)
    return handles


def _reassemble(
    parts: Sequence[Any],
    lengths: Sequence[int],
    chunk_bytes: int,
    take_buffer: Callable[[int], memoryview],
    copy_single: bool,
    remote: RemoteSource | None,
    deferred: list[Any] | None,
) -> tuple[memoryview, ...]:
    buffers = []
    index = 2
    handles = iter(deferred or ())
    for n in lengths:
        if n >= REMOTE_BIT:
            if deferred is not None:
                buffers.append(next(handles))
            else:
                slot, generation = DESCRIPTOR.unpack(parts[index])
                buffers.append(remote.read(slot, generation, n & ~REMOTE_BIT, take_buffer))
            index += 1
            continue
        if n <= chunk_bytes:
            buffers.append(memoryview(bytearray(memoryview(parts[index]))) if copy_single else memoryview(parts[index]))
            index += 1
            continue
        out = take_buffer(n)
        for start in range(0, n, chunk_bytes):
            part = parts[index]
            out[start : start + len(part)] = memoryview(part)
            index += 1
        buffers.append(out)
    return tuple(buffers)

"""The wire format of one mesh message: constants, encoding, and the ordered inbound checks.

A message is one ZeroMQ multipart message (atomic: all parts arrive or none)::

    frame 0   header   struct ``!4sHHHQII`` + ``nbuffers`` x ``!Q``
                       magic b"ZGRD", protocol version, kind, flags, request id,
                       chunk size in bytes, number of buffers, then each buffer's length
    frame 1   meta     msgpack (any msgpack-able value; ``None`` is one byte)
    frame 2.. buffers  each buffer as ceil(length / chunk) frames of exactly ``chunk`` bytes,
                       the last one shorter; an empty buffer is one empty frame

On the inbound ROUTER socket a routing-id frame precedes frame 0; the mesh checks it (the
peer) before calling :func:`decode`, which checks the rest in a fixed order — frame count,
header length, magic, version, kind, chunk size, buffer count, total size, per-frame lengths,
metadata — and raises :class:`Rejected` with a short reason at the first failure. Nothing is
allocated for a buffer until every length has been checked. See ``docs/transport.md``.

Standard library and msgpack only; buffers are anything that supports the buffer protocol.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

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
    "RESERVED_KINDS",
    "Rejected",
    "as_byte_view",
    "encode_meta",
    "encode",
    "decode",
]

MAGIC = b"ZGRD"
PROTOCOL_VERSION = 1
HEADER = struct.Struct("!4sHHHQII")
_LENGTH = struct.Struct("!Q")
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
RESERVED_KINDS = frozenset(
    {KIND_REGISTER, KIND_TABLE, KIND_ABORT, KIND_HELLO, KIND_HELLO_ACK, KIND_HEARTBEAT, KIND_GOODBYE, KIND_GOODBYE_ACK}
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
        _LENGTH.pack_into(header, offset, n)
        offset += _LENGTH.size
        if n <= chunk_bytes:
            frames.append(view)
        else:
            frames.extend(view[i : i + chunk_bytes] for i in range(0, n, chunk_bytes))
    frames[0] = bytes(header)
    return frames


def _frames_for(length: int, chunk_bytes: int) -> int:
    return max(1, -(-length // chunk_bytes))


def decode(
    parts: Sequence[Any],
    *,
    valid_kinds: frozenset[int],
    max_message_bytes: int,
    take_buffer: Callable[[int], memoryview],
    copy_single: bool = False,
) -> tuple[int, int, int, Any, tuple[memoryview, ...]]:
    """Check and unpack one message (without its routing-id frame), in the documented order.

    Args:
        parts: the frames (``zmq.Frame``, bytes or byte memoryviews) after the routing id.
        valid_kinds: kinds accepted besides the transport's reserved ones.
        max_message_bytes: cap on the sum of all frame lengths.
        take_buffer: returns a writable view of exactly ``n`` bytes to reassemble a chunked buffer.
        copy_single: copy one-frame buffers too (for frames that alias the sender's memory).

    Returns:
        ``(kind, flags, request_id, meta, buffers)``; a one-frame buffer is a zero-copy view of
        its frame (unless ``copy_single``), a chunked one a view of a buffer from ``take_buffer``.

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
    total = header_bytes + len(parts[1]) + sum(lengths)
    if total > max_message_bytes:
        raise Rejected("too_large", f"message of {total} bytes; the cap is {max_message_bytes} (transport.max_message_mb)")
    chunked = nbuffers and max(lengths) > chunk_bytes
    expected = 2 + (sum(_frames_for(n, chunk_bytes) for n in lengths) if chunked else nbuffers)
    if len(parts) != expected:
        raise Rejected("bad_frame_count", f"got {len(parts)} frames; the header describes {expected}")
    _check_lengths(parts, lengths, chunk_bytes)
    try:
        meta = msgpack.unpackb(parts[1], raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises many types on malformed input; all mean the same here
        raise Rejected("bad_metadata", f"metadata frame is not valid msgpack ({type(exc).__name__}: {exc})") from None
    if not chunked:
        if copy_single:
            return kind, flags, request_id, meta, tuple(memoryview(bytearray(memoryview(p))) for p in parts[2:])
        return kind, flags, request_id, meta, tuple(memoryview(p) for p in parts[2:])
    return kind, flags, request_id, meta, _reassemble(parts, lengths, chunk_bytes, take_buffer, copy_single)


def _check_lengths(parts: Sequence[Any], lengths: Sequence[int], chunk_bytes: int) -> None:
    index = 2
    for n in lengths:
        for start in range(0, max(n, 1), chunk_bytes):
            want = min(chunk_bytes, n - start)
            got = len(parts[index])
            if got != want:
                raise Rejected("bad_frame_length", f"buffer frame {index - 2} has {got} bytes; expected {want}")
            index += 1


def _reassemble(
    parts: Sequence[Any],
    lengths: Sequence[int],
    chunk_bytes: int,
    take_buffer: Callable[[int], memoryview],
    copy_single: bool,
) -> tuple[memoryview, ...]:
    buffers = []
    index = 2
    for n in lengths:
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

"""The wire format of one mesh message: constants, encoding, and the ordered inbound checks.

A message is one ZeroMQ multipart message (atomic: all parts arrive or none)::

    frame 0   head     struct ``!4sHHHQIII`` + ``nbuffers`` x ``!Q`` + meta + inline buffers:
                       magic b"ZGRD", protocol version, kind, flags, request id, chunk size in
                       bytes, number of buffers, metadata length; then each buffer's length;
                       then the metadata (msgpack; ``None`` is one byte); then the bytes of the
                       *inline* buffers (their length has bit 62 set), one after the other
    frame 1..          the other buffers, in order: each as ceil(length / chunk) frames of
                       exactly ``chunk`` bytes, the last one shorter; an empty buffer is one
                       empty frame; a *remote* buffer (its length has bit 63 set) is one
                       descriptor frame ``!IQ`` = ticket slot, generation: the receiver reads
                       the bytes from the sender's memory (same-host cross-memory attach,
                       see ``cma.py``)

Small buffers (up to :data:`INLINE_MAX_BYTES`) travel inside frame 0: every ZeroMQ frame costs
both ends a send or receive call and a message of its own, far more than copying a few KiB.

On the inbound ROUTER socket a routing-id frame precedes frame 0; the mesh checks it (the
peer) before calling :func:`decode`, which checks the rest in a fixed order — frame count,
header length, magic, version, kind, chunk size, buffer count, lengths table, total size,
frame count against the header, per-frame lengths, remote buffers allowed, metadata, remote
reads — and raises :class:`Rejected` with a short reason at the first failure. Nothing is
allocated for a buffer until every length has been checked. See ``docs/transport.md``.

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
    "INLINE_BIT",
    "INLINE_MAX_BYTES",
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
# 3: header, metadata and small buffers in one frame (one frame per message on the small-call path).
PROTOCOL_VERSION = 3
HEADER = struct.Struct("!4sHHHQIII")
_LENGTH = struct.Struct("!Q")
# The lengths table of a message with n buffers, prebuilt for the common small n.
_LENGTHS = tuple(struct.Struct(f"!{n}Q") for n in range(16))
# A buffer length with this bit set describes a remote buffer of (length & ~REMOTE_BIT) bytes
# whose frame is a DESCRIPTOR: ticket slot (u32), ticket generation (u64).
REMOTE_BIT = 1 << 63
DESCRIPTOR = struct.Struct("!IQ")
# A buffer length with this bit set describes an inline buffer of (length & ~INLINE_BIT) bytes,
# carried in frame 0 after the metadata.
INLINE_BIT = 1 << 62
_SIZE_MASK = INLINE_BIT - 1
_FLAG_BITS = REMOTE_BIT | INLINE_BIT
# Buffers up to this size go inline: it paid up to 16 KiB and not at 32 KiB (docs/transport.md, Wire format).
INLINE_MAX_BYTES = 16384
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
    except ValueError:
        # a numpy array of a dtype the buffer protocol has no format for (ml_dtypes' bfloat16):
        # its bytes travel all the same, viewed as unsigned bytes
        if not getattr(getattr(obj, "flags", None), "c_contiguous", False):
            raise TypeError(f"a mesh buffer must be C-contiguous; got a non-contiguous {type(obj).__name__}: make a "
                            "contiguous copy first (e.g. numpy.ascontiguousarray)") from None
        view = memoryview(obj.view("B"))
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

    Buffers of at most :data:`INLINE_MAX_BYTES` are copied into frame 0 (while the inline bytes
    add up to at most ``chunk_bytes``); a :class:`RemoteBuffer` in ``views`` goes as its
    descriptor frame, its length marked remote; the others as frames of their own.

    Returns:
        ``[head, chunk, ...]``; chunks are slices of ``views`` (no copy).

    Raises:
        ValueError: ``flags``, ``request_id`` or the number of buffers is out of range.
    """
    if not 0 <= flags <= MAX_FLAGS:
        raise ValueError(f"mesh flags must fit in 16 bits; got {flags}")
    if not 0 <= request_id <= MAX_REQUEST_ID:
        raise ValueError(f"mesh request_id must fit in an unsigned 64-bit integer; got {request_id}")
    nbuffers = len(views)
    if nbuffers > MAX_BUFFERS:
        raise ValueError(f"a mesh message carries at most {MAX_BUFFERS} buffers; got {nbuffers}")
    head = HEADER.pack(MAGIC, PROTOCOL_VERSION, kind, flags, request_id, chunk_bytes, nbuffers, len(meta_bytes))
    if not nbuffers:
        return [head + meta_bytes]
    lengths = []
    inline = [meta_bytes]
    frames: list = [b""]
    room = chunk_bytes
    for view in views:
        n = view.nbytes
        if type(view) is RemoteBuffer:
            lengths.append(n | REMOTE_BIT)
            frames.append(view.descriptor)
        elif n <= INLINE_MAX_BYTES and n <= room:
            lengths.append(n | INLINE_BIT)
            inline.append(view)
            room -= n
        else:
            lengths.append(n)
            if n <= chunk_bytes:
                frames.append(view)
            else:
                frames.extend(view[i : i + chunk_bytes] for i in range(0, n, chunk_bytes))
    table = _LENGTHS[nbuffers].pack(*lengths) if nbuffers < len(_LENGTHS) else struct.pack(f"!{nbuffers}Q", *lengths)
    frames[0] = b"".join([head, table, *inline])
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
        max_message_bytes: cap on the sum of all frame lengths (and remote buffer sizes).
        take_buffer: returns a writable view of exactly ``n`` bytes to reassemble a chunked buffer.
        copy_single: copy one-frame and inline buffers too (for frames that alias the sender's
            memory, or must not be kept alive by the buffers).
        remote: reads this sender's remote buffers; ``None``: a remote buffer is rejected.
        defer_remote: hand remote buffers out unread, as ``remote.defer`` handles.

    Returns:
        ``(kind, flags, request_id, meta, buffers)``; a one-frame or inline buffer is a zero-copy
        view of its frame (unless ``copy_single``), a chunked or remote one a view of a buffer
        from ``take_buffer`` (a remote one with ``defer_remote``: a handle from ``remote.defer``).

    Raises:
        Rejected: at the first failed check.
    """
    if not parts:
        raise Rejected("short_message", "got no frame after the routing id; expected at least 1")
    head = memoryview(parts[0])
    head_bytes = head.nbytes
    if head_bytes < HEADER.size:
        raise Rejected("bad_header", f"head frame has {head_bytes} bytes; expected at least {HEADER.size}")
    magic, version, kind, flags, request_id, chunk_bytes, nbuffers, meta_bytes = HEADER.unpack_from(head)
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
    meta_start = HEADER.size + _LENGTH.size * nbuffers
    meta_end = meta_start + meta_bytes
    if head_bytes < meta_end:
        raise Rejected(
            "bad_header",
            f"head frame has {head_bytes} bytes; {nbuffers} buffer lengths and {meta_bytes} bytes of metadata need {meta_end}",
        )
    lengths = (_LENGTHS[nbuffers] if nbuffers < len(_LENGTHS) else struct.Struct(f"!{nbuffers}Q")).unpack_from(head, HEADER.size)
    described = meta_end  # bytes the header describes: frame 0, the other buffers, remote sizes
    inline_end = meta_end
    expected = 1
    plain = True  # every buffer inline or in one frame of its own
    for n in lengths:
        if n < INLINE_BIT:
            described += n
            if n > chunk_bytes:
                expected += -(-n // chunk_bytes)
                plain = False
            else:
                expected += 1
        elif n < REMOTE_BIT:
            n &= _SIZE_MASK
            described += n
            inline_end += n
        elif n & INLINE_BIT:
            raise Rejected("bad_header", "a buffer length is marked both inline and remote")
        else:
            described += n & ~REMOTE_BIT
            expected += 1
            plain = False
    total = described + head_bytes - inline_end if head_bytes > inline_end else described
    if total > max_message_bytes:
        raise Rejected("too_large", f"message of {total} bytes; the cap is {max_message_bytes} (transport.max_message_mb)")
    if len(parts) != expected:
        raise Rejected("bad_frame_count", f"got {len(parts)} frames; the header describes {expected}")
    if head_bytes != inline_end:
        raise Rejected("bad_frame_length", f"head frame has {head_bytes} bytes; the header describes {inline_end}")
    if plain:
        views = _plain_views(parts, head, meta_end, lengths)
        meta = _unpack_meta(head[meta_start:meta_end])
        return kind, flags, request_id, meta, tuple(memoryview(bytearray(v)) for v in views) if copy_single else views
    _check_lengths(parts, lengths, chunk_bytes)
    deferred = None
    if any(n >= REMOTE_BIT for n in lengths):
        if remote is None:
            raise Rejected("bad_cma", "a remote buffer from a peer this worker has not agreed to read from")
        # From here on the tickets are reported done whatever happens to the message: now, or
        # (deferred) by their handles, when read, released or dropped.
        deferred = _defer_remote(parts, lengths, chunk_bytes, remote) if defer_remote else \
            _release_remote(parts, lengths, chunk_bytes, remote)
    meta = _unpack_meta(head[meta_start:meta_end])
    return kind, flags, request_id, meta, _buffers(parts, head, meta_end, lengths, chunk_bytes, take_buffer,
                                                   copy_single, remote, deferred)


def _plain_views(parts: Sequence[Any], head: memoryview, offset: int, lengths: Sequence[int]) -> tuple[memoryview, ...]:
    """Check the frame lengths of a message whose buffers are all inline or one frame each, and
    return views of its buffers (``offset``: where the inline bytes start in ``head``)."""
    views = []
    index = 1
    for n in lengths:
        if n < INLINE_BIT:
            view = memoryview(parts[index])
            if view.nbytes != n:
                raise Rejected("bad_frame_length", f"buffer frame {index} has {view.nbytes} bytes; expected {n}")
            index += 1
        else:
            end = offset + (n & _SIZE_MASK)
            view = head[offset:end]
            offset = end
        views.append(view)
    return tuple(views)


def _unpack_meta(data: memoryview) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises many types on malformed input; all mean the same here
        raise Rejected("bad_metadata", f"metadata is not valid msgpack ({type(exc).__name__}: {exc})") from None


def _frames_for(length: int, chunk_bytes: int) -> int:
    """How many frames after frame 0 a buffer of header length ``length`` takes."""
    if length >= REMOTE_BIT:
        return 1
    if length >= INLINE_BIT:
        return 0
    return max(1, -(-length // chunk_bytes))


def _check_lengths(parts: Sequence[Any], lengths: Sequence[int], chunk_bytes: int) -> None:
    index = 1
    for n in lengths:
        if n >= REMOTE_BIT:
            got = len(parts[index])
            if got != DESCRIPTOR.size:
                raise Rejected("bad_frame_length", f"remote buffer descriptor {index} has {got} bytes; expected {DESCRIPTOR.size}")
            index += 1
            continue
        if n >= INLINE_BIT:
            continue
        for start in range(0, max(n, 1), chunk_bytes):
            want = min(chunk_bytes, n - start)
            got = len(parts[index])
            if got != want:
                raise Rejected("bad_frame_length", f"buffer frame {index} has {got} bytes; expected {want}")
            index += 1


def _release_remote(parts: Sequence[Any], lengths: Sequence[int], chunk_bytes: int, remote: RemoteSource) -> None:
    """Hand every descriptor of a well-formed message back for release, before anything can fail."""
    index = 1
    for n in lengths:
        if n >= REMOTE_BIT:
            remote.release(*DESCRIPTOR.unpack(parts[index]))
        index += _frames_for(n, chunk_bytes)


def _defer_remote(parts: Sequence[Any], lengths: Sequence[int], chunk_bytes: int, remote: RemoteSource) -> list[Any]:
    """A read-later handle per remote buffer of a well-formed message (before anything can fail:
    a handle dropped unread releases its ticket)."""
    handles = []
    index = 1
    for n in lengths:
        if n >= REMOTE_BIT:
            slot, generation = DESCRIPTOR.unpack(parts[index])
            handles.append(remote.defer(slot, generation, n & ~REMOTE_BIT))
        index += _frames_for(n, chunk_bytes)
    return handles


def _buffers(
    parts: Sequence[Any],
    head: memoryview,
    offset: int,
    lengths: Sequence[int],
    chunk_bytes: int,
    take_buffer: Callable[[int], memoryview],
    copy_single: bool,
    remote: RemoteSource | None,
    deferred: list[Any] | None,
) -> tuple[memoryview, ...]:
    """The buffers of a checked message; ``offset``: where the inline bytes start in ``head``."""
    buffers = []
    index = 1
    handles = iter(deferred or ())
    for n in lengths:
        if n >= REMOTE_BIT:
            if deferred is not None:
                buffers.append(next(handles))
            else:
                slot, generation = DESCRIPTOR.unpack(parts[index])
                buffers.append(remote.read(slot, generation, n & ~REMOTE_BIT, take_buffer))
            index += 1
        elif n >= INLINE_BIT:
            end = offset + (n & _SIZE_MASK)
            view = head[offset:end]
            buffers.append(memoryview(bytearray(view)) if copy_single else view)
            offset = end
        elif n <= chunk_bytes:
            view = memoryview(parts[index])
            buffers.append(memoryview(bytearray(view)) if copy_single else view)
            index += 1
        else:
            out = take_buffer(n)
            for start in range(0, n, chunk_bytes):
                part = parts[index]
                out[start : start + len(part)] = memoryview(part)
                index += 1
            buffers.append(out)
    return tuple(buffers)

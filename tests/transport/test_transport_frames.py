"""The wire format: encoding, every inbound check in order, and decode never failing otherwise."""

from __future__ import annotations

import array
import struct

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zgrad.transport import frames as fr

KINDS = frozenset({1, 2})
CHUNK = 64
BIG = 1 << 30


def take(n: int) -> memoryview:
    return memoryview(bytearray(n))


def decode(parts, **kw):
    return fr.decode(parts, valid_kinds=KINDS, max_message_bytes=kw.pop("cap", BIG), take_buffer=take, **kw)


def encode(kind=1, meta=None, buffers=(), chunk=CHUNK, flags=0, request_id=0):
    return fr.encode(kind, flags, request_id, fr.encode_meta(meta), [fr.as_byte_view(b) for b in buffers], chunk)


def test_round_trip_of_every_buffer_shape():
    matrix = np.arange(12, dtype=np.float64).reshape(3, 4)
    buffers = [b"", b"x" * CHUNK, b"y" * (CHUNK + 1), bytearray(range(200)), array.array("d", [1.5, 2.5]), matrix]
    parts = encode(2, {"k": [1, "two", b"3"]}, buffers, flags=0xBEEF, request_id=2**64 - 1)
    # b"" and the 64 bytes fill frame 0's room (one chunk); then frames of 65, 200, 16 and 96
    # bytes at 64 a chunk
    assert len(parts) == 1 + 2 + 4 + 1 + 2
    kind, flags, rid, meta, out = decode(parts)
    assert (kind, flags, rid, meta) == (2, 0xBEEF, 2**64 - 1, {"k": [1, "two", b"3"]})
    assert [bytes(b) for b in out] == [bytes(memoryview(b).cast("B")) for b in buffers]
    assert np.array_equal(np.frombuffer(out[5], dtype=np.float64).reshape(3, 4), matrix)


def test_small_buffers_travel_inside_frame_0_and_big_ones_in_frames_of_their_own():
    small, big = b"s" * fr.INLINE_MAX_BYTES, b"b" * (fr.INLINE_MAX_BYTES + 1)
    parts = fr.encode(1, 0, 0, fr.encode_meta(None), [memoryview(small), memoryview(big), memoryview(b"t")], 1 << 20)
    assert len(parts) == 2 and bytes(parts[1]) == big
    assert [bytes(b) for b in decode(parts)[4]] == [small, big, b"t"]


def test_buffers_are_zero_copy_views_of_their_frame_and_copy_single_copies():
    big = bytearray(fr.INLINE_MAX_BYTES + 1)
    parts = encode(buffers=[bytearray(b"abc"), big], chunk=1 << 20)
    inline, single = decode(parts)[4]
    assert inline.obj is parts[0] and single.obj is parts[1].obj
    copied = decode(parts, copy_single=True)[4]
    assert copied[0].obj is not parts[0] and copied[0] == b"abc" and not copied[0].readonly
    assert copied[1].obj is not parts[1].obj and copied[1] == big


def test_header_layout_is_documented():
    head = encode(buffers=[b"abcd"], request_id=7)[0]
    size = struct.calcsize("!4sHHHQIIIQ")
    assert struct.unpack("!4sHHHQIIIQ", head[:size]) == (b"ZGRD", 3, 1, 0, 7, CHUNK, 1, 1, 4 | fr.INLINE_BIT)
    assert head[size:] == b"\xc0abcd"  # the metadata (None), then the inline buffer


_FIELDS = ("magic", "version", "kind", "flags", "rid", "chunk", "nbuf", "meta")


def _with_header(parts, **changes):
    fields = dict(zip(_FIELDS, fr.HEADER.unpack_from(parts[0])))
    fields.update(changes)
    head = fr.HEADER.pack(*fields.values()) + bytes(parts[0][fr.HEADER.size:])
    return [head, *parts[1:]]


def _with_lengths(parts, *lengths):
    fields = dict(zip(_FIELDS, fr.HEADER.unpack_from(parts[0])))
    rest = bytes(parts[0][fr.HEADER.size + 8 * fields["nbuf"]:])
    fields["nbuf"] = len(lengths)
    return [fr.HEADER.pack(*fields.values()) + struct.pack(f"!{len(lengths)}Q", *lengths) + rest, *parts[1:]]


def _with_meta(parts, meta: bytes):
    fields = dict(zip(_FIELDS, fr.HEADER.unpack_from(parts[0])))
    start = fr.HEADER.size + 8 * fields["nbuf"]
    inline = bytes(parts[0][start + fields["meta"]:])
    head = _with_header(parts, meta=len(meta))[0]
    return [head[:start] + meta + inline, *parts[1:]]


GOOD = encode(1, {"a": 1}, [b"x" * 100, b"yz"])  # frame 0 with b"yz" inline, then 64 + 36 bytes


@pytest.mark.parametrize(
    "parts, reason",
    [
        ([], "short_message"),
        ([b"ZGRD", b"\xc0"], "bad_header"),
        (_with_header(GOOD, magic=b"NOPE"), "bad_magic"),
        (_with_header(GOOD, version=2), "bad_version"),
        (_with_header(GOOD, kind=9), "bad_kind"),
        (_with_header(GOOD, chunk=0), "bad_header"),
        (_with_header(GOOD, nbuf=fr.MAX_BUFFERS + 1), "bad_header"),
        (_with_header(GOOD, nbuf=3), "bad_header"),
        (_with_header(GOOD, meta=1000), "bad_header"),
        (_with_lengths(GOOD, 100, 2 | fr.INLINE_BIT | fr.REMOTE_BIT), "bad_header"),
        (GOOD[:-1], "bad_frame_count"),
        (GOOD + [b""], "bad_frame_count"),
        (_with_lengths(GOOD, 100, 2), "bad_frame_count"),
        ([GOOD[0], GOOD[1], b"y" * 37], "bad_frame_length"),
        ([GOOD[0] + b"!", *GOOD[1:]], "bad_frame_length"),
        (_with_lengths(GOOD, 100, 3 | fr.INLINE_BIT), "bad_frame_length"),
        (_with_meta(GOOD, b"\xc1"), "bad_metadata"),
        (_with_meta(GOOD, b"\x92\x01"), "bad_metadata"),
        (_with_meta(GOOD, msgpack.packb(1) + b"extra"), "bad_metadata"),
    ],
)
def test_each_check_rejects_with_its_reason(parts, reason):
    with pytest.raises(fr.Rejected) as info:
        decode(parts)
    assert info.value.reason == reason and info.value.detail


def test_frame_lengths_are_checked_before_the_metadata_on_every_path():
    for chunk in (1 << 20, 64):  # one frame per buffer; chunked
        parts = _with_meta(encode(1, None, [b"z" * (fr.INLINE_MAX_BYTES + 1)], chunk=chunk), b"\xc1")
        parts[-1] = parts[-1][:-1]
        with pytest.raises(fr.Rejected) as info:
            decode(parts)
        assert info.value.reason == "bad_frame_length"


def test_the_helpers_above_change_only_what_they_name():
    assert decode(_with_meta(GOOD, msgpack.packb({"a": 1})))[3] == {"a": 1}
    assert decode(_with_lengths(GOOD, 100, 2 | fr.INLINE_BIT))[3] == {"a": 1}


@pytest.mark.parametrize("claimed", [1 << 40, (1 << 40) | fr.INLINE_BIT, (1 << 40) | fr.REMOTE_BIT])
def test_size_cap_is_checked_before_anything_is_allocated(claimed):
    parts = _with_lengths(encode(), claimed) + [b""]
    with pytest.raises(fr.Rejected) as info:
        fr.decode(parts, valid_kinds=KINDS, max_message_bytes=BIG, take_buffer=pytest.fail)
    assert info.value.reason == "too_large"


def test_reserved_kinds_are_accepted_and_user_kinds_stop_below_them():
    assert decode(encode(fr.KIND_HEARTBEAT))[0] == fr.KIND_HEARTBEAT
    assert fr.MAX_USER_KIND < min(fr.RESERVED_KINDS)


def test_encode_rejects_out_of_range_fields():
    with pytest.raises(ValueError, match="16 bits"):
        encode(flags=1 << 16)
    with pytest.raises(ValueError, match="64-bit"):
        encode(request_id=1 << 64)
    with pytest.raises(TypeError, match="msgpack"):
        fr.encode_meta({1: {2, 3}})


frame_lists = st.lists(st.binary(max_size=80), max_size=6)


@settings(max_examples=400, deadline=None)
@given(frame_lists)
def test_random_frames_are_rejected_never_crash(parts):
    try:
        decode(parts)
    except fr.Rejected:
        pass


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_valid_messages_are_rejected_or_decoded_never_crash(data):
    parts = [bytearray(p) for p in encode(1, {"x": [1, 2]}, [b"a" * 130, b"b"])]
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(parts) - 1))
        if parts[i]:
            j = data.draw(st.integers(0, len(parts[i]) - 1))
            parts[i][j] = data.draw(st.integers(0, 255))
        if data.draw(st.booleans()):
            parts[i] = parts[i][: data.draw(st.integers(0, len(parts[i])))]
    try:
        kind, *_ = decode([bytes(p) for p in parts])
        assert kind in KINDS or kind in fr.RESERVED_KINDS
    except fr.Rejected:
        pass

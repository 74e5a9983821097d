"""Tensor references in RPC values: round trips, every check of a received one, and the memos."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

import zgrad
from zgrad.distributed.rpc import wire_arrays
from zgrad.distributed.rpc.codec import EXT_TENSOR, decode_value, encode_value
from zgrad.errors import ProtocolError


def _frames(encoded):
    return [memoryview(np.ascontiguousarray(b).reshape(-1).view(np.uint8)) for b in encoded.buffers]


def _ref(*fields) -> bytes:
    return msgpack.packb(msgpack.ExtType(EXT_TENSOR, msgpack.packb(list(fields))))


@pytest.mark.parametrize("tensor", [
    zgrad.randn(3, 4, requires_grad=True),
    zgrad.tensor([1, 2, 3]),
    zgrad.zeros(0, 5),
    zgrad.nn.Parameter(zgrad.ones(2)),
    zgrad.tensor(np.float64(2.5)),
])
def test_tensors_round_trip_and_a_second_time_from_the_memo(tensor):
    for _ in range(2):
        encoded = encode_value([tensor, tensor])
        decoded = decode_value(encoded.payload, _frames(encoded))
        for back in decoded.value:
            np.testing.assert_array_equal(back.numpy(), tensor.numpy())
            assert back.shape == tensor.shape and back.dtype == tensor.dtype
            assert back.requires_grad == tensor.requires_grad
            assert isinstance(back, zgrad.nn.Parameter) == isinstance(tensor, zgrad.nn.Parameter)
        assert len(decoded.tensors) == 2


@pytest.mark.parametrize("fields, buffers, words", [
    ((0, "<f4", [2], False), [b"\0" * 12], "cannot hold shape [2]"),
    ((1, "<f4", [1], False), [b"\0" * 4], "outside the 1 buffers received"),
    ((-1, "<f4", [1], False), [b"\0" * 4], "is not a buffer index"),
    ((0, "|O", [1], False), [b"\0" * 8], "is not a plain numeric dtype"),
    ((0, "<f4", [-1], False), [b"\0" * 4], "not a list of non-negative ints"),
    ((0, "<i8", [1], True), [b"\0" * 8], "cannot require grad"),
    ((0, "<f4", [1], False, False, "tpu:0"), [b"\0" * 4], "malformed tensor reference"),
    ((0, "<f4", [1], 1), [b"\0" * 4], "malformed tensor reference"),
    ((0, "<f4"), [b"\0" * 4], "malformed tensor reference"),
])
def test_a_bad_reference_is_refused_every_time(fields, buffers, words):
    for _ in range(2):  # a refused reference is not remembered as good
        with pytest.raises(ProtocolError, match=words.replace("[", r"\[").replace("]", r"\]")):
            decode_value(_ref(*fields), [memoryview(b) for b in buffers])


def test_a_remembered_reference_is_still_checked_against_its_buffer_and_its_use():
    good = _ref(0, "<f4", [2], False)
    assert decode_value(good, [memoryview(bytearray(8))]).value.shape == (2,)
    with pytest.raises(ProtocolError, match="cannot hold shape"):
        decode_value(good, [memoryview(bytearray(4))])
    twice = msgpack.packb([msgpack.ExtType(EXT_TENSOR, msgpack.packb([0, "<f4", [2], False]))] * 2)
    with pytest.raises(ProtocolError, match="referenced twice"):
        decode_value(twice, [memoryview(bytearray(8))])


def test_the_memos_are_bounded(monkeypatch):
    monkeypatch.setattr(wire_arrays, "_MEMO_SIZE", 8)
    monkeypatch.setattr(wire_arrays, "_packed_refs", {})
    monkeypatch.setattr(wire_arrays, "_parsed_refs", {})
    for n in range(20):
        encoded = encode_value(zgrad.zeros(n))
        assert decode_value(encoded.payload, _frames(encoded)).value.shape == (n,)
    assert len(wire_arrays._packed_refs) == 8 and len(wire_arrays._parsed_refs) == 8

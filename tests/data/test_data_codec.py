"""How values travel between a DataLoader's processes (zgrad/utils/data/_utils/codec.py and
shared_memory.py), in one process: encode into shared memory, hand the descriptors over, decode
from the receiver's mappings. Every kind of value comes back equal, arrays as views of the
segments, and what cannot travel is refused with its path."""

from __future__ import annotations

import collections
import dataclasses
import enum
import os
import re

import numpy as np
import pytest

import zgrad
from zgrad.utils.data._utils.codec import decode, encode
from zgrad.utils.data._utils.shared_memory import BatchArena, ReceivedSegments, SegmentPool

Point = collections.namedtuple("Point", ["x", "y"])


@dataclasses.dataclass(frozen=True)
class Record:
    name: str
    values: list


class Color(enum.IntEnum):
    RED = 1


def round_trip(value, receiver=None, pool=None):
    arena = BatchArena(pool or SegmentPool())
    tree = encode(value, arena)
    segments, new_ids, fds = arena.export()
    received = (receiver or ReceivedSegments()).receive(segments, new_ids, [os.dup(fd) for fd in fds])
    arena.sent()
    return decode(tree, received)


VALUES = [
    None, True, 3, -2**63, 2**64 - 1, 2.5, "text", b"bytes", [1, [2, "x"]], (1, (2.0,)), {"a": 1, 2: "b", (3, 4): None},
    collections.OrderedDict(z=1, a=2), Point(1, "y"), Record("r", [1, 2]), np.float32(1.5), np.int8(-3), np.bool_(True),
    np.arange(6, dtype=np.int16).reshape(2, 3), np.array(["ab", "c"]), np.zeros((0, 3)), np.arange(4)[::2],
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_values_come_back_equal(value):
    back = round_trip(value)
    assert type(back) is type(value)
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value)
    else:
        assert back == value


def test_tensors_come_back_as_views_of_the_shared_memory():
    batch = {"x": zgrad.arange(12).reshape(3, 4).float(), "w": zgrad.ones(2, requires_grad=True)}
    back = round_trip(batch)
    assert back["x"].tolist() == batch["x"].tolist() and back["x"].dtype == zgrad.float32
    assert back["w"].requires_grad and back["w"].is_leaf
    base = back["x"].numpy()
    while isinstance(base, np.ndarray):
        base = base.base
    assert type(base).__name__ == "_BatchView"


def test_subclasses_of_plain_values_travel_as_plain_values():
    assert round_trip([Color.RED]) == [1] and type(round_trip(Color.RED)) is int


def test_a_default_dict_comes_back_as_a_dict():
    assert round_trip(collections.defaultdict(list, a=[1])) == {"a": [1]}


@pytest.mark.parametrize("value, message", [
    ({"f": lambda: 1}, "value['f'] is a function, which cannot travel between processes"),
    ([1, 2**64], "value[1] is an int beyond 64 bits"),
    ({"a": np.array([object()])}, "value['a'] is an array of Python objects"),
])
def test_what_cannot_travel_is_refused_with_its_path(value, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        round_trip(value)


def test_classes_defined_in_functions_cannot_be_looked_up():
    class Local:
        pass

    with pytest.raises(TypeError, match="a class defined inside a function"):
        round_trip(Local())


def test_a_non_leaf_tensor_that_requires_grad_is_refused_as_in_torch():
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor which requires_grad"):
        round_trip(zgrad.ones(2, requires_grad=True) * 2)


def test_segments_are_freed_when_the_batch_goes_and_then_reused():
    pool, receiver = SegmentPool(), ReceivedSegments()
    first = round_trip(zgrad.ones(1000), receiver, pool)
    assert receiver.collect() == ([], [])  # still held
    del first
    freed, dropped = receiver.collect()
    assert len(freed) == 1 and dropped == []
    pool.release(freed)
    arena = BatchArena(pool)
    encode(zgrad.zeros(10), arena)
    segments, new_ids, fds = arena.export()
    assert segments[0][0] == freed[0] and new_ids == [] and fds == []  # filled again, nothing new to send
    arena.sent()

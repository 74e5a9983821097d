"""default_collate and default_convert against PyTorch's, kind by kind: the same structure, types,
dtypes and values, and the same errors."""

from __future__ import annotations

import collections
import dataclasses
import re

import numpy as np
import pytest

import zgrad
from helpers import require_torch
from zgrad.utils.data import default_collate, default_convert

Point = collections.namedtuple("Point", ["x", "y"])


@dataclasses.dataclass
class Record:
    a: int
    b: float


def samples(lib):
    """Batches of every kind default_collate handles, built with ``lib`` (zgrad or torch)."""
    return {
        "ints": [1, 2, 3],
        "floats": [1.5, 2.5],
        "bools": [True, False],
        "strings": ["a", "b"],
        "bytes": [b"x", b"y"],
        "numpy float32 scalars": [np.float32(1), np.float32(2)],
        "numpy int8 scalars": [np.int8(1), np.int8(-3)],
        "numpy bool scalars": [np.bool_(True), np.bool_(False)],
        "numpy arrays": [np.array([1, 2], dtype=np.int16), np.array([3, 4], dtype=np.int16)],
        "numpy 0-d arrays": [np.array(1.0), np.array(2.0)],
        "tensors": [lib.tensor([[1.0, 2.0]]), lib.tensor([[3.0, 4.0]])],
        "int tensors": [lib.tensor(1), lib.tensor(2)],
        "dicts": [{"a": 1, "b": "x", "c": lib.tensor([1.0])}, {"a": 2, "b": "y", "c": lib.tensor([2.0])}],
        "tuples": [(1, 2.0), (3, 4.0)],
        "lists": [[1, 2], [3, 4]],
        "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
        "ordered dicts": [collections.OrderedDict(k=1), collections.OrderedDict(k=2)],
        "nested": [{"img": (np.zeros((2, 2), np.float32), [1, "p"])}, {"img": (np.ones((2, 2), np.float32), [2, "q"])}],
    }


def plain(value, lib):
    """``value`` (a batch of ``lib``) with tensors as (numpy dtype name, values), comparable across libraries."""
    if isinstance(value, lib.Tensor):
        array = np.asarray(value.numpy())
        return ("tensor", str(array.dtype), array.tolist())
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.tolist())
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, *(plain(v, lib) for v in value))
    if isinstance(value, dict):
        return (type(value).__name__, {k: plain(v, lib) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [plain(v, lib) for v in value])
    return value


@pytest.mark.torch
@pytest.mark.parametrize("kind", list(samples(zgrad)))
def test_default_collate_matches_torch(kind):
    torch = require_torch()
    ours = default_collate(samples(zgrad)[kind])
    theirs = torch.utils.data.default_collate(samples(torch)[kind])
    assert plain(ours, zgrad) == plain(theirs, torch)


@pytest.mark.torch
@pytest.mark.parametrize("value", [np.array([1, 2]), (np.array(1), 2), np.float64(3), "s", {"a": np.array([1.0])},
                                   [np.array([1], np.int8)], Point(np.array(0), 1), np.array(["a"])],
                         ids=repr)
def test_default_convert_matches_torch(value):
    torch = require_torch()
    assert plain(default_convert(value), zgrad) == plain(torch.utils.data.default_convert(value), torch)


@pytest.mark.torch
@pytest.mark.parametrize("batch", [[complex(1, 2)], [None, None], [Record(1, 2.0), Record(3, 4.0)], [[1, 2], [3]],
                                   [np.array(["a"]), np.array(["b"])]], ids=repr)
def test_default_collate_errors_match_torch(batch):
    torch = require_torch()
    with pytest.raises(Exception) as theirs:
        torch.utils.data.default_collate(batch)
    with pytest.raises(type(theirs.value), match="^" + re.escape(str(theirs.value)) + "$"):
        default_collate(batch)


def test_collated_tensors_are_fresh_and_record_the_graph():
    a, b = zgrad.ones(3), zgrad.zeros(3)
    batch = default_collate([a, b])
    batch[0, 0] = 5.0
    assert a.tolist() == [1.0, 1.0, 1.0] and batch.shape == (2, 3)
    w = zgrad.ones(2, requires_grad=True)
    stacked = default_collate([w * 2, w * 3])
    stacked.sum().backward()
    assert w.grad.tolist() == [5.0, 5.0]


def test_tensors_of_different_shapes_do_not_stack():
    with pytest.raises(ValueError, match=re.escape("stack expects each tensor to be equal size, but got [2] at entry 0 "
                                                   "and [3] at entry 1")):
        default_collate([zgrad.ones(2), zgrad.ones(3)])

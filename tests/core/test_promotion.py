"""PyTorch's type promotion: ``zgrad.promote_types``, ``result_type`` and ``can_cast`` against
torch's over the dtype grid, each dtype as a tensor with dimensions, a 0-dim tensor and beside
Python numbers; the default dtype and its errors; and the dtypes binary ops give as a result.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import zgrad
from helpers import torch

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
NUMBERS = [True, 3, 2.5]


def as_zgrad(name: str, zero_dim: bool):
    value = np.ones((), name) if zero_dim else np.ones(3, name)
    return zgrad.tensor(value)


def as_torch(name: str, zero_dim: bool):
    return torch.ones((), dtype=getattr(torch, name)) if zero_dim else torch.ones(3, dtype=getattr(torch, name))


def torch_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("a", DTYPES)
def test_promote_types_and_can_cast_are_torchs(a):
    for b in DTYPES:
        expected = torch_name(torch.promote_types(getattr(torch, a), getattr(torch, b)))
        assert str(zgrad.promote_types(np.dtype(a), np.dtype(b))) == expected, (a, b)
        assert zgrad.can_cast(np.dtype(a), np.dtype(b)) == torch.can_cast(getattr(torch, a), getattr(torch, b)), (a, b)


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("a", DTYPES)
def test_result_type_of_tensors_0_dim_tensors_and_numbers_is_torchs(a):
    for a_zero, b, b_zero in itertools.product((False, True), DTYPES, (False, True)):
        expected = torch_name(torch.result_type(as_torch(a, a_zero), as_torch(b, b_zero)))
        got = zgrad.result_type(as_zgrad(a, a_zero), as_zgrad(b, b_zero))
        assert str(got) == expected, (a, a_zero, b, b_zero)
    for a_zero, number in itertools.product((False, True), NUMBERS):
        expected = torch_name(torch.result_type(as_torch(a, a_zero), number))
        assert str(zgrad.result_type(as_zgrad(a, a_zero), number)) == expected, (a, a_zero, number)


@pytest.mark.parametrize("a, b, expected", [
    (np.ones(3, np.int64), 2.5, "float32"),             # an int tensor and a float: the default dtype
    (np.ones(3, np.float32), np.ones((), np.float64), "float32"),  # a 0-dim tensor does not widen
    (np.ones(3, np.uint8), 1000, "uint8"),             # nor does a Python int
    (np.ones(3, np.bool_), 1, "int64"),                # but it raises the category
    (np.ones(3, np.int32), np.ones((), np.float64), "float64"),   # a 0-dim float raises an int tensor
    (np.ones(3, np.int16), np.ones(3, np.float16), "float16"),    # not numpy's float64
])
def test_result_type_rules(a, b, expected):
    assert str(zgrad.result_type(zgrad.tensor(a), b if not isinstance(b, np.ndarray) else zgrad.tensor(b))) \
        == expected


def test_default_dtype_is_float32_and_only_floating_types_may_replace_it():
    assert zgrad.get_default_dtype() == zgrad.float32
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
        zgrad.set_default_dtype(zgrad.int64)
    zgrad.set_default_dtype(zgrad.float64)
    try:
        assert zgrad.get_default_dtype() == zgrad.float64
        assert zgrad.result_type(zgrad.tensor([1, 2]), 0.5) == zgrad.float64
    finally:
        zgrad.set_default_dtype(zgrad.float32)


# An integer result converts every operand to its dtype first, as PyTorch does: numpy would refuse
# an int64 0-d tensor or -1 beside uint8, and would take a maximum in int64.
INTEGER_CASES = [
    ("u8 + -1", lambda lib, x: x + (-1), [0, 1, 2]),
    ("u8 + 300", lambda lib, x: x + 300, [45, 46, 47]),
    ("u8 * 0-d", lambda lib, x: x * lib.tensor(1), [1, 2, 3]),
    ("u8 max 0-d -1", lambda lib, x: lib.maximum(x, lib.tensor(-1)), [255, 255, 255]),
    ("u8 add_ 0-d -1", lambda lib, x: x.clone().add_(lib.tensor(-1)), [0, 1, 2]),
    ("u8 clamp -1", lambda lib, x: lib.clamp(x, min=-1), [255, 255, 255]),
    ("u8 clamp 0-d -1", lambda lib, x: lib.clamp(x, lib.tensor(-1)), [255, 255, 255]),
    ("i8 max 0-d -200", lambda lib, x: lib.maximum(x.to(lib.int8), lib.tensor(-200)), [56, 56, 56]),
]


@pytest.mark.parametrize("case", INTEGER_CASES, ids=lambda c: c[0])
def test_an_integer_result_converts_its_operands_first(case):
    _, run, expected = case
    result = run(zgrad, zgrad.tensor([1, 2, 3], dtype=zgrad.uint8))
    assert result.tolist() == expected


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("case", INTEGER_CASES, ids=lambda c: c[0])
def test_an_integer_result_converts_its_operands_as_torch(case):
    _, run, _ = case
    got = run(zgrad, zgrad.tensor([1, 2, 3], dtype=zgrad.uint8))
    expected = run(torch, torch.tensor([1, 2, 3], dtype=torch.uint8))
    assert got.tolist() == expected.tolist() and str(got.dtype) == torch_name(expected.dtype)


@pytest.mark.parametrize("dtype, bound", [("uint8", 300), ("uint8", -256), ("int8", -129), ("int16", 2 ** 15)])
def test_a_clamp_bound_the_integer_dtype_cannot_take_is_refused(dtype, bound):
    x = zgrad.tensor([1, 2], dtype=getattr(zgrad, dtype))
    with pytest.raises(RuntimeError, match="value cannot be converted to type .* without overflow"):
        zgrad.clamp(x, max=bound)

"""``zgrad.testing.assert_close`` against ``torch.testing.assert_close``: the same verdict, the same
exception type and the same message (dtype and shape names aside) on tensors, numbers and
containers, with the default tolerances of each dtype and explicit ones.
"""

from __future__ import annotations


import numpy as np
import pytest

import zgrad
from helpers import torch
from zgrad.testing import assert_close

NAN, INF = float("nan"), float("inf")

# name: fn(lib) -> (actual, expected, keyword arguments)
CASES = {
    "equal": lambda lib: (lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0]), {}),
    "float32_close": lambda lib: (lib.tensor([0.0, 1.0]), lib.tensor([5e-6, 1.0]), {}),
    "float32_far": lambda lib: (lib.tensor([1.0, 2.0, 3.0]), lib.tensor([1.0, 2.5, 3.0]), {}),
    "float32_relative": lambda lib: (lib.tensor([1000.0]), lib.tensor([1000.01]), {}),
    "float64_far": lambda lib: (lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64),
                                lib.tensor([[1.0, 2.0], [3.0, 4.001]], dtype=lib.float64), {}),
    "float16_close": lambda lib: (lib.tensor([1.0, 2.0], dtype=lib.float16),
                                  lib.tensor([1.0, 2.001], dtype=lib.float16), {}),
    "zero_expected": lambda lib: (lib.ones(2, 2), lib.zeros(2, 2), {}),
    "int_far": lambda lib: (lib.tensor([1, 2, 3]), lib.tensor([1, 4, 3]), {}),
    "uint8_far": lambda lib: (lib.tensor([1, 2], dtype=lib.uint8), lib.tensor([3, 2], dtype=lib.uint8), {}),
    "bool_far": lambda lib: (lib.tensor([True, False]), lib.tensor([True, True]), {}),
    "scalar_tensor": lambda lib: (lib.tensor(1.0), lib.tensor(1.5), {}),
    "python_floats": lambda lib: (1.0, 1.5, {}),
    "python_ints": lambda lib: (1, 2, {}),
    "python_bools": lambda lib: (True, False, {}),
    "nan_unequal": lambda lib: (lib.tensor([NAN]), lib.tensor([NAN]), {}),
    "nan_equal": lambda lib: (lib.tensor([1.0, NAN]), lib.tensor([1.0, NAN]), {"equal_nan": True}),
    "inf_equal": lambda lib: (lib.tensor([INF, -INF]), lib.tensor([INF, -INF]), {}),
    "inf_opposite": lambda lib: (lib.tensor([INF]), lib.tensor([-INF]), {}),
    "explicit_tolerance": lambda lib: (lib.tensor([0.0, 1.0]), lib.tensor([0.0, 1.1]), {"rtol": 0.2, "atol": 0.0}),
    "explicit_too_tight": lambda lib: (lib.tensor([0.0, 1.0]), lib.tensor([0.0, 1.1]), {"rtol": 0.01, "atol": 0.0}),
    "shape": lambda lib: (lib.ones(2), lib.ones(3), {}),
    "dtype": lambda lib: (lib.ones(2), lib.ones(2, dtype=lib.float64), {}),
    "dtype_unchecked_int": lambda lib: (lib.tensor([1, 2]), lib.tensor([1.0, 2.0]), {"check_dtype": False}),
    "dtype_unchecked_loosest": lambda lib: (lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0001], dtype=lib.float16),
                                            {"check_dtype": False}),
    "dtype_unchecked_far": lambda lib: (lib.tensor([1.0, 2.0], dtype=lib.float64), lib.tensor([1.0, 2.0001]),
                                        {"check_dtype": False}),
    "stride": lambda lib: (lib.zeros(2, 2), lib.zeros(2, 2).t(), {"check_stride": True}),
    "stride_unchecked": lambda lib: (lib.zeros(2, 2), lib.zeros(2, 2).t(), {}),
    "list": lambda lib: ([lib.ones(2), lib.zeros(2)], [lib.ones(2), lib.ones(2)], {}),
    "list_length": lambda lib: ([1, 2], [1, 2, 3], {}),
    "dict": lambda lib: ({"a": lib.ones(2)}, {"a": lib.zeros(2)}, {}),
    "nested": lambda lib: ({"a": [lib.ones(2), 1.0]}, {"a": [lib.ones(2), 1.0]}, {}),
    "message": lambda lib: (lib.tensor([1.0, NAN]), lib.tensor([1.0, 2.0]), {"msg": "custom"}),
    "message_callable": lambda lib: (lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.5]), {"msg": lambda m: "X" + m}),
    "tensor_and_number": lambda lib: (lib.ones(()), 1.0, {}),
    "rtol_only": lambda lib: (lib.ones(2), lib.ones(2), {"rtol": 1e-3}),
}


def _outcome(lib, name):
    actual, expected, kwargs = CASES[name](lib)
    check = zgrad.testing.assert_close if lib is zgrad else torch.testing.assert_close
    try:
        check(actual, expected, **kwargs)
    except Exception as error:  # noqa: BLE001 - compared below
        return type(error), str(error)
    return None, None


def _normalized(message: str) -> str:
    """PyTorch's spelling of dtypes and shapes taken out: torch.float32 -> float32,
    torch.Size([2]) -> zgrad.Size([2])."""
    return message.replace("torch.Size(", "zgrad.Size(").replace("torch.", "")


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", sorted(CASES))
def test_verdicts_and_messages_match_pytorch(name):
    our_type, our_message = _outcome(zgrad, name)
    their_type, their_message = _outcome(torch, name)
    assert our_type is their_type, f"zgrad: {our_type} {our_message!r}; torch: {their_type} {their_message!r}"
    if name != "tensor_and_number":  # the message names the library's own types
        assert our_message == (None if their_message is None else _normalized(their_message))


def test_default_tolerances_and_messages():
    assert zgrad.testing.comparison.default_tolerances(np.dtype(np.float32)) == (1.3e-6, 1e-5)
    assert zgrad.testing.comparison.default_tolerances(np.dtype(np.int64), np.dtype(np.float16)) == (1e-3, 1e-5)
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 3 \(33.3%\)\nGreatest absolute difference: "
                                             r"0.5 at index \(1,\) \(up to 1e-05 allowed\)"):
        assert_close(zgrad.tensor([1.0, 2.0, 3.0]), zgrad.tensor([1.0, 2.5, 3.0]))
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol' must be either specified or omitted, but got no atol"):
        assert_close(zgrad.ones(1), zgrad.ones(1), rtol=1.0)
    with pytest.raises(TypeError, match="No comparison pair"):
        assert_close(zgrad.ones(2), np.ones(2))
    assert_close(np.ones(3), np.ones(3))

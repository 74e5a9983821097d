"""PyTorch's rules for arithmetic that numpy decides differently, checked without torch (the
conformance suite compares the same ops with torch over the dtype grid): ``alpha`` of add/sub,
bool operands refused by subtraction and negation, division with a rounding mode and
``floor_divide`` (exact integer quotients, zero gradients), clamp with tensor bounds (gradients
to the bound that wins), softmax's ``dtype`` and legacy implicit dim, and the dtypes activations
and argmax refuse.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from zgrad.errors import DTypeError


def test_add_and_sub_take_alpha_in_the_operands_dtype():
    a, b = zgrad.tensor([1, 2], dtype=zgrad.int8), zgrad.tensor([3, 4], dtype=zgrad.int8)
    out = zgrad.add(a, b, alpha=2)
    assert out.dtype == zgrad.int8 and out.tolist() == [7, 10]
    assert zgrad.sub(a, b, alpha=3).tolist() == [-8, -10]
    flags = zgrad.tensor([True, False])
    assert zgrad.add(flags, flags, alpha=2).dtype == zgrad.bool
    assert a.add(b, alpha=-1).tolist() == [-2, -2]
    with pytest.raises(DTypeError, match="For integral input tensors, argument alpha must not be a floating point"):
        zgrad.add(a, b, alpha=0.5)
    with pytest.raises(DTypeError, match="Boolean alpha only supported for Boolean results"):
        zgrad.add(a, b, alpha=True)


def test_subtraction_and_negation_refuse_bool_tensors():
    flags = zgrad.tensor([True, False])
    for fn in (lambda: flags - flags, lambda: 1 - flags, lambda: zgrad.tensor([1, 2]) - True):
        with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor is not supported"):
            fn()
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor is not supported"):
        -flags


def test_division_with_a_rounding_mode_and_floor_divide():
    a, b = zgrad.tensor([-7, 7, -6, 5]), zgrad.tensor([2, -2, 3, 5])
    assert zgrad.div(a, b, rounding_mode="trunc").tolist() == [-3, -3, -2, 1]
    assert zgrad.div(a, b, rounding_mode="floor").tolist() == [-4, -4, -2, 1]
    assert (a // b).tolist() == [-4, -4, -2, 1] and zgrad.floor_divide(a, b).dtype == zgrad.int64
    assert (7 // zgrad.tensor([2, -2])).tolist() == [3, -4]
    big = zgrad.tensor([2**62 + 1])
    assert zgrad.div(big, 3, rounding_mode="trunc").item() == (2**62 + 1) // 3  # exact, not through a float
    x = zgrad.tensor([-3.5, 3.5, -0.25], dtype=zgrad.float64, requires_grad=True)
    out = zgrad.div(x, 1.0, rounding_mode="trunc")
    assert out.tolist() == [-3.0, 3.0, -0.0]
    out.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    y = zgrad.tensor([5, 9])
    y.div_(2, rounding_mode="floor")
    assert y.tolist() == [2, 4]
    with pytest.raises(RuntimeError, match="div expected rounding_mode to be one of None, 'trunc', or 'floor'"):
        zgrad.div(a, b, rounding_mode="round")


def test_clamp_with_tensor_bounds_sends_the_gradient_where_torch_does():
    x = zgrad.tensor([-2.0, 0.5, 3.0, 1.0], dtype=zgrad.float64, requires_grad=True)
    low = zgrad.tensor([-1.0, -1.0, -1.0, 2.0], dtype=zgrad.float64, requires_grad=True)
    high = zgrad.tensor([1.0, 1.0, 1.0, 0.0], dtype=zgrad.float64, requires_grad=True)
    out = zgrad.clamp(x, min=low, max=high)
    assert out.tolist() == [-1.0, 0.5, 1.0, 0.0]  # crossed bounds (last): max wins
    out.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert low.grad.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert high.grad.tolist() == [0.0, 0.0, 1.0, 1.0]
    with pytest.raises(TypeError, match="both tensors or both numbers"):
        zgrad.clamp(x, min=low, max=1.0)


def test_softmax_takes_a_dtype_and_warns_without_a_dim():
    x = zgrad.tensor([[1, 2], [3, 5]])
    with pytest.raises(RuntimeError, match="\"softmax\" not implemented for 'Long'"):
        zgrad.softmax(x, 1)
    out = zgrad.softmax(x, 1, dtype=zgrad.float64)
    assert out.dtype == zgrad.float64
    np.testing.assert_allclose(out.numpy().sum(1), [1.0, 1.0])
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax has been deprecated"):
        implicit = zgrad.nn.functional.log_softmax(x.float())
    np.testing.assert_allclose(implicit.numpy(), zgrad.log_softmax(x.float(), 1).numpy())


def test_activations_and_argmax_refuse_what_torch_refuses():
    assert zgrad.relu(zgrad.tensor([-3, 4], dtype=zgrad.int16)).tolist() == [0, 4]
    flags = zgrad.tensor([True, False])
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        zgrad.relu(flags)
    with pytest.raises(RuntimeError, match="\"abs\" not implemented for 'Bool'"):
        zgrad.abs(flags)
    with pytest.raises(RuntimeError, match="argmax\\(\\): does not support bool input"):
        zgrad.argmax(flags)
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        zgrad.var(zgrad.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        flags ** flags

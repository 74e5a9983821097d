"""Integer division by zero (``//``, ``%``, ``floor_divide``, ``remainder``, ``fmod``,
``div(rounding_mode=...)`` and their in-place forms) raises PyTorch's ``RuntimeError``
"ZeroDivisionError", on CPU and CUDA (Numba's simulator here); floating division by zero and an
empty result do not.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda
from helpers import torch
from zgrad.errors import IntegerDivisionByZeroError

DIVISIONS = {
    "floordiv_operator": lambda lib, a, b: a // b,
    "rfloordiv_number": lambda lib, a, b: 7 // b,
    "floor_divide": lambda lib, a, b: lib.floor_divide(a, b),
    "mod_operator": lambda lib, a, b: a % b,
    "rmod_number": lambda lib, a, b: 7 % b,
    "remainder": lambda lib, a, b: lib.remainder(a, b),
    "fmod": lambda lib, a, b: lib.fmod(a, b),
    "div_floor": lambda lib, a, b: lib.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda lib, a, b: lib.div(a, b, rounding_mode="trunc"),
    "floor_divide_": lambda lib, a, b: a.clone().floor_divide_(b),
    "ifloordiv": lambda lib, a, b: a.clone().__ifloordiv__(b),
    "imod": lambda lib, a, b: a.clone().__imod__(b),
    "remainder_": lambda lib, a, b: a.clone().remainder_(b),
    "fmod_": lambda lib, a, b: a.clone().fmod_(b),
    "div_trunc_": lambda lib, a, b: a.clone().div_(b, rounding_mode="trunc"),
}
INTEGER_DTYPES = [np.int64, np.int32, np.int8, np.uint8]
NUMBER_DIVISIONS = {
    "floordiv_number": lambda lib, a: a // 0,
    "mod_number": lambda lib, a: a % 0,
    "fmod_number": lambda lib, a: lib.fmod(a, 0),
    "div_floor_number": lambda lib, a: lib.div(a, 0, rounding_mode="floor"),
    "zero_dim_divisor": lambda lib, a: a // lib.tensor(0),
}


def _operands(lib, dtype, device="cpu"):
    a = lib.tensor(np.array([5, 3, 4], dtype=dtype), device=device)
    b = lib.tensor(np.array([1, 0, 2], dtype=dtype), device=device)
    return a, b


def _refuses(fn, *args) -> None:
    with pytest.raises(RuntimeError, match="^ZeroDivisionError$") as raised:
        fn(*args)
    assert isinstance(raised.value, IntegerDivisionByZeroError) or not isinstance(raised.value, zgrad.ZgradError)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(DIVISIONS))
@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_division_by_zero_raises_as_torch(name, dtype):
    fn = DIVISIONS[name]
    if torch is not None:
        _refuses(fn, torch, *_operands(torch, dtype))
    _refuses(fn, zgrad, *_operands(zgrad, dtype))


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(NUMBER_DIVISIONS))
def test_integer_division_by_number_zero_raises_as_torch(name):
    fn = NUMBER_DIVISIONS[name]
    if torch is not None:
        _refuses(fn, torch, torch.tensor([5, -3]))
    _refuses(fn, zgrad, zgrad.tensor([5, -3]))


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(DIVISIONS))
def test_nonzero_divisors_and_empty_results_divide_as_torch(name):
    fn = DIVISIONS[name]
    a, b = np.array([7, -7, 6, -5]), np.array([2, 3, -4, -5])
    got = fn(zgrad, zgrad.tensor(a), zgrad.tensor(b))
    empty = fn(zgrad, zgrad.tensor(a[:0]), zgrad.tensor(np.zeros(0, np.int64)))
    assert empty.shape == (0,) and empty.dtype == np.int64
    assert (zgrad.tensor(a[:0]) // 0).shape == (0,)
    if torch is not None:
        np.testing.assert_array_equal(got.numpy(), fn(torch, torch.tensor(a), torch.tensor(b)).numpy())


@pytest.mark.torch
def test_floating_division_by_zero_is_not_refused():
    a, b = np.array([5, -3, 4]), np.array([1, 0, 2])
    for fn in (lambda lib, x, y: x // y.double(), lambda lib, x, y: lib.fmod(x, 0.0), lambda lib, x, y: x / y,
               lambda lib, x, y: lib.remainder(x.float(), y)):
        got = fn(zgrad, zgrad.tensor(a), zgrad.tensor(b))
        if torch is not None:
            np.testing.assert_array_equal(got.numpy(), fn(torch, torch.tensor(a), torch.tensor(b)).numpy())


# Floating results that are IEEE inf or NaN: given silently, as PyTorch's (numpy's ufuncs would warn)
IEEE_RESULTS = {
    "div_number": lambda lib, x, z: x / 0,
    "div_zeros": lambda lib, x, z: x / z,
    "rdiv_number": lambda lib, x, z: 1 / z,
    "div_": lambda lib, x, z: x.clone().div_(z),
    "div_float64": lambda lib, x, z: x.double() / z.double(),
    "div_float16": lambda lib, x, z: x.half() / z.half(),
    "true_divide": lambda lib, x, z: lib.true_divide(x, z),
    "floor_divide": lambda lib, x, z: lib.floor_divide(x, z),
    "div_floor": lambda lib, x, z: lib.div(x, z, rounding_mode="floor"),
    "remainder": lambda lib, x, z: lib.remainder(x, z),
    "log": lambda lib, x, z: lib.log(z),
    "reciprocal": lambda lib, x, z: lib.reciprocal(z),
    "sqrt_negative": lambda lib, x, z: lib.sqrt(x),
    "pow_negative": lambda lib, x, z: z ** -1.0,
    "pow_tensor": lambda lib, x, z: z.pow(x),
    "fractional_power_negative": lambda lib, x, z: x ** 0.5,
    "addcdiv": lambda lib, x, z: lib.addcdiv(z, x, z),
    "non_finite_to_int": lambda lib, x, z: (x / z).long(),
    "log_gradient": lambda lib, x, z: lib.autograd.grad(lib.log(z.requires_grad_()).sum(), z)[0],
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(IEEE_RESULTS))
def test_floating_division_by_zero_is_silent(name):
    fn = IEEE_RESULTS[name]
    x = np.array([1.0, 0.0, -1.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fn(zgrad, zgrad.tensor(x, dtype=zgrad.float32), zgrad.zeros(3))
    if torch is not None:
        expected = fn(torch, torch.tensor(x, dtype=torch.float32), torch.zeros(3))
        np.testing.assert_array_equal(got.numpy(), expected.numpy())


@requires_cuda
@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod", "div_trunc"])
def test_cuda_integer_division_by_zero_raises(name):
    a, b = _operands(zgrad, np.int32, "cuda")
    _refuses(DIVISIONS[name], zgrad, a, b)
    _refuses(NUMBER_DIVISIONS["floordiv_number"], zgrad, a)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nonzero = DIVISIONS[name](zgrad, a, b + 1)
    expected = DIVISIONS[name](zgrad, a.cpu(), b.cpu() + 1)
    np.testing.assert_array_equal(nonzero.cpu().numpy(), expected.numpy())

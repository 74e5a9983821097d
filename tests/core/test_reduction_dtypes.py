"""The dtypes of reductions, as PyTorch's: sums, products, cumulative sums and nansums of bool and
integer tensors are exact int64 (a count of a mask or a sum of bytes does not wrap); floating
tensors keep their dtype; ``dtype=`` casts the input first; the mean of an integer tensor raises.
Also the gradients PyTorch defines at a product's zeros and at a nansum's NaNs, and the same
cases on CUDA (Numba's simulator here).

Each value is checked against an exact int64 numpy reference (always) and PyTorch (if installed).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda, strict_cuda
from helpers import FD_TOLERANCE, TOLERANCE, numerical_gradients, torch

# Per dtype, data whose sums overflow that dtype while every product still fits in int64.
DATA = {
    "bool": np.array([[True, True, False], [True, True, True]]),
    "uint8": np.array([[200, 100, 255], [1, 2, 3]], np.uint8),
    "int8": np.array([[100, 100, -128], [-100, 27, 5]], np.int8),
    "int16": np.array([[30000, 30000, -7], [3, 2, 1]], np.int16),
    "int32": np.array([[2**31 - 1, 2**31 - 1, 1], [1, 1, -1]], np.int32),
    "int64": np.array([[2**40, 3, -5], [7, 11, 13]], np.int64),
    "float32": np.array([[1.5, -2.25, 3.0], [0.5, 4.0, np.nan]], np.float32),
    "float64": np.array([[1.5, -2.25, 3.0], [0.5, 4.0, -1.0]], np.float64),
}

# name: (the op on zgrad or torch, the same on a numpy array already in the result's dtype)
REDUCTIONS = {
    "sum": (lambda lib, t: lib.sum(t), lambda a: a.sum()),
    "sum_dim_keepdim": (lambda lib, t: t.sum(1, keepdim=True), lambda a: a.sum(1, keepdims=True)),
    "sum_dims": (lambda lib, t: lib.sum(t, dim=(0, 1)), lambda a: a.sum((0, 1))),
    "prod": (lambda lib, t: t.prod(), lambda a: a.prod()),
    "prod_dim": (lambda lib, t: lib.prod(t, 0), lambda a: a.prod(0)),
    "prod_dim_keepdim": (lambda lib, t: t.prod(-1, keepdim=True), lambda a: a.prod(-1, keepdims=True)),
    "cumsum_rows": (lambda lib, t: lib.cumsum(t, 1), lambda a: a.cumsum(1)),
    "cumsum_columns": (lambda lib, t: t.cumsum(dim=0), lambda a: a.cumsum(0)),
    "nansum": (lambda lib, t: lib.nansum(t), lambda a: np.nansum(a)),
    "nansum_dim_keepdim": (lambda lib, t: t.nansum(0, keepdim=True), lambda a: np.nansum(a, 0, keepdims=True)),
}


def _torch_result(fn, data: np.ndarray) -> np.ndarray:
    return fn(torch, torch.from_numpy(data)).numpy()


@pytest.mark.torch
@pytest.mark.parametrize("dtype", sorted(DATA))
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_result_dtype_and_values(name, dtype):
    fn, reference = REDUCTIONS[name]
    data = DATA[dtype]
    expected_dtype = np.dtype(np.int64) if data.dtype.kind in "biu" else data.dtype
    if name.startswith(("sum", "prod", "cumsum")) and dtype == "float32":
        data = np.nan_to_num(data)  # the NaN is there for nansum
    out = fn(zgrad, zgrad.tensor(data))
    assert out.dtype == expected_dtype
    expected = reference(data.astype(expected_dtype))
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
    if torch is not None:
        ref = _torch_result(fn, data)
        assert ref.dtype == out.dtype and ref.shape == out.shape
        np.testing.assert_array_equal(out.numpy(), ref)


def test_the_accuracy_idiom_counts_in_int64():
    correct = (zgrad.tensor([1, 2, 3, 4]) == zgrad.tensor([1, 2, 0, 4])).sum()
    assert correct.dtype == zgrad.int64 and correct.item() == 3
    assert zgrad.tensor([True, True, True, False]).sum().item() == 3


def test_sums_past_the_input_dtype_are_exact():
    assert zgrad.tensor(np.array([200, 100], np.uint8)).sum().item() == 300
    big = zgrad.tensor(np.array([2**31 - 1, 2**31 - 1, 2], np.int32))
    assert big.sum().item() == 2**32
    assert big.cumsum(0).tolist() == [2**31 - 1, 2**32 - 2, 2**32]
    assert zgrad.tensor(np.array([65536, 65536], np.int32)).prod().item() == 2**32
    assert zgrad.tensor(np.ones(300, np.bool_)).nansum().item() == 300


# (the op, its input, the expected result, the expected dtype); results as PyTorch's
DTYPE_ARGUMENT = {
    "sum_bool_as_uint8_wraps": (lambda lib, t: t.sum(dtype=lib.uint8), np.array([200, 100], np.uint8), 44, np.uint8),
    "sum_float_as_int32_truncates_first": (lambda lib, t: lib.sum(t, dtype=lib.int32), np.array([1.5, 2.5]), 3,
                                           np.int32),
    "sum_int_as_float64": (lambda lib, t: t.sum(0, dtype=lib.float64), np.array([2**31 - 1, 1], np.int32),
                           2.0**31, np.float64),
    "mean_int_as_float32": (lambda lib, t: lib.mean(t, dtype=lib.float32), np.array([1, 2], np.int64), 1.5,
                            np.float32),
    "mean_float32_as_float64": (lambda lib, t: t.mean(dtype=lib.float64), np.array([1, 2], np.float32), 1.5,
                                np.float64),
    "prod_int_as_float64": (lambda lib, t: lib.prod(t, dtype=lib.float64), np.array([3, -4], np.int8), -12.0,
                            np.float64),
    "cumsum_bool_as_int32": (lambda lib, t: t.cumsum(0, dtype=lib.int32), np.array([True, False, True]), [1, 1, 2],
                             np.int32),
    "nansum_uint8_as_float32": (lambda lib, t: lib.nansum(t, dtype=lib.float32), np.array([200, 100], np.uint8),
                                300.0, np.float32),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(DTYPE_ARGUMENT))
def test_the_dtype_argument_casts_the_input_first(name):
    fn, data, expected, dtype = DTYPE_ARGUMENT[name]
    out = fn(zgrad, zgrad.tensor(data))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), np.asarray(expected, dtype))
    if torch is not None:
        ref = _torch_result(fn, data)
        assert ref.dtype == out.dtype
        np.testing.assert_array_equal(out.numpy(), ref)


def test_the_dtype_argument_keeps_the_gradient_in_the_input_dtype():
    x = zgrad.tensor([1.0, 2.0, 4.0], requires_grad=True)
    for y in (x.sum(dtype=zgrad.float64), x.prod(dtype=zgrad.float64), x.cumsum(0, dtype=zgrad.float64)[-1]):
        x.grad = None
        y.backward()
        assert y.dtype == zgrad.float64 and x.grad.dtype == zgrad.float32
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1, 1])


def test_integer_results_have_no_gradient():
    x = zgrad.tensor([1.5, -2.0], requires_grad=True)
    assert not x.sum(dtype=zgrad.int64).requires_grad
    assert not (x > 0).sum().requires_grad and not (x > 0).cumsum(0).requires_grad


# torch's names of the integer dtypes in its messages
SCALAR_TYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long"}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", sorted(SCALAR_TYPE_NAMES))
def test_the_mean_of_an_integer_tensor_raises_as_pytorch(dtype):
    message = ("mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
               f"Got: {SCALAR_TYPE_NAMES[dtype]}")
    data = DATA[dtype]
    with pytest.raises(RuntimeError, match=re.escape(message)):
        zgrad.tensor(data).mean()
    with pytest.raises(RuntimeError, match=re.escape(message)):
        zgrad.mean(zgrad.tensor(data), dim=0)
    if torch is not None:
        with pytest.raises(RuntimeError, match=re.escape(message)):
            torch.from_numpy(data).mean()


def test_the_mean_with_an_integer_dtype_raises_as_pytorch():
    message = ("mean(): could not infer output dtype. Optional dtype must be either a floating point or complex "
               "dtype. Got: Long")
    with pytest.raises(RuntimeError, match=re.escape(message)):
        zgrad.tensor([1.0, 2.0]).mean(dtype=zgrad.int64)


def test_prod_takes_one_dim():
    with pytest.raises(TypeError, match="prod"):
        zgrad.prod(zgrad.ones(2, 3), (0, 1))


# --- gradients where the formulas divide by zero or meet NaN ---------------------------------

# rows with one zero, two zeros and none; columns with one zero, two zeros and none
WITH_ZEROS = np.array([[1.5, 0.0, 2.0, -3.0], [0.0, 0.0, 4.0, 1.0], [2.0, -1.0, 0.5, 3.0]])
WITH_NANS = np.array([[1.5, np.nan, 2.0], [np.nan, np.nan, -1.0]])

GRADIENTS = {
    "prod_rows": (lambda lib, t: t.prod(1), WITH_ZEROS),
    "prod_columns_keepdim": (lambda lib, t: lib.prod(t, 0, keepdim=True), WITH_ZEROS),
    "prod_all_three_zeros": (lambda lib, t: t.prod(), WITH_ZEROS),
    "prod_all_one_zero": (lambda lib, t: lib.prod(t), WITH_ZEROS[0]),
    "nansum_all": (lambda lib, t: lib.nansum(t), WITH_NANS),
    "nansum_rows": (lambda lib, t: t.nansum(1), WITH_NANS),
}


def _gradient(fn, data: np.ndarray, upstream: np.ndarray) -> np.ndarray:
    x = zgrad.tensor(data, requires_grad=True)
    fn(zgrad, x).backward(zgrad.tensor(upstream))
    return x.grad.numpy()


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_at_zeros_and_nans(name):
    fn, data = GRADIENTS[name]
    with zgrad.no_grad():
        shape = fn(zgrad, zgrad.tensor(data)).shape
    upstream = np.random.default_rng(5).standard_normal(shape)
    grad = _gradient(fn, data, upstream)
    np.testing.assert_allclose(grad, numerical_gradients(fn, [data], upstream)[0], **FD_TOLERANCE)
    if torch is not None:
        x = torch.tensor(data, requires_grad=True)
        fn(torch, x).backward(torch.tensor(upstream))
        np.testing.assert_allclose(grad, x.grad.numpy(), **TOLERANCE[np.dtype(np.float64)])


# --- CUDA (the simulator is slow: few, small cases) ------------------------------------------

CUDA_CASES = {
    "sum_bool": (lambda lib, t: t.sum(), DATA["bool"]),
    "sum_int32_columns": (lambda lib, t: t.sum(0), DATA["int32"]),
    "prod_int32": (lambda lib, t: t.prod(), DATA["int32"]),
    "cumsum_uint8_rows": (lambda lib, t: t.cumsum(1), DATA["uint8"]),
    "cumsum_bool_columns": (lambda lib, t: lib.cumsum(t, 0), DATA["bool"]),
    "nansum_int8_keepdim": (lambda lib, t: t.nansum(1, keepdim=True), DATA["int8"]),
    "prod_gradient_at_zeros": (lambda lib, t: t.prod(1), WITH_ZEROS),
    "prod_all_gradient_across_chunks": (lambda lib, t: lib.prod(t), np.array([1.5, 0, 2, -3, 2, -1, 0.5, 3, 1.25, 4])),
    "nansum_gradient_at_nans": (lambda lib, t: t.nansum(0), WITH_NANS),
    "cumsum_gradient_across_chunks": (lambda lib, t: t.cumsum(-1), np.linspace(-1, 1, 40).reshape(2, 20)),
}


@requires_cuda
@pytest.mark.parametrize("name", sorted(CUDA_CASES))
def test_cuda_matches_cpu(name):
    fn, data = CUDA_CASES[name]
    check_device(fn, None, arrays=[data], dtype=data.dtype if data.dtype.kind == "f" else np.float32)


# long rows, summed in chunks and then over the chunks' results
LONG_ROWS = {
    "sum_bool": ("sum", np.arange(150) % 7 != 0),
    "prod_int16": ("prod", np.tile(np.array([1, 2, 1, -1, 1], np.int16), 30)),
    "nansum_float64": ("nansum", np.where(np.arange(150) % 9 == 0, np.nan, np.linspace(-1, 2, 150))),
}


@requires_cuda
@pytest.mark.parametrize("name", sorted(LONG_ROWS))
def test_cuda_long_rows_reduce_in_chunks(monkeypatch, name):
    from zgrad.kernels.cuda import reduce as cuda_reduce
    monkeypatch.setattr(cuda_reduce, "SPLIT_MIN_LENGTH", 64)
    op, data = LONG_ROWS[name]
    with strict_cuda():
        out = getattr(zgrad, op)(zgrad.tensor(data))
    expected = getattr(np, op)(data.astype(np.int64) if data.dtype.kind in "biu" else data)
    assert out.dtype == expected.dtype
    np.testing.assert_allclose(out.cpu().item(), expected, rtol=1e-12)

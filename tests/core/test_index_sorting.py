"""sort, argsort, msort, topk, kthvalue, searchsorted and bucketize against PyTorch: values,
int64 indices, dtypes, shapes and gradients (which go back to the positions the values came from);
stable order of equal elements, NaN sorting as the largest value, PyTorch's errors, and the same
cases on CUDA (Numba's simulator here).
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda, strict_cuda
from helpers import check_finite_differences
from index_checks import same_as_torch

RNG = np.random.default_rng(0)
X = RNG.permutation(24).reshape(2, 3, 4).astype(np.float64) / 7 - 1  # distinct: indices agree with torch's

CASES = {
    "sort": lambda lib, x: lib.sort(x),
    "sort_dim0_descending": lambda lib, x: lib.sort(x, 0, descending=True),
    "sort_method_stable": lambda lib, x: x.sort(dim=1, stable=True),
    "argsort": lambda lib, x: lib.argsort(x, dim=1, descending=True),
    "msort": lambda lib, x: lib.msort(x),
    "topk": lambda lib, x: lib.topk(x, 2),
    "topk_smallest_dim1": lambda lib, x: x.topk(3, dim=1, largest=False),
    "kthvalue": lambda lib, x: lib.kthvalue(x, 2),
    "kthvalue_keepdim_dim0": lambda lib, x: x.kthvalue(1, 0, keepdim=True),
}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name, dtype):
    same_as_torch(CASES[name], X.astype(dtype))


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_, np.float16])
def test_other_dtypes_sort_as_torch(dtype):
    with_ties = (X * 3).astype(dtype)
    same_as_torch(lambda lib, x: lib.sort(x, descending=True, stable=True), with_ties, grad=False)
    same_as_torch(lambda lib, x: lib.argsort(x, dim=0, stable=True), with_ties, grad=False)
    if dtype != np.bool_:  # torch's topk refuses bool
        same_as_torch(lambda lib, x: lib.topk(x, 2, largest=False), (X * 7 + 7).astype(dtype), grad=False)


@pytest.mark.torch
def test_equal_elements_keep_their_order_and_nan_is_largest():
    x = np.array([[2.0, np.nan, 1.0, 2.0, 1.0, np.nan, 2.0]])
    for descending in (False, True):
        same_as_torch(lambda lib, t, d=descending: lib.sort(t, stable=True, descending=d), x)
    same_as_torch(lambda lib, t: lib.topk(t, 3), x)


@pytest.mark.torch
def test_gradient_goes_back_to_the_selected_positions():
    check_finite_differences(lambda lib, x: lib.sort(x, 1, descending=True).values, [(3, 5)])
    check_finite_differences(lambda lib, x: lib.topk(x, 2, dim=0).values, [(4, 3)])
    check_finite_differences(lambda lib, x: lib.kthvalue(x, 3, 1).values, [(2, 5)])


@pytest.mark.torch
def test_results_are_named_tuples():
    values, indices = zgrad.sort(zgrad.tensor([3.0, 1.0, 2.0]))
    result = zgrad.topk(zgrad.tensor([3.0, 1.0, 2.0]), 1)
    assert result.values.tolist() == [3.0] and result.indices.tolist() == [0]
    assert values.tolist() == [1.0, 2.0, 3.0] and indices.tolist() == [1, 2, 0]
    same_as_torch(lambda lib, t: lib.sort(t), np.array(2.5))
    same_as_torch(lambda lib, t: lib.kthvalue(t, 1), np.array(2.5))


def test_errors_as_torch():
    x = zgrad.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        zgrad.topk(x, 3)
    with pytest.raises(RuntimeError, match="kthvalue\\(\\): selected number k out of range for dimension 0"):
        zgrad.kthvalue(x, 3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        zgrad.sort(x, 1)
    flags = zgrad.tensor([True, False])
    with pytest.raises(RuntimeError, match="topk does not support bool dtypes"):
        zgrad.topk(flags, 1)
    with pytest.raises(RuntimeError, match="\"kthvalue_cpu\" not implemented for 'Bool'"):
        zgrad.kthvalue(flags, 1)
    with pytest.raises(RuntimeError, match="\"searchsorted_out_cpu\" not implemented for 'Bool'"):
        zgrad.searchsorted(flags, flags)


SEARCHES = {
    "left": lambda lib, s, v: lib.searchsorted(s, v),
    "right": lambda lib, s, v: lib.searchsorted(s, v, right=True),
    "side_right_int32": lambda lib, s, v: lib.searchsorted(s, v, side="right", out_int32=True),
    "bucketize": lambda lib, s, v: lib.bucketize(v, s),
    "bucketize_right": lambda lib, s, v: lib.bucketize(v, s, right=True),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_search_matches_torch(name):
    boundaries = np.array([-1.0, 0.0, 0.0, 0.5, 2.0])
    values = np.array([[-3.0, 0.0, 0.25], [2.0, 5.0, 0.5]])
    same_as_torch(SEARCHES[name], boundaries, values, grad=False)


@pytest.mark.torch
def test_searchsorted_by_rows_with_a_sorter_and_scalars():
    rows = np.array([[1, 3, 5, 7], [2, 4, 6, 8]])
    values = np.array([[3, 6, 9], [1, 4, 4]])
    same_as_torch(lambda lib, s, v: lib.searchsorted(s, v), rows, values, grad=False)
    same_as_torch(lambda lib, s, v: lib.searchsorted(s, v, right=True), rows, values, grad=False)
    unsorted, order = np.array([5.0, 1.0, 3.0]), np.array([1, 2, 0])
    same_as_torch(lambda lib, s, o: lib.searchsorted(s, lib.tensor([3.0, 4.0], dtype=s.dtype), sorter=o),
                  unsorted, order, grad=False)
    assert zgrad.searchsorted(zgrad.tensor([1.0, 2.0, 3.0]), 2.0).item() == 1


def test_search_errors_as_torch():
    with pytest.raises(RuntimeError, match="boundaries tensor should be 1 dimension or the first N-1"):
        zgrad.searchsorted(zgrad.zeros(2, 3), zgrad.zeros(3, 2))
    with pytest.raises(ValueError, match="side and right can't be set to opposites"):
        zgrad.searchsorted(zgrad.zeros(3), zgrad.zeros(2), side="left", right=True)
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        zgrad.bucketize(zgrad.zeros(2), zgrad.zeros(2, 2))


CUDA_CASES = {
    "sort_descending": (lambda lib, x: lib.sort(x, 1, descending=True).values, "full"),
    "topk": (lambda lib, x: lib.topk(x, 2, dim=0).values, None),
    "kthvalue": (lambda lib, x: lib.kthvalue(x, 2).values, "full"),
    "argsort": (lambda lib, x: lib.argsort(x, 0), None),
    "searchsorted": (lambda lib, x: lib.searchsorted(lib.tensor([-1.0, 0.0, 1.0]), x, right=True), "full"),
}


@requires_cuda
@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.full] if m else []) for n, (_, m) in
                                  sorted(CUDA_CASES.items())])
def test_cuda_matches_cpu(name):
    check_device(CUDA_CASES[name][0], [(3, 4)])


@requires_cuda
@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.int64, marks=pytest.mark.full),
                                   pytest.param(np.bool_, marks=pytest.mark.full)])
def test_cuda_sort_is_stable_with_ties_and_nan(dtype):
    values = np.random.default_rng(4).integers(0, 4, (3, 13)).astype(np.float64)
    if dtype == np.float32:
        values[values == 3] = np.nan
    values = values.astype(dtype)
    for descending in (False, True):
        expected = zgrad.argsort(zgrad.tensor(values), descending=descending).numpy()
        with strict_cuda():
            got = zgrad.argsort(zgrad.tensor(values), descending=descending).cpu().numpy()
        np.testing.assert_array_equal(got, expected)

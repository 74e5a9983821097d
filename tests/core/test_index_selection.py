"""take, take_along_dim, masked_select, masked_scatter, nonzero, argwhere, unique,
unique_consecutive, bincount and histc against PyTorch: values, dtypes, shapes, gradients where
PyTorch has them, PyTorch's errors, and the same cases on CUDA (Numba's simulator here).
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda, strict_cuda
from index_checks import same_as_torch

RNG = np.random.default_rng(2)
X = RNG.uniform(-2, 2, (3, 4))
MASK = np.array([True, False, True, True])

SELECTIONS = {
    "take": lambda lib, x: lib.take(x, lib.tensor([[0, 11], [-1, 5], [5, 5]])),
    "take_along_dim": lambda lib, x: lib.take_along_dim(x, lib.tensor([[0, 3], [1, 1], [-1, 2]]), 1),
    "take_along_dim_broadcast": lambda lib, x: x.take_along_dim(lib.tensor([[2], [0]]).reshape(1, 2), dim=1),
    "take_along_dim_flat": lambda lib, x: lib.take_along_dim(x, lib.tensor([7, 0, 7])),
    "masked_select": lambda lib, x: lib.masked_select(x, lib.tensor([True, False, True, True])),
    "masked_select_method_broadcast": lambda lib, x: x[:1].masked_select(lib.tensor([[True], [False], [True]])),
    "masked_scatter": lambda lib, x: lib.masked_scatter(x, lib.tensor([True, False, True, True]), x * 2),
}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_selection_matches_torch(name, dtype):
    same_as_torch(SELECTIONS[name], X.astype(dtype))


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.bool_, np.float16])
@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_selection_of_other_dtypes(name, dtype):
    same_as_torch(SELECTIONS[name] if name != "masked_scatter" else
                  (lambda lib, x: lib.masked_scatter(x, lib.tensor([True, False, True, True]), x[lib.tensor([2, 0, 1])])),
                  (X * 3).astype(dtype), grad=False)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
def test_nonzero_and_argwhere(dtype):
    x = (X > 0.3).astype(dtype) * (2 if dtype != np.bool_ else 1)
    x = x.astype(dtype)
    same_as_torch(lambda lib, t: lib.nonzero(t), x, grad=False)
    same_as_torch(lambda lib, t: t.nonzero(as_tuple=True), x, grad=False)
    same_as_torch(lambda lib, t: lib.argwhere(t), x.reshape(2, 3, 2), grad=False)
    same_as_torch(lambda lib, t: lib.nonzero(t), np.array(3, dtype), grad=False)
    same_as_torch(lambda lib, t: lib.nonzero(t, as_tuple=True), np.array(0, dtype), grad=False)
    same_as_torch(lambda lib, t: lib.nonzero(t), np.zeros((0, 3), dtype), grad=False)


def test_selection_errors_as_torch():
    x = zgrad.zeros(2, 2)
    with pytest.raises(IndexError, match="out of range: tried to access index 4 on a tensor of 4 elements"):
        zgrad.take(x, zgrad.tensor([4]))
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        zgrad.masked_select(x, zgrad.tensor([1, 0]))
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        zgrad.masked_scatter(x, zgrad.tensor([True, True]), zgrad.zeros(3))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        zgrad.take_along_dim(x, zgrad.tensor([0]), 1)


COUNTS = {
    "unique": lambda lib, x: lib.unique(x),
    "unique_all": lambda lib, x: lib.unique(x, return_inverse=True, return_counts=True),
    "unique_method_inverse": lambda lib, x: x.unique(sorted=True, return_inverse=True),
    "unique_consecutive": lambda lib, x: lib.unique_consecutive(x, return_inverse=True, return_counts=True),
    "unique_consecutive_counts": lambda lib, x: x.unique_consecutive(return_counts=True),
    "unique_dim0": lambda lib, x: lib.unique(x[lib.tensor([2, 0, 2, 1, 0])], dim=0, return_inverse=True,
                                             return_counts=True),
    "unique_dim1": lambda lib, x: x[:, lib.tensor([3, 1, 3, 0])].unique(dim=-1, return_inverse=True),
    "unique_consecutive_dim0": lambda lib, x: lib.unique_consecutive(x[lib.tensor([2, 2, 0, 2, 1, 1])], dim=0,
                                                                     return_inverse=True, return_counts=True),
}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.float32, np.float64, np.bool_])
@pytest.mark.parametrize("name", sorted(COUNTS))
def test_unique_matches_torch(name, dtype):
    x = np.array([[3, 1, 1, 2], [2, 2, 0, 3], [0, 0, 3, 1]]).astype(dtype)
    same_as_torch(COUNTS[name], x, grad=False)
    if "dim" not in name:  # the dim cases pick slices by position
        same_as_torch(COUNTS[name], x[:0], grad=False)


@pytest.mark.torch
def test_bincount_matches_torch():
    x = np.array([1, 4, 1, 0, 4, 4])
    same_as_torch(lambda lib, t: lib.bincount(t), x, grad=False)
    same_as_torch(lambda lib, t: t.bincount(minlength=8), x, grad=False)
    same_as_torch(lambda lib, t: lib.bincount(t), x[:0], grad=False)
    for dtype in (np.float32, np.float64, np.float16, np.int32):
        weights = RNG.uniform(0, 2, 6).astype(dtype)
        same_as_torch(lambda lib, t, w: lib.bincount(t, w, minlength=2), x, weights, grad=False)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histc_matches_torch(dtype):
    x = np.concatenate([RNG.uniform(-2, 2, 50), [2.0, -2.0, 5.0, np.nan]]).astype(dtype)
    same_as_torch(lambda lib, t: lib.histc(t, 7, -2, 2), x, grad=False)
    same_as_torch(lambda lib, t: t.histc(bins=5, min=-1, max=1), x, grad=False)
    same_as_torch(lambda lib, t: lib.histc(t, 10), x[:50], grad=False)
    same_as_torch(lambda lib, t: lib.histc(t, 3), np.full(4, 1.5, dtype), grad=False)


def test_counting_errors_as_torch():
    with pytest.raises(RuntimeError, match="\"bincount_cpu\" not implemented for 'Float'"):
        zgrad.bincount(zgrad.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        zgrad.bincount(zgrad.tensor([-1, 2]))
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        zgrad.bincount(zgrad.tensor([[1, 2]]))
    with pytest.raises(RuntimeError, match="weights should be 1-d and have the same length as input"):
        zgrad.bincount(zgrad.tensor([1, 2]), zgrad.ones(3))
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        zgrad.histc(zgrad.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        zgrad.histc(zgrad.ones(3), 4, 2, 1)
    with pytest.raises(RuntimeError, match="is not finite"):
        zgrad.histc(zgrad.tensor([1.0, float("inf")]))
    with pytest.raises(IndexError, match="Dimension out of range"):
        zgrad.unique(zgrad.ones(2, 2), dim=2)


CUDA_CASES = {
    "take": (lambda lib, x: lib.take(x, lib.tensor([[0, 11], [-1, 5]])), None),
    "take_along_dim": (lambda lib, x: lib.take_along_dim(x, lib.tensor([[0, 3], [1, 1], [-1, 2]]), 1), "full"),
    "masked_select": (lambda lib, x: lib.masked_select(x, lib.tensor([True, False, True, True])), "full"),
    "masked_scatter": (lambda lib, x: lib.masked_scatter(x, lib.tensor([True, False, True, True]), x * 2), None),
}


@requires_cuda
@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.full] if m else []) for n, (_, m) in
                                  sorted(CUDA_CASES.items())])
def test_cuda_matches_cpu(name):
    check_device(CUDA_CASES[name][0], [(3, 4)])


def _results(out):
    return [t.cpu().numpy() for t in (out if isinstance(out, tuple) else (out,))]


COUNT_CUDA_CASES = {
    "nonzero": (lambda lib, x: lib.nonzero(x > 0), None),
    "unique": (lambda lib, x: lib.unique((x * 2).long(), return_inverse=True, return_counts=True), None),
    "unique_consecutive": (lambda lib, x: lib.unique_consecutive((x * 2).long(), return_counts=True), "full"),
    "unique_dim": (lambda lib, x: lib.unique((x > 0)[lib.tensor([2, 0, 2, 1])], dim=0, return_inverse=True), None),
    "bincount": (lambda lib, x: lib.bincount((x + 2).long().reshape(-1), x.reshape(-1)), "full"),
    "histc": (lambda lib, x: lib.histc(x, 5), "full"),
}


@requires_cuda
@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.full] if m else []) for n, (_, m) in
                                  sorted(COUNT_CUDA_CASES.items())])
def test_cuda_counts_match_cpu(name):
    fn = COUNT_CUDA_CASES[name][0]
    expected = _results(fn(zgrad, zgrad.tensor(X.astype(np.float32))))
    with strict_cuda():
        results = _results(fn(zgrad, zgrad.tensor(X.astype(np.float32))))
    for got, want in zip(results, expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


KEYS = {
    "int": lambda lib: 1,
    "slices": lambda lib: (slice(1, None), slice(None, None, 2)),
    "none_ellipsis": lambda lib: (None, Ellipsis, 0),
    "integer_array": lambda lib: lib.tensor([2, 0, 2]),
    "negative_array": lambda lib: (Ellipsis, lib.tensor([-1, 1])),
    "broadcast_arrays": lambda lib: (lib.tensor([[0], [2]]), lib.tensor([1, 3])),
    "int_and_array": lambda lib: (1, lib.tensor([0, 3])),
    "array_and_slice": lambda lib: (lib.tensor([0, 1]), slice(1, None)),
    "mask": lambda lib: lib.tensor([[True, False, True, False]] * 3),
    "row_mask": lambda lib: lib.tensor([True, False, True]),
    "slice_and_mask": lambda lib: (slice(1, None), lib.tensor([True, False, True, True])),
    "list": lambda lib: [0, 2],
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(KEYS))
def test_getitem_matches_torch(name):
    same_as_torch(lambda lib, x: x[KEYS[name](lib)], X)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(KEYS))
def test_setitem_matches_torch(name):
    def assign(lib, x, value):
        y = x * 1
        key = KEYS[name](lib)
        y[key] = value.sum() * 2  # a 0-d tensor broadcast to y[key], differentiable in both
        return y
    same_as_torch(assign, X, RNG.uniform(-1, 1, 3))


@pytest.mark.torch
def test_setitem_casts_and_refuses_as_torch():
    def assign(lib, x):
        y = x.clone()
        y[0] = 2.7  # a float into an integer tensor truncates
        y[lib.tensor([1, 1])] = 5
        return y
    same_as_torch(assign, np.arange(12).reshape(3, 4), grad=False)
    x = zgrad.zeros(3, 4)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[zgrad.tensor([0, 2])] = zgrad.ones(3)
    with pytest.raises(IndexError):
        x[zgrad.tensor([5])] = 1.0

"""The reductions of the tensor API beside sum/mean/max against PyTorch: truth reductions and
closeness tests, amax/amin/aminmax, nanmean, var_mean/std_mean, median/nanmedian,
quantile/nanquantile, mode, and the running reductions cumprod, cummax, cummin and
logcumsumexp: values, dtypes, shapes, gradients (float64), ties, NaNs, zeros and errors."""

from __future__ import annotations

import numpy as np
import pytest
import zgrad
from helpers import case, check_torch, require_torch, torch

NAN = np.nan

# Random distinct inputs: values, shapes and float64 gradients against torch.
GRADIENT_CASES = [
    case("amax_all", lambda lib, x: lib.amax(x), (3, 4)),
    case("amax_dims", lambda lib, x: lib.amax(x, dim=(0, 2)), (3, 4, 2)),
    case("amin_keepdim", lambda lib, x: x.amin(1, keepdim=True), (3, 4)),
    case("aminmax_min", lambda lib, x: lib.aminmax(x, dim=0).min, (3, 4)),
    case("aminmax_max", lambda lib, x: x.aminmax().max, (3, 4)),
    case("aminmax_both", lambda lib, x: (lambda r: r.min * 2 + r.max)(lib.aminmax(x, dim=1)), (3, 4)),
    case("nanmean", lambda lib, x: lib.nanmean(x, 1), (3, 4)),
    case("var_mean_var", lambda lib, x: lib.var_mean(x, 1)[0], (3, 4)),
    case("std_mean_mean", lambda lib, x: lib.std_mean(x, (0, 1), keepdim=True)[1], (3, 4)),
    case("std_mean_std", lambda lib, x: lib.std_mean(x, correction=0)[0], (3, 4)),
    case("median_all", lambda lib, x: lib.median(x), (3, 5)),
    case("median_dim", lambda lib, x: lib.median(x, 1).values, (3, 5)),
    case("median_even_keepdim", lambda lib, x: x.median(0, keepdim=True).values, (4, 3)),
    case("nanmedian_dim", lambda lib, x: lib.nanmedian(x, -1).values, (2, 3, 4)),
    case("quantile_scalar", lambda lib, x: lib.quantile(x, 0.3), (3, 5)),
    case("quantile_dim", lambda lib, x: lib.quantile(x, 0.75, dim=1, keepdim=True), (3, 5)),
    case("nanquantile_dim0", lambda lib, x: x.nanquantile(0.4, dim=0), (4, 3)),
    case("mode_values", lambda lib, x: lib.mode(x, 0).values, (3, 4)),
    case("cumprod", lambda lib, x: lib.cumprod(x, 1), (3, 5)),
    case("cumprod_dim0", lambda lib, x: x.cumprod(0), (4, 2, 3)),
    case("cummax", lambda lib, x: lib.cummax(x, 1).values, (3, 5)),
    case("cummin_dim0", lambda lib, x: x.cummin(dim=0).values, (4, 3)),
    case("logcumsumexp", lambda lib, x: lib.logcumsumexp(x, 1), (3, 5)),
    case("logcumsumexp_dim0", lambda lib, x: x.logcumsumexp(0), (4, 3)),
]


@pytest.mark.torch
@pytest.mark.parametrize("op", GRADIENT_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_and_gradients_match_torch(op, dtype):
    check_torch(op.fn, op.shapes, dtype=dtype)


INTERPOLATIONS = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.torch
@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_quantile_interpolations_and_q_tensors_match_torch(interpolation):
    for q in (0.5, 0.25, 0.3):  # a middle rank, a .5 fraction (nearest rounds half to even), a plain one
        check_torch(lambda lib, x, q=q: lib.quantile(x, q, dim=1, interpolation=interpolation), [(3, 3)],
                    dtype=np.float64)
    q = np.array([0.0, 0.125, 0.5, 0.9, 1.0])
    check_torch(lambda lib, x: lib.quantile(x, lib.tensor(q), dim=0, interpolation=interpolation), [(5, 2)],
                dtype=np.float64)
    check_torch(lambda lib, x: x.nanquantile(lib.tensor(q), interpolation=interpolation, keepdim=True), [(2, 5)],
                dtype=np.float64)


def _both(fn, *arrays):
    """fn on zgrad and on torch (tensors made from ``arrays``), as numpy results (tuples kept)."""
    require_torch()

    def numpy_of(value):
        if isinstance(value, tuple):
            return tuple(numpy_of(v) for v in value)
        return value if isinstance(value, bool) else np.asarray(value.numpy() if hasattr(value, "numpy") else value)

    ours = fn(zgrad, *(zgrad.tensor(a) for a in arrays))
    theirs = fn(torch, *(torch.from_numpy(np.array(a)) for a in arrays))
    return numpy_of(ours), numpy_of(theirs)


def _assert_same(ours, theirs):
    if isinstance(theirs, tuple):
        assert type(ours) is tuple or hasattr(ours, "_fields")
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
        return
    if isinstance(theirs, bool):
        assert ours is theirs
        return
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours.shape, ours.dtype, theirs.shape, theirs.dtype)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, equal_nan=True)


TIES = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [5.0, 5.0, 1.0, 1.0, 0.0], [2.0, 2.0, 2.0, 2.0, 2.0]])
NANS = np.array([[1.0, NAN, 2.0, NAN, 0.5], [NAN, NAN, NAN, NAN, NAN], [4.0, 3.0, 1.0, 2.0, 0.0]])
INTS = np.array([[3, 1, 3, 2, 1, 1], [0, -4, 7, 7, -4, 9]], np.int64)

# Exact values (ties, NaNs, integers, bools) against torch.
VALUE_CASES = {
    "all": (lambda lib, x: (lib.all(x), x.all(1), lib.all(x, dim=(0, 1), keepdim=True)), [TIES - 1]),
    "any": (lambda lib, x: (lib.any(x), x.any(0), lib.any(x, 1, keepdim=True)), [TIES * 0]),
    "all_any_uint8": (lambda lib, x: (x.all(), x.any(1)), [np.array([[0, 3], [1, 2]], np.uint8)]),
    "all_any_nan_empty": (lambda lib, x, e: (x.all(), x.any(), lib.all(e), lib.any(e), e.all(0)),
                          [np.array([NAN, 1.0]), np.zeros((0, 2))]),
    "count_nonzero": (lambda lib, x: (lib.count_nonzero(x), x.count_nonzero(0), lib.count_nonzero(x, (0, 1))), [INTS]),
    "isclose": (lambda lib, a, b: (lib.isclose(a, b), a.isclose(b, rtol=0.1, atol=0.5), lib.isclose(a, b, equal_nan=True)),
                [np.array([1.0, NAN, np.inf, -np.inf, 1e-9, 2.0]), np.array([1.0 + 1e-6, NAN, np.inf, np.inf, 0.0, 2.2])]),
    "isclose_int_bool": (lambda lib, a, b, c: (lib.isclose(a, b, rtol=0.1), lib.isclose(c, c)),
                         [np.array([100, 5]), np.array([101, 7]), np.array([True, False])]),
    "allclose_equal": (lambda lib, a, b: (lib.allclose(a, a), a.allclose(b), lib.allclose(a, b, atol=1.0),
                                          lib.equal(a, a), a.equal(b), lib.equal(a, a[:1])), [np.eye(2), np.ones((2, 2))]),
    "amax_ties_nan_int": (lambda lib, x, y, n: (lib.amax(x, 1), x.amin(), lib.amax(y, (0, 1)), n.amax(1), n.amin(0)),
                          [TIES, INTS, NANS]),
    "aminmax_int": (lambda lib, x: tuple(lib.aminmax(x, dim=1, keepdim=True)), [INTS]),
    "median_ties_int": (lambda lib, x, y: (lib.median(x), tuple(x.median(1)), lib.median(y), y.median(0).values), [TIES, INTS]),
    "median_nan": (lambda lib, x: (lib.median(x), lib.median(x, 1).values, lib.median(x, 1).indices[0]), [NANS]),
    "nanmedian": (lambda lib, x: (lib.nanmedian(x), lib.nanmedian(x, 1).values, lib.nanmedian(x, 1).indices[::2]), [NANS]),
    "nanmean": (lambda lib, x: (lib.nanmean(x), x.nanmean(1), x.nanmean((0, 1), keepdim=True)), [NANS]),
    "quantile_nan": (lambda lib, x: (lib.quantile(x, 0.5, 1), lib.nanquantile(x, 0.5, 1), lib.nanquantile(x, 0.2)), [NANS]),
    "mode": (lambda lib, x, y: (tuple(lib.mode(x)), tuple(y.mode(0, keepdim=True)), tuple(lib.mode(x[0, 2]))), [INTS, TIES]),
    "cumprod_int_bool": (lambda lib, x, b: (lib.cumprod(x, 1), b.cumprod(0), lib.cumprod(x, 0, dtype=lib.float64)),
                         [INTS, np.array([True, True, False])]),
    "cummax_ties_nan": (lambda lib, x, n: (tuple(lib.cummax(x, 1)), tuple(x.cummin(1)), tuple(lib.cummax(n, 1)),
                                           tuple(n.cummin(0))), [TIES, NANS]),
    "cummax_int": (lambda lib, x: (tuple(lib.cummax(x, 1)), tuple(lib.cummin(x, 0))), [INTS.astype(np.int32)]),
    "empty_dim_lists": (lambda lib, x: (x.sum(dim=[]), x.mean(dim=()), x.nansum(dim=[]), x.var(dim=()), x.std(dim=[]),
                                        lib.count_nonzero(x, dim=()), x.all(dim=()), x.any(dim=[]), x.amax(dim=[])),
                        [np.arange(6.0).reshape(2, 3)]),
    "logcumsumexp_extremes": (lambda lib, x: (lib.logcumsumexp(x, 0),),
                              [np.array([-1000.0, 0.0, 1.0, -np.inf, np.inf, 3.0])]),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(VALUE_CASES))
def test_exact_values_match_torch(name):
    fn, arrays = VALUE_CASES[name]
    ours, theirs = _both(fn, *arrays)
    _assert_same(ours, theirs)


def _grads(lib, fn, array):
    x = lib.tensor(array, requires_grad=True)
    out = fn(lib, x)
    out.backward(lib.ones_like(out) if lib is torch else lib.ones(*out.shape, dtype=out.dtype))
    return np.asarray(x.grad.numpy())


GRADIENT_CONVENTIONS = {
    "amax_splits_ties": (lambda lib, x: lib.amax(x, 1), TIES),
    "amin_all_splits_ties": (lambda lib, x: lib.amin(x), TIES),
    "aminmax_both_split_ties": (lambda lib, x: (lambda r: r.min * 2 + r.max)(lib.aminmax(x, dim=1)), TIES),
    "median_takes_its_index": (lambda lib, x: lib.median(x, 1).values, np.array([[3.0, 1.0, 2.0, 0.0], [1.0, 1.0, 4.0, 4.0]])),
    "cumprod_with_zeros": (lambda lib, x: lib.cumprod(x, 1), np.array([[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 1.5, 2.0, 3.0, 1.0]])),
    "cumprod_one_zero": (lambda lib, x: lib.cumprod(x, 0), np.array([1.5, -2.0, 0.0, 4.0, 0.5])),
    "cummax_ties": (lambda lib, x: lib.cummax(x, 1).values, TIES),
    "logcumsumexp_far_below": (lambda lib, x: lib.logcumsumexp(x, 0), np.array([-1000.0, 0.0, 1.0, -np.inf, 2.0])),
    "quantile_midpoint": (lambda lib, x: lib.quantile(x, 0.5, 1, interpolation="midpoint"), TIES[:2, :4]),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(GRADIENT_CONVENTIONS))
def test_gradient_conventions_match_torch(name):
    require_torch()
    fn, array = GRADIENT_CONVENTIONS[name]
    np.testing.assert_allclose(_grads(zgrad, fn, array), _grads(torch, fn, array), rtol=1e-12, atol=1e-12)


ERRORS = {
    "amax_empty": (lambda lib: lib.amax(lib.zeros(0)), RuntimeError, "Expected reduction dim to be specified"),
    "amax_empty_dim": (lambda lib: lib.zeros(2, 0).amax(1), IndexError, "Expected reduction dim 1 to have non-zero size"),
    "amax_dim_range": (lambda lib: lib.zeros(2, 3).amax(2), IndexError, "Dimension out of range"),
    "aminmax_empty": (lambda lib: lib.aminmax(lib.zeros(0)), RuntimeError, "cannot compute aminmax"),
    "aminmax_empty_dim": (lambda lib: lib.aminmax(lib.zeros(0, 3), dim=0), IndexError, "Expected reduction dim 0"),
    "median_empty_dim": (lambda lib: lib.zeros(2, 0).median(1), IndexError, "Expected reduction dim 1"),
    "median_bool": (lambda lib: lib.tensor([True, False]).median(0), NotImplementedError, "not implemented for 'Bool'"),
    "nanmedian_bool": (lambda lib: lib.nanmedian(lib.tensor([True])), NotImplementedError, "not implemented for 'Bool'"),
    "mode_empty_dim": (lambda lib: lib.mode(lib.zeros(2, 0), 1), IndexError, "Expected reduction dim 1"),
    "quantile_int": (lambda lib: lib.quantile(lib.tensor([1, 2]), 0.5), RuntimeError, "must be either float or double"),
    "quantile_half": (lambda lib: lib.quantile(lib.ones(3, dtype=lib.float16), 0.5), RuntimeError,
                      "must be either float or double"),
    "quantile_range": (lambda lib: lib.quantile(lib.ones(3), 1.5), RuntimeError, r"in the range \[0, 1\]"),
    "quantile_q_dtype": (lambda lib: lib.quantile(lib.ones(3), lib.tensor([0.5], dtype=lib.float64)), RuntimeError,
                         "same dtype"),
    "quantile_q_2d": (lambda lib: lib.quantile(lib.ones(3), lib.ones(2, 2) * 0.5), RuntimeError, "scalar or 1D"),
    "quantile_interpolation": (lambda lib: lib.quantile(lib.ones(3), 0.5, interpolation="bad"), RuntimeError,
                               "interpolation must be one of"),
    "quantile_empty": (lambda lib: lib.quantile(lib.ones(0), 0.5), RuntimeError, "must be non-empty"),
    "nanmean_int": (lambda lib: lib.nanmean(lib.tensor([1, 2])), RuntimeError, "expected input to have floating point"),
    "var_int": (lambda lib: lib.var(lib.tensor([1, 2])), RuntimeError, "std and var only support floating point"),
    "std_mean_int": (lambda lib: lib.std_mean(lib.tensor([1, 2])), RuntimeError, "std_mean only support floating point"),
    "logcumsumexp_int": (lambda lib: lib.logcumsumexp(lib.tensor([1, 2]), 0), NotImplementedError, "not implemented for 'Long'"),
    "isclose_dtypes": (lambda lib: lib.isclose(lib.tensor([1]), lib.tensor([1.0])), RuntimeError, "Long did not match Float"),
    "isclose_rtol": (lambda lib: lib.isclose(lib.ones(2), lib.ones(2), rtol=-1), RuntimeError,
                     "rtol must be greater than or equal to zero"),
    "sum_repeated_dim": (lambda lib: lib.ones(2, 2).sum((1, -1)), RuntimeError, "dim 1 appears multiple times"),
    "amax_repeated_dim": (lambda lib: lib.amax(lib.ones(2, 2), (0, 0)), RuntimeError, "dim 0 appears multiple times"),
    "all_dim_range": (lambda lib: lib.ones(2).all(1), IndexError, "Dimension out of range"),
    "cumprod_dim_range": (lambda lib: lib.ones(2).cumprod(1), IndexError, "Dimension out of range"),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_torch(name):
    fn, error, pattern = ERRORS[name]
    with pytest.raises(error, match=pattern):
        fn(zgrad)
    if torch is not None:
        with pytest.raises(error, match=pattern):
            fn(torch)


def test_named_results_and_integer_indices():
    x = zgrad.tensor([[1.0, 4.0, 2.0], [3.0, 0.0, 5.0]], requires_grad=True)
    for result in (x.median(1), x.nanmedian(1), x.mode(1), x.cummax(1), x.cummin(1)):
        values, indices = result
        assert result.values is values and result.indices is indices
        assert indices.dtype == zgrad.int64 and not indices.requires_grad and values.requires_grad
    low, high = x.aminmax()
    assert (low.item(), high.item()) == (0.0, 5.0)
    assert type(x.median(1)).__name__ == "median" and zgrad.return_types.median is type(x.median(1))


@pytest.mark.torch
@pytest.mark.parametrize("name", ["cumsum_", "cumprod_"])
def test_inplace_running_reductions_match_torch(name):
    require_torch()
    array = np.array([[1.5, -2.0, 0.0], [3.0, 0.5, 2.0]])
    results = []
    for lib in (zgrad, torch):
        x = lib.tensor(array, requires_grad=True)
        y = x * 1
        assert getattr(y, name)(1) is y
        y.backward(lib.tensor(array[::-1].copy()))
        ints = lib.tensor([[3, 1, 2]], dtype=lib.int32)
        getattr(ints, name)(1)
        results.append((y.detach().numpy(), x.grad.numpy(), ints.numpy()))
    for ours, theirs in zip(*results):
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs)

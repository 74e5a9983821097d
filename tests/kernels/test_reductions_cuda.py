"""The reductions of :mod:`test_reductions_torch` on CUDA (Numba's simulator here), with a strict
device check, outputs and gradients compared with the CPU backend: every gradient case, and the
ties, NaNs, integers and bools of the exact-value cases.

A representative subset runs by default (every new kernel at least once); the rest carry the
``full`` marker, as in :mod:`test_cuda_ops`.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda, strict_cuda
from test_reductions_torch import GRADIENT_CASES, INTS, NANS, TIES
from zgrad.kernels import dispatch, dispatch_scan

pytestmark = requires_cuda

SUBSET = {"amax_dims", "aminmax_both", "median_dim", "quantile_dim", "mode_values", "cumprod", "cummax", "logcumsumexp", "nanmean"}


def _marked(cases):
    return [pytest.param(*p.values, id=p.id, marks=() if p.id in SUBSET else (pytest.mark.full,)) for p in cases]


@pytest.mark.parametrize("op", _marked(GRADIENT_CASES))
def test_gradient_cases_on_cuda_match_the_cpu(op):
    check_device(op.fn, op.shapes, dtype=np.float32)


# (op returning one tensor, input arrays): integer and bool dtypes, ties and NaNs
EXACT = {
    "all_dims": (lambda lib, x: lib.all(x, dim=(0, 1)), [TIES - 1]),
    "any_uint8": (lambda lib, x: x.any(1), [np.array([[0, 3], [0, 0]], np.uint8)]),
    "count_nonzero": (lambda lib, x: lib.count_nonzero(x, 1), [INTS]),
    "isclose": (lambda lib, a, b: lib.isclose(a, b, equal_nan=True),
                [np.array([1.0, np.nan, np.inf, 1e-9, 2.0]), np.array([1.0 + 1e-6, np.nan, np.inf, 0.0, 2.2])]),
    "amax_int_ties": (lambda lib, x: lib.amax(x, 1), [INTS]),
    "amax_ties_grad": (lambda lib, x: lib.amax(x, 1), [TIES]),
    "aminmax_ties_nan_grad": (lambda lib, x: (lambda r: r.min * 2 + r.max)(lib.aminmax(x, dim=1)),
                              [np.concatenate([TIES, NANS])]),
    "median_nan": (lambda lib, x: lib.median(x, 1).indices, [NANS]),
    "nanmedian_grad": (lambda lib, x: lib.nanmedian(x, 1).values, [NANS]),
    "nanquantile": (lambda lib, x: lib.nanquantile(x, lib.tensor([0.2, 0.5], dtype=lib.float64), 1, interpolation="nearest"), [NANS]),
    "mode_int": (lambda lib, x: lib.mode(x, 1).indices, [INTS]),
    "mode_ties_grad": (lambda lib, x: lib.mode(x, 1).values, [TIES]),
    "cumprod_int": (lambda lib, x: lib.cumprod(x, 1), [INTS]),
    "cumprod_zeros_grad": (lambda lib, x: lib.cumprod(x, 1), [np.array([[2.0, 0.0, 3.0, 0.0], [0.0, 1.5, 2.0, 3.0]])]),
    "cummax_int32": (lambda lib, x: lib.cummax(x, 1).indices, [INTS.astype(np.int32)]),
    "cummin_nan_grad": (lambda lib, x: lib.cummin(x, 0).values, [NANS]),
    "logcumsumexp_extremes": (lambda lib, x: lib.logcumsumexp(x, 0), [np.array([-1000.0, 0.0, 1.0, -np.inf, 3.0])]),
}
EXACT_SUBSET = {"aminmax_ties_nan_grad", "median_nan", "mode_int", "cummax_int32", "cumprod_zeros_grad", "isclose"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in EXACT_SUBSET else (pytest.mark.full,))
                                  for n in sorted(EXACT)])
def test_exact_cases_on_cuda_match_the_cpu(name):
    fn, arrays = EXACT[name]
    check_device(fn, [a.shape for a in arrays], arrays=arrays, dtype=arrays[0].dtype if arrays[0].dtype.kind == "f"
                 else np.float64)


def test_bool_results_on_cuda():
    with strict_cuda():
        a, b = zgrad.tensor(np.eye(2)), zgrad.tensor(np.ones((2, 2)))
        assert zgrad.allclose(a, a) and not zgrad.allclose(a, b) and zgrad.equal(a, a) and not a.equal(b)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_the_cuda_sort_is_numpys_stable_argsort(dtype):
    """Rows of several lengths (one a power of two, others padded), ties and NaNs."""
    rng = np.random.default_rng(3)
    for count in (1, 8, 37):
        data = rng.integers(0, 5, size=(3, count)).astype(dtype)
        if dtype == np.float32:
            data[data == 4] = np.nan
        with strict_cuda():
            order = dispatch_scan.row_order(zgrad.tensor(data)._data)
            order = dispatch.to_device(order, "cpu")
        np.testing.assert_array_equal(order, np.argsort(data, axis=1, kind="stable"))


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_a_few_long_rows_reduce_to_extremes_and_their_indices_in_two_passes(dtype, monkeypatch):
    """Rows long enough (here: from 40 elements) are read by a block per chunk (here up to 20, more
    than the simulator's 8 threads a block), then the chunks' results are combined: the max and min, and argmax/argmin taking the first index on ties across
    chunks and the first NaN's index, as one block per row does."""
    from zgrad.kernels.cuda import reduce as cuda_reduce

    monkeypatch.setattr(cuda_reduce, "SPLIT_MIN_LENGTH", 40)
    monkeypatch.setattr(cuda_reduce.rt, "blocks_for", lambda tasks: min(tasks, 20))  # more chunks than threads
    launched = []
    launch_rows = cuda_reduce.launch_rows
    monkeypatch.setattr(cuda_reduce, "launch_rows", lambda kernel, *a: launched.append(kernel.__name__) or
                        launch_rows(kernel, *a))
    rng = np.random.default_rng(2)
    rows = rng.integers(-50, 50, (3, 101)).astype(dtype)
    rows[0, [12, 75, 99]] = 80  # the max three times, in chunks 1, 9 and 12 (of 8): ties across chunks
    rows[1, [3, 90]] = -80
    if dtype == np.float32:
        rows[2, [70, 95]] = np.nan  # NaN wins: the first one's index
    x = zgrad.tensor(rows, device="cuda")
    cases = [(lambda t: t.argmax(1), 3), (lambda t: t.argmin(1), 3), (lambda t: t.max(1).values, 3),
             (lambda t: t.min(1).values, 3), (lambda t: t[0].argmax(), 1), (lambda t: t[1].argmin(), 1),
             (lambda t: t[2].max(), 1), (lambda t: t.argmax(), 1)]
    for fn, reduced_rows in cases:
        launched.clear()
        np.testing.assert_array_equal(fn(x).cpu().numpy(), fn(zgrad.tensor(rows)).numpy())
        assert len(launched) >= 2 * reduced_rows and "row_arg_extreme" not in launched, "two passes a row"


@pytest.mark.parametrize("dtype", [zgrad.bool, zgrad.uint8, zgrad.int8, zgrad.int16, zgrad.int32])
def test_sums_and_products_into_narrow_dtypes_match_the_cpu_and_reach_the_kernels_wide(dtype, monkeypatch):
    """A GPU's warp shuffles take 32- and 64-bit values only: a sum or product with a bool or
    narrow ``dtype`` reaches the block reductions as int64 and is cast at the end. (The simulator
    refuses to store an out-of-range integer into a signed narrow array, so the values here keep
    the signed results in range; uint8's sums wrap.)"""
    from zgrad.kernels.cuda import kernels
    from zgrad.kernels.cuda import runtime as rt

    launched = []
    launch = rt.launch
    monkeypatch.setattr(rt, "launch", lambda kernel, config, *args: launched.append((kernel, args)) or
                        launch(kernel, config, *args))
    rng = np.random.default_rng(4)
    data = rng.integers(0, 120 if dtype == zgrad.uint8 else 2, (5, 24)).astype(np.int32)
    data[1, :] = 0
    x, cx = zgrad.tensor(data), zgrad.tensor(data, device="cuda")
    cases = [lambda t: t.sum(dtype=dtype), lambda t: t.sum(1, dtype=dtype), lambda t: t.sum(0, dtype=dtype),
             lambda t: t[:, :4].prod(1, dtype=dtype), lambda t: t[:2, :3].prod(dtype=dtype),
             lambda t: t.nansum(1, dtype=dtype)]
    for fn in cases:
        want = fn(x)
        got = fn(cx)
        assert got.dtype == want.dtype == dtype
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    reduced = {args[-1].dtype for kernel, args in launched if kernel is kernels.rows.row_reduce}
    assert reduced and reduced <= {np.dtype(np.int32), np.dtype(np.int64)}

"""The collectives' reduction kernels (``zgrad/kernels/cpu/kernels/collectives.py``, through dispatch) against numpy."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from zgrad.kernels import dispatch, dispatch_collectives

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.float16]
UFUNCS = {"sum": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum}


def sample(rng, n, dtype):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, n).astype(dtype)
    return rng.standard_normal(n).astype(dtype)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", list(UFUNCS))
@pytest.mark.parametrize("n", [0, 1, 1001])
def test_reductions_match_numpy(rng, dtype, op, n):
    a, b = sample(rng, n, dtype), sample(rng, n, dtype)
    want = UFUNCS[op](a, b)

    out = a.copy()
    dispatch_collectives.reduce_inplace(out, b, op)
    np.testing.assert_array_equal(out, want)

    out = np.empty_like(a)
    dispatch_collectives.reduce_pair(out, a, b, op)
    np.testing.assert_array_equal(out, want)

    out, copy = a.copy(), np.empty_like(a)
    dispatch_collectives.reduce_and_copy(out, copy, b, op)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(copy, want)


@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_propagate_nan_like_numpy(op):
    a = np.array([np.nan, 1.0, 2.0, np.nan], np.float32)
    b = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    out = a.copy()
    dispatch_collectives.reduce_inplace(out, b, op)
    np.testing.assert_array_equal(out, UFUNCS[op](a, b))


def test_integer_sum_wraps_like_numpy():
    big = np.array([np.iinfo(np.int32).max], np.int32)
    out = big.copy()
    dispatch_collectives.reduce_inplace(out, np.array([1], np.int32), "sum")
    assert out[0] == np.iinfo(np.int32).min


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_divide_is_a_true_division_not_a_multiplication_by_the_inverse(rng, dtype):
    x = sample(rng, 4097, dtype)
    out = x.copy()
    dispatch_collectives.divide_inplace(out, 3)
    np.testing.assert_array_equal(out, (x / dtype(3)).astype(dtype))
    if dtype != np.float16:  # at this size some x * (1/3) rounds differently from x / 3
        assert not np.array_equal(out, (x * dtype(1 / 3)).astype(dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_divide_truncates_toward_zero(dtype):
    x = np.array([7, -7, 6, -6, 1, -1, 0], dtype)
    dispatch_collectives.divide_inplace(x, 2)
    np.testing.assert_array_equal(x, np.array([3, -3, 3, -3, 0, 0, 0], dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_copy(rng, dtype):
    src = sample(rng, 999, dtype).reshape(27, 37)
    out = np.empty(src.size, dtype)
    dispatch_collectives.scale_copy(out, src, 4)
    np.testing.assert_array_equal(out, (src / dtype(4)).reshape(-1))


def test_bad_arguments_are_refused():
    a = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"copy_into: out has shape \[4\], the source \[5\]"):
        dispatch.copy_into(a, np.zeros(5))
    with pytest.raises(ValueError, match="unknown reduction 'avg'"):
        dispatch_collectives.reduce_inplace(a, a, "avg")
    with pytest.raises(ValueError, match="1-D C-contiguous arrays of one dtype"):
        dispatch_collectives.reduce_inplace(a, np.zeros(4, np.float64), "sum")
    with pytest.raises(ValueError, match="1-D C-contiguous"):
        dispatch_collectives.reduce_inplace(a, np.zeros(5, np.float32), "sum")


def test_a_reduction_releases_the_gil():
    """Another Python thread keeps running while a large reduction runs (the mesh's threads move
    data beside it)."""
    out, src = np.ones(1 << 25, np.float32), np.ones(1 << 25, np.float32)
    dispatch_collectives.reduce_inplace(out[:8], src[:8], "sum")  # compile first
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        time.sleep(0.01)
        start = time.perf_counter()
        dispatch_collectives.reduce_inplace(out, src, "max")  # one call: a GIL held throughout would stop the ticker
        end = time.perf_counter()
    finally:
        stop.set()
        thread.join(5)
    during = [t for t in ticks if start < t < end]
    assert len(during) >= 3, f"only {len(during)} ticks during {1e3 * (end - start):.1f} ms of one reduction"

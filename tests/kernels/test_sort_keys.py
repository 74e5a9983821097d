"""The CPU sorts and selections on packed keys (zgrad.kernels.cpu.kernels.sort_keys) against
numpy's stable argsort, for every dtype they take and the 64-bit ones they leave to numpy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import zgrad
from zgrad.kernels.blas import BLAS
from zgrad.kernels.cpu import sorting

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.bool_]


def _rows(dtype, rows: int = 5, columns: int = 33) -> np.ndarray:
    """Rows with many ties; floats also with NaNs, infinities and both zeros."""
    rng = np.random.default_rng(7)
    if dtype == np.bool_:
        return rng.integers(0, 2, (rows, columns)).astype(bool)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        data = rng.integers(-3, 4, (rows, columns)).clip(info.min, info.max).astype(dtype)
        data[0, :2] = info.min, info.max
        return data
    data = rng.integers(-3, 4, (rows, columns)).astype(np.float32)
    data[0, :6] = np.nan, np.inf, -np.inf, 0.0, -0.0, -np.nan
    data[1, 3], data[1, 9] = -0.0, 0.0
    data[2] = np.nan
    return data.astype(dtype)


def _stable_order(x: np.ndarray, descending: bool) -> np.ndarray:
    """The reference: numpy's stable argsort (NaN last), on float64 values with -0.0 made 0.0;
    descending by sorting the negated values (NaN first)."""
    values = x.astype(np.float64) + 0.0
    values[np.isnan(values)] = np.inf if not descending else -np.inf
    nan_rank = np.isnan(x.astype(np.float64))
    keys = -values if descending else values
    # NaNs after +inf ascending (before -inf descending): a second key that sorts them apart
    return np.lexsort((np.broadcast_to(np.arange(x.shape[1]), x.shape), keys,
                       nan_rank if not descending else ~nan_rank), axis=1)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_is_the_stable_order(dtype, descending):
    x = _rows(dtype)
    out = sorting.argsort(x, descending, np.empty(x.shape, np.int64))
    np.testing.assert_array_equal(out, _stable_order(x, descending))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("largest", [False, True])
@pytest.mark.parametrize("k", [1, 3, 16, 20, 60])  # one pass, a selection, a full sort
def test_topk_is_the_first_k_of_the_stable_order(dtype, largest, k):
    x = _rows(dtype, columns=200)
    out = sorting.argtopk(x, k, largest, np.empty((x.shape[0], k), np.int64))
    np.testing.assert_array_equal(out, _stable_order(x, largest)[:, :k])


@pytest.mark.parametrize("threads", [1, 2])
def test_topk_in_chunks_of_rows_on_one_or_two_threads(monkeypatch, threads):
    """The selection packs and selects a few rows at a time (here 2 of 7 per chunk, 4 chunks split
    between the threads where there are two)."""
    monkeypatch.setattr(sorting, "_SELECTION_CHUNK", 400)
    monkeypatch.setattr(BLAS, "spin_is_bounded", lambda: True)
    before = zgrad.get_num_threads()
    zgrad.set_num_threads(threads)
    try:
        x = _rows(np.float32, rows=7, columns=200)
        for largest in (False, True):
            out = sorting.argtopk(x, 5, largest, np.empty((x.shape[0], 5), np.int64))
            np.testing.assert_array_equal(out, _stable_order(x, largest)[:, :5])
    finally:
        zgrad.set_num_threads(before)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_select_rows_reads_the_stable_order_at_each_rank(dtype):
    x = _rows(dtype)
    for ranks in (np.full(x.shape[0], 16), np.array([0, 32, 5, 16, 16]), np.array([3, 3, 3, 3, 4])):
        out = sorting.select_rows(x, ranks.reshape(-1, 1), np.empty((x.shape[0], 1), np.int64))
        expected = np.take_along_axis(_stable_order(x, False), ranks.reshape(-1, 1), axis=1)
        np.testing.assert_array_equal(out, expected)


def test_empty_rows_and_one_column():
    for shape in ((0, 4), (3, 1)):
        x = np.zeros(shape, np.float32)
        np.testing.assert_array_equal(sorting.argsort(x, False, np.empty(shape, np.int64)), np.zeros(shape, np.int64))

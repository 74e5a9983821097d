"""run_in_parts: parts at once on as many threads where numpy's BLAS runs one thread or its threads
spin briefly (held at one thread meanwhile), one part on the caller otherwise; a part's error
raised on the caller after every part has finished. ufunc_in_parts: a ufunc's loop cut into a
contiguous range per thread where that gives numpy's answer, one call otherwise."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import zgrad
from zgrad.kernels.blas import BLAS, blas_threads
from zgrad.kernels.cpu.parts import run_in_parts, ufunc_in_parts
from zgrad.kernels.scratch import workspace


@pytest.fixture
def two_threads():
    before = zgrad.get_num_threads()
    zgrad.set_num_threads(2)
    yield
    zgrad.set_num_threads(before)


def _record(seen):
    def part(index, parts, scratch):
        seen[index] = (parts, threading.get_ident(), scratch)
    return part


def test_parts_run_at_once_on_their_own_threads_where_blas_runs_one_thread(two_threads):
    barrier = threading.Barrier(2, timeout=30)  # both parts must be running at the same time
    seen = {}
    record = _record(seen)

    def part(index, parts, scratch):
        barrier.wait()
        record(index, parts, scratch)

    with threadpool_limits(1, user_api="blas"), workspace() as scratch:
        assert blas_threads() == 1
        run_in_parts(part, 5, scratch)
    assert sorted(seen) == [0, 1]
    assert seen[0][0] == seen[1][0] == 2
    assert seen[0][1] == threading.get_ident() and seen[1][1] != seen[0][1]
    assert seen[0][2] is scratch and seen[1][2] is not scratch


def test_parts_hold_blas_at_one_thread_where_its_threads_spin_briefly(two_threads, monkeypatch):
    monkeypatch.setattr(BLAS, "spin_is_bounded", lambda: True)
    barrier = threading.Barrier(2, timeout=30)
    seen = {}

    def part(index, parts, scratch):
        barrier.wait()
        seen[index] = (parts, blas_threads())

    with threadpool_limits(2, user_api="blas"), workspace() as scratch:
        if blas_threads() == 1:
            pytest.skip("numpy's BLAS runs one thread here")
        run_in_parts(part, 5, scratch)
        assert blas_threads() == 2
    assert seen == {0: (2, 1), 1: (2, 1)}


def test_one_part_on_the_caller_where_blas_threads_spin_long_one_task_or_one_thread(two_threads, monkeypatch):
    monkeypatch.setattr(BLAS, "spin_is_bounded", lambda: False)
    cases = [(2, 5, 2), (1, 1, 2), (1, 5, 1)]  # (BLAS threads, tasks, zgrad threads)
    for blas, tasks, threads in cases:
        seen = {}
        zgrad.set_num_threads(threads)
        with threadpool_limits(blas, user_api="blas"), workspace() as scratch:
            if blas > 1 and blas_threads() == 1:
                pytest.skip("numpy's BLAS runs one thread here")
            run_in_parts(_record(seen), tasks, scratch)
        assert seen == {0: (1, threading.get_ident(), scratch)}, (blas, tasks, threads)


def test_an_error_in_a_part_is_raised_after_every_part_finished(two_threads):
    finished = []

    def part(index, parts, scratch):
        if index == 1:
            raise ValueError("part 1 failed")
        threading.Event().wait(0.05)
        finished.append(index)

    with threadpool_limits(1, user_api="blas"), workspace() as scratch:
        with pytest.raises(ValueError, match="part 1 failed"):
            run_in_parts(part, 2, scratch)
    assert finished == [0]


class _RecordingUfunc:
    """Calls ``ufunc`` and records each call's thread and the slice of out it wrote."""

    def __init__(self, ufunc):
        self.ufunc, self.calls, self._lock = ufunc, [], threading.Lock()

    def __call__(self, *operands, out):
        with self._lock:
            self.calls.append((threading.get_ident(), out.size))
        return self.ufunc(*operands, out=out)


def test_a_large_ufunc_call_runs_a_contiguous_range_per_thread(two_threads):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 301, 7))
    for ufunc, operands in [(np.add, (a, b)), (np.multiply, (a, 2.5)), (np.sin, (a,)), (np.subtract, (a, b[0, 0]))]:
        recording, out = _RecordingUfunc(ufunc), np.empty_like(a)
        assert ufunc_in_parts(recording, operands, out, min_size=a.size) is out
        np.testing.assert_array_equal(out, ufunc(*operands))  # the same loop on each range: bit for bit
        assert sorted(size for _, size in recording.calls) == [a.size // 2, a.size - a.size // 2]
        assert {thread for thread, _ in recording.calls} - {threading.get_ident()}, "no part ran on the pool"


def test_an_in_place_call_splits_and_a_shifted_view_of_out_does_not(two_threads):
    x = np.arange(4000, dtype=np.float64)
    recording = _RecordingUfunc(np.multiply)
    ufunc_in_parts(recording, (x, 2.0), x, min_size=1)  # out is the operand itself
    np.testing.assert_array_equal(x, np.arange(4000) * 2.0)
    assert len(recording.calls) == 2

    y = np.arange(4001, dtype=np.float64)
    recording = _RecordingUfunc(np.add)
    ufunc_in_parts(recording, (y[1:], 1.0), y[:-1], min_size=1)  # reads what an earlier part would write
    np.testing.assert_array_equal(y[:-1], np.arange(1, 4001) + 1.0)
    assert len(recording.calls) == 1


@pytest.mark.parametrize("operands, out", [
    ((np.ones((40, 50)), np.ones(50)), np.empty((40, 50))),  # broadcast
    ((np.ones((50, 40)).T,), np.empty((40, 50))),  # not C-ordered
    ((np.ones(2000),), np.empty(4000)[::2]),  # out not C-ordered
])
def test_a_call_it_cannot_cut_or_below_the_size_runs_once(two_threads, operands, out):
    recording = _RecordingUfunc(np.add if len(operands) == 2 else np.negative)
    ufunc_in_parts(recording, operands, out, min_size=1)
    assert len(recording.calls) == 1
    recording = _RecordingUfunc(np.negative)
    ufunc_in_parts(recording, (np.ones(100),), np.empty(100), min_size=101)
    assert len(recording.calls) == 1


def test_the_callers_error_state_applies_to_every_part(two_threads):
    a, b = np.ones(2000), np.ones(2000)
    b[-1] = 0.0  # in the last part, which runs on the pool
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        ufunc_in_parts(np.true_divide, (a, b), np.empty(2000), min_size=1)
    with np.errstate(divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")  # a part on numpy's default state would warn, and raise here
        out = ufunc_in_parts(np.true_divide, (a, b), np.empty(2000), min_size=1)
    assert out[-1] == np.inf


def test_a_part_that_splits_again_runs_its_parts_in_turn(two_threads):
    """A part on the pool that calls ufunc_in_parts must not wait for the pool's only thread."""
    x = np.arange(4000, dtype=np.float64)
    results = {}

    def part(index, parts, scratch):
        out = np.empty_like(x)
        results[index] = ufunc_in_parts(np.multiply, (x, float(index + 1)), out, min_size=1)

    with threadpool_limits(1, user_api="blas"), workspace() as scratch:
        run_in_parts(part, 2, scratch)
    np.testing.assert_array_equal(results[1], x * 2)
    np.testing.assert_array_equal(results[0], x)

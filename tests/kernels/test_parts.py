"""run_in_parts: parts at once on as many threads where numpy's BLAS runs one thread or its threads
spin briefly (held at one thread meanwhile), one part on the caller otherwise; a part's error
raised on the caller after every part has finished."""

from __future__ import annotations

import threading

import pytest
from threadpoolctl import threadpool_limits

import zgrad
from zgrad.kernels.blas import BLAS, blas_threads
from zgrad.kernels.cpu.parts import run_in_parts
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

"""numpy's BLAS as zgrad uses it: OpenBLAS's spin bounded where zgrad is imported before numpy,
and one-thread regions that give the thread counts back when the last open one ends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from threadpoolctl import threadpool_limits

from zgrad.kernels.blas import BLAS, SPIN_TIMEOUT, blas_threads

_SPIN_VARIABLES = ("OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT")


def _in_fresh_interpreter(code: str, **variables: str) -> list[str]:
    env = {name: value for name, value in os.environ.items() if name not in _SPIN_VARIABLES}
    done = subprocess.run([sys.executable, "-c", code], env={**env, **variables}, capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.split()


_REPORT = ("import os; from zgrad.kernels.blas import BLAS; "
           "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT', '-'), BLAS.spin_is_bounded())")


def _openblas_with_threads() -> bool:
    return _in_fresh_interpreter("import zgrad; from zgrad.kernels.blas import BLAS; "
                                 "print(all(l.internal_api == 'openblas' and "
                                 "getattr(l, 'threading_layer', None) == 'pthreads' "
                                 "for l in BLAS._libraries()))") == ["True"]


def test_zgrad_imported_before_numpy_bounds_openblas_spin():
    seen = _in_fresh_interpreter("import zgrad; " + _REPORT)
    assert seen[0] == str(SPIN_TIMEOUT)
    if _openblas_with_threads():
        assert seen[1] == "True"


def test_numpy_imported_first_or_a_variable_set_by_the_user_keeps_openblas_default_or_the_users_value():
    assert _in_fresh_interpreter("import numpy, zgrad; " + _REPORT) == ["-", "False"]
    assert _in_fresh_interpreter("import zgrad; " + _REPORT, OPENBLAS_THREAD_TIMEOUT="28") == ["28", "False"]
    seen = _in_fresh_interpreter("import zgrad; " + _REPORT, GOTO_THREAD_TIMEOUT="16")
    assert seen[0] == "-"
    if _openblas_with_threads():
        assert seen[1] == "True"


def test_a_spin_value_that_is_not_a_number_counts_as_unbounded():
    """OpenBLAS reads such a value as 0 (clamped to 4); zgrad cannot tell what OpenBLAS did with
    it, so it keeps loops on BLAS's threads rather than split them beside a spinning one. zgrad
    imports and leaves the value as the user set it."""
    for value in ("fast", "2.5"):
        assert _in_fresh_interpreter("import zgrad; " + _REPORT, OPENBLAS_THREAD_TIMEOUT=value) == [value, "False"]


@pytest.fixture
def two_blas_threads():
    with threadpool_limits(2, user_api="blas"):
        if blas_threads() != 2:
            pytest.skip("numpy's BLAS cannot run two threads here")
        yield


def test_a_one_thread_region_gives_the_count_back_even_on_error(two_blas_threads):
    with pytest.raises(RuntimeError, match="inside"):
        with BLAS.one_thread():
            assert blas_threads() == 1
            raise RuntimeError("inside")
    assert blas_threads() == 2


def test_regions_open_at_once_on_two_threads_give_the_count_back_when_the_last_ends(two_blas_threads):
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with BLAS.one_thread():
            first_in.set()
            second_in.wait(30)
        seen["after first"] = blas_threads()
        first_out.set()

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert first_in.wait(30)
        with BLAS.one_thread():
            second_in.set()
            assert first_out.wait(30)
            seen["second, after first"] = blas_threads()
    finally:
        second_in.set()
        thread.join(30)
    assert seen == {"after first": 1, "second, after first": 1}
    assert blas_threads() == 2

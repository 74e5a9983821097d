"""The agent's threading parts on their own: the callee pool, Future, the deadline timer."""

from __future__ import annotations

import threading
import time

import pytest

from zgrad.futures import Future
from zgrad.distributed.rpc.pool import CalleePool

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def make_pool():
    pools = []

    def make(num_threads: int, **kwargs) -> CalleePool:
        pool = CalleePool("test-pool", num_threads, **kwargs)
        pool.start()
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.close()


def test_every_task_runs_once_on_a_pool_thread(make_pool):
    pool = make_pool(3)
    seen = []
    for i in range(500):
        pool.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
    assert pool.wait_idle(10)
    assert sorted(i for i, _ in seen) == list(range(500))
    assert all(name.startswith("test-pool-") for _, name in seen)
    assert pool.in_flight() == 0
    assert pool.peak_threads == 3  # no thread was blocked, so none was added


def test_a_raising_task_does_not_kill_its_thread(make_pool, caplog):
    pool = make_pool(1)
    done = Future("after the failure")

    def boom():
        raise ValueError("task failed on purpose")

    pool.submit(boom)
    pool.submit(lambda: done.set_result(threading.current_thread().name))
    assert done.wait(5) == "test-pool-1"
    assert "task failed on purpose" in caplog.text


def test_threads_blocked_in_nested_waits_are_compensated(make_pool):
    """A chain deeper than the pool: each task waits for the next one's future."""
    depth = 12
    pool = make_pool(2, idle_exit_s=0.3)
    futures = [Future(f"level {i}") for i in range(depth + 1)]

    def level(i: int) -> None:
        if i == depth:
            futures[i].set_result(i)
            return
        pool.submit(lambda: level(i + 1))
        futures[i].set_result(futures[i + 1].wait(10))

    pool.submit(lambda: level(0))
    assert futures[0].wait(10) == depth
    assert pool.peak_threads > 2
    # Compensating threads leave once idle; the core threads stay and still work.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(pool._threads) > 2:
        time.sleep(0.05)
    assert len(pool._threads) == 2
    after = Future("after shrinking")
    pool.submit(lambda: after.set_result("ok"))
    assert after.wait(5) == "ok"


def test_close_drops_queued_tasks_and_joins_every_thread(make_pool):
    pool = make_pool(1)
    gate = threading.Event()
    ran = []
    pool.submit(gate.wait)
    for i in range(10):
        pool.submit(lambda i=i: ran.append(i))
    threads = list(pool._threads)
    closer = threading.Thread(target=pool.close)
    closer.start()
    time.sleep(0.05)
    gate.set()
    closer.join(10)
    assert not closer.is_alive()
    assert ran == []
    assert not any(t.is_alive() for t in threads)
    pool.submit(lambda: ran.append("late"))  # dropped silently after close
    assert ran == []


def test_wait_idle_times_out_while_a_task_runs(make_pool):
    pool = make_pool(1)
    gate = threading.Event()
    pool.submit(gate.wait)
    assert not pool.wait_idle(0.1)
    assert pool.in_flight() == 1
    gate.set()
    assert pool.wait_idle(5)


# ------------------------------------------------------------------------------------ Future


def test_future_releases_every_waiter_once_completed():
    future = Future("shared")
    results, threads = [], []
    for _ in range(8):
        threads.append(threading.Thread(target=lambda: results.append(future.wait(5))))
        threads[-1].start()
    time.sleep(0.05)
    assert not future.done()
    future.set_result(42)
    with pytest.raises(RuntimeError, match="Future can only be marked completed once"):
        future.set_result(43)
    for thread in threads:
        thread.join(5)
    assert results == [42] * 8
    assert future.wait(0) == 42 and future.done()


def test_future_wait_timeout_names_the_call_and_the_call_goes_on():
    from zgrad.errors import ZgradTimeoutError

    future = Future("RPC to 'worker1' calling 'm:f'")
    with pytest.raises(ZgradTimeoutError, match=r"waiting for RPC to 'worker1' calling 'm:f' ran past 0.05 seconds"):
        future.wait(0.05)
    future.set_exception(ValueError("late failure"))
    with pytest.raises(ValueError, match="late failure"):
        future.wait(1)
    assert isinstance(future.exception(), ValueError)


def test_future_then_and_callbacks_run_on_completion():
    future = Future()
    chained = future.then(lambda f: f.value() + 1)
    seen = []
    future.add_done_callback(lambda f: seen.append(f.value()))
    with pytest.raises(RuntimeError, match="has not completed yet"):
        future.value()
    future.set_result(1)
    assert chained.wait(1) == 2 and seen == [1]
    future.add_done_callback(lambda f: seen.append("at once"))
    assert seen == [1, "at once"]


# ------------------------------------------------------------------------------ DeadlineTimer


@pytest.fixture
def timer():
    from zgrad.distributed.rpc.timer import DeadlineTimer

    started = DeadlineTimer("test")
    started.start()
    yield started
    started.stop()


def test_timer_fires_due_callbacks_in_deadline_order_and_not_cancelled_ones(timer):
    fired = []
    done = threading.Event()
    timer.schedule(0.15, lambda: (fired.append("late"), done.set()))
    timer.schedule(0.05, lambda: fired.append("early"))
    cancelled = timer.schedule(0.01, lambda: fired.append("cancelled"))
    timer.cancel(cancelled)
    assert done.wait(5)
    assert fired == ["early", "late"]


def test_timer_drops_cancelled_entries_in_bulk(timer):
    """One RPC schedules and cancels a timeout: the heap must not grow with the call count."""
    for _ in range(20_000):
        timer.cancel(timer.schedule(60.0, lambda: None))
    assert len(timer._heap) <= 2 * 1024 + 1
    fired = threading.Event()
    timer.schedule(0.01, fired.set)  # still works after compaction
    assert fired.wait(5)

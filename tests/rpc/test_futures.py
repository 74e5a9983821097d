"""``zgrad.futures`` as PyTorch's ``torch.futures``: completion once, chaining, collect_all and
wait_all; the RPC futures are this class."""

from __future__ import annotations

import threading
import time

import pytest

import zgrad
from zgrad.errors import ZgradTimeoutError
from zgrad.futures import Future, collect_all, wait_all

pytestmark = pytest.mark.timeout(30)


def complete_later(future: Future, value=None, error=None, delay_s: float = 0.05) -> threading.Thread:
    def run():
        time.sleep(delay_s)
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_the_public_names_are_pytorchs():
    assert zgrad.futures.Future is Future
    from zgrad.distributed import rpc

    assert rpc.Future is Future


def test_a_future_completes_once_and_checks_what_it_is_given():
    fut = Future()
    fut.set_result(1)
    with pytest.raises(RuntimeError, match="Future can only be marked completed once"):
        fut.set_result(2)
    with pytest.raises(RuntimeError, match="Future can only be marked completed once"):
        fut.set_exception(ValueError("late"))
    assert fut.wait() == 1 and fut.value() == 1 and fut.done()
    with pytest.raises(TypeError, match="not an Exception"):
        Future().set_exception("not an error")
    with pytest.raises(ValueError, match="expected 'cpu' or 'cuda:0'"):
        Future(devices=["cuda:1"])
    Future(devices=["cuda:0", "cuda"])
    assert Future(devices=["cpu"]).done() is False


def test_then_chains_values_and_errors():
    fut = Future()
    doubled = fut.then(lambda f: f.value() * 2)
    failed = fut.then(lambda f: 1 / 0)
    propagated = Future()
    after_error = propagated.then(lambda f: f.value() + 1)
    fut.set_result(21)
    propagated.set_exception(KeyError("missing"))
    assert doubled.wait(1) == 42
    with pytest.raises(ZeroDivisionError):
        failed.wait(1)
    with pytest.raises(KeyError, match="missing"):
        after_error.wait(1)


def test_collect_all_waits_for_every_future_and_keeps_the_failed_ones():
    futures = [Future() for _ in range(4)]
    collected = collect_all(futures)
    threads = [complete_later(f, value=i, delay_s=0.01 * (4 - i)) for i, f in enumerate(futures[:3])]
    threads.append(complete_later(futures[3], error=ValueError("third"), delay_s=0.02))
    done = collected.wait(5)
    assert all(a is b for a, b in zip(done, futures)) and len(done) == 4
    assert [f.value() for f in done[:3]] == [0, 1, 2]
    assert isinstance(done[3].exception(), ValueError)
    assert collect_all([]).wait(1) == []
    with pytest.raises(TypeError, match="entry 1 is a int"):
        collect_all([Future(), 3])
    for thread in threads:
        thread.join()


def test_wait_all_returns_values_in_order_or_raises_the_first_error():
    futures = [Future() for _ in range(3)]
    threads = [complete_later(f, value=f"v{i}", delay_s=0.03 * (3 - i)) for i, f in enumerate(futures)]
    assert wait_all(futures) == ["v0", "v1", "v2"]
    failing = [Future(), Future()]
    failing[0].set_result(1)
    failing[1].set_exception(RuntimeError("second failed"))
    with pytest.raises(RuntimeError, match="second failed"):
        wait_all(failing)
    with pytest.raises(ZgradTimeoutError):
        wait_all([Future()], timeout=0.05)
    for thread in threads:
        thread.join()

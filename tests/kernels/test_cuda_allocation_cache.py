"""Freed CUDA allocations kept for reuse by the thread that made them
(``zgrad.kernels.cuda.allocation_cache``), and ``zgrad.cuda``'s memory statistics.

The cache's rules run against a stand-in allocator (any class with a ``__dict__``, as Numba's device
arrays have): reuse by dtype and length on the allocating thread only, the bound by the peak in
use, the retry after emptying on a full device, and the counts. The CUDA backend's own allocations
(in Numba's simulator) are reused the same way and stay sole views for the engine; the check on
Numba's real driver module is in ``test_cuda_memory_pool.py``.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from cuda_helpers import REAL_GPU

import zgrad
from zgrad.kernels.cuda import allocation_cache

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


class _Memory:
    """A stand-in device array: its length, dtype, a serial number for the memory behind it, and
    how many views of that memory there are."""

    made = 0

    def __init__(self, length: int, dtype: np.dtype) -> None:
        _Memory.made += 1
        self.length, self.dtype, self.serial, self.views = length, dtype, _Memory.made, 0


class _OutOfMemory(Exception):
    pass


@pytest.fixture
def cache(monkeypatch):
    """The cache with counts and thread caches of its own for one test."""
    monkeypatch.setattr(allocation_cache, "_counts", dict.fromkeys(allocation_cache._counts, 0))
    monkeypatch.setattr(allocation_cache, "_local", threading.local())
    monkeypatch.setattr(allocation_cache, "_caches", type(allocation_cache._caches)())
    yield allocation_cache
    allocation_cache.empty_cache()


def _allocate(length: int, dtype: np.dtype = F32, new=_Memory):
    return allocation_cache.allocate(length, dtype, new, lambda exc: isinstance(exc, _OutOfMemory),
                                     lambda array: array.views)


def _on_a_thread(fn):
    result = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    return result[0]


def test_a_freed_allocation_is_handed_out_again_for_its_dtype_and_length_only(cache):
    a = _allocate(100)
    serial = a.serial
    del a
    assert cache.memory_stats()["inactive_split_bytes.all.current"] == 400
    b = _allocate(100)
    assert b.serial == serial, "the same memory, the same object's fields"
    c, d = _allocate(100, F64), _allocate(101)
    assert len({b.serial, c.serial, d.serial}) == 3
    stats = cache.memory_stats()
    assert stats["allocated_bytes.all.current"] == 400 + 800 + 404
    assert stats["allocation.all.allocated"] == 4 and stats["allocation.all.cache_hits"] == 1
    assert stats["allocation.all.freed"] == 1


def test_only_the_allocating_thread_reuses_an_allocation(cache):
    holder = [_allocate(10)]
    serial = holder[0].serial
    _on_a_thread(holder.clear)  # the last reference dropped on another thread: back to the allocator
    fresh = _allocate(10)
    assert fresh.serial != serial
    assert cache.memory_stats()["inactive_split_bytes.all.current"] == 0

    kept = _allocate(20)
    serial = kept.serial
    del kept  # kept by this thread
    assert _on_a_thread(lambda: _allocate(20).serial) != serial, "another thread makes its own"
    assert _allocate(20).serial == serial


def test_a_dead_threads_kept_allocations_go_back_while_its_others_live_on(cache):
    def work():
        handed_over, scratch = _allocate(30), _allocate(40)
        del scratch  # kept by this thread, until it ends
        return handed_over

    result = _on_a_thread(work)
    gc.collect()
    assert cache.memory_stats()["inactive_split_bytes.all.current"] == 0
    assert cache.memory_stats()["allocated_bytes.all.current"] == 120
    del result


def test_memory_still_viewed_or_not_the_allocation_itself_is_not_kept(cache):
    viewed = _allocate(10)
    viewed.views = 1  # a kernel argument over its memory outlives it
    del viewed
    assert cache.memory_stats()["inactive_split_bytes.all.current"] == 0
    assert cache.memory_stats()["allocated_bytes.all.current"] == 0

    original = _allocate(10)
    twin = object.__new__(type(original))  # as Numba's slices are made: type(self), fields of its own
    twin.__dict__ = dict(original.__dict__)
    del twin
    stats = cache.memory_stats()
    assert stats["allocated_bytes.all.current"] == 40 and stats["inactive_split_bytes.all.current"] == 0
    serial = original.serial
    del original
    assert _allocate(10).serial == serial


def test_what_is_kept_is_bounded_by_the_peak_in_use(cache):
    big = _allocate(1000)
    del big  # peak 4000 bytes in use
    small = [_allocate(n) for n in range(1, 200)]  # 4 * 19900 bytes, 199 lengths
    del small
    stats = cache.memory_stats()
    assert stats["inactive_split_bytes.all.current"] <= cache._counts["allocated_ever_peak"]
    assert stats["inactive_split_bytes.all.current"] > 0
    assert stats["allocated_bytes.all.current"] == 0
    assert stats["reserved_bytes.all.current"] == stats["inactive_split_bytes.all.current"]


def test_a_full_device_empties_every_cache_and_tries_once_more(cache):
    kept = _allocate(50)
    del kept
    _on_a_thread(lambda: _allocate(60).serial)  # kept by a thread that has ended: nothing
    attempts = []

    def full_once(length, dtype):
        attempts.append(length)
        if len(attempts) == 1:
            raise _OutOfMemory()
        return _Memory(length, dtype)

    made = _allocate(70, new=full_once)
    stats = cache.memory_stats()
    assert attempts == [70, 70] and stats["num_alloc_retries"] == 1 and stats["num_ooms"] == 0
    assert stats["inactive_split_bytes.all.current"] == 0, "the kept allocation went back first"
    assert made.length == 70

    def always_full(length, dtype):
        raise _OutOfMemory()

    with pytest.raises(_OutOfMemory):
        _allocate(80, new=always_full)
    assert cache.memory_stats()["num_ooms"] == 1

    def broken(length, dtype):
        attempts.append("broken")
        raise ValueError("not a memory error")

    with pytest.raises(ValueError, match="not a memory error"):
        _allocate(90, new=broken)
    assert attempts.count("broken") == 1, "other errors are not retried"


def test_counts_stay_exact_while_another_thread_empties_the_caches(cache):
    stop = threading.Event()

    def empty_repeatedly():
        while not stop.is_set():
            cache.empty_cache()

    emptier = threading.Thread(target=empty_repeatedly)
    emptier.start()
    try:
        for i in range(3000):
            held = [_allocate(8 + i % 5), _allocate(8 + i % 7)]
            del held
    finally:
        stop.set()
        emptier.join(timeout=30)
    assert not emptier.is_alive()
    cache.empty_cache()
    stats = cache.memory_stats()
    assert stats["allocated_bytes.all.current"] == 0 and stats["reserved_bytes.all.current"] == 0
    assert stats["allocation.all.allocated"] == stats["allocation.all.freed"] == 6000


def test_peaks_start_again_from_the_current_values(cache):
    a, b = _allocate(100), _allocate(200)
    del b
    stats = cache.memory_stats()
    assert (stats["allocated_bytes.all.peak"], stats["reserved_bytes.all.peak"]) == (1200, 1200)
    cache.reset_peak_memory_stats()
    stats = cache.memory_stats()
    assert (stats["allocated_bytes.all.peak"], stats["reserved_bytes.all.peak"]) == (400, 1200)
    cache.empty_cache()
    cache.reset_peak_memory_stats()
    assert cache.memory_stats()["reserved_bytes.all.peak"] == 400
    del a


# --- the CUDA backend's allocations (Numba's simulator) ----------------------------------------

def test_cuda_tensors_reuse_freed_memory_and_zgrad_cuda_reports_it():
    if REAL_GPU:
        pytest.skip("exact byte counts assume no other allocations on the device meanwhile")
    zgrad.cuda.empty_cache()
    gc.collect()
    before = zgrad.cuda.memory_allocated()
    x = zgrad.empty(250, device="cuda")
    assert zgrad.cuda.memory_allocated() == before + 1000
    assert zgrad.cuda.max_memory_allocated() >= before + 1000
    address = x.data_ptr()
    del x
    assert zgrad.cuda.memory_allocated() == before
    assert zgrad.cuda.memory_reserved() >= before + 1000
    y = zgrad.ones(250, device="cuda")
    assert y.data_ptr() == address
    assert y.sum().item() == 250.0, "the reused memory is written as any new allocation"
    zgrad.cuda.reset_peak_memory_stats()
    assert zgrad.cuda.max_memory_allocated() == zgrad.cuda.memory_allocated()
    del y
    zgrad.cuda.empty_cache()
    assert zgrad.cuda.memory_reserved() == zgrad.cuda.memory_allocated() == before
    stats = zgrad.cuda.memory_stats()
    assert list(stats) == sorted(stats) and stats["allocation.all.cache_hits"] >= 1


def test_an_allocation_is_not_reused_while_a_kernel_argument_views_its_memory():
    from zgrad.kernels.cuda.array import DeviceArray

    temporary = DeviceArray.empty((64,), F32)
    address = temporary.data_ptr()
    argument = temporary[1:].arg()  # what contiguous(x).arg() leaves behind
    del temporary
    other = DeviceArray.empty((64,), F32)
    assert other.data_ptr() != address
    del argument


def test_a_reused_allocation_is_a_sole_view_as_a_new_one_is():
    from zgrad.kernels.cuda.array import DeviceArray

    first = DeviceArray.empty((64,), F32)
    assert first.is_sole_view()
    del first
    again = DeviceArray.empty((64,), F32)
    assert again.is_sole_view()
    view = again[2:]
    assert not again.is_sole_view() and not view.is_sole_view()


def test_memory_functions_check_the_device_as_pytorchs_do():
    for device in (None, 0, "cuda", "cuda:0", zgrad.device("cuda")):
        assert zgrad.cuda.memory_allocated(device) >= 0
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        zgrad.cuda.memory_allocated("cpu")
    with pytest.raises(zgrad.ZgradError, match="invalid device ordinal"):
        zgrad.cuda.max_memory_reserved(1)
    with pytest.raises(ValueError, match="non-negative"):
        zgrad.cuda.memory_stats(-1)


@pytest.mark.skipif(REAL_GPU, reason="needs a process where CUDA cannot be used")
def test_without_cuda_the_statistics_are_empty_as_in_pytorch():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    code = ("import zgrad; assert not zgrad.cuda.is_available(); zgrad.cuda.empty_cache(); "
            "zgrad.cuda.reset_peak_memory_stats(); "
            "print(zgrad.cuda.memory_stats(), zgrad.cuda.memory_allocated(), zgrad.cuda.max_memory_reserved())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["{}", "0", "0"]


def test_a_full_device_raises_pytorchs_out_of_memory_error(monkeypatch):
    from zgrad.kernels.cuda import array

    class DeviceFull(Exception):
        pass

    def full(length, dtype):
        raise DeviceFull()

    monkeypatch.setattr(array, "is_out_of_memory", lambda exc: isinstance(exc, DeviceFull))
    monkeypatch.setattr(array, "_new_allocation", full)
    with pytest.raises(zgrad.cuda.OutOfMemoryError,
                       match=r"^CUDA out of memory\. Tried to allocate 3\.00 MiB\. GPU 0 has a total capacity of "
                             r"[0-9.]+ GiB of which [0-9.]+ [GMK]iB is free\. Of the allocated memory .* is allocated by "
                             r"zgrad, and .* is reserved by zgrad but unallocated\. Free tensors") as caught:
        zgrad.empty(3 * 2**18, device="cuda")  # 3 MiB of float32, a length nothing has kept
    assert isinstance(caught.value.__cause__, DeviceFull) and isinstance(caught.value, RuntimeError)
    assert zgrad.OutOfMemoryError is zgrad.cuda.OutOfMemoryError
    monkeypatch.setattr(array, "_new_allocation", lambda length, dtype: (_ for _ in ()).throw(ValueError("other")))
    with pytest.raises(ValueError, match="other"):
        zgrad.empty(3 * 2**18 + 1, device="cuda")

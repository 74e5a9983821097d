"""The CUDA backend's device memory: the driver's stream-ordered pool
(``zgrad.kernels.cuda.memory_pool``).

The ordering rules run here against a recording stand-in for the driver (no GPU needed): a free
on the allocating thread is queued on its stream at once; a free on another thread waits for that
thread's stream and is queued at the next allocation; a full device is waited for, trimmed and
tried once more. On a real GPU (``ZGRAD_TEST_REAL_GPU=1``) the pool must be the manager in use,
and a training step's temporaries must come from it and go back to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import REAL_GPU

from zgrad.kernels.cuda.memory_pool import (
    ALLOCATOR_ENVIRONMENT_VARIABLE,
    StreamOrderedAllocator,
)


class _OutOfMemory(Exception):
    pass


class _Driver:
    """Records the driver calls; cuMemAllocAsync fails with _OutOfMemory ``failures`` times."""

    def __init__(self, failures: int = 0) -> None:
        self.calls: list[tuple] = []
        self.failures = failures
        self._next = 0x1000

    def cuMemAllocAsync(self, size, stream):
        self.calls.append(("alloc", size, stream))
        if self.failures:
            self.failures -= 1
            raise _OutOfMemory()
        self._next += 0x1000
        return self._next

    def cuMemFreeAsync(self, pointer, stream):
        self.calls.append(("free", pointer, stream))

    def cuEventCreate(self, flags):
        self.calls.append(("event", flags))
        return f"event{len(self.calls)}"

    def cuEventRecord(self, event, stream):
        self.calls.append(("record", event, stream))

    def cuStreamWaitEvent(self, stream, event, flags):
        self.calls.append(("wait", stream, event))

    def cuEventDestroy(self, event):
        self.calls.append(("destroy", event))

    def cuCtxSynchronize(self):
        self.calls.append(("synchronize",))

    def cuMemPoolTrimTo(self, pool, keep):
        self.calls.append(("trim", pool, keep))


_BINDING = types.SimpleNamespace(CUevent_flags=types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2))


class _Threads:
    """Each thread's stream (a new one on first use, named by its handle), as the runtime's."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._count = 0

    def stream(self):
        stream = getattr(self._local, "stream", None)
        if stream is None:
            self._count += 1
            stream = self._local.stream = types.SimpleNamespace(handle=f"stream{self._count}")
        return stream

    def existing(self):
        return getattr(self._local, "stream", None)


def _allocator(failures: int = 0):
    driver, threads = _Driver(failures), _Threads()
    allocator = StreamOrderedAllocator(driver, _BINDING, "pool", threads.stream, threads.existing,
                                       lambda exc: isinstance(exc, _OutOfMemory))
    return allocator, driver, threads


def _on_another_thread(threads: _Threads, fn, with_stream: bool) -> None:
    def run():
        if with_stream:
            threads.stream()
        fn()
    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()


def test_a_free_on_the_allocating_thread_is_queued_on_its_stream_at_once():
    allocator, driver, _ = _allocator()
    pointer, free = allocator.allocate(64)
    free()
    assert driver.calls == [("alloc", 64, "stream1"), ("free", pointer, "stream1")]
    assert allocator.pending_foreign_frees == 0


def test_a_free_on_another_thread_waits_for_that_threads_stream_and_is_queued_at_the_next_allocation():
    allocator, driver, threads = _allocator()
    pointer, free = allocator.allocate(64)
    _on_another_thread(threads, free, with_stream=True)
    event = driver.calls[2][1]
    assert driver.calls[1:] == [("event", 2), ("record", event, "stream2")], "nothing freed yet"
    assert allocator.pending_foreign_frees == 1
    driver.calls.clear()
    allocator.allocate(32)
    assert driver.calls[:3] == [("wait", "stream1", event), ("destroy", event), ("free", pointer, "stream1")], \
        "freed on the allocating stream, after the freeing thread's stream"
    assert driver.calls[3] == ("alloc", 32, "stream1")
    assert allocator.pending_foreign_frees == 0


def test_a_free_on_a_thread_that_never_used_cuda_is_queued_without_an_event():
    allocator, driver, threads = _allocator()
    pointer, free = allocator.allocate(64)
    _on_another_thread(threads, free, with_stream=False)
    assert driver.calls == [("alloc", 64, "stream1")], "no driver call from a thread without a context"
    allocator.queue_foreign_frees()
    assert driver.calls[1:] == [("free", pointer, "stream1")]


def test_a_full_device_is_waited_for_trimmed_and_tried_once_more():
    allocator, driver, _ = _allocator(failures=1)
    allocator.allocate(1 << 20)
    assert [c[0] for c in driver.calls] == ["alloc", "synchronize", "trim", "alloc"]
    assert driver.calls[2] == ("trim", "pool", 0)
    allocator, driver, _ = _allocator(failures=2)
    with pytest.raises(_OutOfMemory):
        allocator.allocate(1 << 20)


def test_an_unknown_allocator_choice_names_the_choices(monkeypatch):
    from zgrad.kernels.cuda import memory_pool
    monkeypatch.setenv(ALLOCATOR_ENVIRONMENT_VARIABLE, "caching")
    with pytest.raises(ValueError, match="ZGRAD_CUDA_ALLOCATOR='caching' is not an allocator: choose 'pool' or 'numba'"):
        memory_pool._chosen()


def test_numbas_memory_manager_allocates_from_the_pool_and_frees_when_dropped():
    """The Numba side, in a process of its own with Numba's real driver module (a recorder
    standing in for the driver): initialized once, memory from cuMemAllocAsync, freed on drop,
    and not at the interpreter's exit; zgrad's own allocations, which take the memory from the
    context's manager without Numba's per-call context check, are the arrays Numba makes."""
    pytest.importorskip("numba.cuda")
    script = Path(__file__).resolve().parents[1] / "support" / "cuda_memory_manager_check.py"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.pop(ALLOCATOR_ENVIRONMENT_VARIABLE, None)
    done = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120, env=env,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["installed"] and result["manager"] == "StreamOrderedMemoryManager"
    assert (result["pointer"], result["size"], result["freed_at_exit"]) == (0x7000, 256, False)
    names = [call[0] for call in result["calls"]]
    assert names[:5] == ["cuMemGetInfo", "cuDeviceGetDefaultMemPool", "cuMemPoolSetAttribute", "cuMemAllocAsync",
                         "cuMemFreeAsync"]
    assert "RELEASE_THRESHOLD" in result["calls"][2][2] and result["calls"][2][3].endswith(f"{(1 << 64) - 1}>")
    assert result["calls"][3][1:] == ["256", "stream"] and result["calls"][4][1:] == [str(0x7000), "stream"]
    # zgrad's allocations (runtime.device_vector) are the arrays Numba's device_array makes
    assert result["vectors"] == [[True, 5, "float32", 20], [True, 1, "float64", 8], [True, 7, "uint16", 14],
                                 [True, 3, "bool", 3]]
    assert [call[1] for call in result["calls"][5:] if call[0] == "cuMemAllocAsync"][:8] == [
        "20", "20", "8", "8", "14", "14", "3", "3"]
    # zgrad's allocation cache over it: a dropped allocation is made again without a driver call,
    # as a Numba device array of the same Numba type, and freed when the cache is emptied
    reuse = result["reuse"]
    assert reuse["same_pointer"] and reuse["numba_device_array"] and reuse["numba_type"] == "array(float32, 1d, C)"
    assert reuse["calls"] == ["cuMemAllocAsync"] and reuse["after_empty"] == ["cuMemAllocAsync", "cuMemFreeAsync"]
    # memory a reference cycle's collection freed is not kept: the next allocation is a new one
    assert reuse["cycle_calls"] == ["cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocAsync", "cuMemFreeAsync"]
    assert reuse["cycle_memory_alive"] and reuse["ignored_in_del"] == []


@pytest.mark.gpu
@pytest.mark.skipif(not REAL_GPU, reason="needs a real CUDA GPU (run with ZGRAD_TEST_REAL_GPU=1 on a machine with one)")
def test_on_a_gpu_a_training_steps_temporaries_come_from_the_pool_and_go_back():
    from numba import cuda
    from numba.cuda.cudadrv import driver

    import zgrad
    from zgrad.kernels.cuda import memory_pool, runtime

    model = zgrad.nn.Sequential(zgrad.nn.Linear(64, 256), zgrad.nn.ReLU(), zgrad.nn.Linear(256, 10)).to("cuda")
    optimizer = zgrad.optim.Adam(model.parameters())
    x = zgrad.tensor(np.random.default_rng(0).standard_normal((128, 64), dtype=np.float32), device="cuda")
    y = zgrad.tensor(np.arange(128) % 10, device="cuda")
    assert memory_pool.installed()
    context = cuda.current_context()
    assert type(context.memory_manager).__name__ == "StreamOrderedMemoryManager"
    pool = driver.driver.cuDeviceGetDefaultMemPool(context.device.id)
    used = driver.binding.CUmemPool_attribute.CU_MEMPOOL_ATTR_USED_MEM_CURRENT
    losses = []
    for _ in range(3):
        optimizer.zero_grad(set_to_none=True)
        loss = zgrad.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        runtime.synchronize()
        assert int(driver.driver.cuMemPoolGetAttribute(pool, used)) > 0, "the step's memory is the pool's"
    assert losses[2] < losses[0]
    assert not context.memory_manager.deallocations._cons, "no device memory waits in Numba's queue of frees"

"""Device memory from the CUDA driver's stream-ordered pool (``cuMemAllocAsync`` /
``cuMemFreeAsync``): the memory manager zgrad installs into Numba for its CUDA backend.

Why: Numba's own manager calls ``cuMemAlloc`` for every array and ``cuMemFree`` for every ten
freed, and both make the GPU synchronize across all streams (the CUDA programming guide's
stream-ordered allocator chapter). A training step allocates and frees thousands of temporaries,
so with Numba's manager the host stopped to wait for the device every few kernels: waits that
:func:`zgrad.kernels.cuda.runtime.host_waits` cannot count, and that keep the host from queueing
work ahead of the device. The driver's pool is the allocator CUDA provides for this (PyTorch's
``cudaMallocAsync`` backend uses it too); freed memory stays in the pool for the next allocation.

The ordering rules (:class:`StreamOrderedAllocator`):

- an allocation is ordered on the allocating thread's stream; another thread uses the memory
  after a synchronize on that thread, the rule for any kernel's output (docs/cuda.md);
- the allocating thread's free is queued on its stream at once, after every kernel it queued on
  that memory;
- a free on another thread (a tensor handed over, the cyclic garbage collector) also waits for
  the freeing thread's stream (an event recorded there), and is queued at the next allocation of
  any thread: a thread that never used CUDA has no context to call the driver from;
- an allocation that finds the device full queues the pending frees, waits for the device,
  returns the pool's unused memory to the driver and tries once more.

``ZGRAD_CUDA_ALLOCATOR=numba`` keeps Numba's manager; so do a ``NUMBA_CUDA_MEMORY_MANAGER`` the
user set, a CUDA context made before zgrad's CUDA backend loaded, and a device without memory
pools. The choice is made when zgrad's CUDA runtime loads, before any context exists.
"""

from __future__ import annotations

import collections
import os
import sys
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["ALLOCATOR_ENVIRONMENT_VARIABLE", "StreamOrderedAllocator", "install", "installed", "is_out_of_memory",
           "release_unused"]

ALLOCATOR_ENVIRONMENT_VARIABLE = "ZGRAD_CUDA_ALLOCATOR"
_CHOICES = ("pool", "numba")
_KEEP_EVERYTHING = (1 << 64) - 1  # the pool's release threshold: freed memory stays in the pool
_installed = [False]


class StreamOrderedAllocator:
    """Allocations and frees ordered on CUDA streams, through ``driver`` (Numba's driver object:
    driver API functions that return their results and raise on an error code).

    ``stream_of_thread()`` is the calling thread's stream, made on first use;
    ``existing_stream()`` the calling thread's stream or None when it has none yet.
    """

    def __init__(self, driver: Any, binding: Any, pool: Any, stream_of_thread: Callable[[], Any],
                 existing_stream: Callable[[], Any], is_out_of_memory: Callable[[BaseException], bool]) -> None:
        self._driver = driver
        self._binding = binding
        self._pool = pool
        self._stream_of_thread = stream_of_thread
        self._existing_stream = existing_stream
        self._is_out_of_memory = is_out_of_memory
        self._foreign_frees: collections.deque = collections.deque()

    def allocate(self, size: int) -> tuple[Any, Callable[[], None]]:
        """(device pointer, the function that frees it) of ``size`` bytes on this thread's stream."""
        self.queue_foreign_frees()
        stream = self._stream_of_thread()
        try:
            pointer = self._driver.cuMemAllocAsync(size, stream.handle)
        except Exception as exc:
            if not self._is_out_of_memory(exc):
                raise
            self.release_unused()
            pointer = self._driver.cuMemAllocAsync(size, stream.handle)
        return pointer, self._free_function(pointer, stream)

    def release_unused(self) -> None:
        """Queue the pending frees, wait for the device, and give the pool's unused memory back to
        the driver (for other allocations of this process's and other processes)."""
        self.queue_foreign_frees()
        self._driver.cuCtxSynchronize()
        self._driver.cuMemPoolTrimTo(self._pool, 0)

    def _free_function(self, pointer: Any, stream: Any) -> Callable[[], None]:
        def free() -> None:
            freeing_stream = self._existing_stream()  # streams are per thread: this identifies the thread
            if freeing_stream is stream:
                self._driver.cuMemFreeAsync(pointer, stream.handle)
                return
            event = None
            if freeing_stream is not None:
                event = self._driver.cuEventCreate(int(self._binding.CUevent_flags.CU_EVENT_DISABLE_TIMING))
                self._driver.cuEventRecord(event, freeing_stream.handle)
            self._foreign_frees.append((pointer, stream, event))
        return free

    def queue_foreign_frees(self) -> None:
        """Queue the frees other threads left: each on its allocating stream, after the freeing
        thread's stream where it had one."""
        while True:
            try:
                pointer, stream, event = self._foreign_frees.popleft()
            except IndexError:
                return
            if event is not None:
                self._driver.cuStreamWaitEvent(stream.handle, event, 0)
                self._driver.cuEventDestroy(event)
            self._driver.cuMemFreeAsync(pointer, stream.handle)

    @property
    def pending_foreign_frees(self) -> int:
        return len(self._foreign_frees)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is the CUDA driver's out-of-memory error (as Numba raises it)."""
    from numba.cuda.cudadrv import driver as numba_driver
    error, binding = getattr(numba_driver, "CudaAPIError", None), getattr(numba_driver, "binding", None)
    if error is None or binding is None or not isinstance(exc, error):  # the simulator has no such error
        return False
    return exc.code == binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY


def _chosen() -> str:
    choice = os.environ.get(ALLOCATOR_ENVIRONMENT_VARIABLE, "pool").strip().lower() or "pool"
    if choice not in _CHOICES:
        raise ValueError(f"{ALLOCATOR_ENVIRONMENT_VARIABLE}={choice!r} is not an allocator: choose "
                         f"{' or '.join(map(repr, _CHOICES))} (the driver's stream-ordered pool, or Numba's manager)")
    return choice


def install(stream_of_thread: Callable[[], Any], existing_stream: Callable[[], Any]) -> bool:
    """Make the driver's pool Numba's memory manager for the contexts made from now on (see the
    module docstring for when it does not); return whether it did."""
    from numba import config
    from numba.cuda.cudadrv import driver as numba_driver

    if _chosen() == "numba" or config.CUDA_MEMORY_MANAGER != "default" or numba_driver._memory_manager is not None:
        return False
    binding = numba_driver.binding

    class StreamOrderedMemoryManager(numba_driver.NumbaCUDAMemoryManager):
        """Numba's manager with device memory from the driver's stream-ordered pool (pinned host
        memory stays Numba's)."""

        _allocator: StreamOrderedAllocator | None = None
        _initialized = False

        def initialize(self) -> None:  # Numba calls it each time the context is made current
            super().initialize()
            if self._initialized:
                return
            self._initialized = True
            device = self.context.device
            if not device.MEMORY_POOLS_SUPPORTED:
                return
            pool = numba_driver.driver.cuDeviceGetDefaultMemPool(device.id)
            numba_driver.driver.cuMemPoolSetAttribute(
                pool, binding.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, binding.cuuint64_t(_KEEP_EVERYTHING))
            self._allocator = StreamOrderedAllocator(
                numba_driver.driver, binding, pool, stream_of_thread, existing_stream, is_out_of_memory)

        def memalloc(self, size: int) -> Any:
            if self._allocator is None:
                return super().memalloc(size)
            pointer, free = self._allocator.allocate(size)
            memory = numba_driver.MemoryPointer(weakref.proxy(self.context), pointer, size,
                                                finalizer=_unless_exiting(free))
            memory._finalizer.atexit = False  # the process's end frees the device memory
            return memory

    numba_driver.set_memory_manager(StreamOrderedMemoryManager)
    _installed[0] = True
    return True


def _unless_exiting(free: Callable[[], None]) -> Callable[[], None]:
    """``free``, doing nothing once the interpreter is shutting down (the context may be gone)."""
    def run() -> None:
        if not sys.is_finalizing():
            free()
    return run


def release_unused() -> None:
    """:meth:`StreamOrderedAllocator.release_unused` for the current context, where the pool is
    its memory manager (nothing otherwise)."""
    from numba import cuda

    allocator = getattr(cuda.current_context().memory_manager, "_allocator", None)
    if isinstance(allocator, StreamOrderedAllocator):
        allocator.release_unused()


def installed() -> bool:
    """Whether :func:`install` made the pool Numba's memory manager in this process."""
    return _installed[0]

"""The CUDA runtime of zgrad: numba.cuda and cuda-python for the host code (besides it only the
kernel modules of :mod:`zgrad.kernels.cuda.kernels`, which compile with numba.cuda,
``DeviceArray.arg``, which wraps device memory as Numba's device array, and
:mod:`zgrad.kernels.cuda.memory_pool`, Numba's memory manager for zgrad, import numba.cuda), device
discovery, launch configuration, a stream per thread, events for timing, a pinned host buffer pool.

Imported only on the first CUDA use (by :mod:`zgrad.kernels.cuda.backend`). Two modes:

- a real GPU: ``cuda.bindings.driver`` finds the devices; kernels launch on the calling thread's
  own stream with a grid sized from the device's multiprocessor count;
- Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported): every CUDA
  thread is a Python thread, so grids are tiny, and launches are serialized by a process-wide
  lock (the simulator keeps one launch context per process and fails when two threads launch).

Host code and kernels live in different modules (:mod:`zgrad.kernels.cuda.kernels` holds only kernels): during a
launch the simulator swaps the ``cuda`` global of the kernel's module, which host code in the same
module would see from other threads.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import weakref
from typing import Any, Callable

import numpy as np

from zgrad.errors import ZgradError
from zgrad.kernels.cuda import launcher as _launcher

try:
    from numba import cuda
except ImportError as exc:  # numba-cuda missing: dispatch turns this into the install hint
    raise ModuleNotFoundError(f"numba.cuda cannot be imported: {exc}", name="numba.cuda") from exc

__all__ = [
    "CudaUnavailableError", "SIMULATOR", "SIMULATOR_HINT", "require_device", "device_count", "device_properties",
    "memory_info", "simulator_array", "import_lock", "launch", "grid_1d", "blocks_for", "row_launch", "plane_launch", "current_stream", "device_vector", "synchronize", "host_waits", "defer_check", "Event", "elapsed_ms", "PinnedPool",
    "pinned_pool", "is_leased", "cuda",
]

if not cuda.jit.__module__.startswith("numba.cuda.simulator"):
    # Small tensors give small grids by design; Numba would warn on every such launch.
    from numba import config as _numba_config
    _numba_config.CUDA_LOW_OCCUPANCY_WARNINGS = 0

# What numba.cuda became at its import, not numba.config.ENABLE_CUDASIM: Numba re-reads its
# environment settings later (on compiles), and that setting may have changed since.
SIMULATOR = cuda.jit.__module__.startswith("numba.cuda.simulator")
SIMULATOR_HINT = ("to run zgrad's CUDA backend without a GPU, set NUMBA_ENABLE_CUDASIM=1 before importing zgrad "
                  "(Numba's CUDA simulator: slow, for tests on small shapes)")

# Launch shapes. On a GPU: 256 threads a block and up to 8 resident blocks per multiprocessor
# for grid-stride loops. In the simulator a CUDA thread is a Python thread: 2 blocks of 8
# threads still exercise the grid-stride and block-reduction paths.
BLOCK = 256
SIM_BLOCK = 8
SIM_GRID = 2
BLOCKS_PER_SM = 8
MAX_GRID_ROWS = 65535


class CudaUnavailableError(ZgradError):
    """No CUDA device can be used by this process."""


@functools.cache
def _driver_device_count() -> int:
    """How many CUDA devices the driver reports; raises CudaUnavailableError when there is none."""
    try:
        from cuda.bindings import driver
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuInit failed: {err}")
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuDeviceGetCount failed: {err}")
    except (ImportError, RuntimeError, OSError) as exc:
        raise CudaUnavailableError(f"no CUDA device: {exc}; {SIMULATOR_HINT}") from None
    if count == 0:
        raise CudaUnavailableError(f"no CUDA device: the driver reports 0 devices; {SIMULATOR_HINT}")
    return int(count)


def require_device() -> None:
    """Check that CUDA work can run here (a GPU, or the simulator).

    Raises:
        CudaUnavailableError: no driver or no device, with the hint to use the simulator.
    """
    if not SIMULATOR:
        _driver_device_count()


def device_count() -> int:
    """How many CUDA devices this process sees (1 in the simulator, 0 without a device)."""
    if SIMULATOR:
        return 1
    try:
        return _driver_device_count()
    except CudaUnavailableError:
        return 0


@functools.cache
def device_properties() -> dict[str, Any]:
    """Name, compute capability, multiprocessor count and peak memory bandwidth / float32 FLOP
    rate (estimates from the driver's attributes) of device 0. Raises CudaUnavailableError."""
    require_device()
    if SIMULATOR:
        return {"name": "Numba CUDA simulator", "compute_capability": (0, 0), "multiprocessors": 1,
                "peak_gb_s": None, "peak_gflop_s": None}
    dev = cuda.get_current_device()
    sms = int(dev.MULTIPROCESSOR_COUNT)
    clock_khz = int(dev.CLOCK_RATE)
    mem_khz = int(dev.MEMORY_CLOCK_RATE)
    bus_bits = int(dev.GLOBAL_MEMORY_BUS_WIDTH)
    cc = tuple(dev.compute_capability)
    fp32_per_sm = 128 if cc[0] >= 8 and cc != (8, 0) else 64
    return {
        "name": dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name),
        "compute_capability": cc,
        "multiprocessors": sms,
        "peak_gb_s": 2 * mem_khz * 1e3 * bus_bits / 8 / 1e9,  # double data rate
        "peak_gflop_s": 2 * fp32_per_sm * sms * clock_khz * 1e3 / 1e9,  # one FMA = 2 FLOPs
    }


def memory_info() -> tuple[int, int]:
    """(free, total) bytes of device 0's memory, as the driver reports them; in the simulator,
    whose device memory is host memory, the host's available and physical memory."""
    require_device()
    if SIMULATOR:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    free, total = cuda.current_context().get_memory_info()
    return int(free), int(total)


def simulator_array(host_view: np.ndarray) -> Any:
    """A simulator "device array" over ``host_view`` (the simulator's device memory is host memory)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    return FakeCUDAArray(host_view)


# --- launches ---------------------------------------------------------------------------------

_SIM_LAUNCH = threading.RLock()  # the simulator runs one launch at a time per process
_local = threading.local()


def current_stream() -> Any:
    """This thread's CUDA stream (made on first use); 0, the default stream, in the simulator."""
    if SIMULATOR:
        return 0
    stream = getattr(_local, "stream", None)
    if stream is None:
        stream = _local.stream = cuda.stream()
    return stream


def device_vector(length: int, dtype: np.dtype) -> Any:
    """A new 1-D device array of ``length`` elements of ``dtype`` (not the simulator's), its memory
    taken from this thread's context's memory manager directly: ``cuda.device_array`` asks the
    driver for the current context at every call (Numba's ``require_context``), where this
    thread's stream has made it current once and for all."""
    stream = current_stream()
    context = getattr(_local, "context", None)
    if context is None:
        context = _local.context = cuda.current_context()
    itemsize = dtype.itemsize
    return _device_array_class()((length,), (itemsize,), dtype, stream=stream,
                                 gpu_data=context.memalloc(length * itemsize))


@functools.cache
def _device_array_class() -> type:
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return DeviceNDArray


_host_waits = [0]


def synchronize() -> None:
    """Block until every kernel and copy queued by this thread has finished (a host wait: counted
    by :func:`host_waits`, also in the simulator, where there is nothing to wait for); then run
    the checks :func:`defer_check` left for this wait.

    Raises:
        Exception: the first error a deferred check raised (the later checks still ran).
    """
    checking = getattr(_local, "checking", False)
    if not checking:  # a check's own reads come inside a wait already counted
        _host_waits[0] += 1
    if not SIMULATOR:
        current_stream().synchronize()
    checks = getattr(_local, "checks", None)
    if checks and not checking:
        _local.checks, _local.checking = [], True
        errors = []
        try:
            for check in checks:
                try:
                    check()
                except Exception as exc:  # noqa: BLE001 - every check runs; the first error is raised
                    errors.append(exc)
        finally:
            _local.checking = False
        if errors:
            raise errors[0]


def defer_check(check: Callable[[], None]) -> None:
    """Run ``check`` at this thread's next :func:`synchronize`, once the device has computed what
    it reads: a check of input values (indices in range, targets valid) that would otherwise
    make the host wait for the device inside a step. ``check`` raises to report a bad input; it
    may read device arrays (its own waits run no further checks and are not counted)."""
    if getattr(_local, "checks", None) is None:
        _local.checks = []
    _local.checks.append(check)


if not SIMULATOR:
    from zgrad.kernels.cuda import memory_pool

    memory_pool.install(current_stream, lambda: getattr(_local, "stream", None))


def host_waits() -> int:
    """How many times this process has waited for the device so far (every :func:`synchronize`,
    which each copy to or from the host goes through): a training step that asks for no value
    should add none."""
    return _host_waits[0]


@functools.cache
def _grid_cap() -> int:
    return SIM_GRID if SIMULATOR else BLOCKS_PER_SM * device_properties()["multiprocessors"]


def grid_1d(n: int) -> tuple[int, int]:
    """(blocks, threads per block) for a grid-stride loop over ``n`` items."""
    block = SIM_BLOCK if SIMULATOR else BLOCK
    return max(1, min(-(-n // block), _grid_cap())), block


def blocks_for(tasks: int) -> int:
    """How many blocks to launch for ``tasks`` block-sized tasks (blocks stride past the grid)."""
    return max(1, min(tasks, _grid_cap()))


def row_launch(rows: int) -> tuple[int, int]:
    """(blocks, threads per block) for a kernel that runs one block per row (rows stride past the
    grid's end)."""
    return max(1, min(rows, SIM_GRID if SIMULATOR else MAX_GRID_ROWS)), SIM_BLOCK if SIMULATOR else BLOCK


def plane_launch(planes: int, per_plane: int) -> tuple[tuple[int, int], int]:
    """((blocks across, blocks down), threads per block) for a kernel whose grid y walks
    ``planes`` (striding past the grid's end) and whose grid x and threads walk each plane's
    ``per_plane`` elements."""
    if SIMULATOR:
        return (SIM_GRID, SIM_GRID), SIM_BLOCK
    return (max(1, min(-(-per_plane // BLOCK), 1024)), max(1, min(planes, MAX_GRID_ROWS))), BLOCK


def import_lock() -> Any:
    """What to hold while importing a kernel module: the simulator's launch lock (a launch swaps
    the ``cuda`` global of the module it runs from), nothing on a GPU."""
    return _SIM_LAUNCH if SIMULATOR else contextlib.nullcontext()


def launch(kernel: Any, config: tuple[Any, Any], *args: Any) -> None:
    """Launch ``kernel`` with (grid, block) ``config`` on this thread's stream (serialized in the
    simulator)."""
    grid, block = config
    if SIMULATOR:
        with _SIM_LAUNCH:
            kernel[grid, block](*args)
    else:
        _launcher.launch(kernel, grid, block, current_stream(), args)


# --- timing -----------------------------------------------------------------------------------

class Event:
    """A CUDA event on this thread's stream (host time in the simulator, where events do nothing)."""

    def __init__(self) -> None:
        self._event = None if SIMULATOR else cuda.event(timing=True)
        self._host_s = 0.0

    def record(self) -> None:
        if self._event is None:
            self._host_s = time.perf_counter()
        else:
            self._event.record(current_stream())

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to ``end`` (both recorded); waits for ``end``."""
        if self._event is None:
            return (end._host_s - self._host_s) * 1e3
        end._event.synchronize()
        return float(cuda.event_elapsed_time(self._event, end._event))


def elapsed_ms(fn: Callable[[], Any], repeat: int = 1) -> float:
    """Milliseconds per call of ``fn`` over ``repeat`` calls, timed with events on this thread's stream."""
    start, end = Event(), Event()
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    return start.elapsed_ms(end) / repeat


# --- pinned host memory -----------------------------------------------------------------------

class PinnedPool:
    """Page-locked host buffers for device <-> host staging, reused by size class.

    ``take(nbytes)`` returns a uint8 buffer of at least ``nbytes`` (a power of two from 4 KiB);
    ``give(buffer)`` returns it once no transfer uses it. At most ``max_cached_bytes`` stay cached;
    more are freed. Thread-safe. In the simulator pinned memory is plain host memory.
    """

    def __init__(self, max_cached_bytes: int = 256 << 20) -> None:
        self.max_cached_bytes = max_cached_bytes
        self._free: dict[int, list[np.ndarray]] = {}
        self._cached_bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def _size_class(nbytes: int) -> int:
        return max(4096, 1 << max(0, int(nbytes) - 1).bit_length())

    def take(self, nbytes: int) -> np.ndarray:
        size = self._size_class(nbytes)
        with self._lock:
            bucket = self._free.get(size)
            if bucket:
                self._cached_bytes -= size
                return bucket.pop()
        return cuda.pinned_array(size, dtype=np.uint8)

    def give(self, buffer: np.ndarray) -> None:
        size = buffer.nbytes
        with self._lock:
            if self._cached_bytes + size <= self.max_cached_bytes:
                self._free.setdefault(size, []).append(buffer)
                self._cached_bytes += size

    def lease(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A host array of ``shape`` and ``dtype`` in a pinned buffer of the pool, given back to the
        pool once the array and every view of it are gone (a transport that sends it zero-copy
        holds it until the send is done)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        buffer = self.take(nbytes)
        owner = _Lease(buffer, tuple(shape), dtype)
        weakref.finalize(owner, self.give, buffer)
        return np.asarray(owner)

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes


class _Lease:
    """Owns a leased view of a pooled buffer: numpy keeps it as the base of the leased array and
    of every view of it (a non-array base ends numpy's base collapsing), so it dies with the last."""

    def __init__(self, buffer: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.buffer = buffer
        self.__array_interface__ = {"data": (buffer.ctypes.data, False), "shape": shape, "typestr": dtype.str,
                                    "descr": dtype.descr, "version": 3}


def is_leased(array: np.ndarray) -> bool:
    """Whether host ``array`` is (a view of) an array :meth:`PinnedPool.lease` handed out."""
    while isinstance(array, np.ndarray):
        array = array.base
    return isinstance(array, _Lease)


@functools.cache
def pinned_pool() -> PinnedPool:
    """The process's pool of pinned staging buffers (256 MiB of them cached at most)."""
    return PinnedPool()

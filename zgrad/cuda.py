"""``zgrad.cuda``: whether CUDA can be used here, how many devices, waiting for queued work, the
memory zgrad's tensors use and keep for reuse, and the CUDA default generator's seed and state,
as ``torch.cuda``.

CUDA work runs on a GPU found by the driver, or on Numba's CUDA simulator when
``NUMBA_ENABLE_CUDASIM=1`` was set before zgrad (and numba) were imported. Nothing here loads
the CUDA backend until called.
"""

from __future__ import annotations

from zgrad.device import Device, as_device, is_device_index, usable_cuda_device
from zgrad.errors import OutOfMemoryError
from dataclasses import dataclass

from zgrad.kernels import dispatch
from zgrad.random import cuda_default_generator
from zgrad.tensor import Tensor

__all__ = ["is_available", "device_count", "synchronize", "current_device", "get_device_name", "default_generators",
           "set_device", "get_device_capability", "get_device_properties", "is_bf16_supported", "mem_get_info",
           "DeviceProperties", "OutOfMemoryError",
           "empty_cache", "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
           "memory_stats", "reset_peak_memory_stats",
           "get_rng_state", "initial_seed", "manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state"]

default_generators = (cuda_default_generator,)
"""The CUDA default generators, one per device as in PyTorch (zgrad computes on one device)."""


def is_available() -> bool:
    """True when the CUDA backend loads and finds a device (or runs in the simulator)."""
    return dispatch.backend_available("cuda")


def device_count() -> int:
    """How many CUDA devices this process can use (0 without one)."""
    return int(dispatch.backend("cuda").device_count()) if is_available() else 0


def current_device() -> int:
    """The index of the device zgrad computes on (always 0: zgrad uses one device per process).

    Raises:
        ZgradError: no CUDA device can be used here.
    """
    dispatch.backend("cuda")
    return 0


def set_device(device: Device | str | int | None) -> None:
    """Select the device zgrad computes on. zgrad uses one device per process, device 0 (start one
    process per GPU and pick it with ``CUDA_VISIBLE_DEVICES``), so this only checks ``device`` (an
    index, or a device with one); a negative index does nothing, as in PyTorch.

    Raises:
        ZgradError: no CUDA device can be used here, or an index other than 0.
        ValueError: ``device`` is not a CUDA device, or has no index.
    """
    if is_device_index(device):
        if device < 0:
            return
    else:
        named = as_device(device) if isinstance(device, (str, Device)) else None
        if named is None or named.index is None:
            if named is not None and named.type != "cuda":
                raise ValueError(f"Expected a cuda device, but got: {device}")
            raise ValueError(f"Expected a device with a specified index or an integer, but got:{device}")
    usable_cuda_device(device)


def get_device_name(device: Device | str | int | None = None) -> str:
    """The name of CUDA device ``device`` ("Numba CUDA simulator" in the simulator).

    Raises:
        ZgradError: no CUDA device can be used here, or the index is past the last device.
        ValueError: ``device`` is not a CUDA device.
    """
    return get_device_properties(device).name


@dataclass(frozen=True)
class DeviceProperties:
    """What :func:`get_device_properties` reports, under PyTorch's attribute names."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int


def get_device_properties(device: Device | str | int | None = None) -> DeviceProperties:
    """The name, compute capability, memory in bytes and multiprocessor count of ``device`` (in the
    simulator: capability 0.0, one multiprocessor, the host's memory).

    Raises:
        ZgradError: no CUDA device can be used here, or the index is past the last device.
        ValueError: ``device`` is not a CUDA device.
    """
    _require_cuda_device(device)
    backend = dispatch.backend("cuda")
    properties = backend.device_properties()
    major, minor = properties["compute_capability"]
    return DeviceProperties(str(properties["name"]), int(major), int(minor), backend.memory_info()[1],
                            int(properties["multiprocessors"]))


def get_device_capability(device: Device | str | int | None = None) -> tuple[int, int]:
    """(major, minor) compute capability of ``device`` ((0, 0) in the simulator)."""
    properties = get_device_properties(device)
    return properties.major, properties.minor


def mem_get_info(device: Device | str | int | None = None) -> tuple[int, int]:
    """(free, total) bytes of ``device``'s memory as the driver reports them (free counts memory
    zgrad keeps for reuse as used: :func:`empty_cache` gives it back); in the simulator, the host's.

    Raises:
        ZgradError: no CUDA device can be used here, or the index is past the last device.
        ValueError: ``device`` is not a CUDA device.
    """
    _require_cuda_device(device)
    return dispatch.backend("cuda").memory_info()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether bfloat16 tensors compute on the device: natively from compute capability 8.0 (the
    tensor cores' products), else through float32 when ``including_emulation`` (as zgrad computes
    every other bfloat16 op). False where CUDA cannot be used."""
    if not is_available():
        return False
    return including_emulation or get_device_capability() >= (8, 0)


def synchronize() -> None:
    """Block until every kernel and copy the calling thread queued on the device has finished.

    Raises:
        ZgradError: no CUDA device can be used here.
    """
    dispatch.backend("cuda").synchronize()


def memory_allocated(device: Device | str | int | None = None) -> int:
    """Bytes of device memory the tensors (and other arrays zgrad allocated) occupy now; 0 where
    CUDA cannot be used, as in PyTorch.

    ``device`` (None, an index, ``"cuda"``, ``"cuda:0"`` or a device) must be a CUDA device zgrad
    can use; zgrad computes on one. Memory from elsewhere (tensors imported through DLPack) is not
    counted.

    Raises:
        ZgradError: no CUDA device can be used here, or the index is past the last device.
        ValueError: ``device`` is not a CUDA device.
    """
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: Device | str | int | None = None) -> int:
    """The most bytes :func:`memory_allocated` has counted since the process started or
    :func:`reset_peak_memory_stats` (``device`` as there)."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: Device | str | int | None = None) -> int:
    """Bytes held by zgrad's allocations: in use (:func:`memory_allocated`) plus freed and kept for
    reuse by the thread that allocated them (``device`` as in :func:`memory_allocated`). The
    driver's memory pool beneath may hold more; :func:`empty_cache` gives both back."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: Device | str | int | None = None) -> int:
    """The most bytes :func:`memory_reserved` has counted since the process started or
    :func:`reset_peak_memory_stats`."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def memory_stats(device: Device | str | int | None = None) -> dict[str, int]:
    """PyTorch's memory statistics that zgrad keeps, under PyTorch's keys, sorted:
    ``allocated_bytes.all.current`` / ``.peak``, ``reserved_bytes.all.current`` / ``.peak``,
    ``inactive_split_bytes.all.current`` (kept for reuse), ``allocation.all.allocated`` /
    ``.freed``, ``num_alloc_retries`` (allocations that emptied the cache and tried again),
    ``num_ooms``, and zgrad's own ``allocation.all.cache_hits`` (allocations served from the
    cache). ``device`` as in :func:`memory_allocated`. Empty where CUDA cannot be used, as in
    PyTorch."""
    if not is_available():
        return {}
    _require_cuda_device(device)
    return dict(sorted(dispatch.backend("cuda").memory_stats().items()))


def reset_peak_memory_stats(device: Device | str | int | None = None) -> None:
    """Start the peaks of :func:`max_memory_allocated` and :func:`max_memory_reserved` again from
    the current values (nothing where CUDA cannot be used)."""
    if not is_available():
        return
    _require_cuda_device(device)
    dispatch.backend("cuda").reset_peak_memory_stats()


def empty_cache() -> None:
    """Give the device memory kept for reuse back to the driver, so that other processes (and
    libraries that allocate their own) can use it: freed allocations every thread kept, then on a
    GPU the unused memory of the driver's pool, after waiting for the device. Memory in use is
    untouched. Does nothing where CUDA cannot be used, as in PyTorch."""
    if is_available():
        dispatch.backend("cuda").empty_cache()


def _require_cuda_device(device: Device | str | int | None) -> None:
    if device is None:
        dispatch.backend("cuda")
        return
    if is_device_index(device) and device < 0:
        raise ValueError(f"Expected a non-negative CUDA device index, but got: {device}")
    usable_cuda_device(device)


def manual_seed(seed: int) -> None:
    """Seed the CUDA default generator (``zgrad.manual_seed`` seeds it and the CPU's).

    Raises:
        TypeError: ``seed`` is not an int.
        ValueError: ``seed`` is outside [-2**63, 2**64).
    """
    cuda_default_generator.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed the CUDA default generator of every device (zgrad has one): :func:`manual_seed`."""
    manual_seed(seed)


def seed() -> None:
    """Seed the CUDA default generator from the OS (non-deterministic)."""
    cuda_default_generator.seed()


def seed_all() -> None:
    """Seed the CUDA default generator of every device from the OS: :func:`seed`."""
    seed()


def initial_seed() -> int:
    """The seed the CUDA default generator's stream started from."""
    return cuda_default_generator.initial_seed()


def get_rng_state(device: object = "cuda") -> Tensor:
    """The CUDA default generator's state as a uint8 tensor (for :func:`set_rng_state`)."""
    return cuda_default_generator.get_state()


def set_rng_state(new_state: Tensor, device: object = "cuda") -> None:
    """Restore the CUDA default generator's state from :func:`get_rng_state`.

    Raises:
        TypeError: ``new_state`` is not a uint8 tensor.
        ZgradError: it is not a state a zgrad generator gave.
    """
    cuda_default_generator.set_state(new_state)

"""Keep freed host memory for the next tensor instead of handing it back to the kernel.

glibc serves blocks above a sliding threshold (128 KiB at start) with ``mmap`` and returns them
with ``munmap`` when freed, and it trims the heap top once more than 128 KiB is free. A worker
that allocates and frees the same megabyte-sized arrays every step (activations, gradients,
received tensors) therefore touches fresh zeroed pages every step, which often costs more than
the arithmetic on them (figures: bench/README.md, Design figures).

``tune_host_allocator`` fixes the mmap threshold at glibc's largest (32 MiB), so smaller blocks
come from the heap and are reused, and lets up to ``keep_free_mb`` of freed memory stay with the
process. Resident memory then stays near the job's high-water mark, as with PyTorch's caching
allocators. It changes process-wide malloc settings, so it runs only where zgrad owns the
process's workload: ``init_rpc`` applies it unless ``[memory] tune_malloc = false``.
"""

from __future__ import annotations

import ctypes
import platform
import threading

__all__ = ["MMAP_THRESHOLD_BYTES", "tune_host_allocator"]

# glibc's mallopt options (malloc.h) and the largest mmap threshold it accepts on 64-bit
# (HEAP_MAX_SIZE / 2); anything larger is refused.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20

_lock = threading.Lock()
_applied: int | None = None


def tune_host_allocator(keep_free_mb: int) -> bool:
    """Apply the settings above once per process; return whether they are in effect.

    Returns False (and changes nothing) where the C library is not glibc. A second call with a
    different ``keep_free_mb`` updates the trim threshold.
    """
    global _applied
    if keep_free_mb < 0:
        raise ValueError(f"keep_free_mb must be >= 0, got {keep_free_mb}")
    with _lock:
        if _applied == keep_free_mb:
            return True
        if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
            return False
        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
        ok = ok and mallopt(_M_TRIM_THRESHOLD, keep_free_mb << 20) == 1
        _applied = keep_free_mb if ok else None
        return ok

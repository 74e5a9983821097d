"""Keep freed host memory for the next tensor instead of handing it back to the kernel.

glibc serves blocks above a sliding threshold (128 KiB at start) with ``mmap`` and returns them
with ``munmap`` when freed, and it trims the heap top once more than 128 KiB is free. A worker
that allocates and frees the same megabyte-sized arrays every step (activations, gradients,
received tensors) therefore touches fresh zeroed pages every step, which often costs more than
the arithmetic on them (figures: bench/README.md, Design figures).

``tune_host_allocator`` fixes the mmap threshold at glibc's largest (32 MiB) and turns off
mapping blocks on their own, so blocks of every size come from the heap and are reused (above
32 MiB glibc would otherwise map each one afresh, and a 64 MiB tensor's pages would be faulted in
on every allocation, with stalls of tens of milliseconds on a VM). It lets up to
``keep_free_mb`` of freed memory at the heap's top stay with the process; memory freed below it
stays until the process reuses it. Resident memory then stays near the job's high-water mark, as
with PyTorch's caching allocators. Threads other than the main one still map blocks of 64 MiB and
more (the size of glibc's per-thread heaps).

It changes process-wide malloc settings, so it runs only once zgrad's own workload starts:
``init_rpc`` and ``init_process_group`` apply it unless ``[memory] tune_malloc = false``
(:func:`leave_host_allocator` then records the choice), and otherwise the process's first local
backward pass or DataLoader iterator applies it (:func:`tune_for_training`) unless
``ZGRAD_TUNE_MALLOC=0``.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading

__all__ = ["DEFAULT_KEEP_FREE_MB", "MMAP_THRESHOLD_BYTES", "TUNE_ENVIRONMENT_VARIABLE", "leave_host_allocator",
           "tune_for_training", "tune_host_allocator"]

# glibc's mallopt options (malloc.h) and the largest mmap threshold it accepts on 64-bit
# (HEAP_MAX_SIZE / 2); anything larger is refused.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
MMAP_THRESHOLD_BYTES = 32 << 20

DEFAULT_KEEP_FREE_MB = 256  # the default of ``[memory] keep_free_mb``
TUNE_ENVIRONMENT_VARIABLE = "ZGRAD_TUNE_MALLOC"
_DECLINING = ("0", "false", "no", "off")

_lock = threading.Lock()
_applied: int | None = None
_settled = False  # tuned, or left alone on purpose: a backward pass changes nothing then


def tune_host_allocator(keep_free_mb: int) -> bool:
    """Apply the settings above once per process; return whether they are in effect.

    Returns False (and changes nothing) where the C library is not glibc. A second call with a
    different ``keep_free_mb`` updates the trim threshold.
    """
    global _applied, _settled
    if keep_free_mb < 0:
        raise ValueError(f"keep_free_mb must be >= 0, got {keep_free_mb}")
    with _lock:
        _settled = True
        if _applied == keep_free_mb:
            return True
        if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
            return False
        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
        ok = ok and mallopt(_M_MMAP_MAX, 0) == 1
        ok = ok and mallopt(_M_TRIM_THRESHOLD, keep_free_mb << 20) == 1
        _applied = keep_free_mb if ok else None
        return ok


def leave_host_allocator() -> None:
    """Record that this process keeps its allocator as it is (``[memory] tune_malloc = false``),
    so that no later backward pass tunes it. Settings already applied stay."""
    global _settled
    _settled = True


def tune_for_training() -> None:
    """Tune the allocator (:func:`tune_host_allocator` with :data:`DEFAULT_KEEP_FREE_MB`) on the
    process's first call, run by every local backward pass and DataLoader iterator, unless ``init_rpc`` or
    ``init_process_group`` settled it already or ``ZGRAD_TUNE_MALLOC`` is 0 (or false, no, off)."""
    if _settled:
        return
    if os.environ.get(TUNE_ENVIRONMENT_VARIABLE, "1").strip().lower() in _DECLINING:
        leave_host_allocator()
        return
    tune_host_allocator(DEFAULT_KEEP_FREE_MB)

"""Freed device allocations kept for reuse by the thread that made them (PyTorch's caching
allocator's idea), and the memory statistics ``zgrad.cuda.memory_allocated`` and its kin report.

Why: a training step allocates and frees the same few hundred temporaries every step. Each new
allocation costs the host a driver call, Numba's ``MemoryPointer`` with its finalizer, a
``DeviceNDArray`` and the direct launcher's first read of its fields; each free another driver
call. A freed allocation kept here is handed out again, as the same array object with those fields
already read, to the next request of the same dtype and length on the same thread.

The rules:

- an allocation is reused only by the thread that made it, whose stream orders every kernel it
  queued on the memory before any kernel of the next user (the stream-ordered pool's rule for its
  own frees, :mod:`~zgrad.kernels.cuda.memory_pool`); an allocation dropped on another thread goes
  back to the pool, through the pool's handling of frees from other threads;
- an allocation whose memory something else still views when it goes (a kernel argument made from
  it, an export), or whose memory is already freed, is not kept: it is freed as before, when the
  last view goes;
- what is kept is bounded by the peak of bytes in use so far (the most a step has needed at once);
  past that a freed allocation goes back to the pool;
- an allocation that fails for want of memory empties every thread's cache and tries once more;
  :func:`empty_cache` does it on request.

The array a cache hands out is of a subclass of the allocator's array class that adds
``__del__``: when its last reference goes, a new object of the same class takes over its fields
(the same memory pointer object, so nothing is freed) and waits in the cache. Arrays of that class
made otherwise (Numba's slices and reshapes build theirs with ``type(self)``; a copy) are not the
allocation: their fields do not carry its mark, and their ``__del__`` does nothing.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["allocate", "empty_cache", "memory_stats", "reset_peak_memory_stats"]

_LIVE = "_zgrad_live"  # in a cached allocation's __dict__: in use (True) or waiting in a cache (False)
_KEY = "_zgrad_key"  # (dtype, length): what it is reused for
_NBYTES = "_zgrad_nbytes"
_OWNER = "_zgrad_owner"  # a weak reference to the _ThreadCache of the thread that made it
_MARK = "_zgrad_mark"  # id() of the allocation's __dict__, which each successor takes over
_SOLE = "_zgrad_sole"  # references to its memory when nothing views it (the memory_holders count)
_COUNTS = "_zgrad_counts"  # the counts it was counted in, which its release updates


class _ThreadCache:
    """One thread's freed allocations, by (dtype, length)."""

    __slots__ = ("__weakref__", "blocks")

    def __init__(self) -> None:
        self.blocks: dict[tuple, list] = {}


_local = threading.local()
_caches: weakref.WeakSet = weakref.WeakSet()
_lock = threading.RLock()  # guards _counts and _caches; reentrant: the garbage collector may free a
# cached array (running _release) on this thread while it holds the lock
_counts = {"allocated": 0, "allocated_peak": 0, "allocated_ever_peak": 0, "cached": 0, "reserved_peak": 0,
           "allocations": 0, "frees": 0, "cache_hits": 0, "alloc_retries": 0, "ooms": 0}


def _thread_cache() -> _ThreadCache:
    cache = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = _ThreadCache()
        with _lock:
            _caches.add(cache)
    return cache


def allocate(length: int, dtype: np.dtype, new: Callable[[int, np.dtype], Any],
             is_out_of_memory: Callable[[BaseException], bool], memory_holders: Callable[[Any], int]) -> Any:
    """A 1-D device array of ``length`` elements of ``dtype``: one this thread freed, else
    ``new(length, dtype)``. When ``new`` raises an error ``is_out_of_memory`` accepts, every
    cache is emptied and ``new`` tried once more. ``memory_holders(array)`` counts the references
    to an array's memory (a view of it holds one; huge once the memory is freed): an array is kept
    only if the count is what it was when the array was new."""
    cache = getattr(_local, "cache", None) or _thread_cache()
    key = (dtype, length)
    blocks = cache.blocks.get(key)
    if blocks:
        try:
            array = blocks.pop()
        except IndexError:  # emptied by another thread's empty_cache meanwhile
            array = None
        if array is not None:
            fields = array.__dict__
            fields[_LIVE] = True
            nbytes = fields[_NBYTES]
            with _lock:
                fields[_COUNTS]["cached"] -= nbytes
                fields[_COUNTS] = _counts
                _counts["cache_hits"] += 1
                _in_use(nbytes)
            return array
    try:
        array = new(length, dtype)
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        with _lock:
            _counts["alloc_retries"] += 1
        empty_cache()
        try:
            array = new(length, dtype)
        except Exception as again:
            if is_out_of_memory(again):
                with _lock:
                    _counts["ooms"] += 1
            raise
    nbytes = length * dtype.itemsize
    array.__class__ = _cached_class(type(array), memory_holders)
    fields = array.__dict__
    fields.update({_LIVE: True, _KEY: key, _NBYTES: nbytes, _OWNER: weakref.ref(cache), _MARK: id(fields)})
    fields[_SOLE] = memory_holders(array)
    with _lock:
        fields[_COUNTS] = _counts
        _in_use(nbytes)
    return array


def _in_use(nbytes: int) -> None:
    """Count ``nbytes`` more in use (under ``_lock``)."""
    allocated = _counts["allocated"] = _counts["allocated"] + nbytes
    _counts["allocations"] += 1
    if allocated > _counts["allocated_peak"]:
        _counts["allocated_peak"] = allocated
    if allocated > _counts["allocated_ever_peak"]:
        _counts["allocated_ever_peak"] = allocated
    reserved = allocated + _counts["cached"]
    if reserved > _counts["reserved_peak"]:
        _counts["reserved_peak"] = reserved


def _release(array: Any, _finalizing: Callable[[], bool] = sys.is_finalizing) -> None:
    """The ``__del__`` of a cached class: a freed allocation's fields move to a new object that
    waits in its thread's cache (see the module docstring); a cached one's memory goes back.
    Nothing is counted or kept once the interpreter is shutting down (its modules may be gone)."""
    fields = array.__dict__
    if _finalizing() or fields.get(_MARK) != id(fields):  # not the allocation itself (module docstring)
        return
    nbytes = fields[_NBYTES]
    counts = fields[_COUNTS]
    if not fields[_LIVE]:
        with _lock:
            counts["cached"] -= nbytes
        return
    owner = fields[_OWNER]()
    keep = (owner is not None and getattr(_local, "cache", None) is owner
            and type(array)._zgrad_memory_holders(array) <= fields[_SOLE])
    with _lock:
        counts["allocated"] -= nbytes
        counts["frees"] += 1
        keep = keep and counts["cached"] + nbytes <= counts["allocated_ever_peak"]
        if keep:
            counts["cached"] += nbytes
    if keep:
        successor = object.__new__(type(array))
        fields[_LIVE] = False
        successor.__dict__ = fields
        blocks = owner.blocks.get(fields[_KEY])
        if blocks is None:
            blocks = owner.blocks[fields[_KEY]] = []
        blocks.append(successor)


@functools.cache
def _cached_class(base: type, memory_holders: Callable[[Any], int]) -> type:
    return type(base.__name__, (base,), {"__del__": _release, "__module__": base.__module__, "__doc__": base.__doc__,
                                         "_zgrad_memory_holders": staticmethod(memory_holders)})


def empty_cache() -> None:
    """Give every thread's kept allocations back to the allocator beneath (the memory pool)."""
    with _lock:
        caches = list(_caches)
    for cache in caches:
        blocks = cache.blocks
        cache.blocks = {}
        blocks.clear()


def memory_stats() -> dict[str, int]:
    """The counts behind ``zgrad.cuda.memory_stats`` (bytes, and numbers of events)."""
    with _lock:
        counts = dict(_counts)
    return {
        "allocated_bytes.all.current": counts["allocated"],
        "allocated_bytes.all.peak": counts["allocated_peak"],
        "reserved_bytes.all.current": counts["allocated"] + counts["cached"],
        "reserved_bytes.all.peak": counts["reserved_peak"],
        "inactive_split_bytes.all.current": counts["cached"],
        "allocation.all.allocated": counts["allocations"],
        "allocation.all.freed": counts["frees"],
        "allocation.all.cache_hits": counts["cache_hits"],
        "num_alloc_retries": counts["alloc_retries"],
        "num_ooms": counts["ooms"],
    }


def reset_peak_memory_stats() -> None:
    """Start the peaks of bytes allocated and reserved again from their current values."""
    with _lock:
        _counts["allocated_peak"] = _counts["allocated"]
        _counts["reserved_peak"] = _counts["allocated"] + _counts["cached"]

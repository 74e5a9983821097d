"""How many threads zgrad's CPU kernels compute on: ``zgrad.set_num_threads`` /
``get_num_threads`` (intra-op, as PyTorch's) and ``set_num_interop_threads`` /
``get_num_interop_threads``.

Intra-op threads are the threads of Numba's pool that a parallel kernel
(:class:`zgrad.kernels._jit.ParallelKernel`) splits its loop over. The pool's size is fixed when it
starts (``NUMBA_NUM_THREADS``, by default the number of cores); ``set_num_threads`` chooses how
many of them each later parallel call uses, for every thread of the process (Numba's own setting
is per calling thread; each parallel call applies this one). One thread makes every kernel run
its serial variant. NumPy's BLAS (matmul, convolution) keeps its own threads.

Nothing here imports Numba or starts its threading layer until asked for the default count.
"""

from __future__ import annotations

import os
import threading

__all__ = ["INTRA_OP_THREADS", "PARALLEL_MIN_SIZE", "PARALLEL_MIN_SIZE_HEAVY", "PARALLEL_MIN_SIZE_MULTI_STREAM",
           "IntraOpThreads", "get_num_interop_threads", "get_num_threads", "set_num_interop_threads", "set_num_threads"]

# From these element counts up a parallel kernel runs its parallel variant, and an op backed by a
# numpy ufunc splits its loop (zgrad.kernels.cpu.parts.ufunc_in_parts); `python bench/kernels.py
# --thresholds` measures them (medians; figures: bench/README.md, Design figures). Threads sleep
# between regions, so a parallel call first wakes one, which on this project's 2-core VMs takes
# about 45 us: a loop
# over one or two arrays (relu, an activation's backward, a sum) wins from about 2**21 elements;
# an optimizer step (four to seven arrays) from 2**20 (PARALLEL_MIN_SIZE_MULTI_STREAM); a loop
# that evaluates exp/log/tanh per element, or a row of softmax, from about 2**19.
# On a machine shared with other busy processes a parallel call can instead wait a scheduler time
# slice (ms) for its second thread: give each process no more NUMBA_NUM_THREADS than free cores.
PARALLEL_MIN_SIZE = 1 << 21
PARALLEL_MIN_SIZE_MULTI_STREAM = 1 << 20
PARALLEL_MIN_SIZE_HEAVY = 1 << 19


class IntraOpThreads:
    """The process's intra-op and inter-op thread counts (one instance, :data:`INTRA_OP_THREADS`)."""

    def __init__(self) -> None:
        self._requested: int | None = None  # None: the pool's size
        self._in_use: int | None = None  # min(requested, pool size), known after the first ask
        self._interop: int | None = None
        self._lock = threading.Lock()

    @staticmethod
    def pool_size() -> int:
        """The number of threads of Numba's pool (``NUMBA_NUM_THREADS``; imports Numba)."""
        import numba
        return int(numba.config.NUMBA_NUM_THREADS)

    def requested(self) -> int:
        """The count last set, else the pool's size."""
        requested = self._requested
        return self.pool_size() if requested is None else requested

    def in_use(self) -> int:
        """The threads a parallel call runs on: the count set, at most the pool's size (asked on
        every kernel call, so kept once known)."""
        in_use = self._in_use
        if in_use is None:
            in_use = self._in_use = min(self.requested(), self.pool_size())
        return in_use

    def set(self, count: int) -> None:
        self._requested = count
        self._in_use = None

    def interop(self) -> int:
        interop = self._interop
        return (os.cpu_count() or 1) if interop is None else interop

    def set_interop(self, count: int) -> None:
        """Record the inter-op count; PyTorch allows it once.

        Raises:
            RuntimeError: it was set before.
        """
        with self._lock:
            if self._interop is not None:
                raise RuntimeError("Error: cannot set number of interop threads after parallel work has started "
                                   "or set_num_interop_threads called")
            self._interop = count


INTRA_OP_THREADS = IntraOpThreads()


def _positive_count(count: object, name: str) -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise RuntimeError(f"{name} expects an int, but got {type(count).__name__}")
    if count <= 0:
        raise RuntimeError(f"{name} expects a positive integer")
    return count


def set_num_threads(int: int) -> None:  # noqa: A002 - PyTorch's argument name
    """Make parallel CPU kernels split their work over ``int`` threads (at most
    ``NUMBA_NUM_THREADS``, the size of Numba's pool), for every thread of the process; 1 runs every
    kernel serially.

    Raises:
        RuntimeError: a count below 1, or not an int (PyTorch's messages).
    """
    INTRA_OP_THREADS.set(_positive_count(int, "set_num_threads"))


def get_num_threads() -> int:
    """The number of threads parallel CPU kernels use: the last :func:`set_num_threads`, else
    ``NUMBA_NUM_THREADS`` (imports Numba; does not start its threads)."""
    return INTRA_OP_THREADS.requested()


def set_num_interop_threads(int: int) -> None:  # noqa: A002 - PyTorch's argument name
    """Set the number of inter-op threads, once, as PyTorch allows. zgrad runs no inter-op pool of
    its own (ops run on the thread that calls them, each parallel kernel on the intra-op threads),
    so the count is only recorded and read back by :func:`get_num_interop_threads`.

    Raises:
        RuntimeError: a count below 1, not an int, or a second call (PyTorch's messages).
    """
    INTRA_OP_THREADS.set_interop(_positive_count(int, "set_num_interop_threads"))


def get_num_interop_threads() -> int:
    """The inter-op thread count: the one set, else the number of cores (PyTorch's default)."""
    return INTRA_OP_THREADS.interop()

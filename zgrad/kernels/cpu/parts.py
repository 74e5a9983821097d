"""Host work split into parts that run at once on Python threads, numpy's BLAS held at one
thread meanwhile.

A loop of many small matrix products (the Winograd convolution's: 16 products of 64 x 64 by
64 x 512 per chunk of samples) gains little from BLAS's own threads, which split each product and
meet after it. Split between Python threads instead, each product on one BLAS thread, the loop
scales with the threads; the kernels and the products release the GIL.

That holds only while no BLAS thread spins: OpenBLAS's threads busy-wait after each
multi-threaded product, by default for about 0.1 s, and on two cores a part that runs meanwhile
shares its core with one. In a small convolutional network whose other products ran on two BLAS
threads, splitting its convolutions made the training step slower than leaving their products to
BLAS; with the spin bounded to 2^20 cycles (:mod:`zgrad.kernels.blas`, as zgrad sets it when
imported before numpy) the split step was a quarter faster (figures: bench/README.md, Design
figures). So :func:`run_in_parts` splits where numpy's BLAS runs one thread or spins briefly, and
otherwise runs the loop in one part on the calling thread, its products on BLAS's threads.

Part 0 runs on the calling thread, the others on a pool of ``zgrad.get_num_threads() - 1`` threads
started on first use (again in a forked child, whose copy of the pool has no threads).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from zgrad.kernels.blas import BLAS
from zgrad.kernels.scratch import Workspace, workspace
from zgrad.kernels.threads import INTRA_OP_THREADS

__all__ = ["run_in_parts"]


class _Pool:
    """The helper threads, started on first use and again in a forked child."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._size = 0
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._executor, self._size = None, 0

    def executor(self, size: int) -> ThreadPoolExecutor:
        with self._lock:
            if self._size < size:
                if self._executor is not None:
                    self._executor.shutdown(wait=False)
                self._executor = ThreadPoolExecutor(size, thread_name_prefix="zgrad-intra-op")
                self._size = size
            return self._executor


_POOL = _Pool()


def run_in_parts(part: Callable[[int, int, Workspace], None], tasks: int, scratch: Workspace) -> None:
    """Call ``part(index, parts, scratch)`` for index in range(parts), at once on as many threads,
    parts = min(tasks, ``zgrad.get_num_threads()``), with numpy's BLAS held at one thread
    meanwhile; one part (on the BLAS's threads) where they spin unbounded (see the module).
    Part 0 runs on the calling thread with ``scratch``; every other part gets a workspace of its
    own. The first error raised by a part is raised here, after every part has finished."""
    parts = max(1, min(tasks, INTRA_OP_THREADS.in_use()))
    if parts > 1 and BLAS.threads() > 1 and not BLAS.spin_is_bounded():
        parts = 1
    if parts == 1:
        part(0, 1, scratch)
        return
    with BLAS.one_thread():
        futures = [_POOL.executor(parts - 1).submit(_with_workspace, part, index, parts)
                   for index in range(1, parts)]
        try:
            part(0, parts, scratch)
        finally:
            errors = [future.exception() for future in futures]
    for error in errors:
        if error is not None:
            raise error


def _with_workspace(part: Callable[[int, int, Workspace], None], index: int, parts: int) -> None:
    with workspace() as scratch:
        part(index, parts, scratch)

"""Host work split into parts that run at once on Python threads: loops of products, numpy's BLAS
held at one thread meanwhile (:func:`run_in_parts`), and numpy's element-wise loops, which run on
one thread (:func:`ufunc_in_parts`).

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

numpy's ufuncs release the GIL inside their loops but run them on the calling thread: where torch
splits an element-wise op between its threads, zgrad's ops backed by a ufunc (``+``, ``*``,
``sin``, ``bitwise_and``) would run on one core. :func:`ufunc_in_parts` cuts a large call into a
contiguous range per thread; waking a pool thread costs about as much as a parallel Numba region
(figures: bench/README.md, Design figures), so the same thresholds apply.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from zgrad.kernels.blas import BLAS
from zgrad.kernels.scratch import Workspace, workspace
from zgrad.kernels.threads import INTRA_OP_THREADS

__all__ = ["run_in_parts", "ufunc_in_parts"]


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
                self._executor = ThreadPoolExecutor(size, thread_name_prefix="zgrad-intra-op",
                                                    initializer=_mark_pool_thread)
                self._size = size
            return self._executor


_POOL = _Pool()
_POOL_THREAD = threading.local()


def _mark_pool_thread() -> None:
    _POOL_THREAD.member = True


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
    def indexed(index: int) -> None:
        if index == 0:
            part(0, parts, scratch)
        else:
            _with_workspace(part, index, parts)

    with BLAS.one_thread():
        _run_parts(indexed, parts)


def _run_parts(part: Callable[[int], None], parts: int) -> None:
    """``part(index)`` for index in range(parts): 0 on the calling thread, the others on the pool;
    the first error raised by a part is raised here, after every part has finished. A part that
    splits again runs its own parts in turn: waiting for the pool from a pool thread could wait
    for itself."""
    if getattr(_POOL_THREAD, "member", False):
        for index in range(parts):
            part(index)
        return
    futures = [_POOL.executor(parts - 1).submit(part, index) for index in range(1, parts)]
    try:
        part(0)
    finally:
        errors = [future.exception() for future in futures]
    for error in errors:
        if error is not None:
            raise error


def ufunc_in_parts(ufunc: np.ufunc, operands: tuple, out: np.ndarray, min_size: int) -> np.ndarray:
    """``ufunc(*operands, out=out)``, cut into a contiguous range of elements per thread
    (``zgrad.get_num_threads()``) where out has at least ``min_size`` elements, out is C-ordered,
    every array operand is a number, a 0-d array or a C-ordered array of out's shape, and none
    overlaps out unless it is out itself (an in-place op); else one call. numpy's error state
    (``np.errstate``) of the calling thread applies to every part."""
    parts = 1 if out.size < min_size else INTRA_OP_THREADS.in_use()
    if parts == 1 or not _splittable(operands, out):
        return ufunc(*operands, out=out)
    flat_out = out.reshape(-1)
    flat = [(v.reshape(-1), True) if isinstance(v, np.ndarray) and v.ndim else (v, False) for v in operands]
    bounds = [out.size * index // parts for index in range(parts + 1)]
    errors = np.geterr()

    def part(index: int) -> None:
        start, stop = bounds[index], bounds[index + 1]
        with np.errstate(**errors):
            ufunc(*(v[start:stop] if sliced else v for v, sliced in flat), out=flat_out[start:stop])

    _run_parts(part, parts)
    return out


def _splittable(operands: tuple, out: np.ndarray) -> bool:
    if not out.flags.c_contiguous:
        return False
    for v in operands:
        if not isinstance(v, np.ndarray) or v.ndim == 0:
            continue
        if v.shape != out.shape or not v.flags.c_contiguous:
            return False
        if np.may_share_memory(v, out) and v.__array_interface__["data"][0] != out.__array_interface__["data"][0]:
            return False  # a shifted view of out: numpy's one call buffers it, parts would not
    return True


def _with_workspace(part: Callable[[int, int, Workspace], None], index: int, parts: int) -> None:
    with workspace() as scratch:
        part(index, parts, scratch)

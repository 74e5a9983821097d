"""numpy's BLAS as zgrad's CPU kernels use it: how long OpenBLAS's threads spin, how many threads
it computes on, and regions where it computes on one.

**The spin.** After each multi-threaded product, OpenBLAS's threads busy-wait for the next one,
by default for 2^28 time-stamp cycles (about 0.1 s on a 2.6 GHz CPU), before they sleep. Work that
follows on other threads (zgrad's parallel kernels, the intra-op parts of
:mod:`zgrad.kernels.cpu.parts`) then shares its cores with threads that do nothing.

OpenBLAS reads ``OPENBLAS_THREAD_TIMEOUT`` (an exponent, 4 to 30) once, when it starts its threads
as numpy loads it. :func:`bound_openblas_spin` sets it to :data:`SPIN_TIMEOUT` (2^20 cycles, about
0.4 ms) where it is unset and numpy is not loaded yet; importing this module calls it, and
``zgrad/__init__`` imports it before numpy. A program that imports numpy before zgrad keeps
OpenBLAS's default unless it sets the variable itself. Products that follow one another (a
training step's) still find the threads spinning: the gaps between them are far shorter.

**The threads.** :data:`BLAS` reads numpy's BLAS libraries through threadpoolctl and can hold
them at one thread while a loop of products splits between zgrad's own threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import sys
import threading
from collections.abc import Callable, Iterator

__all__ = ["BLAS", "SPIN_TIMEOUT", "bound_openblas_spin", "blas_threads"]

SPIN_TIMEOUT = 20
"""OpenBLAS's spin, as the exponent of its time-stamp cycles, that zgrad sets where it can."""

_SPIN_VARIABLES = ("OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT")  # OpenBLAS reads the first one set
_BOUNDED_SPIN = 22  # the longest spin (about 1.6 ms) after which a loop still splits well


def bound_openblas_spin() -> None:
    """Set ``OPENBLAS_THREAD_TIMEOUT`` to :data:`SPIN_TIMEOUT` where neither it nor
    ``GOTO_THREAD_TIMEOUT`` is set and numpy (which loads OpenBLAS) is not imported yet.

    Child processes inherit the variable. Where numpy is already loaded it changes nothing, so
    the environment keeps saying what OpenBLAS read."""
    if "numpy" in sys.modules or any(name in os.environ for name in _SPIN_VARIABLES):
        return
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(SPIN_TIMEOUT)


def _spin_exponent() -> int | None:
    for name in _SPIN_VARIABLES:
        if name in os.environ:
            try:
                return min(max(int(os.environ[name]), 4), 30)  # OpenBLAS clamps it so
            except ValueError:
                return None  # OpenBLAS's atoi reads 0, clamped to 4; say unknown rather than guess
    return None


def _openblas_setter(library) -> Callable[[int], None] | None:
    """OpenBLAS's own ``openblas_set_num_threads`` in ``library`` (threadpoolctl's controller), or
    None. threadpoolctl's setter is not used: from version 3.7 it changes OpenBLAS's count only on
    the first thread that set it and silently does nothing on any other, and zgrad's kernels run
    on whichever thread calls them."""
    if library.internal_api != "openblas":
        return None
    dynlib = ctypes.CDLL(library.filepath)  # loaded already: the same handle
    for prefix, suffix in itertools.product(("", "scipy_"), ("", "64_", "_64")):
        setter = getattr(dynlib, f"{prefix}openblas_set_num_threads{suffix}", None)
        if setter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], None
            return setter
    return None


class Blas:
    """numpy's BLAS libraries as threadpoolctl finds them (looked up on first use), and regions in
    which they compute on one thread (one instance, :data:`BLAS`)."""

    def __init__(self) -> None:
        self._controllers: list | None = None
        self._setters: list = []
        self._lock = threading.Lock()
        self._regions = 0
        self._restore: list[tuple[Callable[[int], None], int]] = []
        os.register_at_fork(after_in_child=self._leave_regions_in_child)

    def _libraries(self) -> list:
        if self._controllers is None:
            from threadpoolctl import ThreadpoolController
            controllers = ThreadpoolController().select(user_api="blas").lib_controllers
            self._setters = [_openblas_setter(library) for library in controllers]
            self._controllers = controllers
        return self._controllers

    def threads(self) -> int:
        """The most threads any of them computes a product on now (1 where none is found)."""
        return max((library.num_threads for library in self._libraries()), default=1)

    def spin_is_bounded(self) -> bool:
        """Whether every library's threads sleep soon after a product, and zgrad can hold it at one
        thread: OpenBLAS with its own pthreads pool, whose spin its environment variable bounded to
        at most 2^22 cycles. Other libraries (MKL, BLIS, OpenBLAS built with OpenMP) answer False."""
        exponent = _spin_exponent()
        if exponent is None or exponent > _BOUNDED_SPIN:
            return False
        libraries = self._libraries()
        return all(getattr(library, "threading_layer", None) == "pthreads" and setter is not None
                   for library, setter in zip(libraries, self._setters))

    @contextlib.contextmanager
    def one_thread(self) -> Iterator[None]:
        """Compute every OpenBLAS product on one thread inside the block, for the whole process;
        the counts come back when the last of the blocks open at once (on any thread) ends. Other
        libraries keep their count."""
        with self._lock:
            if self._regions == 0:
                self._restore = [(setter, library.num_threads)
                                 for library, setter in zip(self._libraries(), self._setters)
                                 if setter is not None and library.num_threads > 1]
                for setter, _ in self._restore:
                    setter(1)
            self._regions += 1
        try:
            yield
        finally:
            with self._lock:
                self._regions -= 1
                if self._regions == 0:
                    self._give_back()

    def _give_back(self) -> None:
        for setter, threads in self._restore:
            setter(threads)
        self._restore = []

    def _leave_regions_in_child(self) -> None:
        """A child forked inside a region has none of the threads that were in it."""
        self._lock = threading.Lock()
        if self._regions:
            self._regions = 0
            self._give_back()


BLAS = Blas()

bound_openblas_spin()


def blas_threads() -> int:
    """How many threads numpy's BLAS computes a product on (as set now, by its environment
    variable or at run time)."""
    return BLAS.threads()

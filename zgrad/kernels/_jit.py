"""Every Numba option of zgrad's CPU kernels, in one place (the numbagg pattern).

Kernels are decorated with :func:`kernel` (one serial variant) or :func:`parallel_kernel` (a
serial and a ``parallel=True`` variant, picked per call by the size of the first argument; with
``NUMBA_NUM_THREADS=1`` always the serial one).
Either way nothing compiles at import: dispatchers carry no signatures and compile on their first
call, one specialisation per dtype, cached on disk (``cache=True``; set ``NUMBA_CACHE_DIR`` to move
the cache). Importing this module does not start Numba's threading layer, so a process may still
fork safely after importing a kernel module of :mod:`zgrad.kernels.cpu.kernels`; the layer starts
on the first parallel call with a pool of ``NUMBA_NUM_THREADS`` threads (Numba reads it; zgrad never
overrides it), of which each parallel call uses ``zgrad.get_num_threads()`` (:mod:`zgrad.kernels.threads`).

Options, and why:

- ``nogil=True``: a kernel releases the GIL while it runs, so RPC and transport threads (and
  DDP's gradient communication) proceed during long kernels.
- ``error_model="numpy"``: float division by zero gives inf/nan like numpy instead of raising
  (and the per-element zero checks of the Python model would stop vectorisation).
- ``fastmath={"contract"}``: lets LLVM fuse a*b+c into one FMA (one rounding instead of two, as
  PyTorch's vectorised CPU kernels do). No ``nnan``/``ninf``: NaN and inf propagate exactly.
- Reductions add ``"reassoc"`` so LLVM may split a running sum into vector lanes. It is given only
  to kernels whose reductions tolerate reordering; helper math
  (:mod:`zgrad.kernels.cpu.kernels.vector_math`) is compiled separately without it, so range
  reductions such as ``x - n*ln2_hi - n*ln2_lo`` stay exact.
- Running maxima and minima (``reduction="extremes"``) add ``"nsz"`` too: LLVM splits a chain of
  NaN-propagating maxima into vector lanes only if the sign of a zero may go either way (the
  max of -0.0 and +0.0 is then either, as in PyTorch's vector kernels). NaN still wins.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import pathlib
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Literal

import numba
from llvmlite import binding as llvm_binding
from numba.core import sigutils
from numba.core.caching import FunctionCache, IndexDataCacheFile
from numba.core.compiler_lock import global_compiler_lock
from numba.core.errors import NumbaIRAssumptionWarning
from numba.core.registry import CPUDispatcher

from zgrad.kernels.threads import (
    INTRA_OP_THREADS,
    PARALLEL_MIN_SIZE,
    PARALLEL_MIN_SIZE_HEAVY,
    PARALLEL_MIN_SIZE_MULTI_STREAM,
)

# Threading layer: GNU OpenMP's (Numba's "omp") under the passive wait policy, where it loads.
# Its threads sleep between regions instead of spinning: spinning ones starve the BLAS threads
# that run the next matmul (an MLP training step took twice as long). Numba's workqueue layer is
# the fallback where libgomp is missing, and the layer when another library already loaded
# libgomp.so.1 into the process (torch does): one libgomp serves every caller, with the wait
# policy it read when it loaded, so zgrad's regions would spin on torch's threads (a minGPT step
# twice as slow). Workqueue runs its loops on its own threads while the caller sleeps, two
# hand-offs per region where OpenMP's caller shares the work: on two cores passive OpenMP ran
# element-wise kernels of 1M-4M elements about 1.8x faster than workqueue, and training steps
# alike (bench/README.md, Design figures). NUMBA_THREADING_LAYER or
# NUMBA_THREADING_LAYER_PRIORITY in the environment overrides the choice; OMP_WAIT_POLICY or
# GOMP_SPINCOUNT overrides the wait policy (:class:`_ThreadingLayer`). Whatever the layer, one
# parallel region runs at a time in the process (workqueue aborts the process when two threads
# launch parallel kernels at once, and zgrad runs ops from many threads): a thread that finds it
# busy runs the serial variant instead, which also avoids oversubscribing the cores.
# GNU OpenMP cannot run parallel regions in a child forked after the parent used it (Numba
# terminates such a child): after a fork every kernel runs serial in the child, whichever the
# layer (DataLoader workers are forked, as in PyTorch, whose workers run one thread).
_LAYER_VARIABLES = ("NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY")
_CHOOSE_LAYER = numba.config.THREADING_LAYER == "default" and not any(name in os.environ for name in _LAYER_VARIABLES)
if _CHOOSE_LAYER:
    numba.config.THREADING_LAYER_PRIORITY = ["omp", "workqueue", "tbb"]
_PARALLEL_REGION = threading.Lock()
_WAIT_POLICY = "OMP_WAIT_POLICY"
_PROCESS_MAPS = pathlib.Path("/proc/self/maps")

# Numba's SSA pass warns, asking for a bug report, when it meets its own renamed variables in the
# inlined vector-math helpers of the LSTM/GRU cells: a pedantic check of Numba's IR, not of the
# results, printed to users on the first compile. Only that check, and only from that pass.
warnings.filterwarnings("ignore", category=NumbaIRAssumptionWarning, module=r"numba\.core\.ssa")


def _libgomp_loaded() -> bool:
    """Whether a shared library named libgomp.so.* is mapped into this process already (a copy
    under a private name, as wheels repaired by auditwheel carry, is not shared)."""
    try:
        maps = _PROCESS_MAPS.read_text()
    except OSError:  # no procfs: judge by the library known to bring its own libgomp.so.1
        return "torch" in sys.modules
    paths = (line.rpartition(" ")[2] for line in maps.splitlines())
    return any(pathlib.PurePath(path).name.startswith("libgomp.so") for path in paths)


class _ThreadingLayer:
    """Whether this process may run parallel regions, and the start of Numba's layer (OpenMP's
    with the passive wait policy)."""

    def __init__(self) -> None:
        self.started = False
        self.forked = False  # a child forked after the parent started the layer: serial only
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        self.forked = self.forked or self.started

    def run(self, parallel: Any, args: tuple) -> Any:
        """``parallel(*args)`` on :func:`zgrad.get_num_threads` threads. The first call starts
        Numba's layer (OpenMP's, or workqueue's where libgomp is missing or already loaded: see
        above) under OMP_WAIT_POLICY=passive unless the environment sets OMP_WAIT_POLICY or
        GOMP_SPINCOUNT (libgomp reads them once, when it loads; the environment is restored after,
        so child processes see the user's)."""
        if not self.started:
            self.started = True
            if _CHOOSE_LAYER and _libgomp_loaded():
                numba.config.THREADING_LAYER = "workqueue"
            passive = not any(variable in os.environ for variable in (_WAIT_POLICY, "GOMP_SPINCOUNT"))
            if passive:
                os.environ[_WAIT_POLICY] = "passive"
            try:
                numba.set_num_threads(INTRA_OP_THREADS.in_use())  # loads the layer
            finally:
                if passive:
                    del os.environ[_WAIT_POLICY]
        numba.set_num_threads(INTRA_OP_THREADS.in_use())  # Numba's count is per calling thread
        return parallel(*args)


_LAYER = _ThreadingLayer()

__all__ = [
    "MATH_OPTIONS",
    "PARALLEL_MIN_SIZE",
    "PARALLEL_MIN_SIZE_HEAVY",
    "PARALLEL_MIN_SIZE_MULTI_STREAM",
    "ParallelKernel",
    "kernel",
    "parallel_kernel",
]


_FASTMATH = frozenset({"contract"})
_FASTMATH_REDUCTION = frozenset({"contract", "reassoc"})
_FASTMATH_EXTREMES = frozenset({"contract", "reassoc", "nsz"})


def target_has_feature(name: str) -> bool:
    """Whether Numba compiles for a CPU with feature ``name`` (LLVM's spelling: "avx512f", "f16c"):
    the features it compiles for are NUMBA_CPU_FEATURES where set, else the host's (as Numba's own
    code generator decides)."""
    features = numba.config.CPU_FEATURES
    if features is None:
        features = llvm_binding.get_host_cpu_features().flatten()
    return f"+{name}" in features.split(",")


# Options for the scalar helpers of vector_math (compiled by numba.extending.overload).
MATH_OPTIONS = {"fastmath": set(_FASTMATH), "error_model": "numpy"}


@functools.cache
def _kernel_sources_digest() -> str:
    """A hash of the kernel sources (computed on the first compile, not at import)."""
    digest = hashlib.sha256()
    for path in sorted(pathlib.Path(__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


class _LockedCacheFile(IndexDataCacheFile):
    """Numba's index and data files of one function's cache, read and written under a lock file.

    Numba's own ``save`` reads the index, picks the first free data file number, then writes the
    index and the data file: two processes compiling two signatures of one kernel at once (pytest
    workers, ranks) can both pick the same number, and the index then sends one signature to the
    other's machine code ("can't unbox array"). An exclusive ``flock`` around a save and a shared
    one around a load make each a single step.
    """

    def save(self, key, data):
        with self._locked(fcntl.LOCK_EX):
            super().save(key, data)

    def load(self, key):
        with self._locked(fcntl.LOCK_SH):
            return super().load(key)

    def _locked(self, mode: int) -> contextlib.AbstractContextManager:
        return _file_lock(self._cache_path, self._index_path + ".lock", mode)

    def compiling(self) -> contextlib.AbstractContextManager:
        """Held while this process loads or compiles a signature missing from its memory: the
        first process to miss compiles while the others wait, then they load its machine code. A
        process that waits longer than ``COMPILE_WAIT_S`` (the holder stopped or stuck) compiles
        without it, as every process did before the lock."""
        return _file_lock(self._cache_path, self._index_path + ".compiling", fcntl.LOCK_EX, COMPILE_WAIT_S)


COMPILE_WAIT_S = 60.0  # the longest one process waits for another's compile of a kernel


@contextlib.contextmanager
def _file_lock(directory: str, path: str, mode: int, wait_s: float | None = None) -> Iterator[None]:
    """A POSIX lock (``lockf``: ``mode`` LOCK_SH or LOCK_EX) on the file ``path`` (made in
    ``directory``) while the block runs; no lock where the directory takes no new file (then as
    unlocked as Numba's own cache), nor after waiting ``wait_s`` seconds for it when given. POSIX
    locks belong to the process, so a child forked while a thread holds one (a DataLoader worker)
    does not keep it held."""
    try:
        os.makedirs(directory, exist_ok=True)
        lock = open(path, "a+")  # readable and writable: a shared POSIX lock needs read access
    except OSError:
        yield
        return
    with lock:
        held = _acquire(lock, mode, wait_s)
        try:
            yield
        finally:
            if held:
                fcntl.lockf(lock, fcntl.LOCK_UN)


def _acquire(lock: Any, mode: int, wait_s: float | None) -> bool:
    """Take the lock: blocking, or (``wait_s`` given) trying with sleeps that grow to 0.1 s until
    ``wait_s`` has passed. Whether it was taken."""
    if wait_s is None:
        fcntl.lockf(lock, mode)
        return True
    deadline, pause = time.monotonic() + wait_s, 0.001
    while True:
        try:
            fcntl.lockf(lock, mode | fcntl.LOCK_NB)
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(2 * pause, 0.1)


class _KernelCache(FunctionCache):
    """Numba's on-disk cache, also keyed on every source file of zgrad.kernels (subpackages
    included), its files read and written under a lock (:class:`_LockedCacheFile`).

    Numba invalidates a cached kernel only when the kernel's own file changes, but kernels inline
    helpers from sibling modules (vector_math.py); without this an edit there would keep serving
    stale machine code.
    """

    def __init__(self, py_func):
        super().__init__(py_func)
        plain = self._cache_file
        self._cache_file = _LockedCacheFile(plain._cache_path, plain._index_name[:-len(".nbi")], plain._source_stamp)

    def _index_key(self, sig, codegen):
        return (*super()._index_key(sig, codegen), _kernel_sources_digest())


Reduction = bool | Literal["extremes"]


def _fastmath(reduction: Reduction) -> set[str]:
    if reduction == "extremes":
        return set(_FASTMATH_EXTREMES)
    return set(_FASTMATH_REDUCTION if reduction else _FASTMATH)


class _KernelDispatcher(CPUDispatcher):
    """Numba's CPU dispatcher, compiling a signature it lacks under the kernel's compile lock
    (:meth:`_LockedCacheFile.compiling`): processes that start together on a cold cache (ranks,
    pytest workers) compile each kernel once, the others load it from the cache when the first is
    done, instead of each compiling it at the same time."""

    _compiling_here = 0  # nested compiles of this dispatcher in this process (the lock is held)

    def compile(self, sig: Any) -> Any:
        args, _ = sigutils.normalize_signature(sig)
        if self._compiling_here or tuple(args) in self.overloads:
            return super().compile(sig)
        with global_compiler_lock, self._cache._cache_file.compiling():
            self._compiling_here += 1
            try:
                return super().compile(sig)
            finally:
                self._compiling_here -= 1


def _dispatcher(py_func: Callable, *, parallel: bool, reduction: Reduction) -> Any:
    dispatcher = _KernelDispatcher(py_func=py_func, locals={}, targetoptions={
        "nopython": True,
        "nogil": True,  # communication threads keep running while a kernel computes
        "parallel": parallel,
        "error_model": "numpy",
        "fastmath": _fastmath(reduction),
        "boundscheck": None,
    })
    dispatcher._cache = _KernelCache(py_func)
    return dispatcher


def _renamed_copy(py_func: Callable, suffix: str) -> Callable:
    """The same function under another qualname.

    Numba names cache files by module and qualname, not by compile options, so a serial and a
    parallel dispatcher of one function object would overwrite each other's cache entries.
    """
    copy = types.FunctionType(
        py_func.__code__, py_func.__globals__, py_func.__name__, py_func.__defaults__, py_func.__closure__
    )
    copy.__qualname__ = py_func.__qualname__ + suffix
    copy.__module__ = py_func.__module__
    copy.__doc__ = py_func.__doc__
    return copy


def kernel(py_func: Callable | None = None, *, reduction: Reduction = False) -> Any:
    """Compile ``py_func`` lazily as one serial, cached Numba kernel.

    Use it for helpers called from other kernels and for loops too small to split.
    ``reduction=True`` allows reassociating float sums, ``"extremes"`` running maxima too (see the
    module docstring).
    """
    if py_func is None:
        return functools.partial(kernel, reduction=reduction)
    return _dispatcher(py_func, parallel=False, reduction=reduction)


class ParallelKernel:
    """A serial and a ``parallel=True`` dispatcher of one loop, picked by problem size.

    Calls with ``args[0].size >= min_size`` run the parallel (``prange``) variant on
    ``zgrad.get_num_threads()`` threads, unless that is one thread. Both variants compile lazily, so a process that only ever sees small
    arrays (or runs with ``NUMBA_NUM_THREADS=1``) never compiles the parallel one.
    """

    def __init__(self, py_func: Callable, *, min_size: int, reduction: Reduction) -> None:
        self.serial = _dispatcher(py_func, parallel=False, reduction=reduction)
        self.parallel = _dispatcher(_renamed_copy(py_func, "__parallel"), parallel=True, reduction=reduction)
        self.min_size = min_size
        functools.update_wrapper(self, py_func)

    def _parallel_size(self, size: int) -> bool:
        """Whether a call whose first argument has ``size`` elements is worth the parallel variant.
        With one thread (NUMBA_NUM_THREADS=1 or set_num_threads(1)) it only costs: the calling
        thread still hands the loop to one pool thread and waits for it, two thread hand-offs at
        any size for no parallelism (figures: bench/README.md, Design figures)."""
        return size >= self.min_size and INTRA_OP_THREADS.in_use() > 1 and not _LAYER.forked

    def __call__(self, *args: Any) -> Any:
        if args[0].size < self.min_size:  # the common case, decided before any further call
            return self.serial(*args)
        if self._parallel_size(args[0].size) and _PARALLEL_REGION.acquire(blocking=False):
            try:
                return _LAYER.run(self.parallel, args)
            finally:
                _PARALLEL_REGION.release()
        return self.serial(*args)

    def task_count(self, size: int) -> int:
        """How many tasks a kernel that keeps per-task partial sums should split its work into, for
        a call whose first argument has ``size`` elements: one where the call runs serial (without
        asking Numba, which would start the threading layer), else the number of threads a
        parallel call uses (:func:`zgrad.get_num_threads`). Read outside the kernel, which Numba could not
        cache otherwise."""
        return INTRA_OP_THREADS.in_use() if self._parallel_size(size) else 1

    @property
    def signatures(self) -> list:
        """The signatures compiled so far, serial then parallel (empty until the first call)."""
        return [*self.serial.signatures, *self.parallel.signatures]


def parallel_kernel(
    *, min_size: int = PARALLEL_MIN_SIZE, reduction: Reduction = False
) -> Callable[[Callable], ParallelKernel]:
    """Decorate a ``prange`` loop as a :class:`ParallelKernel`.

    Args:
        min_size: element count (of the first argument) from which the parallel variant runs.
        reduction: allow reassociating float sums (True), and running maxima ("extremes"; see the
            module docstring).
    """
    return functools.partial(ParallelKernel, min_size=min_size, reduction=reduction)

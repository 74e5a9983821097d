"""zgrad's own host work per CUDA training step, measured without a GPU.

On a GPU a training step is bound by the host when queueing its kernels takes longer than the
device takes to run them: torch's minGPT step (``bench/train_step.py``) takes 41.4 ms on an H200
in all. This script runs the steps of ``bench/train_step.py`` on zgrad's CUDA backend in Numba's
simulator with every launch, cuBLAS call and device allocation replaced by a stub (a kernel
launch records its kernel and returns; products take the cuBLAS and cuBLASLt paths, as on a GPU,
and compute nothing; an allocation is host memory, and zgrad's allocation cache hands freed ones
out again as on a GPU), so what it times is zgrad's Python above the driver: autograd, dispatch, layouts,
kernel arguments. Each launch goes through zgrad's direct launcher (``kernels/cuda/launcher.py``)
as on a GPU, its plan made from the arguments' types, up to cuda.core's ``launch``, which is the
stub (``--no-launcher`` stops at the launch, as this script did before 2026-12-01's tenth
session). cuda.core's compiled launch and the driver add to it on a GPU (not measured here).

Prints a table (median host ms per step over ``--steps`` steps after two warm-up steps, launches
per step, host µs per launch, the most launched kernels) and its JSON as the last line.

    python bench/cuda_host.py [--steps 7] [--step mlp|mingpt] [--no-launcher]
"""

from __future__ import annotations

import os

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba is imported

import argparse
import collections
import ctypes
import functools
import json
import pathlib
import statistics
import sys
import time
from collections.abc import Callable

import numba
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from train_step import STEPS  # after the simulator is chosen


def _stub_the_device(launches: collections.Counter, through_launcher: bool = True) -> None:
    """Launches and cuBLAS products count their kernel and return (a launch after the direct
    launcher's work when ``through_launcher``); allocations are host memory never copied."""
    from zgrad.kernels.cuda import array, cublas, cublas_lt, launcher
    from zgrad.kernels.cuda import runtime as rt

    def launch(kernel: object, config: object, *args: object) -> None:
        launches[getattr(kernel, "__name__", None) or kernel.py_func.__name__] += 1
        if through_launcher:
            launcher.launch(kernel, *config, None, args)

    class NoProducts:
        """cuBLAS present, each product queued and not computed: the host path a GPU takes."""

        def cublasGemmStridedBatchedEx(self, *args: object) -> int:
            launches["cublas_gemm"] += 1
            return 0

    class NoBiasedProducts:
        """cuBLASLt present, each product with an epilogue queued and not computed."""

        def cublasLtMatmulAlgoGetHeuristic(self, *args: object) -> int:
            args[-1]._obj.value = 1  # one algorithm found
            return 0

        def cublasLtMatmul(self, *args: object) -> int:
            launches["cublaslt_matmul"] += 1
            return 0

        def __getattr__(self, name: str) -> Callable:  # descriptors and their attributes
            return lambda *args: 0

    rt.launch = launch
    launchable = _launchable_array_class()
    rt.simulator_array = launchable
    array._new_allocation = _host_allocator(launchable)
    launcher._plans = _PlansFromTypes()
    launcher._numba_launch = lambda: (_launched, _LaunchConfig)
    cublas._library = lambda: NoProducts()
    cublas._handle = lambda: None
    cublas_lt._library = lambda: NoBiasedProducts()
    cublas_lt._works.update({(np.dtype(t), e): True for t in ("float32", "float64")  # the check reads results
                             for e in (cublas_lt.BIAS, cublas_lt.BIAS_GRADIENT)})


def _launchable_array_class() -> type:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class LaunchableArray(FakeCUDAArray):
        """A simulator array with what the direct launcher reads of a GPU's device array: its Numba
        type, computed once per array as numba-cuda's arrays cache it, and its data pointer."""

        _numba_type_ = functools.cached_property(FakeCUDAArray._numba_type_.fget)

        @property
        def device_ctypes_pointer(self) -> ctypes.c_void_p:
            return ctypes.c_void_p(self._ary.ctypes.data)

    return LaunchableArray


def _numba_type(kind: object) -> object:
    """A Numba type of an argument the launcher keys by ``kind`` (a device array's kind, a Numba
    type, a Python or numpy scalar class, or a tuple of those): the one its converter follows."""
    from numba.cuda import types
    if isinstance(kind, tuple) and getattr(kind[0], "device_ctypes_pointer", None) is not None:
        return types.Array(numba.from_dtype(kind[1]), kind[2], "A")
    if isinstance(kind, tuple):
        return types.Tuple([_numba_type(k) for k in kind])
    if isinstance(kind, types.Type):
        return kind
    return numba.typeof(kind(0))


class _PlansFromTypes(dict):
    """The launcher's plans, each made on its first use from the argument types in its key (the
    simulator has no compiled kernel to make it from; the launch is the stub's)."""

    def get(self, key: tuple, default: object = None) -> object:
        from zgrad.kernels.cuda import launcher
        plan = dict.get(self, key)
        if plan is None:
            plan = self[key] = launcher.Plan(None, [launcher._converter(_numba_type(kind)) for kind in key[1:]])
        return plan


def _launched(stream: object, config: object, kernel: object, *values: object) -> None:
    """cuda.core's ``launch``, stubbed: the parameters arrive and nothing runs."""


class _LaunchConfig:
    """cuda.core's ``LaunchConfig``, stubbed."""

    def __init__(self, grid: tuple, block: tuple, shmem_size: int) -> None:
        self.grid, self.block, self.shmem_size = grid, block, shmem_size


def _host_allocator(wrap: Callable) -> Callable:
    """An allocation stub: host memory, never copied, as a launchable array. zgrad's allocation
    cache (``kernels/cuda/allocation_cache.py``) above it hands freed allocations out again, so
    a step's allocations after the first steps come from there, as on a GPU."""

    def allocate(length: int, dtype: np.dtype) -> object:
        return wrap(np.empty(length, dtype))

    return allocate


def measure(name: str, step_factory: Callable, steps: int, through_launcher: bool = True) -> dict:
    import zgrad

    launches: collections.Counter = collections.Counter()
    _stub_the_device(launches, through_launcher)
    step = step_factory(zgrad)
    step()
    step()
    launches.clear()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    per_step = sum(launches.values()) / steps
    host_ms = statistics.median(times)
    return {"step": name, "host_ms": host_ms, "launches": per_step, "us_per_launch": 1e3 * host_ms / per_step,
            "kernels": {k: v / steps for k, v in launches.most_common(8)}}


def format_table(rows: list[dict]) -> str:
    lines = ["| step | host ms per step | launches per step | host µs per launch | most launched |",
             "|---|---|---|---|---|"]
    for r in rows:
        top = ", ".join(f"{k} {v:.0f}" for k, v in r["kernels"].items())
        lines.append(f"| {r['step']} | {r['host_ms']:.1f} | {r['launches']:.0f} | {r['us_per_launch']:.1f} | {top} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--step", choices=sorted(STEPS), action="append")
    parser.add_argument("--no-launcher", action="store_true", help="stop each launch before the direct launcher")
    args = parser.parse_args(argv)
    rows = [measure(name, STEPS[name], args.steps, not args.no_launcher) for name in (args.step or sorted(STEPS))]
    print(format_table(rows))
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""zgrad's own host work per CUDA training step, measured without a GPU.

On a GPU a training step is bound by the host when queueing its kernels takes longer than the
device takes to run them: torch's minGPT step (``bench/train_step.py``) takes 41.4 ms on an H200
in all. This script runs the steps of ``bench/train_step.py`` on zgrad's CUDA backend in Numba's
simulator with every launch, cuBLAS call and device allocation replaced by a stub (a kernel
launch records its kernel and returns; products take the cuBLAS and cuBLASLt paths, as on a GPU,
and compute nothing; an allocation is host memory, freed buffers handed out again as the device's
pool does), so what it times is zgrad's Python above the driver: autograd, dispatch, layouts,
kernel arguments. Numba's own launch path and the driver add to it on a GPU (not measured here).

Prints a table (median host ms per step over ``--steps`` steps after two warm-up steps, launches
per step, host µs per launch, the most launched kernels) and its JSON as the last line.

    python bench/cuda_host.py [--steps 7] [--step mlp|mingpt]
"""

from __future__ import annotations

import os

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba is imported

import argparse
import collections
import json
import pathlib
import statistics
import sys
import time
import weakref
from collections.abc import Callable

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from train_step import STEPS  # after the simulator is chosen


def _stub_the_device(launches: collections.Counter) -> None:
    """Launches and cuBLAS products count their kernel and return; allocations are host memory
    never copied."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    from zgrad.kernels.cuda import array, cublas, cublas_lt
    from zgrad.kernels.cuda import runtime as rt

    def launch(kernel: object, config: object, *args: object) -> None:
        launches[getattr(kernel, "__name__", None) or kernel.py_func.__name__] += 1

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
    array._allocate = _reusing_allocator(FakeCUDAArray, array._kernel_dtype)
    cublas._library = lambda: NoProducts()
    cublas._handle = lambda: None
    cublas_lt._library = lambda: NoBiasedProducts()
    cublas_lt._works.update({(np.dtype(t), e): True for t in ("float32", "float64")  # the check reads results
                             for e in (cublas_lt.BIAS, cublas_lt.BIAS_GRADIENT)})


def _reusing_allocator(wrap: Callable, kernel_dtype: Callable) -> Callable:
    """An allocation stub that hands out freed host buffers again, as the device's memory pool does:
    a fresh ``numpy.empty`` of a step's larger arrays costs the kernel a new mapping each time
    (tens of µs, varying with the machine's load), which would swamp the Python measured here.

    Each buffer is referred to by its one allocation view and the finalizer that returns it, so
    the reference counts zgrad's sole-view test reads are the same for every allocation."""
    free: dict = collections.defaultdict(list)

    def allocate(size: int, dtype: np.dtype) -> object:
        key = (max(size, 1), kernel_dtype(dtype))
        buffers = free[key]
        buffer = buffers.pop() if buffers else np.empty(*key)
        allocation = wrap(buffer[:])
        weakref.finalize(allocation, buffers.append, buffer)
        return allocation

    return allocate


def measure(name: str, step_factory: Callable, steps: int) -> dict:
    import zgrad

    launches: collections.Counter = collections.Counter()
    _stub_the_device(launches)
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
    args = parser.parse_args(argv)
    rows = [measure(name, STEPS[name], args.steps) for name in (args.step or sorted(STEPS))]
    print(format_table(rows))
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which variant of a :class:`zgrad.kernels._jit.ParallelKernel` a test's calls really ran.

A kernel test calls each kernel at a size below its parallel threshold and at one above it; the
check that the call went through the variant its size selects must look at the calls themselves
(a variant's compiled signatures only say that it ran once, ever, in the process).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Iterable

import numpy as np
import pytest

from zgrad.kernels._jit import ParallelKernel

__all__ = ["VariantCalls", "dtypes_and_sizes"]

VARIANT_OF_SIZE = {"small": "serial", "large": "parallel"}


def dtypes_and_sizes(sizes: Iterable[str]) -> pytest.MarkDecorator:
    """``parametrize("dtype, size_name")``: float32 and float64 at each of ``sizes``. float64 at
    the parallel size compiles the same prange source as float32 once more: it carries the
    ``full`` marker (CI's full step runs it; the README's command runs the other three)."""
    params = [pytest.param(dtype, size, id=f"{dtype.__name__}-{size}",
                           marks=(pytest.mark.full,) if dtype is np.float64 and VARIANT_OF_SIZE[size] == "parallel" else ())
              for size in sizes for dtype in (np.float32, np.float64)]
    return pytest.mark.parametrize("dtype, size_name", params)


def _counted(dispatcher: Callable[..., Any], counts: dict[str, int], variant: str) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        counts[variant] += 1
        return dispatcher(*args)

    return call


def _parallel_kernels(module: ModuleType) -> list[ParallelKernel]:
    """The ParallelKernels of ``module``: its globals, and the values of its dicts of them (one
    kernel per combination of options, as the CPU optim kernels' ``_ADAM_UPDATES``)."""
    found = []
    for value in vars(module).values():
        candidates = value.values() if isinstance(value, dict) else [value]
        found += [kernel for kernel in candidates if isinstance(kernel, ParallelKernel)]
    return found


class VariantCalls:
    """Counts the calls that reach the serial and the parallel variant of every ParallelKernel in
    ``modules`` (globals and dicts of them), for as long as ``monkeypatch`` keeps its changes (the
    test)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *modules: ModuleType) -> None:
        self._counts: dict[int, dict[str, int]] = {}
        for module in modules:
            for kernel in _parallel_kernels(module):
                if id(kernel) not in self._counts:
                    counts = self._counts[id(kernel)] = {"serial": 0, "parallel": 0}
                    for variant in ("serial", "parallel"):
                        monkeypatch.setattr(kernel, variant, _counted(getattr(kernel, variant), counts, variant))

    def assert_ran(self, kernel: ParallelKernel, size_name: str) -> None:
        """Since the previous check of ``kernel``, its calls ran the variant that ``size_name``
        ("small" or "large") selects, at least once, and never the other one."""
        counts = self._counts[id(kernel)]
        ran = dict(counts)
        counts.update(serial=0, parallel=0)
        expected = VARIANT_OF_SIZE[size_name]
        other = "parallel" if expected == "serial" else "serial"
        assert ran[expected] and not ran[other], f"{kernel.__name__}: the {size_name} calls ran {ran}"

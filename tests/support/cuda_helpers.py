"""Running an op test on zgrad's CUDA backend (in Numba's simulator here) against its CPU backend.

:func:`check_device` runs a case lambda ``fn(lib, *inputs)`` (the op tests' form) twice on the same
inputs and upstream gradient: on the CPU, and with every factory creating on CUDA
(``zgrad.set_default_device("cuda")``) under :func:`strict_cuda`, which makes any use of the CPU
backend fail the test. Outputs and gradients must agree, and must be CUDA arrays: a CUDA op that
fell back to numpy cannot pass.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pytest

import zgrad
from zgrad.kernels import dispatch
from zgrad.kernels.promotion import is_floating

__all__ = ["CUDA", "SIMULATOR", "REAL_GPU", "requires_cuda", "requires_gpu", "strict_cuda", "check_device", "is_device_array", "TOLERANCE"]

CUDA = zgrad.cuda.is_available()
requires_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA backend here (install zgrad[cuda]; tests use the simulator)")
SIMULATOR = CUDA and dispatch.backend("cuda").rt.SIMULATOR
REAL_GPU = CUDA and not SIMULATOR
requires_gpu = [pytest.mark.gpu, pytest.mark.skipif(not REAL_GPU, reason="needs a real CUDA GPU (run with ZGRAD_TEST_REAL_GPU=1 on a machine with one)")]

# CUDA against CPU: different summation orders and math libraries.
TOLERANCE = {np.dtype(np.float32): dict(rtol=2e-4, atol=2e-5), np.dtype(np.float64): dict(rtol=1e-9, atol=1e-11),
             np.dtype(np.float16): dict(rtol=2e-3, atol=2e-3), zgrad.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}


class _CpuGuard(types.ModuleType):
    """Stands in for the CPU backend during a CUDA computation: any use fails."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the CPU backend's {name!r} ran during a CUDA computation (a CUDA op fell back to numpy)")


@contextlib.contextmanager
def strict_cuda() -> Iterator[None]:
    """Make factories create on CUDA and any use of the CPU backend raise AssertionError."""
    cpu = dispatch.backend("cpu")
    dispatch._loaded["cpu"] = _CpuGuard("zgrad.kernels.cpu.backend (guarded)")
    zgrad.set_default_device("cuda")
    try:
        yield
    finally:
        zgrad.set_default_device(None)
        dispatch._loaded["cpu"] = cpu


def is_device_array(array: Any) -> bool:
    return dispatch.device_type_of(array) == "cuda" and not isinstance(array, np.ndarray)


@contextlib.contextmanager
def full_float32_convolutions() -> Iterator[None]:
    """Convolutions in full float32, as PyTorch's own tests compare them (on a GPU they run in
    TF32 by default, ``zgrad.backends.cudnn.allow_tf32``: about 1e-3 apart from the CPU's)."""
    before = zgrad.backends.cudnn.allow_tf32
    zgrad.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        zgrad.backends.cudnn.allow_tf32 = before


def _run(fn: Callable[..., Any], arrays: Sequence[np.ndarray], upstream: np.ndarray | None, device: str):
    context = contextlib.ExitStack()
    if device == "cuda":
        context.enter_context(strict_cuda())
        context.enter_context(full_float32_convolutions())
    with context:
        inputs = [zgrad.tensor(a, requires_grad=is_floating(a.dtype)) for a in arrays]
        out = fn(zgrad, *inputs)
        if upstream is None:
            upstream = np.random.default_rng(7).standard_normal(out.shape).astype(out.dtype)
        if out.requires_grad:
            out.backward(zgrad.tensor(upstream))
        if device == "cuda":
            assert is_device_array(out._data), f"the output is not a CUDA array: {type(out._data).__name__}"
            for i, t in enumerate(inputs):
                assert t.grad is None or is_device_array(t.grad._data), f"gradient {i} is not a CUDA array"
        grads = [None if t.grad is None else t.grad._host() for t in inputs]
    return out._host(), grads, upstream


def check_device(fn: Callable[..., Any], shapes: Sequence[Sequence[int]], *, dtype: Any = np.float32,
                 domain: tuple[float, float] = (-2.0, 2.0), seed: int = 0, arrays: Sequence[np.ndarray] | None = None,
                 rtol: float | None = None, atol: float | None = None) -> None:
    """Assert that ``fn`` gives the same output and input gradients on CUDA as on the CPU."""
    if arrays is None:
        rng = np.random.default_rng(seed)
        arrays = [rng.uniform(*domain, size=tuple(s)).astype(dtype) for s in shapes]
    tol = dict(TOLERANCE[np.dtype(dtype)])
    tol.update({k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None})
    ref, ref_grads, upstream = _run(fn, arrays, None, "cpu")
    out, grads, _ = _run(fn, arrays, upstream, "cuda")
    assert out.shape == ref.shape and out.dtype == ref.dtype, f"CUDA gave {out.shape} {out.dtype}, CPU {ref.shape} {ref.dtype}"
    np.testing.assert_allclose(out, ref, err_msg="CUDA forward differs from the CPU's", **tol)
    for i, (grad, expected) in enumerate(zip(grads, ref_grads)):
        assert (grad is None) == (expected is None), f"input {i}: CUDA grad {grad is not None}, CPU {expected is not None}"
        if grad is not None:
            assert grad.dtype == expected.dtype
            np.testing.assert_allclose(grad, expected, err_msg=f"CUDA gradient of input {i} differs", **tol)

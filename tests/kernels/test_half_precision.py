"""The wrapper dispatch puts around each backend (``zgrad.kernels.half_precision``): kernels see
float16 and bfloat16 arrays as float32 copies, results are rounded back once, and everything
else passes through untouched."""

from __future__ import annotations

import types

import numpy as np
import pytest

import zgrad
from zgrad.kernels import dispatch
from zgrad.kernels.half_precision import STORAGE_OPS, HalfPrecisionBackend
from zgrad.kernels.vocabulary import OPS


def _module(**ops) -> types.ModuleType:
    """A backend module whose ops are ``ops`` (the rest: the CPU backend's)."""
    module = types.ModuleType("fake_backend")
    cpu = dispatch.backend("cpu").module
    for op in OPS:
        setattr(module, op, ops.get(op, getattr(cpu, op)))
    return module


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), zgrad.bfloat16], ids=str)
def test_kernels_see_float32_copies_and_the_result_is_rounded_once(dtype):
    seen = []

    def add(a, b, out):
        seen.append((a.dtype, b.dtype, out.dtype))
        return np.add(np.add(a, b, out=out), 1e-4, out=out)  # two steps: rounded once, at the end

    backend = HalfPrecisionBackend(_module(add=add))
    a, b = np.array([1.0, 2.0], dtype), np.array([0.5, 0.25], dtype)
    out = np.empty(2, dtype)
    result = backend.add(a, b, out)
    assert result is out and seen == [(np.float32,) * 3]
    want = (a.astype(np.float32) + b.astype(np.float32) + np.float32(1e-4)).astype(dtype)
    assert out.tobytes() == want.tobytes()


def test_float32_calls_and_storage_ops_pass_straight_through():
    calls = []

    def add(a, b, out):
        calls.append((a, b, out))
        return out

    module = _module(add=add)
    backend = HalfPrecisionBackend(module)
    a = np.ones(2, np.float32)
    assert backend.add(a, a, a) is a and calls == [(a, a, a)]
    assert all(getattr(backend, op) is getattr(module, op) for op in STORAGE_OPS)
    assert backend.module is module and backend.__name__ == "fake_backend"


def test_writes_into_arguments_the_op_does_not_return_are_rounded_back():
    def sgd_step(param, grad, lr):  # in place, returns nothing, as the optimizer kernels
        assert param.dtype == grad.dtype == np.float32
        param -= lr * grad

    backend = HalfPrecisionBackend(_module(sgd_step=sgd_step))
    param, grad = np.array([1.0, 2.0], zgrad.bfloat16), np.array([0.5, 0.5], zgrad.bfloat16)
    backend.sgd_step(param, grad, 0.1)
    np.testing.assert_array_equal(param.astype(np.float32), np.array([0.95, 1.95], zgrad.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(grad.astype(np.float32), [0.5, 0.5])


def test_an_input_viewing_the_outputs_memory_does_not_overwrite_the_result():
    base = np.arange(4, dtype=np.float16)
    backend = HalfPrecisionBackend(_module())
    out = base[1:]
    backend.mul(base[:-1], 10.0, out)  # reads base[:-1] (writable, overlapping): rounded back first
    np.testing.assert_array_equal(base, np.array([0, 0, 10, 20], np.float16))

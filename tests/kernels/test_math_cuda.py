"""The element-wise math functions on the CUDA backend (Numba's simulator here) against the CPU
backend: the op cases of ``test_math_ops`` (outputs and gradients, under a strict device check),
special values (inf, NaN, -0.0, ties, the domain edges), integer and bool dtypes, bitwise
functions and shifts.

The simulator runs one Python thread per element, so a representative subset runs by default;
the rest carry the ``full`` marker.
"""

from __future__ import annotations

import numpy as np
import pytest

import test_math_ops
import zgrad
from cuda_helpers import check_device, requires_cuda, strict_cuda

pytestmark = requires_cuda

SUBSET = {"sin", "erfinv", "rounding_zero_gradient", "round_decimals", "nan_to_num", "atan2", "fmod", "logaddexp",
          "copysign", "lerp_tensor_weight"}


def _params() -> list:
    return [pytest.param(p.values[0], id=p.id, marks=() if p.id in SUBSET else (pytest.mark.full,))
            for p in test_math_ops.CASES]


@pytest.mark.parametrize("c", _params())
def test_case_on_cuda_matches_cpu(c):
    check_device(c.fn, c.shapes, domain=c.domain)


def _on_both(fn, *arrays):
    """fn's result on the CPU and on CUDA (strict: no CPU op may run), as host arrays."""
    cpu = fn(*(zgrad.tensor(a) for a in arrays))
    with strict_cuda():
        cuda = fn(*(zgrad.tensor(a) for a in arrays))
        assert cuda.device.type == "cuda"
        cuda = cuda._host()
    return cpu.numpy(), cuda


def _assert_same(cpu: np.ndarray, cuda: np.ndarray, rtol: float) -> None:
    assert cpu.dtype == cuda.dtype and cpu.shape == cuda.shape
    if cpu.dtype.kind == "f":
        np.testing.assert_allclose(cuda, cpu, rtol=rtol, atol=0, equal_nan=True)
        numbers = ~np.isnan(cpu)
        np.testing.assert_array_equal(np.signbit(cuda[numbers]), np.signbit(cpu[numbers]))
    else:
        np.testing.assert_array_equal(cuda, cpu)


SPECIAL = [0.0, -0.0, 0.4, -0.4, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, 1e-30, -7.2, 1.0, -1.0, 0.999999,
           3e38, np.inf, -np.inf, np.nan]
DEFAULT_UNARY = {"erfinv", "round", "floor", "frac", "signbit", "isposinf", "sign"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT_UNARY else (pytest.mark.full,))
                                  for n in test_math_ops.SPECIAL_UNARY])
def test_special_values_on_cuda_match_cpu(name):
    for dtype in (np.float32, np.float64):
        with np.errstate(all="ignore"):
            x = np.array(SPECIAL).astype(dtype)
        cpu, cuda = _on_both(getattr(zgrad, name), x)
        _assert_same(cpu, cuda, rtol=4e-6 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in ("logaddexp", "fmod") else (pytest.mark.full,))
                                  for n in ("atan2", "fmod", "hypot", "logaddexp", "logaddexp2", "copysign")])
def test_binary_special_values_on_cuda_match_cpu(name):
    values = np.array([0.0, -0.0, 1.5, -2.0, 1e30, np.inf, -np.inf, np.nan], np.float32)
    a, b = np.meshgrid(values, values)
    cpu, cuda = _on_both(getattr(zgrad, name), a, b)
    _assert_same(cpu, cuda, rtol=4e-6)


@pytest.mark.parametrize("dtype", ["int8", "uint8", pytest.param("int32", marks=pytest.mark.full), "int64"])
def test_integer_functions_on_cuda_match_cpu(dtype):
    a = np.array([[5, 1, 0, 100], [3, 7, 2, 64]]).astype(dtype)
    b = np.array([1, 3, 9, 2]).astype(dtype)
    if np.dtype(dtype).kind == "i":
        a[0, 0], b[0] = -7, -1
    for fn in (zgrad.bitwise_and, zgrad.bitwise_or, zgrad.bitwise_xor, zgrad.bitwise_left_shift,
               zgrad.bitwise_right_shift, zgrad.fmod, zgrad.floor_divide, lambda x, y: ~x + zgrad.sign(x)):
        _assert_same(*_on_both(fn, a, b), rtol=0)
    for fn in (zgrad.floor, zgrad.isnan, zgrad.isfinite, zgrad.signbit, zgrad.sin, zgrad.nan_to_num):
        _assert_same(*_on_both(fn, a), rtol=1e-6)


def test_bool_functions_on_cuda_match_cpu():
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    for fn in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: ~x,
               lambda x, y: zgrad.sign(x), lambda x, y: zgrad.isinf(x), lambda x, y: zgrad.erf(y)):
        _assert_same(*_on_both(fn, a, b), rtol=1e-6)

"""The Numba CPU kernels against numpy (and PyTorch's optimizers where torch is installed).

Every kernel runs in float32 and float64 at a small size (serial variant) and a size above its
parallel threshold (prange variant; float64's carries the ``full`` marker, see
:func:`kernel_variants.dtypes_and_sizes`). Compilation happens here, once per variant and dtype, so the
first run of this file on a fresh checkout also measures the cold compile time of the kernels.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

from kernel_variants import VariantCalls, dtypes_and_sizes
from optim_reference import REFERENCES
from zgrad.kernels._jit import PARALLEL_MIN_SIZE
from zgrad.kernels import vocabulary
from zgrad.kernels.cpu import kernels
from zgrad.kernels.cpu.kernels.vector_math import SCALE_BY_VSCALEF, _ldexp, _scale_by_factors

DTYPES = [np.float32, np.float64]
SIZES = {"small": 1001, "large": PARALLEL_MIN_SIZE + 1001}
# The kernel modules the CPU backend calls directly (the fused element-wise, row-wise and optimizer kernels).
PUBLIC_KERNEL_MODULES = (kernels.elementwise, kernels.rowwise, kernels.optim)
SHAPES = {"small": (7, 33), "large": (2063, 1031)}  # 2063 * 1031 > PARALLEL_MIN_SIZE


def assert_close(got, want, dtype, ulps=4, scale=0.0):
    """|got - want| <= ulps * eps * (|want| + scale), with ``want`` computed in float64.

    ``scale`` is the magnitude of the terms where the kernel subtracts nearly equal numbers (a
    fused multiply-add there is more exact than numpy's separately rounded expression).
    """
    eps = float(np.finfo(dtype).eps)
    np.testing.assert_allclose(got, want, rtol=ulps * eps, atol=ulps * eps * scale)


def f64(*arrays):
    return [a.astype(np.float64) for a in arrays]


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def variants(monkeypatch):
    return VariantCalls(monkeypatch, kernels.elementwise, kernels.rowwise, kernels.loss, kernels.optim)


# --- element-wise -----------------------------------------------------------------------------

def _unary_input(rng, name, n, dtype):
    if name == "log_forward":
        return (rng.random(n) * 10 + 1e-3).astype(dtype)
    if name == "sigmoid_backward":
        return rng.random(n).astype(dtype)
    if name == "tanh_backward":
        return rng.uniform(-1, 1, n).astype(dtype)
    return (rng.standard_normal(n) * 4).astype(dtype)


UNARY = {
    "relu_forward": lambda x: np.maximum(x, 0),
    "sigmoid_forward": lambda x: 1 / (1 + np.exp(-x)),
    "tanh_forward": np.tanh,
    "exp_forward": np.exp,
    "log_forward": np.log,
}

BACKWARD = {
    "relu_backward": lambda g, x: np.where(x > 0, g, 0),
    "sigmoid_backward": lambda g, y: g * y * (1 - y),
    "tanh_backward": lambda g, y: g * (1 - y * y),
}


@dtypes_and_sizes(SIZES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_forward(name, dtype, size_name, rng, variants):
    x = _unary_input(rng, name, SIZES[size_name], dtype)
    out = np.empty_like(x)
    kernel = getattr(kernels.elementwise, name)
    assert kernel(x, out) is None
    with np.errstate(over="ignore"):
        assert_close(out, UNARY[name](*f64(x)), dtype)
    variants.assert_ran(kernel, size_name)


@dtypes_and_sizes(SIZES)
@pytest.mark.parametrize("name", BACKWARD)
def test_activation_backward(name, dtype, size_name, rng, variants):
    n = SIZES[size_name]
    grad = rng.standard_normal(n).astype(dtype)
    saved = _unary_input(rng, name, n, dtype)
    out = np.empty_like(grad)
    kernel = getattr(kernels.elementwise, name)
    kernel(grad, saved, out)
    assert_close(out, BACKWARD[name](*f64(grad, saved)), dtype, scale=np.abs(grad).max())
    variants.assert_ran(kernel, size_name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_activation_edge_values(dtype):
    big = np.finfo(dtype).max
    x = np.array([-np.inf, -big, -1000, -100, -20, -0.0, 0.0, 20, 100, 1000, big, np.inf], dtype=dtype)
    out = np.empty_like(x)
    with np.errstate(all="raise"):  # a kernel never goes through numpy's FP error machinery
        kernels.elementwise.sigmoid_forward(x, out)
        np.testing.assert_array_equal(out[:3], 0)
        assert out[3] == pytest.approx(np.exp(-100.0), rel=1e-5)  # subnormal in float32
        np.testing.assert_array_equal(out[5:7], 0.5)
        np.testing.assert_array_equal(out[-4:], 1)
        kernels.elementwise.tanh_forward(x, out)
        np.testing.assert_array_equal(out[:5], -1)
        np.testing.assert_array_equal(out[5:7], 0)
        np.testing.assert_array_equal(out[-5:], 1)
        kernels.elementwise.relu_forward(x, out)
        np.testing.assert_array_equal(out, np.maximum(x, 0))
        grad = np.ones_like(x)
        kernels.elementwise.relu_backward(grad, x, out)
        np.testing.assert_array_equal(out, (x > 0).astype(dtype))  # x == 0 passes no gradient

    nan = np.array([np.nan], dtype=dtype)
    one = np.empty_like(nan)
    for name in UNARY:
        getattr(kernels.elementwise, name)(nan, one)
        assert np.isnan(one[0]), f"{name}(nan) must be nan"


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_log_special_values(dtype):
    info = np.finfo(dtype)
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, info.tiny / 4, info.tiny, info.max,
                  1000.0, -1000.0, np.log(info.max) * 0.999, np.log(info.tiny) - 5], dtype=dtype)
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        kernels.elementwise.exp_forward(x, out)
        np.testing.assert_allclose(out, np.exp(x), rtol=4 * info.eps, atol=4 * info.smallest_subnormal)
        kernels.elementwise.log_forward(x, out)
        np.testing.assert_allclose(out, np.log(x), rtol=4 * info.eps)


def _max_ulp_error(kernel, x, reference):
    """Largest error of ``kernel`` over ``x`` in units of the last place of the reference."""
    out = np.empty_like(x)
    kernel(x, out)
    want = reference(x.astype(np.longdouble))
    rounded = want.astype(x.dtype)
    normal = np.isfinite(rounded) & (np.abs(rounded) >= np.finfo(x.dtype).tiny)
    return float(np.max(np.abs(out[normal] - want[normal]) / np.spacing(np.abs(rounded[normal]))))


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_math_accuracy(dtype):
    """kernels.vector_math's exp/exp2/log/tanh are within 2 ulp (sigmoid 3) over their whole range."""
    info = np.finfo(dtype)
    log_max = float(np.log(info.max))
    with np.errstate(all="ignore"):
        spread = np.linspace(-log_max * 1.05, log_max * 1.01, 400_001).astype(dtype)
        assert _max_ulp_error(kernels.elementwise.exp_forward, spread, np.exp) <= 2
        spread2 = np.concatenate([np.linspace(info.minexp - info.nmant - 2, info.maxexp + 1, 400_001),
                                  np.geomspace(1e-30, 1, 1000)]).astype(dtype)
        assert _max_ulp_error(kernels.special.exp2_forward, np.concatenate([spread2, -spread2]), np.exp2) <= 2
        positive = np.exp(np.linspace(np.log(info.smallest_subnormal), log_max, 400_001)).astype(dtype)
        assert _max_ulp_error(kernels.elementwise.log_forward, positive[positive > 0], np.log) <= 2
        around_zero = np.concatenate([np.linspace(-25, 25, 200_001), np.geomspace(1e-30, 0.7, 1000)]).astype(dtype)
        assert _max_ulp_error(kernels.elementwise.tanh_forward, around_zero, np.tanh) <= 2
        assert _max_ulp_error(kernels.elementwise.sigmoid_forward, around_zero * 4, lambda x: 1 / (1 + np.exp(-x))) <= 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_expm1_and_sinh_accuracy(dtype):
    """expm1 and sinh are within 3 ulp over their whole range (Taylor's series near zero, exp
    beyond, sinh up to its own overflow past exp's), keep -0.0 and give inf, -1 / -inf and NaN."""
    log_max = float(np.log(np.finfo(dtype).max))
    with np.errstate(all="ignore"):
        spread = np.concatenate([np.linspace(-log_max * 1.05, log_max * 1.05, 400_001), np.geomspace(1e-30, 2, 2000),
                                 -np.geomspace(1e-30, 2, 2000)]).astype(dtype)
        assert _max_ulp_error(kernels.special.expm1_forward, spread, np.expm1) <= 3
        assert _max_ulp_error(kernels.special.sinh_forward, spread, np.sinh) <= 3
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=dtype)
    for kernel, expected in ((kernels.special.expm1_forward, [0.0, -0.0, np.inf, -1.0, np.nan]),
                             (kernels.special.sinh_forward, [0.0, -0.0, np.inf, -np.inf, np.nan])):
        out = np.empty_like(special)
        kernel(special, out)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_math_log1p_accuracy(dtype):
    """log1p(exp(x)) (the Softplus kernel with no threshold) is within 3 ulp up to where exp
    overflows, tiny results included (which log(1 + z) would round away); inf and NaN pass."""
    info = np.finfo(dtype)
    log_max = float(np.log(info.max))

    def softplus(x, out):
        kernels.activation.smooth_activation_forward(x, vocabulary.SOFTPLUS, 1.0, np.inf, out)

    with np.errstate(all="ignore"):
        spread = np.linspace(-log_max * 1.05, log_max * 0.999, 400_001).astype(dtype)
        assert _max_ulp_error(softplus, spread, lambda x: np.log1p(np.exp(x))) <= 3
        special = np.array([np.inf, -np.inf, np.nan], dtype=dtype)
        out = np.empty_like(special)
        softplus(special, out)
    np.testing.assert_array_equal(out, [np.inf, 0.0, np.nan])


def _libm(function):
    """``function`` of Python's math module over an array, in float64 (the ulp reference of erf and
    erfc: libm's, within 1 ulp of float64)."""
    apply = np.frompyfunc(lambda v: function(float(v)), 1, 1)
    return lambda x: apply(x).astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_math_erf_accuracy(dtype):
    """vector_math's erf (the erf op's kernel) is within 3 ulp and erfc within 6 over their whole
    range (erfc down to its underflow: 10.05 in float32, 27.2 in float64), both signs, tiny
    arguments included; their values at +-0, +-inf and NaN are numpy's/libm's."""
    reach = 11.0 if dtype == np.float32 else 28.0
    grid = np.concatenate([np.linspace(-reach, reach, 400_001), np.geomspace(1e-30, reach, 20_000)]).astype(dtype)
    grid = np.concatenate([grid, -grid])
    assert _max_ulp_error(kernels.special.erf_forward, grid, _libm(math.erf)) <= 3
    assert _max_ulp_error(kernels.special.erfc_forward, grid, _libm(math.erfc)) <= 6
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45 if dtype == np.float32 else 5e-324], dtype)
    for kernel, function in ((kernels.special.erf_forward, math.erf), (kernels.special.erfc_forward, math.erfc)):
        out = np.empty_like(special)
        kernel(special, out)
        want = np.array([function(float(v)) for v in special], dtype)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(want))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_kernels_accuracy(dtype):
    """The exact GELU's kernels, x Phi(x) and Phi(x) + x phi(x): float32 within 2e-7 and 3e-7 of the
    exact values relative to max(1, |x|) (float32's one-range fit; PyTorch's kernel is 1.1e-6 off),
    float64 within 8 ulp of that; Phi(0) is exactly 1/2, far negative arguments give exact zeros,
    and +-inf and NaN give the values of the formula x / 2 (1 + erf(x / sqrt 2))."""
    grid = np.concatenate([np.linspace(-12.0, 12.0, 300_001), np.geomspace(1e-30, 12.0, 10_000)])
    grid = np.concatenate([grid, -grid]).astype(dtype)
    phi = _libm(lambda v: 0.5 * math.erfc(-v / math.sqrt(2.0)))(grid)
    density = np.exp(-0.5 * grid.astype(np.float64) ** 2) / math.sqrt(2.0 * math.pi)
    wants = (grid * phi, phi + grid * density)
    tolerances = (2e-7, 3e-7) if dtype == np.float32 else (8 * np.finfo(dtype).eps,) * 2
    forward = np.empty_like(grid)
    kernels.activation.gelu_forward(grid, False, forward)
    derivative = np.empty_like(grid)
    kernels.activation.gelu_backward(np.ones_like(grid), grid, False, derivative)
    for got, want, tolerance in zip((forward, derivative), wants, tolerances):
        assert np.max(np.abs(got - want) / np.maximum(np.abs(want), 1.0)) <= tolerance

    special = np.array([0.0, -0.0, -1e20, -3e38, np.inf, -np.inf, np.nan], dtype)
    forward, derivative = np.empty_like(special), np.empty_like(special)
    kernels.activation.gelu_forward(special, False, forward)
    kernels.activation.gelu_backward(np.ones_like(special), special, False, derivative)
    np.testing.assert_array_equal(forward, np.array([0.0, -0.0, -0.0, -0.0, np.inf, np.nan, np.nan], dtype))
    np.testing.assert_array_equal(np.signbit(forward[:4]), [False, True, True, True])
    np.testing.assert_array_equal(derivative, np.array([0.5, 0.5, 0.0, 0.0, np.nan, np.nan, np.nan], dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tan_kernel(dtype):
    """The tan kernel (vector_math's tan, libm's beyond its reduction's limit) is within 3 ulp over
    a dense grid across many periods and arguments up to 1e30; numpy's values at +-0, +-inf, NaN."""
    grid = np.concatenate([np.linspace(-20, 20, 400_001), np.geomspace(1e-30, 1e30, 200_000)]).astype(dtype)
    assert _max_ulp_error(kernels.special.tan_forward, np.concatenate([grid, -grid]), np.tan) <= 3
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    out = np.empty_like(special)
    kernels.special.tan_forward(special, out)
    np.testing.assert_array_equal(out, [0.0, -0.0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(np.signbit(out[:2]), [False, True])


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_math_inverse_trigonometry(dtype):
    """vector_math's atan, asin, acos (the ops' kernels) are within 4 ulp over dense grids inside
    and outside their domains, tiny and huge arguments included; numpy's values at +-0, +-inf,
    NaN and +-1, signs of zero included; asin and acos are NaN outside [-1, 1]."""
    grid = np.concatenate([np.linspace(-1.5, 1.5, 300_001), np.geomspace(1e-30, 1e30, 100_000)]).astype(dtype)
    grid = np.concatenate([grid, -grid])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], dtype)
    outside = np.array([1.5, -1.5, 1 + np.finfo(dtype).eps, -1e30], dtype)
    for kernel, function in ((kernels.special.atan_forward, np.arctan), (kernels.special.asin_forward, np.arcsin),
                             (kernels.special.acos_forward, np.arccos)):
        with np.errstate(invalid="ignore"):
            assert _max_ulp_error(kernel, grid, function) <= 4
            want = function(special)
        out = np.empty_like(special)
        kernel(special, out)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(np.signbit(out[~np.isnan(out)]), np.signbit(want[~np.isnan(want)]))
        out = np.empty_like(outside)
        kernel(outside, out)
        assert np.isnan(out).all() == (function is not np.arctan)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_math_atan2(dtype, rng):
    """vector_math's atan2 is within 3 ulp over points in all four quadrants, magnitudes from 1e-20
    to 1e20, and gives the correctly rounded angles at signed zeros, infinities and NaN."""
    n = 200_000
    y, x = (rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20, n)).astype(dtype), \
        (rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20, n)).astype(dtype)
    out = np.empty_like(x)
    kernels.special.atan2_forward(y, x, out)
    want = np.arctan2(y.astype(np.longdouble), x.astype(np.longdouble))
    rounded = want.astype(dtype)
    normal = np.abs(rounded) >= np.finfo(dtype).tiny
    assert np.max(np.abs(out[normal] - want[normal]) / np.spacing(np.abs(rounded[normal]))) <= 3
    values = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], dtype)
    y, x = (a.ravel() for a in np.meshgrid(values, values))
    out = np.empty_like(x)
    kernels.special.atan2_forward(y, x, out)
    # the correctly rounded angles: numpy's own float32 loop is 1 ulp off at pi/4 on some CPUs
    want = np.arctan2(y.astype(np.longdouble), x.astype(np.longdouble)).astype(dtype)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out[~np.isnan(out)]), np.signbit(want[~np.isnan(want)]))


def test_fmod_float32_is_exact(rng):
    """The float32 fmod kernel equals numpy's fmod bit for bit (signed zeros included) over
    operands from 1e-40 to 1e38 of both signs, integers, and every pair of special values (zeros,
    +-inf, NaN, the smallest subnormal, the largest floats): its float64 path where that is exact,
    libm's for the rest."""
    n = 500_000
    a, b = (rng.standard_normal((2, n)) * 10.0 ** rng.integers(-40, 38, (2, n))).astype(np.float32)
    values = np.array([0, -0.0, 1, -1, 2.5, -2.5, 4, -4, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, -3.4e38], np.float32)
    special_a, special_b = (v.ravel() for v in np.meshgrid(values, values))
    integers_a, integers_b = rng.integers(-1000, 1000, n).astype(np.float32), rng.integers(1, 30, n).astype(np.float32)
    a, b = np.concatenate([a, special_a, integers_a]), np.concatenate([b, special_b, integers_b])
    out = np.empty_like(a)
    kernels.special.fmod_float32_forward(a, b, out)
    with np.errstate(invalid="ignore"):
        want = np.fmod(a, b)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out[~np.isnan(out)]), np.signbit(want[~np.isnan(want)]))


def test_erfinv_float32_estimate_kernel():
    """The float32 erfinv kernel (Giles' estimate on vector_math's log, no Halley step) is within
    2e-6 relative of float64 erfinv (erf's inverse by bisection on math.erf) across (-1, 1), and
    gives +-inf at +-1, NaN outside [-1, 1] and at NaN, signed zeros."""
    x = np.linspace(-0.9999, 0.9999, 2001).astype(np.float32)
    out = np.empty_like(x)
    kernels.special.erfinv_forward(x, 0, out)
    low, high = np.full(x.size, -5.0), np.full(x.size, 5.0)
    erf = np.frompyfunc(math.erf, 1, 1)
    for _ in range(60):
        middle = (low + high) / 2
        below = erf(middle).astype(np.float64) < x
        low, high = np.where(below, middle, low), np.where(below, high, middle)
    np.testing.assert_allclose(out, (low + high) / 2, rtol=2e-6, atol=1e-15)  # atol: erfinv(0) = 0 against 1e-17
    special = np.array([1.0, -1.0, 1.5, -np.inf, np.nan, 1e-30, 0.0, -0.0], np.float32)
    out = np.empty_like(special)
    kernels.special.erfinv_forward(special, 0, out)
    np.testing.assert_array_equal(out, [np.inf, -np.inf, np.nan, np.nan, np.nan, out[5], 0.0, -0.0])
    assert out[5] == pytest.approx(1e-30 * math.sqrt(math.pi) / 2, rel=1e-6)
    assert np.signbit(out[-1]) and not np.signbit(out[-2])


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_math_log1p_unit_accuracy(dtype):
    """log1p_unit (logaddexp's log1p of exp(-|a - b|)) is within 2 ulp on [0, 1], tiny and 0 included."""
    @numba.njit
    def log1p_unit(x, out):
        for i in range(x.size):
            out[i] = kernels.vector_math.log1p_unit(x[i])

    tiny = float(np.finfo(dtype).smallest_subnormal)
    x = np.concatenate([np.linspace(0, 1, 200_001), np.geomspace(tiny, 1, 2000)]).astype(dtype)
    out = np.empty_like(x)
    log1p_unit(x, out)
    want = np.log1p(x.astype(np.longdouble))
    rounded = want.astype(dtype)
    assert out[0] == 0 and not np.signbit(out[0])
    assert float(np.max(np.abs(out[1:] - want[1:]) / np.spacing(rounded[1:]))) <= 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_scaling_by_vscalef_equals_scaling_by_factors(dtype):
    """exp's 2**n, as AVX-512's vscalef (where the CPU has it) and as two exact factors (elsewhere),
    bit for bit over the whole range of n, subnormal results and overflow to inf included."""
    if not SCALE_BY_VSCALEF:
        pytest.skip("this CPU has no AVX-512: exp scales by factors only")

    @numba.njit
    def scale(p, n, by_vscalef, out):
        for i in range(p.size):
            out[i] = _ldexp(p[i], n[i]) if by_vscalef else _scale_by_factors(p[i], n[i])

    low, high, subnormal = (-153, 130, -140) if dtype == np.float32 else (-1078, 1026, -1040)
    n = np.repeat(np.arange(low, high + 1), 64).astype(dtype)
    p = np.random.default_rng(5).uniform(0.7, 1.42, n.size).astype(dtype)  # exp(r) for |r| <= ln2 / 2
    by_vscalef, by_factors = np.empty_like(p), np.empty_like(p)
    scale(p, n, True, by_vscalef)
    scale(p, n, False, by_factors)
    np.testing.assert_array_equal(by_vscalef.view(f"i{p.itemsize}"), by_factors.view(f"i{p.itemsize}"))
    assert np.isinf(by_factors[-1]) and 0 < by_factors[n == subnormal].max() < np.finfo(dtype).tiny


def test_vector_math_is_numba_only():
    with pytest.raises(TypeError, match="Numba-compiled"):
        kernels.vector_math.exp(1.0)


@dtypes_and_sizes(SIZES)
@pytest.mark.parametrize("squared", [True, False], ids=["squared", "absolute"])
def test_pointwise_loss(squared, dtype, size_name, rng, variants):
    n = SIZES[size_name]
    a, b = rng.standard_normal((2, n)).astype(dtype)
    b[::5] = a[::5]  # d = 0: the sign's gradient is 0
    d64 = (a - b).astype(np.float64)  # the difference in the data's dtype, then squared or summed in float64
    want = np.square(d64) if squared else np.abs(d64)
    total = kernels.loss.pointwise_loss_sum(a, b, squared)
    assert type(total) is float
    assert total == pytest.approx(float(np.sum(want)), rel=1e-12)
    variants.assert_ran(kernels.loss.pointwise_loss_sum, size_name)
    out = np.empty_like(a)
    kernels.loss.pointwise_loss_forward(a, b, squared, out)
    assert_close(out, want, dtype)
    variants.assert_ran(kernels.loss.pointwise_loss_forward, size_name)
    grad = rng.standard_normal(n).astype(dtype)
    slope = 2 * d64 if squared else np.sign(d64)
    for upstream, divisor in ((grad, 1.0), (np.array([0.5], dtype), float(n))):  # per element, or one broadcast
        kernels.loss.pointwise_loss_backward(a, b, upstream, squared, divisor, out)
        assert_close(out, upstream.astype(np.float64) / divisor * slope, dtype, scale=np.abs(upstream).max() / divisor)
    variants.assert_ran(kernels.loss.pointwise_loss_backward, size_name)


# --- row-wise ---------------------------------------------------------------------------------

def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _log_softmax(x):
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


ACTIVATIONS = {0: lambda v: v, 1: lambda v: np.maximum(v, 0), 2: np.tanh, 3: lambda v: 1 / (1 + np.exp(-v))}


@dtypes_and_sizes(SHAPES)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_bias_act_forward(act, dtype, size_name, rng, variants):
    x = (rng.standard_normal(SHAPES[size_name]) * 3).astype(dtype)
    bias = rng.standard_normal(x.shape[1]).astype(dtype)
    want = ACTIVATIONS[act](*f64(x + bias))
    out = np.empty_like(x)
    kernels.rowwise.bias_act_forward(x, bias, act, out)
    assert_close(out, want, dtype)
    variants.assert_ran(kernels.rowwise.bias_act_forward, size_name)
    kernels.rowwise.bias_act_forward(x, bias, act, x)  # in place
    np.testing.assert_array_equal(x, out)


def test_bias_act_rejects_unknown_activation():
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match="act must be"):
        kernels.rowwise.bias_act_forward(x, np.zeros(3), 4, x)


@dtypes_and_sizes(SHAPES)
def test_softmax_and_log_softmax(dtype, size_name, rng, variants):
    x = (rng.standard_normal(SHAPES[size_name]) * 5).astype(dtype)
    for kernel, reference in ((kernels.rowwise.softmax_forward, _softmax), (kernels.rowwise.log_softmax_forward, _log_softmax)):
        out = np.empty_like(x)
        kernel(x, out)
        assert_close(out, reference(*f64(x)), dtype, ulps=8, scale=np.abs(x).max())
        variants.assert_ran(kernel, size_name)
        aliased = x.copy()
        kernel(aliased, aliased)
        assert_close(aliased, out, dtype, ulps=8, scale=1)  # the row sum may be vectorised differently


@dtypes_and_sizes(SHAPES)
def test_softmax_backwards(dtype, size_name, rng, variants):
    x = rng.standard_normal(SHAPES[size_name]).astype(dtype)
    grad = rng.standard_normal(x.shape).astype(dtype)
    y = _softmax(x)
    out = np.empty_like(x)
    kernels.rowwise.softmax_backward(grad, y, out)
    g64, y64 = f64(grad, y)
    assert_close(out, y64 * (g64 - (g64 * y64).sum(axis=1, keepdims=True)), dtype, scale=np.abs(grad).max())
    variants.assert_ran(kernels.rowwise.softmax_backward, size_name)
    log_y = _log_softmax(x)
    kernels.rowwise.log_softmax_backward(grad, log_y, out)
    g64, log_y64 = f64(grad, log_y)
    want = g64 - np.exp(log_y64) * g64.sum(axis=1, keepdims=True)
    assert_close(out, want, dtype, ulps=8, scale=np.abs(g64).sum(axis=1).max())
    variants.assert_ran(kernels.rowwise.log_softmax_backward, size_name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_family_is_stable_for_large_logits(dtype):
    x = np.array([[1000, 1000, -1000], [-1e4, -1e4 + 1, -1e4 + 2], [3e4, 0, -3e4]], dtype=dtype)
    out = np.empty_like(x)
    kernels.rowwise.softmax_forward(x, out)
    assert np.isfinite(out).all()
    assert_close(out, _softmax(x.astype(np.float64)), dtype, scale=1)
    kernels.rowwise.log_softmax_forward(x, out)
    assert np.isfinite(out).all()
    assert_close(out, _log_softmax(x.astype(np.float64)), dtype, scale=1)
    loss, counted = kernels.rowwise.cross_entropy_forward(x, np.array([2, 0, 2]), -100, np.empty_like(x))
    assert np.isfinite(loss) and counted == 3  # -log p of a probability that underflows to 0 in float32/64
    want_loss = -np.mean(_log_softmax(x.astype(np.float64))[np.arange(3), [2, 0, 2]])
    assert loss / counted == pytest.approx(want_loss, rel=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_family_propagates_nan(dtype):
    x = np.array([[0.0, np.nan, 1.0], [np.nan, 0.0, 1.0], [0.0, 1.0, 2.0]], dtype=dtype)
    for kernel in (kernels.rowwise.softmax_forward, kernels.rowwise.log_softmax_forward):
        out = np.empty_like(x)
        kernel(x, out)
        assert np.isnan(out[:2]).all(), kernel.__name__
        assert np.isfinite(out[2]).all(), kernel.__name__


@dtypes_and_sizes(SHAPES)
@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_cross_entropy(ignore_index, dtype, size_name, rng, variants):
    logits = (rng.standard_normal(SHAPES[size_name]) * 4).astype(dtype)
    n, c = logits.shape
    targets = rng.integers(0, c, n).astype(np.int64)
    targets[::4] = 3  # ignored where ignore_index is 3
    counted = targets != ignore_index
    probs = np.empty_like(logits)
    loss, count = kernels.rowwise.cross_entropy_forward(logits, targets, ignore_index, probs)
    assert type(loss) is float and count == counted.sum()
    want_loss = -np.sum(_log_softmax(logits.astype(np.float64))[np.arange(n), targets][counted])
    assert loss == pytest.approx(want_loss, rel=8 * float(np.finfo(dtype).eps))
    assert_close(probs, _softmax(*f64(logits)), dtype, ulps=8, scale=1)
    variants.assert_ran(kernels.rowwise.cross_entropy_forward, size_name)

    scale = 1.0 / count
    want_grad = probs.copy()
    want_grad[np.arange(n), targets] -= 1
    want_grad *= dtype(scale)
    want_grad[~counted] = 0
    out = np.empty_like(probs)
    kernels.rowwise.cross_entropy_backward(probs, targets, ignore_index, scale, out)
    assert_close(out, want_grad, dtype, scale=scale)
    variants.assert_ran(kernels.rowwise.cross_entropy_backward, size_name)
    kernels.rowwise.cross_entropy_backward(probs, targets, ignore_index, scale, probs)  # out aliases probs
    np.testing.assert_array_equal(probs, out)


@pytest.mark.parametrize("bad_target", [-1, 5])
def test_cross_entropy_rejects_targets_out_of_range(bad_target):
    logits = np.zeros((2, 5))
    targets = np.array([0, bad_target])
    with pytest.raises(IndexError, match="outside"):
        kernels.rowwise.cross_entropy_forward(logits, targets, -100, np.empty_like(logits))
    with pytest.raises(IndexError, match="outside"):
        kernels.rowwise.cross_entropy_backward(logits, targets, -100, 1.0, np.empty_like(logits))
    total, counted = kernels.rowwise.cross_entropy_forward(logits, targets, bad_target, np.empty_like(logits))  # ignored: fine
    assert counted == 1 and total == pytest.approx(np.log(5))


# --- optimizers -------------------------------------------------------------------------------
# Each fused kernel runs under its optimizer (zgrad.optim), whose state has PyTorch's names, as
# tests/support/optim_reference.py's does: every state entry is compared by name.

OPTIM_CASES = [  # (optimizer, options as PyTorch's), every branch of every kernel
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-2)),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=1e-2, nesterov=True, maximize=True)),
    ("Adam", dict(lr=1e-3)),
    ("Adam", dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, amsgrad=True, maximize=True)),
    ("Adam", dict(lr=1e-3, betas=(0.3, 0.999), amsgrad=True)),  # lerp weight >= 0.5
    ("AdamW", dict(lr=1e-3, weight_decay=0.1, amsgrad=True)),
    ("RMSprop", dict(lr=1e-2)),
    ("RMSprop", dict(lr=1e-2, alpha=0.9, momentum=0.9, centered=True, weight_decay=0.1, maximize=True)),
    ("RMSprop", dict(lr=1e-2, alpha=0.3, centered=True)),  # lerp weight >= 0.5
    ("Adagrad", dict(lr=1e-2)),
    ("Adagrad", dict(lr=1e-2, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.5, maximize=True)),
    ("Adadelta", dict(lr=1.0)),
    ("Adadelta", dict(lr=0.5, rho=0.5, weight_decay=0.1, maximize=True)),
]
# The kernels added later run at the small size only (serial variant): a large case compiles the
# parallel variant of each loop, some 15 s of CI per kernel and dtype.
SERIAL_OPTIM_CASES = [
    ("NAdam", dict(lr=1e-3)),
    ("NAdam", dict(lr=1e-3, betas=(0.3, 0.99), weight_decay=0.1, momentum_decay=0.05, maximize=True)),
    ("NAdam", dict(lr=1e-3, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=1e-3)),
    ("RAdam", dict(lr=1e-3, betas=(0.3, 0.999), weight_decay=0.1, maximize=True)),  # lerp weight >= 0.5
    ("RAdam", dict(lr=1e-3, weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adamax", dict(lr=2e-3)),
    ("Adamax", dict(lr=2e-3, betas=(0.3, 0.99), weight_decay=0.1, maximize=True)),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=0, weight_decay=0.1, maximize=True)),  # averages from step 3
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.06), maximize=True)),
]


def _element_loop(name, options):
    """The ParallelKernel that zgrad.optim.<name> with ``options`` runs."""
    if name == "SGD":
        return kernels.optim._SGD_UPDATES[options.get("momentum", 0) != 0]
    if name in ("Adam", "AdamW"):
        return kernels.optim._ADAM_UPDATES[options.get("amsgrad", False)]
    if name == "RMSprop":
        return kernels.optim._RMSPROP_UPDATES[options.get("centered", False), options.get("momentum", 0) > 0]
    if name == "RAdam":
        return kernels.optim._RADAM_UPDATES[True]  # the last of its _optim_steps
    if name == "ASGD":
        return kernels.optim._ASGD_UPDATES[options.get("t0", 1e6) == 0]
    return {"Adagrad": kernels.optim._adagrad_update, "Adadelta": kernels.optim._adadelta_update,
            "NAdam": kernels.optim._nadam_update, "Adamax": kernels.optim._adamax_update,
            "Rprop": kernels.optim._rprop_update}[name]


OPTIM_STEPS = 4


def _optim_steps(name):
    """How many steps a case runs: RAdam's rectified loop runs from its 6th step on."""
    return 7 if name == "RAdam" else OPTIM_STEPS


def _optimizer_run(name, options, param, grads):
    """``param`` (a copy) and its state after zgrad.optim.<name> applied ``grads`` one by one."""
    import zgrad

    tensor = zgrad.tensor(param.copy())
    optimizer = getattr(zgrad.optim, name)([tensor], **options)
    for grad in grads:
        optimizer.step_with_gradients({tensor: grad})
    return tensor.numpy(), optimizer.state[tensor]


def _reference_run(name, options, param, grads):
    """``param`` (a copy) and its state after tests/support/optim_reference.py's <name> applied
    ``grads`` one by one, in param's dtype."""
    param, state = param.copy(), {}
    for grad in grads:
        REFERENCES[name](param, grad, state, **options)
    return param, state


@dtypes_and_sizes(SIZES)
@pytest.mark.parametrize("name, options", OPTIM_CASES, ids=lambda v: v if isinstance(v, str) else str(v))
def test_optimizer_step(name, options, dtype, size_name, rng, variants):
    check_optimizer_step(name, options, dtype, size_name, rng, variants)


@dtypes_and_sizes(["small"])
@pytest.mark.parametrize("name, options", SERIAL_OPTIM_CASES, ids=lambda v: v if isinstance(v, str) else str(v))
def test_optimizer_step_serial(name, options, dtype, size_name, rng, variants):
    check_optimizer_step(name, options, dtype, size_name, rng, variants)


def check_optimizer_step(name, options, dtype, size_name, rng, variants):
    """zgrad.optim.<name>'s fused kernel against the numpy reference (and that against itself in
    long double): the parameter and every state entry, and the variant that ran."""
    n = SIZES[size_name]
    param = rng.standard_normal(n).astype(dtype)
    grads = [rng.standard_normal(n).astype(dtype) for _ in range(_optim_steps(name))]
    grads_before = [g.copy() for g in grads]
    got, state = _optimizer_run(name, options, param, grads)
    want, want_state = _reference_run(name, options, param, grads)
    exact, exact_state = _reference_run(name, options, param.astype(np.longdouble),
                                        [g.astype(np.longdouble) for g in grads])
    for g, before in zip(grads, grads_before):
        np.testing.assert_array_equal(g, before)
    assert sorted(state) == sorted(want_state)
    # Four steps of recurrences in which g = ±grad + wd*param may cancel, where a fused multiply-add
    # of the kernel rounds once and numpy twice: a few of a million elements drift by tens of ulps.
    # Where the reference itself strays from the same steps in long double (centered RMSprop's
    # square root of a running variance that cancels), zgrad may stray from it by twice as much.
    eps = np.finfo(dtype).eps
    for key, expected in [("param", want), *want_state.items()]:
        if key != "step":
            value, truth = (got, exact) if key == "param" else (state[key], exact_state[key])
            bound = 64 * eps * (np.abs(expected) + np.abs(expected).max(initial=0)) + 2 * np.abs(expected - truth)
            outside = np.flatnonzero(np.abs(value - expected) > bound)
            assert outside.size == 0, (f"{key}: {outside.size} elements outside the bound, first at {outside[:1]}: "
                                       f"{value.flat[outside[:1]]} against {expected.flat[outside[:1]]}")
    assert state.get("step") == want_state.get("step")
    variants.assert_ran(_element_loop(name, options), size_name)


# (element loop, state arrays it takes, its scalar arguments), each with its options on.
LOOP_CALLS = {
    "sgd momentum": (kernels.optim._SGD_UPDATES[True], 1, (0.05, 0.9, 0.1, 0.01, True, False, True)),
    "adam amsgrad": (kernels.optim._ADAM_UPDATES[True], 3, (0.1, 0.999, 1e-3, 0.3, 1e-8, 0.1, 0.99, True, False)),
    "adamw": (kernels.optim._ADAM_UPDATES[False], 3, (0.1, 0.999, 1e-3, 0.3, 1e-8, 0.1, 0.99, False, True)),
    "rmsprop centered momentum": (kernels.optim._RMSPROP_UPDATES[True, True], 3, (1e-2, 0.9, 1e-8, 0.1, 0.9, True)),
    "rmsprop": (kernels.optim._RMSPROP_UPDATES[False, False], 3, (1e-2, 0.9, 1e-8, 0.1, 0.0, False)),
    "adagrad": (kernels.optim._adagrad_update, 1, (1e-2, 0.1, 1e-10, True)),
    "adadelta": (kernels.optim._adadelta_update, 2, (1.0, 0.9, 1e-6, 0.1, True)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("loop", LOOP_CALLS)
def test_optimizer_variants_agree(loop, dtype, rng):
    """The serial and the parallel variant of each element loop, on the same arrays, agree to an
    ulp or two (LLVM fuses multiply-adds differently in vectorized loops)."""
    kernel, arrays, scalars = LOOP_CALLS[loop]
    n = SIZES["large"]
    param, grad, *state = (rng.standard_normal(n).astype(dtype) for _ in range(5))
    state = [np.abs(s) + 1 for s in state]
    state[1] *= 0.01  # RMSprop's running mean of g well below its running mean of g*g: no sqrt of < 0
    results = []
    for variant in (kernel.serial, kernel.parallel):
        copies = [a.copy() for a in (param, grad, *state[:arrays])]
        variant(*copies, *scalars)
        results.append(copies)
    for serial, parallel in zip(*results):
        assert np.isfinite(serial).all()
        assert_close(parallel, serial, dtype, scale=np.abs(serial).max())


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, options", OPTIM_CASES + SERIAL_OPTIM_CASES,
                         ids=lambda v: v if isinstance(v, str) else str(v))
def test_optimizers_match_torch(name, options, dtype, rng):
    torch = pytest.importorskip("torch")
    n = 4099
    param = rng.standard_normal(n).astype(dtype)
    grads = [rng.standard_normal(n).astype(dtype) for _ in range(3)]
    got, state = _optimizer_run(name, options, param, grads)
    t_param = torch.tensor(param, requires_grad=True)
    opt = getattr(torch.optim, name)([t_param], foreach=False, **options)
    for grad in grads:
        t_param.grad = torch.tensor(grad)
        opt.step()
    for key, want in [("param", t_param), *opt.state[t_param].items()]:
        if key != "step":
            want = want.detach().numpy()
            assert_close(got if key == "param" else state[key], want, dtype, scale=np.abs(want).max())


def test_optimizers_reject_mismatched_state():
    param = np.zeros(4)
    with pytest.raises(ValueError, match=r"sgd_step: momentum_buf has 3 elements; expected as many as param \(4\)"):
        kernels.optim.sgd_step(param, np.zeros(4), np.zeros(3), 0.1, 0.9, 0.0, 0.0, False, False, False)
    kernels.optim.sgd_step(param, np.zeros(4), np.zeros(0), 0.1, 0.0, 0.0, 0.0, False, False, False)  # no momentum: unused
    with pytest.raises(ValueError, match="adam_step: exp_avg_sq has 2 elements"):
        kernels.optim.adam_step(param, np.zeros(4), np.zeros(4), np.zeros(2), np.zeros(0), 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, False,
                    False, False)
    with pytest.raises(ValueError, match="adam_step: max_exp_avg_sq has 0 elements"):
        kernels.optim.adam_step(param, np.zeros(4), np.zeros(4), np.zeros(4), np.zeros(0), 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, True,
                    False, False)
    with pytest.raises(ValueError, match="adam_step: step must be"):
        kernels.optim.adam_step(param, np.zeros(4), np.zeros(4), np.zeros(4), np.zeros(0), 0, 1e-3, 0.9, 0.999, 1e-8, 0.0, False,
                    False, False)
    with pytest.raises(ValueError, match="rmsprop_step: grad_avg has 3 elements"):
        kernels.optim.rmsprop_step(param, np.zeros(4), np.zeros(4), np.zeros(3), np.zeros(0), 1e-2, 0.99, 1e-8, 0.0, 0.0, True,
                       False)
    with pytest.raises(ValueError, match="rmsprop_step: momentum_buffer has 0 elements"):
        kernels.optim.rmsprop_step(param, np.zeros(4), np.zeros(4), np.zeros(0), np.zeros(0), 1e-2, 0.99, 1e-8, 0.0, 0.9, False,
                       False)
    with pytest.raises(ValueError, match="adagrad_step: state_sum has 5 elements"):
        kernels.optim.adagrad_step(param, np.zeros(4), np.zeros(5), 1, 1e-2, 0.0, 0.0, 1e-10, False)
    with pytest.raises(ValueError, match="adagrad_step: step must be"):
        kernels.optim.adagrad_step(param, np.zeros(4), np.zeros(4), 0, 1e-2, 0.0, 0.0, 1e-10, False)
    with pytest.raises(ValueError, match="adadelta_step: grad has 3 elements"):
        kernels.optim.adadelta_step(param, np.zeros(3), np.zeros(4), np.zeros(4), 1.0, 0.9, 1e-6, 0.0, False)
    with pytest.raises(ValueError, match="nadam_step: exp_avg_sq has 2 elements"):
        kernels.optim.nadam_step(param, np.zeros(4), np.zeros(4), np.zeros(2), 1, 0.9, 2e-3, 0.9, 0.999, 1e-8, 0.0,
                                 4e-3, False, False)
    with pytest.raises(ValueError, match="nadam_step: step must be"):
        kernels.optim.nadam_step(param, np.zeros(4), np.zeros(4), np.zeros(4), 0, 0.9, 2e-3, 0.9, 0.999, 1e-8, 0.0,
                                 4e-3, False, False)
    with pytest.raises(ValueError, match="radam_step: exp_avg has 5 elements"):
        kernels.optim.radam_step(param, np.zeros(4), np.zeros(5), np.zeros(4), 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, False,
                                 False)
    with pytest.raises(ValueError, match="adamax_step: exp_inf has 3 elements"):
        kernels.optim.adamax_step(param, np.zeros(4), np.zeros(4), np.zeros(3), 1, 2e-3, 0.9, 0.999, 1e-8, 0.0, False)
    with pytest.raises(ValueError, match="adamax_step: step must be"):
        kernels.optim.adamax_step(param, np.zeros(4), np.zeros(4), np.zeros(4), 0, 2e-3, 0.9, 0.999, 1e-8, 0.0, False)
    with pytest.raises(ValueError, match="asgd_step: ax has 1 elements"):
        kernels.optim.asgd_step(param, np.zeros(4), np.zeros(1), 0.01, 1.0, 1e-4, 0.0, False)
    with pytest.raises(ValueError, match="rprop_step: step_size has 0 elements"):
        kernels.optim.rprop_step(param, np.zeros(4), np.zeros(4), np.zeros(0), 0.5, 1.2, 1e-6, 50.0, False)


# --- matmul -----------------------------------------------------------------------------------

@pytest.mark.parametrize("m, k, n, b_transposed", [
    (64, 256, 1024, True),   # the swapped case: short A times a transposed B
    (8, 64, 512, True),
    (64, 256, 1024, False),  # not swapped: B is C-order
    (256, 256, 512, True),   # not swapped: A is not short enough
])
def test_cpu_matmul_layouts_agree_with_numpy(m, k, n, b_transposed, rng):
    from zgrad.kernels.cpu import backend as cpu

    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32).T if b_transposed else rng.standard_normal((k, n)).astype(np.float32)
    out = np.empty((m, n), np.float32)
    assert cpu.matmul(a, b, out) is out
    assert out.flags.c_contiguous
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)


# --- compilation and import behaviour ---------------------------------------------------------

def _run_python(code: str, env: dict | None = None, *args: str) -> str:
    """stdout of ``code`` in a fresh interpreter; ``env`` adds to this environment (None removes)."""
    environment = {name: value for name, value in {**os.environ, **(env or {})}.items() if value is not None}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                            capture_output=True, text=True, timeout=120, env=environment)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_import_compiles_nothing_and_starts_no_threads():
    out = _run_python("""
        import json
        import numba
        from numba.core.dispatcher import Dispatcher
        from numba.np.ufunc import parallel
        from zgrad.kernels import _jit
        from zgrad.kernels.cpu.kernels import elementwise, optim, rowwise
        kernels = {}
        for module in (elementwise, optim, rowwise):
            for name, value in vars(module).items():
                if isinstance(value, (Dispatcher, _jit.ParallelKernel)):
                    kernels[module.__name__ + "." + name] = len(value.signatures)
        print(json.dumps({"kernels": kernels, "threads_started": parallel._is_initialized}))
    """)
    report = json.loads(out)
    assert len(report["kernels"]) >= sum(len(m.__all__) for m in PUBLIC_KERNEL_MODULES)
    assert not any(report["kernels"].values()), report["kernels"]
    assert report["threads_started"] is False


def test_small_layers_do_not_start_the_threading_layer():
    """Serial calls never touch Numba's threading layer (fork safety relies on it, see _jit.py):
    the normalization kernels used to ask numba.get_num_threads() for their task count, which
    starts it."""
    out = _run_python("""
        import json
        from numba.np.ufunc import parallel
        import zgrad
        from zgrad import nn
        x = zgrad.randn(8, 4, 5, requires_grad=True)
        y = nn.BatchNorm1d(4)(x) + nn.GroupNorm(2, 4)(x) + nn.LayerNorm(5)(x)
        y.sum().backward()
        print(json.dumps({"threads_started": parallel._is_initialized}))
    """)
    assert json.loads(out)["threads_started"] is False


_FORK_AFTER_PARALLEL = """
    import os, json
    import numpy as np
    from zgrad.kernels import _jit
    from zgrad.kernels.cpu import kernels
    x = np.linspace(-3, 3, 1 << 21).astype(np.float32)
    out = np.empty_like(x)
    kernels.elementwise.tanh_forward(x, out)  # parallel: starts the layer
    pid = os.fork()
    if pid == 0:  # the child: serial kernels, same results
        again = np.empty_like(x)
        kernels.elementwise.tanh_forward(x, again)
        os._exit(0 if _jit._LAYER.forked and np.array_equal(again, out) else 3)
    _, status = os.waitpid(pid, 0)
    import time
    start = time.process_time()
    time.sleep(0.3)  # the pool's threads sleep too: no spinning between regions
    print(json.dumps({"child_status": status, "parent_forked": _jit._LAYER.forked,
                      "layer": __import__("numba").threading_layer(), "policy_left": os.environ.get("OMP_WAIT_POLICY"),
                      "idle_cpu_below_0.1s": time.process_time() - start < 0.1}))
"""


@pytest.mark.parametrize("layer", ["workqueue", "omp"])
def test_a_child_forked_after_parallel_kernels_runs_them_serially(layer):
    """GNU OpenMP cannot run parallel regions in a child forked after the parent used it (Numba
    terminates the child): kernels run serial there, on either layer, and give the same results;
    OpenMP's layer starts with the passive wait policy and leaves the environment as it was."""
    try:
        report = json.loads(_run_python(_FORK_AFTER_PARALLEL, {"NUMBA_NUM_THREADS": "2",
                                                               "NUMBA_THREADING_LAYER": layer}))
    except AssertionError as error:
        if "No threading layer could be loaded" in str(error):
            pytest.skip(f"Numba's {layer} layer is not available here")
        raise
    assert report == {"child_status": 0, "parent_forked": False, "layer": layer, "policy_left": None,
                      "idle_cpu_below_0.1s": True}


_LAYER_CHOSEN = """
    import ctypes, json, sys
    import numpy as np
    if sys.argv[1] == "preloaded":  # as torch does: its own libgomp.so.1, loaded before zgrad's first region
        ctypes.CDLL("libgomp.so.1")
    import numba
    from zgrad.kernels.cpu import kernels
    x = np.linspace(-3, 3, 1 << 21).astype(np.float32)
    kernels.elementwise.tanh_forward(x, np.empty_like(x))  # parallel: starts the layer
    print(json.dumps(numba.threading_layer()))
"""


@pytest.mark.parametrize("libgomp", ["absent", "preloaded"])
def test_the_default_layer_is_passive_openmp_unless_another_library_loaded_libgomp(libgomp):
    """zgrad starts OpenMP's layer (passive) where it loads, and workqueue's where a libgomp.so.1
    is mapped already: that runtime would run zgrad's regions with its owner's wait policy."""
    import ctypes.util
    import importlib.util

    # Found, not loaded: a libgomp loaded into this process would choose the layer of its later tests.
    if ctypes.util.find_library("gomp") is None or importlib.util.find_spec("numba.np.ufunc.omppool") is None:
        pytest.skip("no GNU OpenMP runtime here: the layer is workqueue's")
    environment = {name: None for name in ("NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY")}
    layer = json.loads(_run_python(_LAYER_CHOSEN, {"NUMBA_NUM_THREADS": "2", **environment}, libgomp))
    assert layer == {"absent": "omp", "preloaded": "workqueue"}[libgomp]


def test_task_count_is_one_below_the_parallel_threshold():
    kernel = kernels.norm.group_norm_backward
    assert kernel.task_count(kernel.min_size - 1) == 1
    assert kernel.task_count(kernel.min_size) >= 1


def test_import_zgrad_does_not_import_numba():
    out = _run_python("import sys, zgrad; print('numba' in sys.modules)")
    assert out.strip() == "False"


def test_serial_and_parallel_variants_are_cached_separately(tmp_path):
    code = """
        import sys
        import numpy as np
        from zgrad.kernels import _jit
        from zgrad.kernels.cpu import kernels
        if sys.argv[1:] == ["edited"]:  # as if a helper module such as vector_math.py had changed
            _jit._kernel_sources_digest = lambda: "edited"
        for n in (10, _jit.PARALLEL_MIN_SIZE):
            x = np.linspace(-1, 1, n)
            out = np.empty_like(x)
            kernels.elementwise.relu_forward(x, out)
            assert np.array_equal(out, np.maximum(x, 0))
        stats = [kernels.elementwise.relu_forward.serial.stats, kernels.elementwise.relu_forward.parallel.stats]
        print(sum(len(s.cache_hits) for s in stats), sum(len(s.cache_misses) for s in stats))
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_NUM_THREADS": "2"}
    assert _run_python(code, env).split() == ["0", "2"]  # cold: both variants compile
    assert _run_python(code, env).split() == ["2", "0"]  # warm: both load, neither overwrote the other
    assert _run_python(code, env, "edited").split() == ["0", "2"]  # a sibling source changed: recompile


def test_one_numba_thread_runs_the_serial_variant_at_every_size():
    """With NUMBA_NUM_THREADS=1 the parallel variant would only cost (the loop is handed to the
    pool's one thread and waited for: SGD's update of 2**20 floats took 1.6x the serial variant's
    time); big calls run the serial one, compile nothing else and never start the threading layer."""
    out = _run_python("""
        import json
        import numpy as np
        from numba.np.ufunc import parallel
        from zgrad.kernels import _jit
        from zgrad.kernels.cpu import kernels
        n = 2 * _jit.PARALLEL_MIN_SIZE
        x = np.linspace(-1, 1, n)
        out = np.empty_like(x)
        kernels.elementwise.relu_forward(x, out)
        param, grad = np.ones(n, np.float32), np.full(n, 2, np.float32)
        kernels.optim.sgd_step(param, grad, np.empty(0, np.float32), 0.25, 0.0, 0.0, 0.0, False, True, False)
        print(json.dumps({"relu": bool(np.array_equal(out, np.maximum(x, 0))), "sgd": float(param.max()),
                          "parallel": len(kernels.elementwise.relu_forward.parallel.signatures), "serial": len(kernels.elementwise.relu_forward.serial.signatures),
                          "tasks": kernels.elementwise.relu_forward.task_count(n), "threads_started": parallel._is_initialized}))
    """, {"NUMBA_NUM_THREADS": "1"})
    assert json.loads(out) == {"relu": True, "sgd": 0.5, "parallel": 0, "serial": 1, "tasks": 1, "threads_started": False}


def test_every_public_kernel_is_documented():
    for module in PUBLIC_KERNEL_MODULES:
        for name in module.__all__:
            assert getattr(module, name).__doc__, f"{module.__name__}.{name}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("rows", [1, 4, 9])
def test_running_rows_match_numpy(dtype, rows, rng):
    """The row kernel of cumsum/cumprod (four rows at a time, then the rest one by one), forward
    and from the end, against numpy's accumulate."""
    x = rng.integers(-3, 4, (rows, 37)).astype(dtype) if np.dtype(dtype).kind == "i" else \
        rng.uniform(0.5, 1.5, (rows, 37)).astype(dtype)
    for product, ufunc in ((False, np.add), (True, np.multiply)):
        for reverse in (False, True):
            out = np.empty_like(x)
            kernels.scan.running_rows(x, product, reverse, out)
            want = np.flip(ufunc.accumulate(np.flip(x, 1), axis=1), 1) if reverse else ufunc.accumulate(x, axis=1)
            np.testing.assert_allclose(out, want, rtol=1e-6)


@pytest.mark.parametrize("largest", [True, False])
def test_cumextreme_rows_take_the_latest_tie_and_keep_a_nan(largest):
    """cummax/cummin's kernel over 9 rows (two blocks of four and one more), with ties and NaNs,
    against a plain loop of PyTorch's rule: the latest index on ties, a NaN once one is seen."""
    x = np.random.default_rng(5).integers(0, 4, (9, 23)).astype(np.float64)
    x[2, 7] = x[5, 0] = x[8, 22] = np.nan
    values, indices = np.empty_like(x), np.empty(x.shape, np.int64)
    kernels.scan.cumextreme(x, largest, values, indices)
    for r in range(x.shape[0]):
        best, at = x[r, 0], 0
        for j, v in enumerate(x[r]):
            if np.isnan(v) or (not np.isnan(best) and (v >= best if largest else v <= best)):
                best, at = v, j
            np.testing.assert_equal((values[r, j], indices[r, j]), (best, at))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 9), (4, 1), (7, 33), (9, 1000)])
def test_row_extremes_and_non_zero_counts(dtype, shape):
    """extreme_rows, extremes_rows (min and max in one pass) and the non-zero counts against
    numpy, with NaN winning in a row that has one, zeros of both signs and infinities."""
    rng = np.random.default_rng(17)
    x = rng.integers(-3, 4, shape).astype(dtype)
    x[0, -1] = np.nan
    x[-1, 0] = -np.inf
    x[shape[0] // 2, shape[1] // 2] = -0.0
    for largest in (True, False):
        out = np.empty(shape[0], dtype)
        kernels.reduce.extreme_rows(x, largest, out)
        np.testing.assert_array_equal(out, np.max(x, axis=1) if largest else np.min(x, axis=1))
    smallest, largest = np.empty(shape[0], dtype), np.empty(shape[0], dtype)
    kernels.reduce.extremes_rows(x, smallest, largest)
    np.testing.assert_array_equal(smallest, np.min(x, axis=1))
    np.testing.assert_array_equal(largest, np.max(x, axis=1))
    counts = np.empty(shape[0], np.int64)
    kernels.reduce.count_nonzero_rows(x, counts)
    np.testing.assert_array_equal(counts, np.count_nonzero(x, axis=1))
    total = np.empty(1, np.int64)
    kernels.reduce.count_nonzero(x.reshape(-1), total)
    assert total[0] == np.count_nonzero(x)

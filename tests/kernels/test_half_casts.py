"""The float32 <-> float16/bfloat16 cast kernels against numpy's and ml_dtypes' casts, bit for bit,
and the backend's ``copy`` choosing them (views and small arrays included)."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from zgrad.kernels.cpu import backend, kernels

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 6e-8, 3e-8, 65504.0, 65519.99, 65520.0,
            1.0000001, 3.4e38, -3.4e38, 1.17549435e-38]


def _float32_patterns() -> np.ndarray:
    """float32 bit patterns over every exponent and sign (a stride through all of them, random ones),
    the halfway cases of both roundings (bfloat16 drops 16 bits, float16 13 of the significand)
    with their neighbours, and the specials."""
    rng = np.random.default_rng(7)
    high = rng.integers(0, 1 << 32, 20_000, dtype=np.uint64).astype(np.uint32)
    halfway = [(high & ~np.uint32(0xFFFF)) | np.uint32(v) for v in (0x7FFF, 0x8000, 0x8001, 0x18000)]
    halfway += [(high & ~np.uint32(0x1FFF)) | np.uint32(v) for v in (0x0FFF, 0x1000, 0x1001, 0x3000)]
    bits = np.concatenate([np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32),
                           rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32), *halfway])
    return np.concatenate([bits.view(np.float32), np.array(SPECIALS, np.float32)])


def _numpy_cast(x: np.ndarray, dtype) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow to inf, NaN
        return x.astype(dtype)


@pytest.mark.parametrize("dtype", [BFLOAT16, np.dtype(np.float16)], ids=["bfloat16", "float16"])
def test_narrowing_matches_the_reference_cast(dtype):
    """Rounding to nearest even, overflow to inf, subnormals: the reference's bits; NaN stays NaN
    (for bfloat16 the quiet NaN of its sign, as ml_dtypes)."""
    if dtype == np.float16 and not kernels.half_casts.FLOAT16_IN_HARDWARE:
        pytest.skip("no F16C: float16 casts stay numpy's")
    x = _float32_patterns()
    out = np.empty(x.size, np.uint16)
    kernel = kernels.half_casts.float32_to_bfloat16 if dtype == BFLOAT16 else kernels.half_casts.float32_to_float16
    kernel(x, out)
    want = _numpy_cast(x, dtype).view(np.uint16)
    nan = np.isnan(x)
    np.testing.assert_array_equal(out[~nan], want[~nan])
    assert np.isnan(out[nan].view(dtype).astype(np.float32)).all()
    if dtype == BFLOAT16:
        np.testing.assert_array_equal(out[nan], want[nan])


@pytest.mark.parametrize("dtype", [BFLOAT16, np.dtype(np.float16)], ids=["bfloat16", "float16"])
def test_widening_is_exact(dtype):
    """All 65536 bit patterns widen to the reference's float32 bits (NaN to a NaN)."""
    if dtype == np.float16 and not kernels.half_casts.FLOAT16_IN_HARDWARE:
        pytest.skip("no F16C: float16 casts stay numpy's")
    bits = np.arange(1 << 16, dtype=np.uint16)
    out = np.empty(bits.size, np.float32)
    kernel = kernels.half_casts.bfloat16_to_float32 if dtype == BFLOAT16 else kernels.half_casts.float16_to_float32
    kernel(bits, out)
    want = bits.view(dtype).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(out[~nan].view(np.uint32), want[~nan].view(np.uint32))
    assert np.isnan(out[nan]).all()


@pytest.mark.parametrize("dtype", [BFLOAT16, np.dtype(np.float16)], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "into_transposed", "permuted_alike", "small"])
def test_backend_copy_casts_both_ways(dtype, layout):
    """``copy`` gives numpy's result for C-ordered arrays, from transposed views and into them (by
    the kernels) and for arrays too small for a kernel call (by numpy)."""
    rng = np.random.default_rng(3)
    shape = {"small": (3, 5), "permuted_alike": (7, 11, 13)}.get(layout, (97, 131))
    x = (rng.standard_normal(shape) * 1e3).astype(np.float32)
    x.flat[:len(SPECIALS)] = SPECIALS
    if layout == "transposed":
        x = x.T
    if layout == "permuted_alike":
        x = x.transpose(2, 0, 1)
    want = _numpy_cast(x, dtype)

    def destination(like_dtype):
        if layout == "into_transposed":
            return np.empty(x.shape[::-1], like_dtype).T
        if layout == "permuted_alike":  # laid out as x: cast in memory order
            return np.empty(shape, like_dtype).transpose(2, 0, 1)
        return np.empty(x.shape, like_dtype)

    narrow = backend.copy(x, destination(dtype))
    np.testing.assert_array_equal(narrow.astype(np.float32), want.astype(np.float32))
    wide = backend.copy(narrow, destination(np.float32))
    np.testing.assert_array_equal(wide, want.astype(np.float32))

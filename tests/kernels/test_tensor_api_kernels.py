"""The Numba kernels of the tensor-API ops (pointwise, gather, reduce of zgrad.kernels.cpu.kernels) against numpy,
in float32 and float64, at a small size (serial variant) and above the parallel threshold
(prange variant; float64's carries the ``full`` marker: :func:`kernel_variants.dtypes_and_sizes`)."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_variants import VariantCalls, dtypes_and_sizes
from zgrad.kernels._jit import PARALLEL_MIN_SIZE
from zgrad.kernels.cpu import kernels, tensor_ops

DTYPES = [np.float32, np.float64]
SIZES = {"small": 1001, "large": PARALLEL_MIN_SIZE + 1001}
ROWS = {"small": (7, 33), "large": (2063, 1031)}  # 2063 * 1031 > PARALLEL_MIN_SIZE


def tolerance(dtype):
    return dict(rtol=8 * float(np.finfo(dtype).eps), atol=8 * float(np.finfo(dtype).eps))


@pytest.fixture
def rng():
    return np.random.default_rng(5)


@pytest.fixture
def variants(monkeypatch):
    return VariantCalls(monkeypatch, kernels.gather, kernels.pointwise, kernels.reduce)


def test_variant_check_fails_when_the_other_variant_ran(variants):
    """The check looks at this call, not at what compiled earlier in the process (the old check
    passed for any size once both variants had compiled)."""
    n = SIZES["small"]
    a, out = np.linspace(-1, 1, n), np.empty(n)
    kernels.pointwise.clamp_forward(a, -0.5, 0.5, out)
    with pytest.raises(AssertionError, match="the large calls ran"):
        variants.assert_ran(kernels.pointwise.clamp_forward, "large")
    with pytest.raises(AssertionError, match="the small calls ran"):
        variants.assert_ran(kernels.pointwise.clamp_forward, "small")  # counts restart at each check
    a, out = np.linspace(-1, 1, SIZES["large"]), np.empty(SIZES["large"])
    kernels.pointwise.clamp_forward(a, -0.5, 0.5, out)
    variants.assert_ran(kernels.pointwise.clamp_forward, "large")


@dtypes_and_sizes(SIZES)
def test_pointwise_kernels(rng, dtype, size_name, variants):
    n = SIZES[size_name]
    grad, a, b = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    b[::7] = a[::7]  # ties
    a[5] = np.nan
    out = np.empty(n, dtype)
    kernels.pointwise.clamp_forward(a, -0.5, 0.5, out)
    np.testing.assert_array_equal(out, np.clip(a, dtype(-0.5), dtype(0.5)))
    assert np.isnan(out[5]), "NaN stays NaN"
    variants.assert_ran(kernels.pointwise.clamp_forward, size_name)
    kernels.pointwise.clamp_forward(a, 1.0, -1.0, out)
    assert np.all(out[~np.isnan(a)] == -1), "low > high gives high"
    kernels.pointwise.clamp_backward(grad, a, -0.5, 0.5, out)
    np.testing.assert_array_equal(out, np.where((a >= -0.5) & (a <= 0.5), grad, 0))
    variants.assert_ran(kernels.pointwise.clamp_backward, size_name)
    for take_max in (True, False):
        out_a, out_b = np.empty(n, dtype), np.empty(n, dtype)
        kernels.pointwise.extremum_backward(grad, a, b, take_max, out_a, out_b)
        a_loses, b_loses = (a < b, a > b) if take_max else (a > b, a < b)
        shared = np.where(a == b, grad * dtype(0.5), grad)
        np.testing.assert_array_equal(out_a, np.where(a_loses, 0, shared))
        np.testing.assert_array_equal(out_b, np.where(b_loses, 0, shared))
        assert out_a[5] == grad[5] and out_b[5] == grad[5], "NaN: both get the gradient"
    variants.assert_ran(kernels.pointwise.extremum_backward, size_name)
    c = rng.uniform(0.5, 2, n).astype(dtype)
    for name, expected in [
        ("add_scaled", lambda o: o + dtype(-0.3) * grad),
        ("addcmul", lambda o: o + dtype(0.7) * grad * c),
        ("addcdiv", lambda o: o + dtype(0.7) * grad / c),
    ]:
        target = b.copy()
        want = expected(b.copy())
        kernel = getattr(kernels.pointwise, name)
        kernel(target, grad, -0.3) if name == "add_scaled" else kernel(target, grad, c, 0.7)
        np.testing.assert_allclose(target, want, **tolerance(dtype))
        variants.assert_ran(kernel, size_name)


@pytest.mark.parametrize("inner", [1, 3], ids=["last_dim", "middle_dim"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_scatter_kernels(rng, dtype, inner):
    outer, size, k = 67, 41, 13
    x = rng.standard_normal((outer, size, inner)).astype(dtype)
    index = rng.integers(0, size, (outer, k, inner))
    out = np.empty((outer, k, inner), dtype)
    kernels.gather.gather(x, index, out)
    np.testing.assert_array_equal(out, np.take_along_axis(x, index, axis=1))

    src = rng.standard_normal((outer, k, inner)).astype(dtype)
    added = np.zeros_like(x)
    kernels.gather.scatter_add(index, src, added)
    expected = np.zeros_like(x)
    o, _, i = np.indices(index.shape)
    np.add.at(expected, (o, index, i), src)
    np.testing.assert_allclose(added, expected, **tolerance(dtype))

    unique = np.stack([rng.permutation(size)[:k] for _ in range(outer)])[:, :, None].repeat(inner, axis=2)
    written = x.copy()
    kernels.gather.scatter(unique, src, written)
    expected = x.copy()
    np.put_along_axis(expected, unique, src, axis=1)
    np.testing.assert_array_equal(written, expected)
    value = np.broadcast_to(np.asarray(2.5, dtype), unique.shape)  # a scalar source has zero strides
    kernels.gather.scatter(unique, value, written)
    np.testing.assert_array_equal(np.take_along_axis(written, unique, axis=1), value)

    rows = rng.integers(0, size, k)
    summed = np.zeros_like(x)
    kernels.gather.index_add(rows, src, summed)
    expected = np.zeros_like(x)
    np.add.at(expected, (slice(None), rows), src)
    np.testing.assert_allclose(summed, expected, **tolerance(dtype))


@dtypes_and_sizes(SIZES)
def test_reduce_kernels(rng, dtype, size_name, variants):
    n, c = ROWS[size_name]
    x = (rng.standard_normal((n, c)) * 3 + 100).astype(dtype)  # an offset the one-pass formula would lose
    mean, var = np.empty(n, dtype), np.empty(n, dtype)
    kernels.reduce.var_forward(x, 1.0, mean, var)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(mean, x64.mean(axis=1), **tolerance(dtype))
    np.testing.assert_allclose(var, x64.var(axis=1, ddof=1), rtol=64 * float(np.finfo(dtype).eps))
    variants.assert_ran(kernels.reduce.var_forward, size_name)
    coef = rng.standard_normal(n).astype(dtype)
    out = np.empty_like(x)
    kernels.reduce.var_backward(x, mean, coef, out)
    np.testing.assert_allclose(out, coef[:, None] * (x - mean[:, None]), **tolerance(dtype))

    y = rng.standard_normal((n, c)).astype(dtype) * 5
    y[0, :] = -np.inf
    lse = np.empty(n, dtype)
    kernels.reduce.logsumexp_forward(y, lse)
    with np.errstate(invalid="ignore", divide="ignore"):
        peak = y.astype(np.float64).max(axis=1, keepdims=True)
        want = np.log(np.exp(y - np.where(np.isinf(peak), 0, peak)).sum(axis=1)) + np.where(np.isinf(peak), 0, peak)[:, 0]
    np.testing.assert_allclose(lse, want, rtol=4 * float(np.finfo(dtype).eps))
    variants.assert_ran(kernels.reduce.logsumexp_forward, size_name)
    g = rng.standard_normal(n).astype(dtype)
    grad = np.empty_like(y)
    kernels.reduce.logsumexp_backward(g[1:], y[1:], lse[1:], grad[1:])
    np.testing.assert_allclose(grad[1:], g[1:, None] * np.exp(y[1:].astype(np.float64) - lse[1:, None]),
                               rtol=8 * float(np.finfo(dtype).eps), atol=8 * float(np.finfo(dtype).eps))

    flat = x.reshape(-1).copy()
    flat[::97] = flat.max()
    share = np.empty_like(flat)
    kernels.reduce.distribute_equal(flat, flat.max(), 3.0, share)
    ties = flat == flat.max()
    np.testing.assert_allclose(share, np.where(ties, dtype(3.0 / ties.sum()), 0), **tolerance(dtype))
    variants.assert_ran(kernels.reduce.distribute_equal, size_name)
    flat[3] = np.nan
    kernels.reduce.distribute_equal(flat, np.nan, 2.0, share)
    assert share[3] == 2.0 and share.sum() == 2.0, "a NaN maximum: the gradient goes to the NaNs"


@dtypes_and_sizes(SIZES)
def test_extreme_kernels(rng, dtype, size_name, variants):
    """The row maxima and minima, alone and both in one pass, with NaN winning in its row, and one
    long row (a full reduction) cut into a piece per thread by the host code."""
    n, c = ROWS[size_name]
    x = rng.standard_normal((n, c)).astype(dtype)
    x[1, c // 2] = np.nan
    x[2, :] = -np.inf
    out, smallest, largest = np.empty(n, dtype), np.empty(n, dtype), np.empty(n, dtype)
    for top, reference in ((True, np.max), (False, np.min)):
        kernels.reduce.extreme_rows(x, top, out)
        np.testing.assert_array_equal(out, reference(x, axis=1))
        variants.assert_ran(kernels.reduce.extreme_rows, size_name)
    kernels.reduce.extremes_rows(x, smallest, largest)
    np.testing.assert_array_equal(smallest, np.min(x, axis=1))
    np.testing.assert_array_equal(largest, np.max(x, axis=1))
    variants.assert_ran(kernels.reduce.extremes_rows, size_name)

    row = rng.standard_normal((1, SIZES[size_name] + 3)).astype(dtype)  # pieces and a tail of a few
    for nan_at in (None, 5, -1):  # in the first piece, in the tail
        if nan_at is not None:
            row[0, nan_at] = np.nan
        for top, reference in ((True, np.max), (False, np.min)):
            tensor_ops.extreme_rows(row, top, out[:1])
            np.testing.assert_array_equal(out[:1], reference(row, axis=1))
        tensor_ops.extremes_rows(row, smallest[:1], largest[:1])
        np.testing.assert_array_equal(smallest[:1], np.min(row, axis=1))
        np.testing.assert_array_equal(largest[:1], np.max(row, axis=1))
    if size_name == "large":
        variants.assert_ran(kernels.reduce.extreme_rows, size_name)  # the pieces, on the threads
        variants.assert_ran(kernels.reduce.extremes_rows, size_name)


@dtypes_and_sizes(SIZES)
def test_sum_kernel(rng, dtype, size_name, variants):
    """Row sums in float64 against numpy's float64 sum, with a NaN and infinities; through the host
    code, a full sum cut into a piece per thread and a sum over the last two of three axes."""
    n, c = ROWS[size_name]
    x = (rng.standard_normal((n, c)) * 3 + 100).astype(dtype)
    x[1, 5], x[2, 3], x[3, :2] = np.nan, np.inf, (np.inf, -np.inf)
    out = np.empty(n, dtype)
    kernels.reduce.sum_rows(x, out)
    # float32: the float64 sum rounds to numpy's; float64: vector lanes of about 32 terms each,
    # against numpy's pairwise sum, a few ulp apart
    rtol = float(np.finfo(dtype).eps) * (1 if dtype == np.float32 else 16)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1).astype(dtype), rtol=rtol)
    variants.assert_ran(kernels.reduce.sum_rows, size_name)

    clean = x[4:]
    for axes, shape in (((0, 1), ()), ((1, 2), (clean.shape[0],))):
        cube = clean.reshape(clean.shape[0], 1, clean.shape[1]) if axes == (1, 2) else clean
        total = np.empty(shape, dtype)
        tensor_ops.sum_over(cube, axes, False, total)
        # float32: summed in float64, then rounded; float64: as the rows above (vector lanes, as
        # wide as the CPU's, against numpy's pairwise sum: 3.2 ulp apart on a 2-core AMD EPYC)
        np.testing.assert_allclose(total, cube.astype(np.float64).sum(axis=axes).astype(dtype),
                                   rtol=2 * float(np.finfo(dtype).eps) if dtype == np.float32 else rtol)


@dtypes_and_sizes(SIZES)
def test_prod_backward_kernel(rng, dtype, size_name, variants):
    n, c = ROWS[size_name]
    x = (1 + 0.01 * rng.standard_normal((n, c))).astype(dtype)  # products of ~1000 factors stay finite
    x[1, 5] = 0  # one zero: only its own gradient is not zero
    x[2, [3, 7]] = 0  # two zeros: every gradient is zero
    g = rng.standard_normal(n).astype(dtype)
    out = np.empty_like(x)
    kernels.reduce.prod_backward(x, g, out)
    x64 = x.astype(np.float64)
    ones = np.ones((n, 1))
    before = np.cumprod(np.concatenate([ones, x64[:, :-1]], axis=1), axis=1)
    after = np.cumprod(np.concatenate([ones, x64[:, :0:-1]], axis=1), axis=1)[:, ::-1]
    np.testing.assert_allclose(out, g[:, None] * before * after, rtol=4 * c * float(np.finfo(dtype).eps), atol=0)
    assert np.count_nonzero(out[1]) == 1 and out[1, 5] != 0 and not np.any(out[2])
    variants.assert_ran(kernels.reduce.prod_backward, size_name)

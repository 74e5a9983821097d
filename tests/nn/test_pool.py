"""max_pool2d, avg_pool2d, adaptive_avg_pool2d and their modules: forward and gradient against
PyTorch (float32, float64) and float64 finite differences, over kernel / stride / padding /
dilation / ceil_mode / count_include_pad combinations; argmax indices; NaN; error texts; the
kernels releasing the GIL."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import zgrad
from helpers import case, check_finite_differences, check_torch, require_torch, torch
from zgrad import nn


def F(lib):
    return lib.nn.functional


CASES = [
    case("max_k2", lambda lib, x: F(lib).max_pool2d(x, 2), (2, 3, 6, 6)),
    case("max_k3_s2_p1", lambda lib, x: F(lib).max_pool2d(x, 3, stride=2, padding=1), (2, 3, 7, 6)),
    case("max_overlapping_s1", lambda lib, x: F(lib).max_pool2d(x, 3, stride=1, padding=1), (1, 2, 5, 5)),
    case("max_rect_dilated_ceil", lambda lib, x: F(lib).max_pool2d(x, (3, 2), (2, 3), (1, 0), (2, 1), ceil_mode=True),
         (2, 2, 9, 8)),
    case("max_ceil_odd", lambda lib, x: F(lib).max_pool2d(x, 2, ceil_mode=True), (2, 2, 7, 5)),
    case("max_ceil_padded", lambda lib, x: F(lib).max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), (1, 2, 6, 6)),
    case("max_unbatched", lambda lib, x: F(lib).max_pool2d(x, 2, stride=1), (3, 4, 5)),
    case("max_transposed_input", lambda lib, x: F(lib).max_pool2d(x.transpose(2, 3), 2), (2, 2, 5, 6)),
    case("avg_k2", lambda lib, x: F(lib).avg_pool2d(x, 2), (2, 3, 6, 6)),
    case("avg_k3_s2_p1", lambda lib, x: F(lib).avg_pool2d(x, 3, stride=2, padding=1), (2, 3, 7, 6)),
    case("avg_exclude_pad", lambda lib, x: F(lib).avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
         (2, 3, 7, 6)),
    case("avg_ceil_include_pad", lambda lib, x: F(lib).avg_pool2d(x, (3, 2), (2, 2), (1, 1), ceil_mode=True),
         (2, 2, 6, 7)),
    case("avg_ceil_exclude_pad", lambda lib, x: F(lib).avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         (2, 2, 6, 8)),
    case("avg_divisor_override", lambda lib, x: F(lib).avg_pool2d(x, 2, stride=1, divisor_override=3), (1, 2, 4, 5)),
    case("avg_unbatched", lambda lib, x: F(lib).avg_pool2d(x, 2), (3, 4, 6)),
    case("adaptive_divisible", lambda lib, x: F(lib).adaptive_avg_pool2d(x, (3, 2)), (2, 3, 6, 6)),
    case("adaptive_uneven", lambda lib, x: F(lib).adaptive_avg_pool2d(x, (4, 3)), (2, 3, 7, 8)),
    case("adaptive_global", lambda lib, x: F(lib).adaptive_avg_pool2d(x, 1), (2, 3, 5, 4)),
    case("adaptive_none_entry", lambda lib, x: F(lib).adaptive_avg_pool2d(x, (None, 2)), (2, 3, 5, 7)),
    case("adaptive_upsampling", lambda lib, x: F(lib).adaptive_avg_pool2d(x, (7, 5)), (1, 2, 4, 3)),
    case("adaptive_unbatched", lambda lib, x: F(lib).adaptive_avg_pool2d(x, 3), (3, 7, 5)),
]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("c", CASES)
def test_pool_matches_torch(c, dtype):
    check_torch(c.fn, c.shapes, dtype=dtype, domain=c.domain)


@pytest.mark.parametrize("c", CASES)
def test_pool_finite_differences(c):
    check_finite_differences(c.fn, c.shapes, domain=c.domain)


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                    dict(kernel_size=(2, 3), stride=1, dilation=(2, 1))])
def test_max_pool2d_indices_match_torch(kwargs):
    """The saved argmax is PyTorch's flat index ih * W + iw, ties going to the first maximum."""
    require_torch()
    x = np.random.default_rng(0).integers(0, 3, size=(2, 3, 7, 6)).astype(np.float32)  # many ties
    out, indices = nn.MaxPool2d(**kwargs, return_indices=True)(zgrad.tensor(x))
    ref, ref_indices = torch.nn.MaxPool2d(**kwargs, return_indices=True)(torch.tensor(x))
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices.numpy(), ref_indices.numpy())
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


@pytest.mark.torch
def test_max_pool2d_with_indices_backward_and_nan():
    """Gradients flow through the values of (values, indices); a NaN in a window is its maximum."""
    require_torch()
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 4))
    x[0, 0, 1, 2] = np.nan
    zx, tx = zgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (out, indices), (ref, ref_indices) = (F(zgrad).max_pool2d(zx, 2, return_indices=True),
                                          F(torch).max_pool2d(tx, 2, return_indices=True))
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(indices.numpy(), ref_indices.numpy())
    assert not indices.requires_grad
    (out * 2).sum().backward()
    (ref * 2).sum().backward()
    np.testing.assert_array_equal(zx.grad.numpy(), tx.grad.numpy())


@pytest.mark.torch
def test_pool_modules_match_torch():
    require_torch()
    x = np.random.default_rng(2).standard_normal((2, 3, 9, 8)).astype(np.float32)
    pairs = [
        (nn.MaxPool2d(3, 2, 1, ceil_mode=True), torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)),
        (nn.AvgPool2d(3, 2, 1, count_include_pad=False), torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False)),
        (nn.AdaptiveAvgPool2d((2, None)), torch.nn.AdaptiveAvgPool2d((2, None))),
    ]
    for module, reference in pairs:
        zx, tx = zgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, ref = module(zx), reference(tx)
        np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
        out.sum().backward()
        ref.sum().backward()
        np.testing.assert_allclose(zx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert repr(nn.MaxPool2d(3, 2, 1)) == repr(torch.nn.MaxPool2d(3, 2, 1))
    assert repr(nn.AdaptiveAvgPool2d((2, None))) == repr(torch.nn.AdaptiveAvgPool2d((2, None)))


def _raises(error, match, fn, *args, **kwargs):
    with pytest.raises(error, match=match):
        fn(*args, **kwargs)


def test_pool_errors():
    x = zgrad.randn(1, 1, 5, 5)
    _raises(RuntimeError, r"MaxPool2d\(kernel_size=3, .*\): Given input size: \(1x2x2\). Calculated output size: "
            r"\(1x0x0\). Output size is too small", nn.MaxPool2d(3), zgrad.randn(1, 1, 2, 2))
    _raises(RuntimeError, r"AvgPool2d\(.*\): Given input size: \(1x2x2\). Calculated output size: \(1x0x0\)",
            nn.AvgPool2d(3), zgrad.randn(1, 1, 2, 2))
    _raises(RuntimeError, "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3 and "
            "dilation=1", F(zgrad).max_pool2d, x, 3, padding=2)
    _raises(RuntimeError, "pad should be at most half of kernel size, but got pad=2 and kernel_size=3",
            F(zgrad).avg_pool2d, x, 3, padding=2)
    _raises(RuntimeError, r"max_pool2d: non-empty 3D or 4D \(batch mode\) tensor expected for input, got input of "
            r"size \[1, 2\]", F(zgrad).max_pool2d, zgrad.randn(1, 2), 2)
    _raises(RuntimeError, "stride should be greater than zero", F(zgrad).max_pool2d, x, 2, stride=0)
    _raises(RuntimeError, "kernel size should be greater than zero", F(zgrad).avg_pool2d, x, 0)
    _raises(RuntimeError, "dilation should be greater than zero", F(zgrad).max_pool2d, x, 2, dilation=0)
    _raises(RuntimeError, "divisor must be not zero", F(zgrad).avg_pool2d, x, 2, divisor_override=0)
    _raises(RuntimeError, r"adaptive_avg_pool2d\(\): Expected 3D or 4D tensor, but got \[1, 2\]",
            nn.AdaptiveAvgPool2d(2), zgrad.randn(1, 2))
    _raises(RuntimeError, "Expected input to have non-zero size for non-batch dimensions",
            F(zgrad).adaptive_avg_pool2d, zgrad.randn(1, 2, 0, 3), 2)
    _raises(RuntimeError, "expected a floating point input", F(zgrad).max_pool2d,
            zgrad.zeros(1, 1, 4, 4, dtype=np.int64), 2)


def test_pool_kernels_release_the_gil():
    """A Python thread keeps running while a pooling kernel computes (kernels are compiled nogil).

    The input is below the size from which the parallel variant runs: Numba's parallel regions
    release the GIL anyway, the serial variant only with ``nogil``.
    """
    x = zgrad.randn(1, 1, 120, 120)
    calls = 8
    F(zgrad).avg_pool2d(x, 60, stride=1)  # compile
    start = time.perf_counter()
    F(zgrad).avg_pool2d(x, 60, stride=1)
    duration = time.perf_counter() - start
    ticks = []
    started = threading.Event()

    def kernels():
        started.set()
        for _ in range(calls):
            F(zgrad).avg_pool2d(x, 60, stride=1)

    thread = threading.Thread(target=kernels)
    thread.start()
    started.wait(5)
    while thread.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    thread.join()
    # Holding the GIL, each kernel call would let this loop tick about once.
    assert duration > 0.003 and len(ticks) > 3 * calls, (duration, len(ticks))

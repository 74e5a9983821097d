"""FractionalMaxPool2d / FractionalMaxPool3d and F.fractional_max_pool2d / 3d against PyTorch: with
the same ``_random_samples``, outputs, int64 indices and input gradients are PyTorch's for many
shapes, kernels, output sizes and ratios (ties and NaNs included), batched and unbatched, float32
and float64; samples drawn from zgrad's generator when none are given; PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda, strict_cuda
from helpers import require_torch

F = zgrad.nn.functional
DTYPES = (np.float32, np.float64)


def _case_2d(rng: np.random.Generator, ratio: bool) -> dict:
    batched = rng.random() < 0.75
    h, w = (int(v) for v in rng.integers(3, 17, 2))
    kernel = (int(rng.integers(1, min(h, 4) + 1)), int(rng.integers(1, min(w, 4) + 1)))
    shape = ((int(rng.integers(1, 3)),) if batched else ()) + (int(rng.integers(1, 4)), h, w)
    if ratio:
        size = None
        out_ratio = tuple(float(r) for r in rng.uniform(0.2, 0.95, 2))
        if any(int(s * r) + k - 1 > s for s, r, k in zip((h, w), out_ratio, kernel)):
            return _case_2d(rng, ratio)
    else:
        size, out_ratio = tuple(int(rng.integers(1, s - k + 2)) for s, k in zip((h, w), kernel)), None
    return dict(shape=shape, kernel=kernel, output_size=size, output_ratio=out_ratio)


def _case_3d(rng: np.random.Generator) -> dict:
    batched = rng.random() < 0.75
    sizes = tuple(int(v) for v in rng.integers(3, 9, 3))
    kernel = tuple(int(rng.integers(1, min(s - 1, 3) + 1)) for s in sizes)
    out = tuple(int(rng.integers(1, s - k + 1)) for s, k in zip(sizes, kernel))  # PyTorch's 3-D rule: o + k <= s
    shape = ((int(rng.integers(1, 3)),) if batched else ()) + (int(rng.integers(1, 3)), *sizes)
    return dict(shape=shape, kernel=kernel, output_size=out, output_ratio=None)


def _input(rng: np.random.Generator, shape: tuple, dtype, ties: bool) -> np.ndarray:
    if ties:  # small integers: many equal maxima in a window, so the scan order shows
        return rng.integers(-2, 3, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _compare(torch, dims: int, case: dict, dtype, seed: int, ties: bool, nan: bool = False) -> None:
    rng = np.random.default_rng(seed)
    x = _input(rng, case["shape"], dtype, ties)
    if nan:
        x.reshape(-1)[rng.choice(x.size, max(1, x.size // 6), replace=False)] = np.nan
    channels = case["shape"][-dims - 1]
    samples = rng.random((2, channels, dims)).astype(dtype)  # more rows than the batch: PyTorch takes the first
    kwargs = dict(output_size=case["output_size"], output_ratio=case["output_ratio"], return_indices=True)
    ours_fn = getattr(zgrad.nn.functional, f"fractional_max_pool{dims}d")
    theirs_fn = getattr(torch.nn.functional, f"fractional_max_pool{dims}d")
    xz, xt = zgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, index = ours_fn(xz, case["kernel"], _random_samples=zgrad.tensor(samples), **kwargs)
    expected, expected_index = theirs_fn(xt, case["kernel"], _random_samples=torch.tensor(samples), **kwargs)
    assert out.shape == tuple(expected.shape) and out.dtype == np.dtype(dtype) and index.dtype == np.int64
    np.testing.assert_array_equal(index.numpy(), expected_index.numpy(), err_msg=str(case))
    np.testing.assert_array_equal(out.detach().numpy(), expected.detach().numpy(), err_msg=str(case))
    upstream = rng.standard_normal(tuple(expected.shape)).astype(dtype)
    (out * zgrad.tensor(upstream)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(xz.grad.numpy(), xt.grad.numpy(), rtol=1e-6 if dtype == np.float32 else 1e-13,
                               err_msg=str(case))


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("seed", range(12))
def test_2d_matches_torch(seed, dtype):
    torch = require_torch()
    rng = np.random.default_rng(seed)
    for i in range(4):
        _compare(torch, 2, _case_2d(rng, ratio=i % 2 == 1), dtype, seed * 10 + i, ties=i < 2)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("seed", range(8))
def test_3d_matches_torch(seed, dtype):
    torch = require_torch()
    rng = np.random.default_rng(100 + seed)
    for i in range(3):
        _compare(torch, 3, _case_3d(rng), dtype, seed * 10 + i, ties=i == 0)


@pytest.mark.torch
@pytest.mark.parametrize("dims", [2, 3])
def test_nan_and_edge_windows_match_torch(dims):
    torch = require_torch()
    rng = np.random.default_rng(dims)
    for i in range(4):
        case = _case_2d(rng, ratio=False) if dims == 2 else _case_3d(rng)
        _compare(torch, dims, case, np.float64, i, ties=True, nan=True)
    # a single window (the last start: size - kernel), a window as large as the plane allows, an empty output
    shape = (1, 2, 6, 7) if dims == 2 else (1, 2, 5, 6, 7)
    spatial = shape[2:]
    for kernel, out in (((2,) * dims, (1,) * dims), (tuple(s - 1 for s in spatial), (1,) * dims),
                        ((1,) * dims, (0,) + (2,) * (dims - 1))):
        case = dict(shape=shape, kernel=kernel, output_size=out, output_ratio=None)
        _compare(torch, dims, case, np.float64, 7, ties=False)


@pytest.mark.torch
def test_window_starts_follow_torch_on_sensitive_samples():
    """Samples that put (i + u) * alpha within an ulp of an integer: the float32 arithmetic of
    PyTorch's start formula decides, and zgrad does the same arithmetic."""
    torch = require_torch()
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        us = []
        size, kernel, out = 41, 2, 12
        alpha = (size - kernel) / (out - 1)
        for i in range(out - 1):
            u = np.ceil(i * alpha) / alpha - i
            if 0 <= u < 1:
                us += [u, np.nextafter(dtype(u), dtype(0)), np.nextafter(dtype(u), dtype(1))]
        us = np.array(us, dtype=dtype)
        x = np.arange(size, dtype=dtype)[None, :].repeat(len(us), 0).reshape(1, len(us), 1, size)
        samples = np.stack([us, rng.random(len(us)).astype(dtype)], axis=1)[None]
        _, index = F.fractional_max_pool2d(zgrad.tensor(x), (1, kernel), output_size=(1, out), return_indices=True,
                                           _random_samples=zgrad.tensor(samples))
        _, expected = torch.nn.functional.fractional_max_pool2d(
            torch.tensor(x), (1, kernel), output_size=(1, out), return_indices=True,
            _random_samples=torch.tensor(samples))
        np.testing.assert_array_equal(index.numpy(), expected.numpy())


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_windows_match_torch(dtype):
    """The start formula rounds every step to the input's dtype, as PyTorch's does."""
    torch = require_torch()
    rng = np.random.default_rng(9)
    for _ in range(12):
        size, kernel = int(rng.integers(5, 60)), int(rng.integers(1, 4))
        out = int(rng.integers(2, size - kernel + 2))
        samples = torch.tensor(rng.random((1, 3, 2)), dtype=getattr(torch, dtype))
        x = torch.arange(size, dtype=torch.float32).reshape(1, 1, 1, size).repeat(1, 3, 1, 1)
        _, expected = torch.nn.functional.fractional_max_pool2d(
            x.to(samples.dtype), (1, kernel), output_size=(1, out), return_indices=True, _random_samples=samples)
        ours = zgrad.tensor(x.numpy()).to(getattr(zgrad, dtype))
        _, index = F.fractional_max_pool2d(ours, (1, kernel), output_size=(1, out), return_indices=True,
                                           _random_samples=zgrad.tensor(samples.float().numpy()).to(ours.dtype))
        np.testing.assert_array_equal(index.numpy(), expected.numpy())


@pytest.mark.torch
@pytest.mark.parametrize("dims", [2, 3])
def test_modules_match_torch(dims):
    torch = require_torch()
    rng = np.random.default_rng(3)
    shape = (2, 3, 9, 10) if dims == 2 else (2, 2, 6, 7, 8)
    x = rng.standard_normal(shape)
    samples = rng.random((2, shape[1], dims))
    name = f"FractionalMaxPool{dims}d"
    for kwargs in (dict(output_size=4), dict(output_ratio=0.5), dict(output_ratio=(0.4, 0.6, 0.5)[:dims]),
                   dict(output_size=3, return_indices=True)):
        ours = getattr(zgrad.nn, name)(2, _random_samples=zgrad.tensor(samples), **kwargs)
        theirs = getattr(torch.nn, name)(2, _random_samples=torch.tensor(samples), **kwargs)
        assert repr(ours) == repr(theirs) == f"{name}()"
        for attribute in ("kernel_size", "output_size", "output_ratio", "return_indices"):
            assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
        assert list(ours.state_dict()) == list(theirs.state_dict()) == ["_random_samples"]
        out, expected = ours(zgrad.tensor(x)), theirs(torch.tensor(x))
        if kwargs.get("return_indices"):
            np.testing.assert_array_equal(out[1].numpy(), expected[1].numpy())
            out, expected = out[0], expected[0]
        np.testing.assert_array_equal(out.numpy(), expected.numpy())
    assert zgrad.nn.modules.pooling.FractionalMaxPool2d is zgrad.nn.FractionalMaxPool2d


@pytest.mark.parametrize("dims", [2, 3])
def test_samples_come_from_zgrads_generator(dims):
    """Without ``_random_samples`` the windows come from ``zgrad.rand(N, C, dims)`` in the input's
    dtype (one row for an unbatched input), drawn at each call."""
    shape = (2, 3, 9, 10) if dims == 2 else (2, 3, 6, 7, 8)
    x = zgrad.tensor(np.random.default_rng(0).standard_normal(shape))
    fn = getattr(F, f"fractional_max_pool{dims}d")
    for inp, batch in ((x, 2), (x[0], 1)):
        zgrad.manual_seed(11)
        out, index = fn(inp, 2, output_size=3, return_indices=True)
        zgrad.manual_seed(11)
        samples = zgrad.rand(batch, 3, dims, dtype=zgrad.float64)
        expected, expected_index = fn(inp, 2, output_size=3, return_indices=True, _random_samples=samples)
        np.testing.assert_array_equal(index.numpy(), expected_index.numpy())
        np.testing.assert_array_equal(out.numpy(), expected.numpy())
    module = getattr(zgrad.nn, f"FractionalMaxPool{dims}d")(2, output_ratio=0.5)
    zgrad.manual_seed(3)
    first = module(x)
    second = module(x)
    assert first.shape == second.shape and not np.array_equal(first.numpy(), second.numpy())


def _errors(torch, fn):
    """The exception ``fn`` raises with zgrad, and with torch (each as (type, message))."""
    found = []
    for lib in (zgrad, torch):
        with pytest.raises(Exception) as info:
            fn(lib)
        found.append(info.value)
    return found


ERROR_CASES = {
    "no_size": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(1, 1, 6, 6), 2),
    "no_size_3d": lambda lib: lib.nn.functional.fractional_max_pool3d(lib.ones(1, 1, 6, 6, 6), 2),
    "module_no_size": lambda lib: lib.nn.FractionalMaxPool2d(2),
    "module_no_size_3d": lambda lib: lib.nn.FractionalMaxPool3d(2),
    "module_both": lambda lib: lib.nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5),
    "module_both_3d": lambda lib: lib.nn.FractionalMaxPool3d(2, output_size=3, output_ratio=0.5),
    "ratio_above_one": lambda lib: lib.nn.FractionalMaxPool2d(2, output_ratio=1.5),
    "ratio_one": lambda lib: lib.nn.FractionalMaxPool3d(2, output_ratio=1.0),
    "ratio_zero_in_pair": lambda lib: lib.nn.FractionalMaxPool2d(2, output_ratio=(0.5, 0)),
    "ratio_negative_3d": lambda lib: lib.nn.FractionalMaxPool3d(2, output_ratio=(0.5, 0.5, -1)),
    "too_large_height": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 3, 10, 12), 3, output_size=9),
    "too_large_width": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 3, 10, 12), 3,
                                                                           output_size=(8, 11)),
    "too_large_both": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(1, 1, 10, 20), (2, 3),
                                                                          output_size=(10, 19)),
    "too_large_ratio": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 3, 10, 12), 3,
                                                                           output_ratio=(0.5, 1.0)),
    "module_too_large": lambda lib: lib.nn.FractionalMaxPool2d(3, output_size=9)(lib.ones(2, 3, 10, 12)),
    "too_large_time": lambda lib: lib.nn.functional.fractional_max_pool3d(lib.ones(1, 1, 10, 20, 30), (2, 3, 4),
                                                                          output_size=(9, 1, 1)),
    "too_large_3d_width_first": lambda lib: lib.nn.functional.fractional_max_pool3d(
        lib.ones(1, 1, 10, 20, 30), (2, 3, 4), output_size=(1, 18, 27)),
    "too_large_3d_height": lambda lib: lib.nn.functional.fractional_max_pool3d(lib.ones(1, 1, 10, 20, 30), (2, 3, 4),
                                                                               output_size=(1, 18, 1)),
    "five_dims": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(1, 2, 3, 10, 12), 3, output_size=2),
    "two_dims_with_samples": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(10, 12), 3, output_size=2, _random_samples=lib.rand(1, 10, 2)),
    "two_dims": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(10, 12), 3, output_size=2),
    "six_dims_3d": lambda lib: lib.nn.functional.fractional_max_pool3d(lib.ones(1, 1, 1, 4, 5, 6), 1, output_size=2),
    "three_dims_3d": lambda lib: lib.nn.functional.fractional_max_pool3d(lib.ones(5, 6, 7), 2, output_size=2),
    "empty_channels": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 0, 10, 12), 3, output_size=2),
    "empty_width": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 3, 10, 0), 1, output_size=(2, 0)),
    "empty_time_3d": lambda lib: lib.nn.functional.fractional_max_pool3d(lib.ones(1, 3, 0, 6, 7), 1,
                                                                         output_size=(0, 2, 2)),
    "samples_dtype": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(2, 3, 10, 12), 3, output_size=2, _random_samples=lib.rand(2, 3, 2, dtype=lib.float64)),
    "samples_dims": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(2, 3, 10, 12), 3, output_size=2, _random_samples=lib.rand(6, 2)),
    "samples_batch": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(2, 3, 10, 12), 3, output_size=2, _random_samples=lib.rand(1, 3, 2)),
    "samples_channels": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(2, 3, 10, 12), 3, output_size=2, _random_samples=lib.rand(2, 4, 2)),
    "samples_last": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(2, 3, 10, 12), 3, output_size=2, _random_samples=lib.rand(2, 3, 3)),
    "samples_last_3d": lambda lib: lib.nn.functional.fractional_max_pool3d(
        lib.ones(2, 3, 5, 6, 7), 2, output_size=2, _random_samples=lib.rand(2, 3, 2)),
    "samples_requiring_grad": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(2, 3, 10, 12), 3, output_size=2, _random_samples=lib.rand(2, 3, 2, requires_grad=True)),
    "samples_not_a_tensor": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(2, 3, 10, 12), 3, output_size=2, _random_samples=[[[0.5, 0.5]] * 3] * 2),
    "kernel_of_three": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 3, 10, 12), (3, 3, 3),
                                                                           output_size=2),
    "output_of_three": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 3, 10, 12), 3,
                                                                           output_size=(2, 2, 2)),
    "kernel_of_two_3d": lambda lib: lib.nn.functional.fractional_max_pool3d(lib.ones(2, 3, 5, 6, 7), (2, 2),
                                                                            output_size=2),
    "output_of_one_3d": lambda lib: lib.nn.functional.fractional_max_pool3d(lib.ones(2, 3, 5, 6, 7), 2,
                                                                            output_size=[2]),
    "float_kernel": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 3, 10, 12), 3.0, output_size=2),
    "float_output": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 3, 10, 12), 3,
                                                                        output_size=(4.0, 5)),
    "negative_output": lambda lib: lib.nn.functional.fractional_max_pool2d(lib.ones(2, 3, 10, 12), 3,
                                                                           output_size=(-1, 2)),
    "integer_input": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(2, 3, 10, 12, dtype=lib.int64), 3, output_size=2, _random_samples=lib.ones(2, 3, 2, dtype=lib.int64)),
    "integer_input_3d": lambda lib: lib.nn.functional.fractional_max_pool3d(
        lib.ones(1, 1, 4, 4, 4, dtype=lib.int64), 1, output_size=2, _random_samples=lib.ones(1, 1, 3, dtype=lib.int64)),
    "integer_input_no_samples": lambda lib: lib.nn.functional.fractional_max_pool2d(
        lib.ones(2, 3, 10, 12, dtype=lib.int64), 3, output_size=2),
}
# PyTorch raises NotImplementedError (a RuntimeError) for a dtype without a kernel; zgrad's DTypeError
# is a RuntimeError and a TypeError.
DTYPE_CASES = {"integer_input", "integer_input_3d", "integer_input_no_samples"}


@pytest.mark.torch
@pytest.mark.parametrize("name", ERROR_CASES)
def test_errors_match_torch(name):
    torch = require_torch()
    ours, theirs = _errors(torch, ERROR_CASES[name])
    assert str(ours) == str(theirs)
    if name in DTYPE_CASES:
        assert isinstance(ours, RuntimeError)
    else:
        assert isinstance(ours, type(theirs)), (type(ours), type(theirs))


def test_empty_batch_and_output_keep_the_graph():
    x = zgrad.ones(0, 3, 5, 5, requires_grad=True)
    out = F.fractional_max_pool2d(x, 2, output_size=2)
    out.sum().backward()
    assert out.shape == (0, 3, 2, 2) and x.grad.shape == (0, 3, 5, 5)
    out, index = F.fractional_max_pool2d(zgrad.ones(2, 3, 5, 5), 2, output_size=(0, 2), return_indices=True)
    assert out.shape == index.shape == (2, 3, 0, 2)
    out, index = F.fractional_max_pool2d_with_indices(zgrad.ones(3, 5, 5), 2, output_size=2)
    assert out.shape == index.shape == (3, 2, 2)


@pytest.mark.torch
def test_a_zero_kernel_gives_torchs_minus_infinity_at_the_window_start():
    torch = require_torch()
    samples = np.full((2, 3, 2), 0.3)
    out, index = F.fractional_max_pool2d(zgrad.ones(2, 3, 10, 12, dtype=zgrad.float64), 0, output_size=2,
                                         return_indices=True, _random_samples=zgrad.tensor(samples))
    expected, expected_index = torch.nn.functional.fractional_max_pool2d(
        torch.ones(2, 3, 10, 12, dtype=torch.float64), 0, output_size=2, return_indices=True,
        _random_samples=torch.tensor(samples))
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    np.testing.assert_array_equal(index.numpy(), expected_index.numpy())


@requires_cuda
@pytest.mark.parametrize("dims", [2, 3])
def test_on_cuda_matches_cpu(dims):
    rng = np.random.default_rng(dims)
    shape = (2, 2, 7, 8) if dims == 2 else (1, 2, 5, 6, 7)
    x = rng.standard_normal(shape).astype(np.float32)
    samples = rng.random((shape[0], shape[1], dims)).astype(np.float32)
    upstream = rng.standard_normal((shape[0], shape[1]) + (3,) * dims).astype(np.float32)
    fn = getattr(F, f"fractional_max_pool{dims}d")
    results = []
    for device in ("cpu", "cuda"):
        def run():
            xt = zgrad.tensor(x, device=device, requires_grad=True)
            out, index = fn(xt, 2, output_size=3, return_indices=True,
                            _random_samples=zgrad.tensor(samples, device=device))
            (out * zgrad.tensor(upstream, device=device)).sum().backward()
            assert out.device.type == index.device.type == xt.grad.device.type == device
            return out.cpu().numpy(), index.cpu().numpy(), xt.grad.cpu().numpy()
        if device == "cuda":
            with strict_cuda():
                results.append(run())
        else:
            results.append(run())
    for ours, reference in zip(results[1], results[0]):
        np.testing.assert_array_equal(ours, reference)

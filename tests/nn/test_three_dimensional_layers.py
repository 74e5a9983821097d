"""The 3-D convolutions and poolings (``conv3d``, ``conv_transpose3d``, ``max_pool3d``, ``avg_pool3d``,
``adaptive_avg_pool3d``), the adaptive max poolings (1-D, 2-D, 3-D) and their modules, with
``BatchNorm3d`` and ``InstanceNorm3d``, against torch 2.13: outputs, indices and the gradients of
inputs, weights and biases in float64, error messages, module reprs; and on the CUDA backend
(Numba's simulator) against the CPU's."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import require_torch

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 4, 5, 6, 7))
W, B = RNG.standard_normal((6, 2, 2, 3, 2)), RNG.standard_normal(6)
W1 = RNG.standard_normal((3, 4, 3, 1, 2))
W_T, B_T = RNG.standard_normal((4, 3, 3, 2, 2)), RNG.standard_normal(6)
X2, X1 = RNG.standard_normal((2, 3, 7, 5)), RNG.standard_normal((2, 3, 7))
TIES = np.round(RNG.standard_normal((2, 3, 5, 6, 7)))  # many equal maxima: torch's first one must win
NANS = np.where(RNG.random(TIES.shape) < 0.1, np.nan, TIES)  # several NaNs a window: torch keeps the last


def conv(**kw):
    return lambda F, x, w, b: F.conv3d(x, w, b, **kw)


def transposed(**kw):
    return lambda F, x, w, b: F.conv_transpose3d(x, w, b, **kw)


def pool(name, *args, **kw):
    return lambda F, x: getattr(F, name)(x, *args, **kw)


CASES = {
    "conv3d": (conv(), (X, W1, B[:3])),
    "conv3d strided, padded, grouped": (conv(stride=(2, 1, 2), padding=(1, 2, 0), groups=2), (X, W, B)),
    "conv3d dilated": (conv(dilation=(2, 1, 3), padding=1, groups=2), (X, W, B)),
    "conv3d same": (conv(padding="same", dilation=(1, 2, 1), groups=2), (X, W, B)),
    "conv3d valid, unbatched": (conv(padding="valid", groups=2), (X[0], W, B)),
    "conv3d no bias": (lambda F, x, w: F.conv3d(x, w, stride=2, groups=2), (X, W)),
    "conv_transpose3d": (transposed(), (X, W_T, B_T[:3])),
    "conv_transpose3d strided, grouped": (transposed(stride=(2, 3, 1), padding=(1, 0, 1), output_padding=(1, 2, 0),
                                                     groups=2), (X, W_T, B_T)),
    "conv_transpose3d dilated": (transposed(stride=2, padding=2, dilation=(2, 1, 3), output_padding=1),
                                 (X, W_T, B_T[:3])),
    "conv_transpose3d unbatched": (lambda F, x, w: F.conv_transpose3d(x, w, stride=(1, 2, 1)), (X[0], W_T)),
    "max_pool3d": (pool("max_pool3d", 2, return_indices=True), (X,)),
    "max_pool3d padded, dilated, ceil": (pool("max_pool3d", (3, 2, 3), (2, 1, 2), (1, 1, 0), (1, 2, 1), True, True),
                                         (X,)),
    "max_pool3d strided ceil, unbatched": (pool("max_pool3d", 2, 2, 1, ceil_mode=True, return_indices=True), (X[0],)),
    "max_pool3d ties": (pool("max_pool3d", (2, 3, 2), 1, (1, 1, 0), return_indices=True), (TIES,)),
    "max_pool3d NaNs": (pool("max_pool3d", (2, 3, 2), 1, (1, 1, 0), return_indices=True), (NANS,)),
    "avg_pool3d": (pool("avg_pool3d", 2), (X,)),
    "avg_pool3d padded, ceil": (pool("avg_pool3d", (3, 2, 3), (2, 1, 2), (1, 1, 1), True), (X,)),
    "avg_pool3d exclude pad": (pool("avg_pool3d", 3, 2, 1, True, False), (X,)),
    "avg_pool3d divisor, unbatched": (pool("avg_pool3d", (2, 3, 2), 1, (1, 0, 1), divisor_override=5), (X[0],)),
    "adaptive_avg_pool3d": (pool("adaptive_avg_pool3d", (3, 4, 5)), (X,)),
    "adaptive_avg_pool3d None, larger": (pool("adaptive_avg_pool3d", (None, 8, 2)), (X[0],)),
    "adaptive_max_pool3d": (pool("adaptive_max_pool3d", (3, 4, 5), True), (X,)),
    "adaptive_max_pool3d divisible, None": (pool("adaptive_max_pool3d", (None, 2, 7), True), (X,)),
    "adaptive_max_pool3d larger, unbatched": (pool("adaptive_max_pool3d", (7, 4, 9), True), (X[0],)),
    "adaptive_max_pool3d ties": (pool("adaptive_max_pool3d", (2, 4, 3), True), (TIES,)),
    "adaptive_max_pool3d NaNs": (pool("adaptive_max_pool3d", (2, 4, 3), True), (NANS,)),
    "adaptive_max_pool2d": (pool("adaptive_max_pool2d", 3, True), (X2,)),
    "adaptive_max_pool2d None": (pool("adaptive_max_pool2d", (None, 3), True), (X2,)),
    "adaptive_max_pool2d unbatched, larger": (pool("adaptive_max_pool2d", (9, 4), True), (X2[0],)),
    "adaptive_max_pool2d ties": (pool("adaptive_max_pool2d", (4, 5), True), (TIES[:, :, 0],)),
    "adaptive_max_pool2d one": (pool("adaptive_max_pool2d", 1), (X2,)),
    "adaptive_max_pool1d": (pool("adaptive_max_pool1d", 3, True), (X1,)),
    "adaptive_max_pool1d unbatched, larger": (pool("adaptive_max_pool1d", (10,), True), (X1[0],)),
    "adaptive_max_pool1d ties": (pool("adaptive_max_pool1d", 4, True), (TIES[:, :, 0, 0],)),
}


def run(lib, fn, arrays):
    inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
    outputs = fn(lib.nn.functional, *inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    weights = lib.tensor(np.linspace(0.5, 2.0, outputs[0].numel()).reshape(tuple(outputs[0].shape)))
    (outputs[0] * weights).sum().backward()
    return [o.detach().numpy() for o in outputs] + [t.grad.numpy() for t in inputs]


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("case", CASES)
def test_functions_and_gradients_agree_with_torch(case):
    torch = require_torch()
    got, expected = run(zgrad, *CASES[case]), run(torch, *CASES[case])
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.torch
def test_empty_adaptive_output_is_torchs():
    torch = require_torch()
    for lib in (zgrad, torch):
        out, index = lib.nn.functional.adaptive_max_pool2d(lib.ones(2, 3, 4, 4), (0, 2), return_indices=True)
        assert tuple(out.shape) == tuple(index.shape) == (2, 3, 0, 2)


@pytest.mark.torch
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_adaptive_max_pool_modules_are_torchs(dims):
    torch = require_torch()
    shape, size = (2, 3, 5, 6, 7)[:dims + 2], (3, 4, 5)[:dims]
    x = RNG.standard_normal(shape)
    results = []
    for lib in (zgrad, torch):
        layer = getattr(lib.nn, f"AdaptiveMaxPool{dims}d")(size if dims > 1 else size[0], return_indices=True)
        out, index = layer(lib.tensor(x))
        results.append((repr(layer), out.numpy(), index.numpy()))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_array_equal(results[0][2], results[1][2])


def modules(lib):
    nn = lib.nn
    layers = [nn.Conv3d(4, 6, 3), nn.Conv3d(4, 6, (1, 2, 3), stride=2, padding=1, dilation=2, groups=2, bias=False,
                                             padding_mode="reflect"),
              nn.Conv3d(4, 6, 3, padding="same"), nn.ConvTranspose3d(4, 6, 3, stride=2, output_padding=1),
              nn.ConvTranspose3d(4, 6, (1, 2, 3), padding=(0, 1, 1), groups=2, bias=False, dilation=2),
              nn.MaxPool3d(3), nn.MaxPool3d(3, 2, 1, 2, True, True), nn.AvgPool3d(3),
              nn.AvgPool3d(3, 2, 1, True, False, 2),
              nn.AdaptiveAvgPool3d(5), nn.AdaptiveAvgPool3d((5, None, 2)), nn.AdaptiveMaxPool3d(2, True),
              nn.AdaptiveMaxPool2d((None, 3)), nn.AdaptiveMaxPool1d(3), nn.BatchNorm3d(3),
              nn.InstanceNorm3d(3, affine=True)]
    ones = lib.ones(2, 4, 5, 6, 7)
    shapes = []
    for mode in ("zeros", "reflect", "replicate", "circular"):
        layer = nn.Conv3d(4, 6, (3, 2, 3), padding=(1, 1, 2), padding_mode=mode)
        shapes += [tuple(layer.weight.shape), tuple(layer(ones).shape)]
    same = nn.Conv3d(4, 6, (2, 3, 4), padding="same", dilation=(1, 2, 1), padding_mode="circular")
    transposed = nn.ConvTranspose3d(4, 6, 3, stride=2, groups=2)
    shapes += [tuple(same(ones).shape), tuple(transposed.weight.shape),
               tuple(transposed(ones, output_size=[11, 14, 15]).shape)]
    return [repr(layer) for layer in layers] + shapes + [repr(nn.Sequential(*layers[:3]))]


@pytest.mark.torch
def test_modules_are_torchs():
    torch = require_torch()
    assert modules(zgrad) == modules(torch)


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv3d_module_matches_torch_with_padding_modes(mode):
    torch = require_torch()
    results = []
    for lib in (zgrad, torch):
        lib.manual_seed(0)
        layer = lib.nn.Conv3d(4, 6, (3, 2, 3), padding="same" if mode == "circular" else (1, 1, 2), groups=2,
                              padding_mode=mode, dtype=lib.float64)
        layer.weight.data.copy_(lib.tensor(W.repeat(2, axis=2).repeat(2, axis=4)[:, :, :3, :2, :3]))
        layer.bias.data.copy_(lib.tensor(B))
        x = lib.tensor(X, requires_grad=True)
        out = layer(x)
        (out * out).sum().backward()
        results.append([out.detach().numpy(), x.grad.numpy(), layer.weight.grad.numpy(), layer.bias.grad.numpy()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["BatchNorm3d", "InstanceNorm3d"])
def test_norm3d_matches_torch(name):
    torch = require_torch()
    results = []
    for lib in (zgrad, torch):
        layer = getattr(lib.nn, name)(4, affine=True, track_running_stats=True, dtype=lib.float64)
        x = lib.tensor(X, requires_grad=True)
        out = layer(x)
        (out * lib.tensor(X)).sum().backward()
        layer.eval()
        results.append([out.detach().numpy(), x.grad.numpy(), layer.weight.grad.numpy(),
                        layer.running_mean.numpy(), layer.running_var.numpy(), layer(lib.tensor(X)).detach().numpy()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_convolutions_run_lowered_under_autocast():
    x = zgrad.ones(1, 2, 3, 3, 3)
    with zgrad.autocast("cpu", dtype=zgrad.bfloat16):
        assert zgrad.nn.Conv3d(2, 4, 2)(x).dtype == zgrad.bfloat16
        assert zgrad.nn.ConvTranspose3d(2, 4, 2)(x).dtype == zgrad.bfloat16


ERRORS = [
    lambda F, lib: F.conv3d(lib.ones(1, 2, 3, 4, 4, 4), lib.ones(2, 3, 1, 1, 1)),
    lambda F, lib: F.conv3d(lib.ones(2, 3, 4, 4), lib.ones(2, 3, 1, 1, 1)),
    lambda F, lib: F.conv3d(lib.ones(2, 3, 4, 4, 4), lib.ones(2, 2, 1, 1, 1)),
    lambda F, lib: F.conv3d(lib.ones(2, 4, 4, 4, 4), lib.ones(2, 4, 1, 1, 1), lib.ones(3)),
    lambda F, lib: F.conv3d(lib.ones(2, 4, 2, 4, 4), lib.ones(2, 4, 3, 1, 1)),
    lambda F, lib: F.conv3d(lib.ones(2, 4, 2, 4, 4), lib.ones(2, 4, 1, 1, 1), stride=2, padding="same"),
    lambda F, lib: F.conv3d(lib.ones(2, 4, 2, 4, 4), lib.ones(2, 4, 1, 1, 1), padding="foo"),
    lambda F, lib: F.conv3d(lib.ones(2, 4, 2, 4, 4), lib.ones(2, 4, 1, 1, 1), stride=0),
    lambda F, lib: F.conv3d(lib.ones(2, 4, 2, 4, 4), lib.ones(2, 4, 1, 1, 1), padding=-1),
    lambda F, lib: F.conv3d(lib.ones(2, 4, 2, 4, 4), lib.ones(2, 4, 1, 1, 1), dilation=0),
    lambda F, lib: F.conv_transpose3d(lib.ones(2, 3, 4, 4), lib.ones(3, 2, 1, 1, 1)),
    lambda F, lib: F.conv_transpose3d(lib.ones(2, 3, 4, 4, 4), lib.ones(3, 2, 1, 1, 1), output_padding=1),
    lambda F, lib: F.max_pool3d(lib.ones(2, 3, 4), 2),
    lambda F, lib: F.max_pool3d(lib.ones(2, 3, 4, 4, 4), (2, 2)),
    lambda F, lib: F.max_pool3d(lib.ones(2, 3, 4, 4, 4), 2, dilation=0),
    lambda F, lib: F.max_pool3d(lib.ones(2, 3, 4, 4, 4), 2, padding=2),
    lambda F, lib: F.max_pool3d(lib.ones(2, 3, 1, 4, 4), 2),
    lambda F, lib: F.avg_pool3d(lib.ones(2, 3, 4), 2),
    lambda F, lib: F.avg_pool3d(lib.ones(2, 3, 4, 4, 4), 2, padding=2),
    lambda F, lib: F.avg_pool3d(lib.ones(2, 3, 1, 4, 4), 2),
    lambda F, lib: F.avg_pool3d(lib.ones(2, 3, 4, 4, 4), 2, divisor_override=0),
    lambda F, lib: F.avg_pool3d(lib.ones(2, 3, 4, 4, 4), (2, 2)),
    lambda F, lib: F.adaptive_avg_pool3d(lib.ones(2, 3, 4), 2),
    lambda F, lib: F.adaptive_avg_pool3d(lib.ones(2, 3, 0, 4, 4), 2),
    lambda F, lib: F.adaptive_avg_pool3d(lib.ones(2, 3, 4, 4, 4), (2, 2)),
    lambda F, lib: F.adaptive_max_pool3d(lib.ones(2, 3, 4), 2),
    lambda F, lib: F.adaptive_max_pool3d(lib.ones(2, 3, 0, 4, 4), 2),
    lambda F, lib: F.adaptive_max_pool3d(lib.ones(2, 3, 4, 4, 4), (2, 2)),
    lambda F, lib: F.adaptive_max_pool2d(lib.ones(2, 3, 4, 4, 4), 2),
    lambda F, lib: F.adaptive_max_pool2d(lib.ones(2, 0, 4), 2),
    lambda F, lib: F.adaptive_max_pool2d(lib.ones(2, 3, 4, 4), (2, 2, 2)),
    lambda F, lib: F.adaptive_max_pool2d(lib.ones(2, 3, 4, 4), -1),
    lambda F, lib: F.adaptive_max_pool1d(lib.ones(2, 3, 4, 4), 2),
    lambda F, lib: F.adaptive_max_pool1d(lib.ones(2, 3, 4), (2, 2)),
    lambda F, lib: F.adaptive_max_pool1d(lib.ones(2, 3, 0), 2),
    lambda F, lib: lib.nn.BatchNorm3d(3)(lib.ones(2, 3, 4, 4)),
    lambda F, lib: lib.nn.InstanceNorm3d(3)(lib.ones(2, 3, 4)),
]


def raised(lib, fn):
    try:
        fn(lib.nn.functional, lib)
    except Exception as error:  # noqa: BLE001 - the type is compared
        return type(error), str(error)
    raise AssertionError("no error raised")


@pytest.mark.torch
@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_carry_torchs_message(case):
    torch = require_torch()
    got, expected = raised(zgrad, ERRORS[case]), raised(torch, ERRORS[case])
    assert got[0] is expected[0], (got, expected)
    # the norm layers' messages name the layer and the input's size inside torch's text
    assert got[1].endswith(expected[1]) or "Norm" in got[1] and expected[1][:-1] in got[1], (got, expected)


SMALL = RNG.standard_normal((1, 2, 3, 4, 3))  # the simulator runs each CUDA thread in Python: tiny inputs
CUDA_CASES = {
    "conv3d": (conv(stride=(2, 1, 1), padding=(1, 0, 1), groups=2), (SMALL, W[:4, :1, :, :2], B[:4])),
    "conv_transpose3d": (transposed(stride=(2, 1, 1), padding=(1, 0, 0), groups=2),
                         (SMALL, W_T[:2, :1, :2, :, :], B_T[:2])),
    "max_pool3d": (pool("max_pool3d", (3, 2, 2), (2, 1, 2), (1, 1, 0), (1, 2, 1), True), (SMALL,)),
    "avg_pool3d": (pool("avg_pool3d", 2, 1, 1, True, False), (SMALL,)),
    "adaptive_avg_pool3d": (pool("adaptive_avg_pool3d", (2, 3, 2)), (SMALL,)),
    "adaptive_max_pool3d": (pool("adaptive_max_pool3d", (2, 3, 2)), (SMALL,)),
    "adaptive_max_pool2d": (pool("adaptive_max_pool2d", (3, 2)), (SMALL[0, :, 0],)),
    "adaptive_max_pool1d": (pool("adaptive_max_pool1d", 2), (SMALL[0, :, 0, 0],)),
}


@requires_cuda
@pytest.mark.parametrize("case", CUDA_CASES)
def test_the_three_dimensional_functions_run_on_cuda_as_on_the_cpu(case):
    fn, arrays = CUDA_CASES[case]
    arrays = [np.ascontiguousarray(a) for a in arrays]
    check_device(lambda lib, *inputs: fn(lib.nn.functional, *inputs), [a.shape for a in arrays], dtype=np.float64,
                 arrays=arrays)


@pytest.mark.torch
def test_transposed_output_size_takes_spatial_or_full_sizes_only():
    import torch

    for lib in (zgrad, torch):
        lib.manual_seed(0)
    ours, theirs = zgrad.nn.ConvTranspose3d(2, 2, 3, stride=2), torch.nn.ConvTranspose3d(2, 2, 3, stride=2)
    for size in ([1, 2, 7, 9, 11], [8, 10, 12]):
        assert tuple(ours(zgrad.ones(1, 2, 3, 4, 5), output_size=size).shape) == \
            tuple(theirs(torch.ones(1, 2, 3, 4, 5), output_size=size).shape)
    with pytest.raises(ValueError, match=r"ConvTranspose3D: for 5D input, output_size must have 3 or 5 elements "
                                         r"\(got 4\)"):
        ours(zgrad.ones(1, 2, 3, 4, 5), output_size=[3, 8, 8, 10])
    with pytest.raises(ValueError, match=r"for 4D input, output_size must have 3 or 4 elements \(got 2\)"):
        ours(zgrad.ones(2, 3, 4, 5), output_size=[8, 10])

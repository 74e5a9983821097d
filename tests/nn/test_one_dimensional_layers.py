"""The 1-D convolutions and poolings (``conv1d``, ``conv_transpose1d``, ``max_pool1d``,
``avg_pool1d``, ``adaptive_avg_pool1d`` and their modules) against torch 2.13: outputs and input
gradients in float64, module reprs, weight shapes and output sizes."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import require_torch

RNG = np.random.default_rng(0)
X, W, B, W_T = (RNG.standard_normal(s) for s in ((2, 4, 9), (6, 2, 3), (6,), (4, 3, 3)))
CASES = {
    "conv1d strided, padded, grouped": (lambda F, x, w, b: F.conv1d(x, w, b, stride=2, padding=1, groups=2), (X, W, B)),
    "conv1d same, dilated": (lambda F, x, w, b: F.conv1d(x, w, b, padding="same", dilation=2, groups=2), (X, W, B)),
    "conv1d unbatched": (lambda F, x, w: F.conv1d(x, w, groups=2), (X[0], W)),
    "conv_transpose1d": (lambda F, x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1, groups=2),
                         (X, W_T)),
    "max_pool1d with indices": (lambda F, x: F.max_pool1d(x, 3, 2, 1, dilation=2, ceil_mode=True,
                                                          return_indices=True), (X,)),
    "avg_pool1d": (lambda F, x: F.avg_pool1d(x, 3, stride=1, padding=1, ceil_mode=True, count_include_pad=False), (X,)),
    "avg_pool1d unbatched": (lambda F, x: F.avg_pool1d(x, 2), (X[0],)),
    "adaptive_avg_pool1d": (lambda F, x: F.adaptive_avg_pool1d(x, 4), (X,)),
}


def run(lib, fn, arrays):
    inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
    outputs = fn(lib.nn.functional, *inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    weights = lib.tensor(np.linspace(0.5, 2.0, outputs[0].numel()).reshape(tuple(outputs[0].shape)))
    (outputs[0] * weights).sum().backward()
    return [o.detach().numpy() for o in outputs] + [t.grad.numpy() for t in inputs]


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_functions_and_gradients_agree_with_torch(case):
    torch = require_torch()
    for got, expected in zip(run(zgrad, *CASES[case]), run(torch, *CASES[case]), strict=True):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def modules(lib):
    nn = lib.nn
    layers = [nn.Conv1d(4, 6, 3), nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, bias=False,
                                             padding_mode="reflect"),
              nn.Conv1d(4, 6, 3, padding="same"), nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1),
              nn.MaxPool1d(3), nn.MaxPool1d(3, 2, 1, 2, True, True), nn.AvgPool1d(3), nn.AvgPool1d(3, 2, 1, True, False),
              nn.AdaptiveAvgPool1d(5)]
    circular = nn.Conv1d(4, 6, 3, padding=2, padding_mode="circular")
    transposed = nn.ConvTranspose1d(4, 6, 3, stride=2, groups=2)
    return ([repr(layer) for layer in layers] + [tuple(circular.weight.shape), tuple(circular(lib.ones(2, 4, 9)).shape),
            tuple(transposed.weight.shape), tuple(transposed(lib.ones(2, 4, 9), output_size=[20]).shape)])


@pytest.mark.torch
def test_modules_are_torchs():
    torch = require_torch()
    assert modules(zgrad) == modules(torch)


def test_bad_input_is_refused_with_torchs_message():
    with pytest.raises(RuntimeError, match=r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv1d, but got "
                                           r"input of size: \[2, 4, 9, 1\]"):
        zgrad.nn.functional.conv1d(zgrad.ones(2, 4, 9, 1), zgrad.ones(6, 4, 3))
    with pytest.raises(ValueError, match="requested an output size of \\[30\\], but valid sizes range from \\[19\\] "
                                         "to \\[20\\]"):
        zgrad.nn.ConvTranspose1d(4, 6, 3, stride=2)(zgrad.ones(2, 4, 9), output_size=[30])
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        zgrad.nn.Conv1d(4, 6, 3, stride=2, padding="same")


@requires_cuda
@pytest.mark.parametrize("case", ["conv1d strided, padded, grouped", "conv_transpose1d", "avg_pool1d"])
def test_the_one_dimensional_functions_run_on_cuda_as_on_the_cpu(case):
    fn, arrays = CASES[case]
    check_device(lambda lib, *inputs: fn(lib.nn.functional, *inputs), [a.shape for a in arrays], dtype=np.float64,
                 arrays=list(arrays))

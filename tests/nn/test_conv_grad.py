"""``nn.grad`` (``F.grad``): a convolution's input and weight gradients from its output's, equal
to what autograd gives for the convolution and to PyTorch's, and differentiable."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import check_finite_differences, torch
from zgrad import nn

CASES = {
    "1d": (1, (2, 4, 9), (6, 2, 3), {"stride": 2, "padding": 1, "dilation": 1, "groups": 2}),
    "2d": (2, (2, 3, 8, 7), (4, 3, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}),
    "3d": (3, (1, 2, 5, 6, 5), (4, 1, 2, 2, 3), {"stride": 2, "padding": 1, "groups": 2}),
}


def _operands(dim, input_size, weight_size, options):
    rng = np.random.default_rng(dim)
    x, w = rng.standard_normal(input_size), rng.standard_normal(weight_size)
    out = getattr(zgrad.nn.functional, f"conv{dim}d")(zgrad.tensor(x), zgrad.tensor(w), **options)
    return x, w, rng.standard_normal(tuple(out.shape))


@pytest.mark.parametrize("case", CASES)
def test_the_gradients_are_autograds(case):
    dim, input_size, weight_size, options = CASES[case]
    x, w, go = _operands(dim, input_size, weight_size, options)
    xt, wt = zgrad.tensor(x, requires_grad=True), zgrad.tensor(w, requires_grad=True)
    getattr(zgrad.nn.functional, f"conv{dim}d")(xt, wt, **options).backward(zgrad.tensor(go))
    grad_input = getattr(nn.grad, f"conv{dim}d_input")(input_size, zgrad.tensor(w), zgrad.tensor(go), **options)
    grad_weight = getattr(zgrad.nn.functional.grad, f"conv{dim}d_weight")(zgrad.tensor(x), weight_size,
                                                                           zgrad.tensor(go), **options)
    np.testing.assert_allclose(grad_input.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad_weight.numpy(), wt.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert not grad_input.requires_grad


def test_a_stride_that_drops_input_positions_and_differentiability():
    weight = zgrad.ones(1, 1, 2, requires_grad=True)
    grad_output = zgrad.ones(1, 1, 3)
    grad_input = nn.grad.conv1d_input((1, 1, 7), weight, grad_output, stride=2)  # the 7th position is never read
    assert grad_input.tolist() == [[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]]]
    grad_input.sum().backward()
    assert weight.grad.tolist() == [[[3.0, 3.0]]]
    with pytest.raises(RuntimeError, match=r"grad_output has shape \(1, 1, 4\), but the convolution's output has "
                                           r"shape \(1, 1, 3\)"):
        nn.grad.conv1d_input((1, 1, 7), weight, zgrad.ones(1, 1, 4), stride=2)


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_as_torchs(case):
    dim, input_size, weight_size, options = CASES[case]
    x, w, go = _operands(dim, input_size, weight_size, options)
    for which, first, size in (("input", w, input_size), ("weight", x, weight_size)):
        mine = getattr(nn.grad, f"conv{dim}d_{which}")
        theirs = getattr(torch.nn.grad, f"conv{dim}d_{which}")
        args_z = (size, zgrad.tensor(first)) if which == "input" else (zgrad.tensor(first), size)
        args_t = (size, torch.tensor(first)) if which == "input" else (torch.tensor(first), size)
        np.testing.assert_allclose(mine(*args_z, zgrad.tensor(go), **options).numpy(),
                                   theirs(*args_t, torch.tensor(go), **options).numpy(), rtol=1e-10, atol=1e-12)



def _grad_input(lib, weight, grad_output):
    return lib.nn.grad.conv2d_input((1, 2, 5, 5), weight, grad_output, stride=2, padding=1)


def test_the_input_gradient_is_differentiable_by_finite_differences():
    """The input gradient as a function of the weight and grad_output, by central differences."""
    check_finite_differences(_grad_input, [(3, 2, 3, 3), (1, 3, 3, 3)])


@requires_cuda
def test_on_cuda_as_on_the_cpu():
    check_device(_grad_input, [(3, 2, 3, 3), (1, 3, 3, 3)], dtype=np.float64)

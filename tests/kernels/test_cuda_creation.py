"""Creation, random functions and autograd helpers on the CUDA backend (Numba's simulator here):
random tensors are created on the device (never through the CPU backend) and, drawn on the host
from the same seed, equal the CPU's; ``normal``'s zero gradients, ``autograd.grad`` and
``assert_close`` work on device tensors.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import is_device_array, requires_cuda, strict_cuda

pytestmark = requires_cuda

# name: fn() drawing from the default generator; run under a seed on the CPU and on CUDA.
DRAWS = {
    "rand": lambda: zgrad.rand(3, 4),
    "randn_float16": lambda: zgrad.randn(5, dtype=zgrad.float16),
    "randint": lambda: zgrad.randint(-2, 9, (6,)),
    "randperm": lambda: zgrad.randperm(7),
    "normal": lambda: zgrad.normal(zgrad.zeros(2, 1), zgrad.ones(3)),
    "normal_size": lambda: zgrad.normal(1.0, 2.0, (4,)),
    "bernoulli": lambda: zgrad.bernoulli(zgrad.full((6,), 0.5)),
    "multinomial": lambda: zgrad.multinomial(zgrad.tensor([[1.0, 0.0, 2.0], [3.0, 1.0, 0.0]]), 5, True),
    "multinomial_without_replacement": lambda: zgrad.multinomial(zgrad.tensor([1.0, 0.0, 2.0, 4.0]), 3),
    "exponential_": lambda: zgrad.zeros(5).exponential_(2.0),
    "log_normal_cauchy_geometric": lambda: zgrad.stack([zgrad.zeros(4).log_normal_(), zgrad.zeros(4).cauchy_(),
                                                        zgrad.zeros(4).geometric_(0.4)]),
    "bernoulli_": lambda: zgrad.zeros(5).bernoulli_(zgrad.full((5,), 0.3)),
    "uniform_strided": lambda: zgrad.zeros(4, 4)[:, ::2].uniform_(1, 2),
    "eye_linspace": lambda: zgrad.eye(3) + zgrad.linspace(0, 1, 3),
}
SUBSET = {"rand", "normal", "multinomial"}


def _draw(name: str, device: str) -> np.ndarray:
    zgrad.manual_seed(17)
    if device == "cpu":
        return DRAWS[name]().numpy()
    with strict_cuda():
        out = DRAWS[name]()
        assert is_device_array(out._data), f"{name} made a {type(out._data).__name__}, not a CUDA array"
        return out._host()


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in SUBSET else (pytest.mark.full,))
                                  for n in sorted(DRAWS)])
def test_random_draws_on_cuda_equal_the_cpus_under_one_seed(name):
    expected, actual = _draw(name, "cpu"), _draw(name, "cuda")
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-6)  # the same draws; exp may differ by an ulp


def test_generators_check_the_device_and_gradients_stay_on_it():
    g = zgrad.Generator("cuda").manual_seed(3)
    with strict_cuda():
        a = zgrad.rand(4, generator=g)
        mean = zgrad.zeros(4, requires_grad=True)
        sample = zgrad.normal(mean, 1.0, generator=g)
        (sample * a).sum().backward()
        assert is_device_array(mean.grad._data)
        np.testing.assert_array_equal(mean.grad._host(), np.zeros(4, np.float32))
        (grad,) = zgrad.autograd.grad((zgrad.tanh(mean + a) ** 2).sum(), [mean])
        assert is_device_array(grad._data)
        zgrad.testing.assert_close(grad, grad.clone())
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'cuda'"):
        zgrad.rand(2, generator=g)
    cpu, cuda = zgrad.ones(2), zgrad.ones(2, device="cuda")
    with pytest.raises(AssertionError, match="The values for attribute 'device' do not match: cuda:0 != cpu."):
        zgrad.testing.assert_close(cuda, cpu)
    zgrad.testing.assert_close(cuda, cpu, check_device=False)

"""``nn.DataParallel``, ``nn.parallel.data_parallel`` and ``nn.Buffer``, as PyTorch's: the wrapper
calls the module as it is without CUDA, and on the device (Numba's simulator here) with it; a
Buffer assigned to a module attribute becomes one of its buffers."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import zgrad
from helpers import torch
from zgrad import nn
from zgrad.errors import ZgradError
from zgrad.nn import data_parallel as data_parallel_module
from zgrad.nn.parallel import data_parallel


class Pair(nn.Module):
    """Two inputs, one through a keyword and a nested list, so that moving them is tested."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, x, *, extra):
        return self.linear(x) * extra[0], {"sum": x.sum()}


class NoArguments(nn.Module):
    def forward(self):
        return "called"


def _inputs():
    rng = np.random.default_rng(0)
    return (zgrad.tensor(rng.standard_normal((4, 3)), dtype=zgrad.float32, requires_grad=True),
            [zgrad.tensor(2.0)])


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(data_parallel_module.cuda, "device_count", lambda: 0)


def test_without_cuda_the_wrapper_calls_the_module_as_it_is(no_cuda):
    model = Pair()
    wrapped = nn.DataParallel(model)
    assert wrapped.module is model and wrapped.device_ids == [] and wrapped.output_device is None
    assert list(wrapped.state_dict()) == ["module.linear.weight", "module.linear.bias"]
    x, extra = _inputs()
    out, parts = wrapped(x, extra=extra)
    expected, _ = model(x, extra=extra)
    assert out.device == zgrad.device("cpu") and np.array_equal(out.numpy(), expected.numpy())
    out.sum().backward()
    assert model.linear.weight.grad is not None and x.grad.shape == (4, 3)
    assert data_parallel(model, x, module_kwargs={"extra": extra})[0].device == zgrad.device("cpu")
    assert nn.DataParallel(model, device_ids=[0]).device_ids == []  # ignored without CUDA, as PyTorch's


def test_with_cuda_it_moves_the_module_once_and_each_calls_tensors_differentiably():
    model = Pair()
    weight = model.linear.weight.detach().numpy().copy()
    wrapped = nn.DataParallel(model)
    assert wrapped.device_ids == [0] and wrapped.output_device == 0
    assert model.linear.weight.device == zgrad.device("cuda:0")
    x, extra = _inputs()
    out, parts = wrapped(x, extra=extra)
    assert out.device == zgrad.device("cuda:0") and parts["sum"].device == zgrad.device("cuda:0")
    expected = (x.detach().numpy() @ weight.T + model.linear.bias.detach().cpu().numpy()) * 2
    np.testing.assert_allclose(out.cpu().detach().numpy(), expected, rtol=1e-5)
    out.sum().backward()
    assert x.grad.device == zgrad.device("cpu")
    np.testing.assert_allclose(x.grad.numpy(), np.tile(weight.sum(0) * 2, (4, 1)), rtol=1e-5)
    assert model.linear.weight.grad.device == zgrad.device("cuda:0")
    assert data_parallel(model, (x,), [0], module_kwargs={"extra": extra})[0].device == zgrad.device("cuda:0")


def test_a_module_moved_off_the_device_and_other_device_ids_are_refused():
    wrapped = nn.DataParallel(Pair(), device_ids=[0])
    wrapped.module.cpu()
    x, extra = _inputs()
    with pytest.raises(RuntimeError, match=r"module must have its parameters and buffers on device cuda:0 "
                                           r"\(device_ids\[0\]\) but found one of them on device: cpu"):
        wrapped(x, extra=extra)
    with pytest.raises(RuntimeError, match="on device cuda:0"):
        data_parallel(wrapped.module, x, module_kwargs={"extra": extra})
    with pytest.raises(ZgradError, match="invalid device ordinal: cuda:1 requested, 1 device"):
        nn.DataParallel(Pair(), device_ids=[0, 1])
    assert data_parallel(NoArguments(), None, [0]) == "called"  # None: no inputs, as PyTorch's


def test_an_assigned_buffer_is_registered_with_its_persistence():
    module = nn.Module()
    data = zgrad.ones(3)
    module.mean = nn.Buffer(data)
    module.scratch = nn.Buffer(zgrad.zeros(2), persistent=False)
    assert [name for name, _ in module.named_buffers()] == ["mean", "scratch"]
    assert list(module.state_dict()) == ["mean"]
    assert isinstance(module.mean, nn.Buffer) and module.mean.persistent
    module.mean.add_(1)
    assert data.tolist() == [2.0, 2.0, 2.0]  # it shares the tensor's memory
    assert nn.Buffer(zgrad.ones(2, requires_grad=True)).requires_grad
    assert nn.Buffer().shape == (0,)
    assert nn.parameter.Buffer is nn.Buffer
    module.copied = copy.deepcopy(nn.Buffer(zgrad.ones(1), persistent=False))
    assert "copied" not in module.state_dict() and "copied" in dict(module.named_buffers())
    module.weight = nn.Parameter(zgrad.ones(1))
    with pytest.raises(TypeError, match="cannot assign 'Buffer' as parameter 'weight'"):
        module.weight = nn.Buffer(zgrad.ones(1))
    module.plain = 3
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        module.plain = nn.Buffer(zgrad.ones(1))


@pytest.mark.torch
def test_buffers_and_the_wrappers_state_dict_as_torch():
    def build(lib):
        module = lib.nn.Module()
        module.inner = lib.nn.Linear(2, 2)
        module.stats = lib.nn.Buffer(lib.zeros(2))
        module.temp = lib.nn.Buffer(lib.zeros(2), persistent=False)
        return lib.nn.DataParallel(module)

    mine, theirs = build(zgrad), build(torch)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in mine.named_buffers()] == [n for n, _ in theirs.named_buffers()]

"""zgrad.compile: PyTorch's argument checks, and the model itself back (zgrad runs eagerly)."""

from __future__ import annotations

import pytest

import zgrad
from zgrad import nn


def test_compile_returns_the_model_and_the_function_themselves():
    model = nn.Linear(3, 2)
    assert zgrad.compile(model) is model
    assert zgrad.compile(model, mode="max-autotune", fullgraph=True, dynamic=False) is model
    assert zgrad.compile(zgrad.sin, backend="eager") is zgrad.sin

    @zgrad.compile(backend="inductor")
    def double(x):
        return x * 2

    assert zgrad.equal(double(zgrad.ones(2)), zgrad.full((2,), 2.0))
    assert zgrad.compiler.disable(double) is double and not zgrad.compiler.is_compiling()
    assert "inductor" in zgrad.compiler.list_backends()


def test_compile_refuses_what_pytorch_refuses():
    with pytest.raises(RuntimeError, match="Unrecognized mode=fast, should be one of: default, lite"):
        zgrad.compile(zgrad.sin, mode="fast")
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        zgrad.compile(zgrad.sin, mode="default", options={})
    with pytest.raises(ValueError, match="Invalid backend: 'nonexistent'"):
        zgrad.compile(zgrad.sin, backend="nonexistent")
    with pytest.raises(NotImplementedError, match="callable backend"):
        zgrad.compile(zgrad.sin, backend=lambda graph, inputs: graph)
    with pytest.raises(TypeError, match="A callable function is expected, but <class 'int'> is provided"):
        zgrad.compile(3)


def test_module_compile_checks_its_arguments_and_keeps_the_module():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    keys = list(model.state_dict())
    x = zgrad.randn(4, 3)
    expected = model(x)
    assert model.compile(mode="reduce-overhead") is None
    assert list(model.state_dict()) == keys and zgrad.equal(model(x), expected)
    with pytest.raises(ValueError, match="Invalid backend: 'nonexistent'"):
        model.compile(backend="nonexistent")

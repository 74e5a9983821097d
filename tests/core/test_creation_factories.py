"""Deterministic factories against PyTorch: ``eye``, ``linspace``, ``logspace``, the ``*_like``
forms and the ``Tensor.new_*`` methods (values, dtype, shape, errors), and in-place ``fill_`` /
``zero_``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import zgrad
from helpers import torch

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]

# name: fn(lib, dtype) with dtype a dtype object of lib (None: the default).
FACTORIES = {
    "eye": lambda lib, d: lib.eye(3, dtype=d),
    "eye_rect": lambda lib, d: lib.eye(2, 4, dtype=d),
    "eye_empty": lambda lib, d: lib.eye(0, dtype=d),
    "linspace": lambda lib, d: lib.linspace(-3, 10, 7, dtype=d),
    "linspace_down": lambda lib, d: lib.linspace(10, 0, 6, dtype=d),
    "linspace_one": lambda lib, d: lib.linspace(2, 5, 1, dtype=d),
    "linspace_none": lambda lib, d: lib.linspace(0, 1, 0, dtype=d),
    "linspace_float_bounds": lambda lib, d: lib.linspace(-1.5, 2.25, 9, dtype=d),
    "logspace": lambda lib, d: lib.logspace(0, 2, 3, dtype=d),
    "logspace_base2": lambda lib, d: lib.logspace(0, 5, 6, base=2, dtype=d),
    "logspace_negative": lambda lib, d: lib.logspace(-2, 1, 4, base=2, dtype=d),
    "zeros_like": lambda lib, d: lib.zeros_like(lib.ones(2, 3), dtype=d),
    "ones_like": lambda lib, d: lib.ones_like(lib.ones(2, 3), dtype=d),
    "full_like": lambda lib, d: lib.full_like(lib.ones(2, 3, dtype=lib.float64), 1, dtype=d),
    "empty_like": lambda lib, d: lib.empty_like(lib.ones(2, 3), dtype=d).fill_(1),
    "new_zeros": lambda lib, d: lib.ones(2, dtype=lib.float64).new_zeros(2, 3, dtype=d),
    "new_ones_tuple": lambda lib, d: lib.ones(2, dtype=lib.int32).new_ones((3,), dtype=d),
    "new_full": lambda lib, d: lib.ones(2).new_full((2, 2), 1, dtype=d),
    "new_empty": lambda lib, d: lib.ones(2).new_empty(2, dtype=d).zero_(),
    "new_tensor": lambda lib, d: lib.ones(2, dtype=lib.int16).new_tensor([[1, 0], [1, 1]], dtype=d),
}

NO_DTYPE = {
    "eye_default": lambda lib: lib.eye(2),
    "linspace_default": lambda lib: lib.linspace(0, 1, 5),
    "logspace_default": lambda lib: lib.logspace(-1, 1, 4),
    "new_zeros_keeps_dtype": lambda lib: lib.ones(2, dtype=lib.float64).new_zeros(3),
    "new_ones_keeps_dtype": lambda lib: lib.ones(2, dtype=lib.int8).new_ones(2, 2),
    "new_full_keeps_dtype": lambda lib: lib.ones(2, dtype=lib.int64).new_full((2,), 7),
    "new_tensor_keeps_dtype": lambda lib: lib.ones(2).new_tensor([1, 2]),
    "new_empty_keeps_dtype": lambda lib: lib.ones(2, dtype=lib.float16).new_empty((1, 2)).fill_(3),
    "zeros_like_keeps": lambda lib: lib.zeros_like(lib.ones(3, dtype=lib.int32)),
}


# PyTorch's uint8 logspace with negative exponents gives 0 for 2**0, 2**1 (its integer pow path).
PYTORCH_QUIRKS = {("logspace_negative", "uint8")}


def _compare(ours, theirs) -> None:
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    rtol = 1e-3 if ours.dtype == np.float16 else 1e-6  # float16 steps round differently by an ulp
    np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.numpy().astype(np.float64), rtol=rtol)


def _refused(fn, lib):
    try:
        return fn(lib), None
    except Exception as error:  # noqa: BLE001 - the kind is compared below
        return None, error


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_match_pytorch(name, dtype):
    if (name, dtype) in PYTORCH_QUIRKS:
        pytest.skip("a PyTorch quirk zgrad does not copy")
    theirs, their_error = _refused(lambda lib: FACTORIES[name](lib, getattr(lib, dtype)), torch)
    ours, our_error = _refused(lambda lib: FACTORIES[name](lib, getattr(lib, dtype)), zgrad)
    if their_error is not None:  # e.g. linspace of bool: refused by PyTorch, not necessarily by zgrad
        return
    assert our_error is None, our_error
    _compare(ours, theirs)


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", sorted(NO_DTYPE))
def test_default_dtypes_match_pytorch(name):
    _compare(NO_DTYPE[name](zgrad), NO_DTYPE[name](torch))


LINSPACES = [(0.1, 0.7, 10), (0.1, 0.7, 1001), (-0.0, 0.0, 1), (2.5, 9, 1), (-math.pi, math.pi, 2000), (0.0, 2 * math.pi, 25), (-1.3, 7.9, 101), (1e-3, 1e3, 1000), (3, -2, 11),
             (-7, 13, 9), (0, 100, 37)]


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32"])
def test_linspace_is_torchs_value_for_value(dtype):
    """Bit for bit: PyTorch fuses start + step * i into one rounding (linspace(-pi, pi, 5)[2] is 0)."""
    for start, end, steps in LINSPACES:
        ours = zgrad.linspace(start, end, steps, dtype=getattr(zgrad, dtype))
        theirs = torch.linspace(start, end, steps, dtype=getattr(torch, dtype))
        np.testing.assert_array_equal(ours.double().numpy(), theirs.double().numpy(), err_msg=f"{start, end, steps}")
        assert np.array_equal(np.signbit(ours.double().numpy()), np.signbit(theirs.double().numpy()))
    assert zgrad.linspace(-math.pi, math.pi, 5)[2].item() == 0.0


def test_factories_take_device_and_requires_grad():
    x = zgrad.linspace(0, 1, 3, requires_grad=True)
    assert x.requires_grad and x.is_leaf
    assert zgrad.eye(2, device="cpu").device == zgrad.device("cpu")
    assert zgrad.ones(2).new_zeros(2, requires_grad=True).requires_grad
    np.testing.assert_allclose(zgrad.linspace(zgrad.tensor(0.0), zgrad.tensor(2.0), 3).numpy(), [0, 1, 2])


def test_factory_errors():
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        zgrad.eye(-1)
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        zgrad.linspace(0, 1, -1)
    with pytest.raises(RuntimeError, match="Trying to create tensor with negative dimension -2"):
        zgrad.zeros(3, -2)
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        zgrad.eye(2, dtype=zgrad.int64, requires_grad=True)


def test_the_legacy_tensor_constructor_makes_default_dtype_tensors():
    """``nn.Parameter(torch.Tensor(n_in, n_out))`` and ``torch.Tensor([1, 2])``, as older layers write them."""
    assert zgrad.Tensor(3, 4).shape == (3, 4) and zgrad.Tensor(3).dtype == zgrad.float32
    assert zgrad.Tensor().shape == (0,) and not zgrad.Tensor(2, 3, 4).requires_grad
    data = zgrad.Tensor([1, 2])
    assert data.dtype == zgrad.float32 and data.tolist() == [1.0, 2.0]
    assert zgrad.nn.Parameter(zgrad.Tensor(2, 3)).shape == (2, 3)
    with pytest.raises(RuntimeError, match=r"negative dimension -1: \[2, -1\]"):
        zgrad.Tensor(2, -1)
    with pytest.raises(TypeError, match="expected sizes"):
        zgrad.Tensor([1.0], 2)


@pytest.mark.parametrize("factory", ["empty", "zeros", "ones", "rand", "randn"])
def test_factories_take_their_size_as_a_keyword(factory):
    make = getattr(zgrad, factory)
    assert make(size=(2, 3)).shape == (2, 3) and make(size=[4]).shape == (4,) and make((2, 1)).shape == (2, 1)
    with pytest.raises(TypeError, match=f"{factory}\\(\\) received an invalid combination of arguments"):
        make(2, size=(2,))


def test_the_legacy_constructor_takes_a_size_numpy_ints_ranges_and_refuses_numbers():
    assert zgrad.Tensor(zgrad.Size([2, 3])).shape == (2, 3) and zgrad.Tensor(3, np.int64(2)).shape == (3, 2)
    assert zgrad.Tensor(np.int64(3)).shape == ()  # a numpy scalar is wrapped as a 0-d array, as zgrad's ops do
    assert zgrad.Tensor(range(3)).tolist() == [0.0, 1.0, 2.0] and zgrad.Tensor(zgrad.Size([])).shape == (0,)
    x = zgrad.ones(2)
    assert zgrad.Tensor(x)._data is x._data
    for refused in (2.5, True):
        with pytest.raises(TypeError, match="expected sizes"):
            zgrad.Tensor(refused)


def _factory_keyword_calls(lib):
    """PyTorch's out=, layout=, pin_memory= and memory_format= keywords of the factories."""
    calls = {
        "zeros_out": lambda: lib.zeros(3, out=lib.empty(3)),
        "arange_out_dtype": lambda: lib.arange(3, out=lib.empty(3, dtype=lib.int64)),
        "ones_out_resized": lambda: lib.ones(2, 2, out=lib.empty(0, dtype=lib.float64)),
        "full_out": lambda: lib.full((2,), 7, out=lib.empty(2, dtype=lib.int32)),
        "eye_out": lambda: lib.eye(2, out=lib.empty(0)),
        "linspace_out": lambda: lib.linspace(0, 1, 3, out=lib.empty(3)),
        "randperm_out": lambda: lib.randperm(4, out=lib.empty(0, dtype=lib.int64)).sort()[0],
        "zeros_out_grad": lambda: lib.zeros(2, out=lib.empty(2), requires_grad=True),
        "zeros_layout": lambda: lib.zeros(2, layout=lib.strided),
        "rand_layout": lambda: lib.rand(2, layout=lib.strided).shape,
        "empty_format": lambda: lib.empty(1, 2, 3, 4, memory_format=lib.channels_last).shape,
        "ones_pin_off": lambda: lib.ones(2, pin_memory=False),
        "tensor_pin_off": lambda: lib.tensor([1, 2], pin_memory=False),
    }
    results = {}
    for name, call in calls.items():
        value = call()
        results[name] = (tuple(value), None) if not isinstance(value, lib.Tensor) else \
            (value.tolist(), str(value.dtype).split(".")[-1], value.requires_grad)
    return results


def test_factories_take_pytorchs_out_layout_and_pin_memory_keywords():
    out = zgrad.empty(0, dtype=zgrad.float64)
    assert zgrad.ones(2, out=out) is out and out.tolist() == [1.0, 1.0]
    mine = _factory_keyword_calls(zgrad)
    assert mine["arange_out_dtype"] == ([0, 1, 2], "int64", False)
    assert mine["zeros_out_grad"] == ([0.0, 0.0], "float32", True)
    with pytest.raises(RuntimeError, match="only layout=zgrad.strided is supported"):
        zgrad.zeros(2, layout=zgrad.sparse_coo)
    with pytest.raises(TypeError):
        zgrad.scalar_tensor(1.0, out=zgrad.empty(0))


@pytest.mark.torch
def test_the_factory_keywords_give_torchs_results():
    assert _factory_keyword_calls(zgrad) == _factory_keyword_calls(torch)


def test_a_factorys_bad_out_is_refused_before_anything_is_written():
    out = zgrad.full((3,), 5.0)
    with pytest.raises(RuntimeError, match=r"dtype Double does not match dtype of out parameter \(Float\)"):
        zgrad.zeros(3, dtype=zgrad.float64, out=out)
    with pytest.raises(RuntimeError, match=r"aten::ones\(\): functions with out=... arguments don't support "
                                           "automatic differentiation"):
        zgrad.ones(3, out=zgrad.zeros(3, requires_grad=True))
    with pytest.raises(TypeError, match="argument 'out' must be a Tensor, not list"):
        zgrad.arange(3, out=[0, 0, 0])
    assert out.tolist() == [5.0, 5.0, 5.0]
    assert zgrad.zeros(3, out=out) is out and out.tolist() == [0.0, 0.0, 0.0]  # it still serves

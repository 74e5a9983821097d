"""Memory formats and layouts as PyTorch's: channels-last layouts made by ``contiguous``, ``to``,
``clone`` and the ``*_like`` factories and recognized by ``is_contiguous``; ``preserve_format``
copies keep a dense layout's order; every tensor is ``strided``."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import require_torch

CASES = {
    "channels_last": lambda lib, x4, x2: x4.contiguous(memory_format=lib.channels_last),
    "to channels_last": lambda lib, x4, x2: x4.to(memory_format=lib.channels_last),
    "clone of channels_last": lambda lib, x4, x2: x4.contiguous(memory_format=lib.channels_last).clone(),
    "clone to contiguous": lambda lib, x4, x2: lib.clone(x4.contiguous(memory_format=lib.channels_last),
                                                         memory_format=lib.contiguous_format),
    "clone of transposed": lambda lib, x4, x2: x2.t().clone(),
    "clone of strided": lambda lib, x4, x2: x2[:, ::2].clone(),
    "clone of expanded": lambda lib, x4, x2: x2.expand(4, 2, 3).clone(),
    "zeros_like channels_last": lambda lib, x4, x2: lib.zeros_like(x4.contiguous(memory_format=lib.channels_last)),
    "empty_like transposed": lambda lib, x4, x2: lib.empty_like(x2.t()),
    "ones_like as contiguous": lambda lib, x4, x2: lib.ones_like(x2.t(), memory_format=lib.contiguous_format),
    "channels_last_3d": lambda lib, x4, x2: lib.ones(2, 3, 2, 4, 5).contiguous(memory_format=lib.channels_last_3d),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", list(CASES))
def test_layouts_match_torch(case):
    torch = require_torch()
    results = []
    for lib in (torch, zgrad):
        out = CASES[case](lib, lib.arange(120.0).reshape(2, 3, 4, 5), lib.arange(6.0).reshape(2, 3))
        fmt = lib.channels_last_3d if out.ndim == 5 else lib.channels_last
        results.append((tuple(out.shape), tuple(out.stride()), out.is_contiguous(),
                        out.is_contiguous(memory_format=fmt) if out.ndim in (4, 5) else None))
    assert results[1] == results[0]


def test_a_channels_last_copy_keeps_values_and_gradients():
    x = zgrad.randn(2, 3, 4, 5, dtype=zgrad.float64, requires_grad=True)
    y = x.contiguous(memory_format=zgrad.channels_last)
    assert y.stride() == (60, 1, 15, 3) and y.contiguous(memory_format=zgrad.channels_last) is y
    np.testing.assert_array_equal(y.detach().numpy(), x.detach().numpy())
    (y * zgrad.arange(120.0, dtype=zgrad.float64).reshape(2, 3, 4, 5)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(120.0).reshape(2, 3, 4, 5))
    conv = zgrad.nn.Conv2d(3, 2, 3, dtype=zgrad.float64).to(memory_format=zgrad.channels_last)
    np.testing.assert_allclose(conv(y).detach().numpy(), conv(x).detach().numpy(), rtol=1e-12)


def test_memory_format_errors_and_layout_queries():
    x = zgrad.ones(2, 3)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        x.contiguous(memory_format=zgrad.channels_last)
    assert x.contiguous(memory_format=zgrad.preserve_format) is x
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
        x.t().contiguous(memory_format=zgrad.preserve_format)
    with pytest.raises(RuntimeError, match="only layout=zgrad.strided is supported here, got zgrad.sparse_coo; make a "
                                           "sparse tensor with zgrad.sparse_coo_tensor"):
        zgrad.zeros_like(x, layout=zgrad.sparse_coo)
    assert x.layout is zgrad.strided and repr(zgrad.strided) == "zgrad.strided"
    assert repr(zgrad.channels_last) == "zgrad.channels_last" and isinstance(zgrad.channels_last, zgrad.memory_format)
    assert not (x.is_sparse or x.is_sparse_csr or x.is_quantized or x.is_meta or x.is_mkldnn or x.is_nested)
    import copy
    assert copy.deepcopy(zgrad.channels_last) is zgrad.channels_last


def test_size_is_pytorchs_tuple_of_sizes():
    size = zgrad.Size([2, 3])
    assert size == (2, 3) == zgrad.ones(2, 3).shape and size.numel() == 6 and repr(size) == "zgrad.Size([2, 3])"
    assert repr(size[1:]) == "zgrad.Size([3])" and size[0] == 2 and repr(size + (4,)) == "zgrad.Size([2, 3, 4])"
    assert zgrad.Size().numel() == 1 and zgrad.zeros(size).shape == (2, 3) and zgrad.Size(np.array([4])) == (4,)
    with pytest.raises(TypeError, match=r"zgrad.Size\(\) takes an iterable of 'int' \(item 0 is 'float'\)"):
        zgrad.Size([1.5])
    normal = zgrad.distributions.Normal(zgrad.zeros(2), zgrad.ones(2))
    assert normal.sample(zgrad.Size([5])).shape == (5, 2)


def test_shape_and_size_are_sizes_that_print_and_combine_as_pytorchs():
    import copy
    import pickle

    x = zgrad.ones(2, 3)
    for size in (x.shape, x.size(), x.to_sparse().shape, x.T.shape):
        assert type(size) is zgrad.Size and repr(size) == f"zgrad.Size({list(size)})"
    assert f"{x.shape}" == "zgrad.Size([2, 3])" and x.shape == (2, 3) and hash(x.shape) == hash((2, 3))
    assert type((1,) + x.shape) is zgrad.Size and (1,) + x.shape == (1, 2, 3)
    assert type(x.shape * 2) is zgrad.Size and 2 * x.shape == (2, 3, 2, 3)
    assert type(x.shape[::-1]) is zgrad.Size and type(x.shape[0]) is int
    with pytest.raises(TypeError, match=r'can only concatenate tuple \(not "list"\) to zgrad.Size'):
        x.shape + [1]
    assert pickle.loads(pickle.dumps(x.shape)) == (2, 3) and type(copy.copy(x.shape)) is zgrad.Size


def test_a_format_of_another_rank_is_not_the_layout():
    x = zgrad.ones(2, 3, 4)
    assert not x.is_contiguous(memory_format=zgrad.channels_last)
    assert not zgrad.ones(2, 3, 4, 5).is_contiguous(memory_format=zgrad.channels_last_3d)
    assert x.is_contiguous(memory_format=zgrad.preserve_format)

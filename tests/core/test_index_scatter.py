"""scatter_add, scatter_reduce, index_add, index_copy, index_fill and index_put (with
``accumulate``) against PyTorch, out of place and in place: values, dtypes and gradients (a
product's at zeros, amax/amin's split among ties, ``include_self=False``'s); PyTorch's errors;
the same cases on CUDA (Numba's simulator here).
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import check_finite_differences
from index_checks import same_as_torch

RNG = np.random.default_rng(1)
SELF = RNG.uniform(-2, 2, (3, 4))
SRC = RNG.uniform(-2, 2, (2, 4))
INDEX = np.array([[0, 2, 2, 1], [2, 2, 0, 1]])  # repeats: several sources meet in one position


def _scatter_reduce(reduce, include_self):
    return lambda lib, x, src, index: lib.scatter_reduce(x, 0, index, src, reduce, include_self=include_self)


@pytest.mark.torch
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_matches_torch(reduce, include_self):
    same_as_torch(_scatter_reduce(reduce, include_self), SELF, SRC, INDEX)


@pytest.mark.torch
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
def test_scatter_reduce_gradients_at_zeros_and_ties(reduce, include_self):
    x = np.array([[1.0, 0.0, 2.0, 3.0], [0.0, 5.0, 1.0, 2.0], [2.0, 2.0, 0.0, 3.0]])
    src = np.array([[2.0, 0.0, 2.0, 3.0], [0.0, 0.0, 2.0, 3.0]])
    same_as_torch(_scatter_reduce(reduce, include_self), x, src, INDEX)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.float16, np.float32])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_dtypes(reduce, dtype):
    x, src = (SELF * 3 + 4).astype(dtype), (SRC * 3 + 4).astype(dtype)
    for include_self in (True, False):
        same_as_torch(_scatter_reduce(reduce, include_self), x, src, INDEX, grad=False)


@pytest.mark.torch
def test_scatter_add_and_a_larger_source():
    big_src = RNG.uniform(-2, 2, (3, 5))
    same_as_torch(lambda lib, x, src, index: lib.scatter_add(x, 0, index, src), SELF, SRC, INDEX)
    # torch's own backward fails on a source larger than the index: forward only, gradients by differences
    same_as_torch(lambda lib, x, src, index: x.scatter_add(0, index, src), SELF, big_src, INDEX, grad=False)
    same_as_torch(lambda lib, x, src, index: lib.scatter_add(x, 1, index[:, :2], src), SELF, big_src, INDEX,
                  grad=False)
    check_finite_differences(lambda lib, x, src: lib.scatter_add(x, 0, lib.tensor([[0, 2], [2, 2]]), src),
                             [(3, 4), (3, 5)])
    check_finite_differences(lambda lib, x, src: lib.scatter_reduce(x, 1, lib.tensor([[0, 0], [1, 1], [2, 0]]), src,
                                                                    "amax"), [(3, 3), (3, 2)])


INDEXED = {
    "index_add": lambda lib, x, s: lib.index_add(x, 1, lib.tensor([3, 0, 3]), s),
    "index_add_alpha": lambda lib, x, s: x.index_add(1, lib.tensor([3, 0, 3]), s, alpha=-2.5),
    "index_copy": lambda lib, x, s: lib.index_copy(x, 1, lib.tensor([3, 0, 1]), s),
    "index_fill": lambda lib, x, s: lib.index_fill(x, 1, lib.tensor([3, 0]), -1.5) * s.sum(),
    "index_fill_tensor_value": lambda lib, x, s: x.index_fill(0, lib.tensor([2]), s[0, 0]),
    "index_put": lambda lib, x, s: lib.index_put(x, (lib.tensor([0, 2]), lib.tensor([1, 1])), s[0, :2]),
    "index_put_accumulate": lambda lib, x, s: x.index_put((lib.tensor([0, 0, 2]), lib.tensor([1, 1, 3])), s[1],
                                                          accumulate=True),
}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(INDEXED))
def test_index_ops_match_torch(name, dtype):
    same_as_torch(INDEXED[name], SELF.astype(dtype), RNG.uniform(-2, 2, (3, 3)).astype(dtype))


@pytest.mark.torch
def test_index_ops_on_integers():
    x, s = np.arange(12).reshape(3, 4), np.arange(9).reshape(3, 3)
    for name in ("index_add", "index_add_alpha", "index_copy", "index_put", "index_put_accumulate"):
        same_as_torch(INDEXED[name] if name != "index_add_alpha" else
                      (lambda lib, a, b: a.index_add(1, lib.tensor([3, 0, 3]), b, alpha=2)), x, s, grad=False)


INPLACE = {
    "index_add_": lambda x, lib, s: x.index_add_(1, lib.tensor([3, 0, 3]), s, alpha=2),
    "index_copy_": lambda x, lib, s: x.index_copy_(1, lib.tensor([3, 0, 1]), s),
    "index_fill_": lambda x, lib, s: x.index_fill_(1, lib.tensor([2]), 7.0),
    "index_put_": lambda x, lib, s: x.index_put_((lib.tensor([1, 1]),), s[0, 0], accumulate=True),
    "scatter_add_": lambda x, lib, s: x.scatter_add_(1, lib.tensor([[0, 0, 1]] * 3), s),
    "scatter_reduce_": lambda x, lib, s: x.scatter_reduce_(1, lib.tensor([[0, 0, 1]] * 3), s, "amin",
                                                           include_self=False),
    "masked_scatter_": lambda x, lib, s: x.masked_scatter_(lib.tensor([True, False, False, True]), s),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_forms_match_torch(name):
    def run(lib, x, s):
        y = x * 1  # a non-leaf, so the in-place op is recorded
        result = INPLACE[name](y, lib, s)
        assert result is y
        return y
    same_as_torch(run, SELF, RNG.uniform(-2, 2, (3, 3)))


def test_errors_as_torch():
    x = zgrad.zeros(3, 4)
    with pytest.raises(ValueError, match="reduce argument must be either sum, prod, mean, amax or amin"):
        zgrad.scatter_reduce(x, 0, zgrad.tensor([[0]]), x, "max")
    with pytest.raises(RuntimeError, match="must have the same scalar type"):
        zgrad.index_add(x, 0, zgrad.tensor([0]), zgrad.zeros(1, 4, dtype=zgrad.float64))
    with pytest.raises(RuntimeError, match="Source/destination tensor must have the same shape"):
        zgrad.index_copy(x, 0, zgrad.tensor([0, 1]), zgrad.zeros(1, 4))
    with pytest.raises(IndexError, match="out of bounds"):
        zgrad.index_fill(x, 1, zgrad.tensor([4]), 1.0)
    with pytest.raises(IndexError, match="out of bounds"):
        zgrad.scatter_add(x, 0, zgrad.tensor([[3]]), x)
    for out_of_range in (lambda: zgrad.scatter_add(x, 0, zgrad.tensor([[3]]), x),  # RuntimeError in torch too
                         lambda: zgrad.index_add(x, 0, zgrad.tensor([3]), x[:1]),
                         lambda: zgrad.gather(x, 0, zgrad.tensor([[-1]]))):
        with pytest.raises(RuntimeError, match="is out of bounds for dimension 0 with size 3"):
            out_of_range()
    flags = zgrad.tensor([True, False])
    with pytest.raises(RuntimeError, match="reduce_mean\" not implemented for 'Bool'"):
        zgrad.scatter_reduce(flags, 0, zgrad.tensor([0]), flags, "mean")
    with pytest.raises(IndexError, match="Dimension out of range"):
        zgrad.index_add(x, 2, zgrad.tensor([0]), x)


CUDA_CASES = {
    "scatter_reduce_amax": (lambda lib, x, s: lib.scatter_reduce(x, 0, lib.tensor([[0, 2, 2, 1]] * 2), s, "amax"),
                            None),
    "scatter_reduce_prod": (lambda lib, x, s: lib.scatter_reduce(x, 0, lib.tensor([[0, 2, 2, 1]] * 2), s, "prod",
                                                                 include_self=False), "full"),
    "scatter_reduce_mean": (lambda lib, x, s: lib.scatter_reduce(x, 0, lib.tensor([[0, 2, 2, 1]] * 2), s, "mean"),
                            "full"),
    "scatter_add": (lambda lib, x, s: lib.scatter_add(x, 1, lib.tensor([[0, 0, 3, 3]] * 2), s), "full"),
    "index_add": (lambda lib, x, s: lib.index_add(x, 0, lib.tensor([2, 2]), s, alpha=3), None),
    "index_copy": (lambda lib, x, s: lib.index_copy(x, 0, lib.tensor([2, 0]), s), "full"),
    "index_fill": (lambda lib, x, s: lib.index_fill(x, 1, lib.tensor([1, 3]), s[1, 1]), "full"),
    "index_put_accumulate": (lambda lib, x, s: lib.index_put(x, (lib.tensor([1, 1]),), s, accumulate=True), "full"),
}


@requires_cuda
@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.full] if m else []) for n, (_, m) in
                                  sorted(CUDA_CASES.items())])
def test_cuda_matches_cpu(name):
    check_device(CUDA_CASES[name][0], [(3, 4), (2, 4)])


"""Norms: ``zgrad.linalg.vector_norm``, ``matrix_norm``, ``norm``, and ``zgrad.norm`` /
``Tensor.norm``: values, dtypes and gradients against PyTorch (including its conventions where the
norm is zero and where elements tie for an infinity norm) and finite differences, and PyTorch's
refusals.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import zgrad
from zgrad.errors import DTypeError, ShapeError, ZgradError
from helpers import case, check, torch

INF = math.inf

CASES = [
    *(case(f"vector_norm-{o}", lambda lib, a, o=o: lib.linalg.vector_norm(a, o), (3, 4))
      for o in (2, 1, 3, 0.5, 1.5, INF, -INF)),
    case("vector_norm-dims", lambda lib, a: lib.linalg.vector_norm(a, 3, dim=(0, 2), keepdim=True), (2, 3, 4)),
    case("vector_norm-dim", lambda lib, a: lib.linalg.vector_norm(a, INF, dim=-1), (2, 3, 4)),
    case("vector_norm-dtype", lambda lib, a: lib.linalg.vector_norm(a, dim=1, dtype=lib.float64), (2, 3)),
    *(case(f"matrix_norm-{o}", lambda lib, a, o=o: lib.linalg.matrix_norm(a, o), (2, 4, 3))
      for o in ("fro", "nuc", 1, -1, 2, -2, INF, -INF)),
    case("matrix_norm-dims-keepdim", lambda lib, a: lib.linalg.matrix_norm(a, "nuc", (0, 2), keepdim=True), (3, 2, 4)),
    case("matrix_norm-1-keepdim", lambda lib, a: lib.linalg.matrix_norm(a, 1, (2, 0), keepdim=True), (3, 2, 4)),
    case("linalg.norm", lambda lib, a: lib.linalg.norm(a), (2, 3, 4)),
    case("linalg.norm-matrix", lambda lib, a: lib.linalg.norm(a, 2), (3, 4)),
    case("linalg.norm-vector", lambda lib, a: lib.linalg.norm(a, -1), (4,)),
    case("linalg.norm-dim", lambda lib, a: lib.linalg.norm(a, 3, dim=1), (2, 3, 4)),
    case("linalg.norm-dims", lambda lib, a: lib.linalg.norm(a, dim=(1, 2)), (2, 3, 4)),
    case("norm", lambda lib, a: lib.norm(a), (2, 3, 4)),
    case("norm-p", lambda lib, a: lib.norm(a, 1, 1, True), (2, 3, 4)),
    case("norm-nuc", lambda lib, a: lib.norm(a, "nuc"), (3, 4)),
    case("norm-fro-dims", lambda lib, a: a.norm("fro", (0, 1)), (2, 3, 4)),
    case("Tensor.norm", lambda lib, a: a.norm(dim=-1), (2, 3)),
    case("Tensor.norm-p", lambda lib, a: a.norm(p=4), (2, 3)),
]


@pytest.mark.torch
@pytest.mark.parametrize("c", CASES)
def test_norms_match_torch(c):
    check(c.fn, c.shapes, domain=c.domain)


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("order", [2, 1, 3, 0.5, INF, 0])
def test_gradient_at_zeros_and_ties_is_torchs(order):
    data = np.array([[0.0, 0.0, 0.0], [1.0, -3.0, 3.0]])
    results = []
    for lib in (zgrad, torch):
        x = lib.tensor(data, requires_grad=True)
        y = lib.linalg.vector_norm(x, order, dim=1)
        y.sum().backward()
        results.append((y.detach().numpy(), None if x.grad is None else x.grad.numpy()))
    (ours, our_grad), (ref, ref_grad) = results
    np.testing.assert_allclose(ours, ref)
    np.testing.assert_allclose(our_grad, np.zeros_like(data) if ref_grad is None else ref_grad)


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_norm_keeps_a_floating_dtype(dtype):
    data = np.arange(6.0).reshape(2, 3).astype(dtype)
    for fn in (lambda lib, t: lib.linalg.vector_norm(t, dim=0), lambda lib, t: lib.linalg.vector_norm(t, 3),
               lambda lib, t: t.norm()):
        ours, ref = fn(zgrad, zgrad.tensor(data)), fn(torch, torch.tensor(data))
        assert str(ours.dtype) == str(ref.dtype).replace("torch.", "")
        np.testing.assert_allclose(ours.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=1e-3)


ERRORS = [
    ("int", DTypeError, lambda: zgrad.linalg.vector_norm(zgrad.ones(2, dtype=zgrad.int64)),
     "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long"),
    ("matrix-int", DTypeError, lambda: zgrad.linalg.matrix_norm(zgrad.ones(2, 2, dtype=zgrad.int64)),
     "linalg.matrix_norm: Expected a floating point or complex tensor as input. Got Long"),
    ("ord-str", TypeError, lambda: zgrad.linalg.vector_norm(zgrad.ones(2), "fro"),
     "linalg_vector_norm(): argument 'ord' must be Number, not str"),
    ("dim", IndexError, lambda: zgrad.linalg.vector_norm(zgrad.ones(2, 2), 2, dim=5),
     "Dimension out of range (expected to be in range of [-2, 1], but got 5)"),
    ("matrix-order", ZgradError, lambda: zgrad.linalg.matrix_norm(zgrad.ones(2, 2), 3),
     "linalg.matrix_norm: Order 3 not supported."),
    ("matrix-vector", ShapeError, lambda: zgrad.linalg.matrix_norm(zgrad.ones(2)),
     "linalg.matrix_norm: The input tensor A must have at least 2 dimensions."),
    ("matrix-dims", ShapeError, lambda: zgrad.norm(zgrad.ones(2, 2, 2), "nuc"),
     "linalg.matrix_norm: dim must be a 2-tuple. Got 0 1 2"),
    ("norm-3d", ShapeError, lambda: zgrad.linalg.norm(zgrad.ones(2, 2, 2), 2),
     "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D."),
    ("inf-empty", RuntimeError, lambda: zgrad.linalg.vector_norm(zgrad.ones(2, 0), INF, dim=1),
     "cannot compute the inf norm on an empty tensor"),
]


@pytest.mark.parametrize("name, error, fn, message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, error, fn, message):
    with pytest.raises(error) as info:
        fn()
    assert message in str(info.value)

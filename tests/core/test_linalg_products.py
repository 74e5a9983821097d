"""The matrix-product family (``mm``, ``bmm``, ``mv``, ``dot``, ``vdot``, ``inner``, ``outer``,
``addmm``, ``baddbmm``, ``addbmm``, ``addmv`` and their in-place forms, ``kron``, ``cdist``,
``cross``), ``einsum`` and ``tensordot``: values, shapes, dtypes and gradients against PyTorch
(and finite differences), and PyTorch's refusals (mixed dtypes, wrong ranks and sizes) with its
messages.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from zgrad.errors import DTypeError, ShapeError
from helpers import case, check, torch

PRODUCTS = [
    case("mm", lambda lib, a, b: lib.mm(a, b), (2, 3), (3, 4)),
    case("Tensor.mm", lambda lib, a, b: a.mm(b), (3, 3), (3, 1)),
    case("bmm", lambda lib, a, b: lib.bmm(a, b), (2, 3, 4), (2, 4, 2)),
    case("mv", lambda lib, a, b: lib.mv(a, b), (2, 3), (3,)),
    case("dot", lambda lib, a, b: lib.dot(a, b), (4,), (4,)),
    case("vdot", lambda lib, a, b: a.vdot(b), (4,), (4,)),
    case("inner", lambda lib, a, b: lib.inner(a, b), (2, 3), (4, 3)),
    case("inner-scalar", lambda lib, a, b: lib.inner(a.sum(), b), (2,), (4, 3)),
    case("outer", lambda lib, a, b: lib.outer(a, b), (3,), (4,)),
    case("ger", lambda lib, a, b: a.ger(b), (3,), (2,)),
    case("addmm", lambda lib, c, a, b: lib.addmm(c, a, b, beta=0.5, alpha=2), (4,), (2, 3), (3, 4)),
    case("addmm-beta0", lambda lib, c, a, b: c.addmm(a, b, beta=0), (2, 4), (2, 3), (3, 4)),
    case("baddbmm", lambda lib, c, a, b: lib.baddbmm(c, a, b, alpha=-1), (2, 3, 4), (2, 3, 5), (2, 5, 4)),
    case("addbmm", lambda lib, c, a, b: lib.addbmm(c, a, b, beta=2), (3, 4), (2, 3, 5), (2, 5, 4)),
    case("addmv", lambda lib, c, a, b: lib.addmv(c, a, b, alpha=3), (2,), (2, 3), (3,)),
    case("addr", lambda lib, c, a, b: lib.addr(c, a, b, beta=0.5, alpha=2), (3,), (2,), (3,)),
    case("Tensor.addr", lambda lib, c, a, b: c.addr(a, b), (2, 3), (2,), (3,)),
    case("kron", lambda lib, a, b: lib.kron(a, b), (2, 3), (4, 2, 2)),
    case("Tensor.kron", lambda lib, a, b: a.kron(b), (2,), (3,)),
    case("cdist", lambda lib, a, b: lib.cdist(a, b), (2, 3, 4), (2, 5, 4)),
    case("cdist-p1", lambda lib, a, b: lib.cdist(a, b, p=1.0), (3, 4), (5, 4)),
    case("cdist-p3", lambda lib, a, b: lib.cdist(a, b, p=3.0), (3, 2), (2, 2)),
    case("cdist-inf", lambda lib, a, b: lib.cdist(a, b, p=float("inf")), (3, 4), (5, 4)),
    case("cross", lambda lib, a, b: lib.cross(a, b, dim=1), (4, 3), (4, 3)),
    case("cross-broadcast", lambda lib, a, b: lib.linalg.cross(a, b), (1, 3), (4, 3)),
    case("Tensor.cross", lambda lib, a, b: a.cross(b, dim=0), (3, 2), (3, 2)),
    case("tensordot", lambda lib, a, b: lib.tensordot(a, b, 2), (2, 3, 4), (3, 4, 5)),
    case("tensordot-lists", lambda lib, a, b: lib.tensordot(a, b, ([0, 2], [2, 0])), (2, 3, 4), (4, 5, 2)),
    case("tensordot-0", lambda lib, a, b: lib.tensordot(a, b, 0), (2, 3), (4,)),
    case("vecdot", lambda lib, a, b: lib.linalg.vecdot(a, b, dim=0), (3, 4), (3, 1)),
    case("linalg.matmul", lambda lib, a, b: lib.linalg.matmul(a, b), (2, 3, 4), (4,)),
]

EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk", [(2, 3, 4), (4, 5)]), ("i,i", [(3,), (3,)]),
    ("i,j->ij", [(3,), (4,)]), ("ijk->kji", [(2, 3, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ij->", [(2, 3)]), ("i,i->i", [(3,), (3,)]),
    ("ij,kj->ik", [(1, 3), (4, 3)]), ("iij->j", [(3, 3, 2)]), ("ab,b->a", [(2, 1), (4,)]),
    ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)]),
]
EINSUM_CASES = [case(f"einsum {eq}", lambda lib, *xs, eq=eq: lib.einsum(eq, *xs), *shapes) for eq, shapes in EINSUM]


@pytest.mark.torch
@pytest.mark.parametrize("c", PRODUCTS)
def test_products_match_torch(c):
    check(c.fn, c.shapes, domain=c.domain)


@pytest.mark.torch
@pytest.mark.parametrize("c", EINSUM_CASES)
def test_einsum_matches_torch(c):
    check(c.fn, c.shapes, domain=c.domain)


def test_einsum_takes_a_list_of_operands():
    a, b = zgrad.ones(2, 3), zgrad.ones(3, 4)
    assert zgrad.einsum("ij,jk->ik", [a, b]).tolist() == [[3.0] * 4] * 2


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("dtype", ["int64", "int32", "float16"])
def test_integer_and_half_products_keep_their_dtype(dtype):
    a = np.arange(6).reshape(2, 3).astype(dtype)
    b = np.arange(12).reshape(3, 4).astype(dtype)
    for fn in (lambda lib, x, y: lib.mm(x, y), lambda lib, x, y: lib.einsum("ij,jk->ik", x, y),
               lambda lib, x, y: lib.addmm(lib.mm(x, y), x, y), lambda lib, x, y: lib.einsum("ii->i", x[:, :2]),
               lambda lib, x, y: lib.einsum("ij->", y), lambda lib, x, y: lib.addbmm(x, x[None], y[None, :, :3]),
               lambda lib, x, y: lib.einsum("i,j", x[0], y[0])):
        out = fn(zgrad, zgrad.tensor(a), zgrad.tensor(b))
        ref = fn(torch, torch.tensor(a), torch.tensor(b))
        assert str(out.dtype) == str(ref.dtype).replace("torch.", "")
        np.testing.assert_allclose(out.numpy(), ref.numpy())


MIXED_DTYPES = [
    ("mm", lambda a, b: zgrad.mm(a, b), "expected m1 and m2 to have the same dtype, but got: float != double"),
    ("matmul", lambda a, b: a @ b, "expected m1 and m2 to have the same dtype, but got: float != double"),
    ("bmm", lambda a, b: zgrad.bmm(a[None], b[None]), "expected scalar type Float but found Double"),
    ("mv", lambda a, b: zgrad.mv(a, b[0]), "addmv input tensors must have the same dtype, but got Float, Float, and Double"),
    ("dot", lambda a, b: zgrad.dot(a[0], b[0]), "dot : expected both vectors to have same dtype, but found Float and Double"),
    ("addmm", lambda a, b: zgrad.addmm(a, a, b), "self and mat2 must have the same dtype, but got Float and Double"),
    ("linear", lambda a, b: zgrad.nn.functional.linear(b, a), "mat1 and mat2 must have the same dtype, but got Double and Float"),
    ("cross", lambda a, b: zgrad.linalg.cross(a[:, :1].expand(2, 3), b[:, :1].expand(2, 3)), "expected scalar type Float but found Double"),
    ("vecdot", lambda a, b: zgrad.linalg.vecdot(a, b), "linalg.vecdot: Expected x and y to have the same dtype"),
]


@pytest.mark.parametrize("name, fn, message", MIXED_DTYPES, ids=[m[0] for m in MIXED_DTYPES])
def test_products_refuse_mixed_dtypes_as_torch(name, fn, message):
    a, b = zgrad.ones(2, 2), zgrad.ones(2, 2, dtype=zgrad.float64)
    with pytest.raises(DTypeError) as info:
        fn(a, b)
    assert message in str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_bool_matmul_is_refused_as_torch():
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        zgrad.mm(zgrad.ones(2, 2, dtype=zgrad.bool), zgrad.ones(2, 2, dtype=zgrad.bool))
    with pytest.raises(NotImplementedError, match="\"cdist\" not implemented for 'Half'"):
        zgrad.cdist(zgrad.ones(2, 2, dtype=zgrad.float16), zgrad.ones(2, 2, dtype=zgrad.float16))
    with pytest.raises(DTypeError, match="linalg.vecdot: Expected a floating point or complex tensor as input. Got Long"):
        zgrad.linalg.vecdot(zgrad.ones(2, dtype=zgrad.int64), zgrad.ones(2, dtype=zgrad.int64))


def test_einsum_outer_product_of_bools_as_torch():
    a = zgrad.tensor([True, False])
    assert zgrad.einsum("i,j->ij", a, a).tolist() == [[True, False], [False, False]]


SHAPE_ERRORS = [
    ("mm-sizes", lambda: zgrad.mm(zgrad.ones(2, 2), zgrad.ones(3, 2)), "mat1 and mat2 shapes cannot be multiplied (2x2 and 3x2)"),
    ("mm-rank", lambda: zgrad.mm(zgrad.ones(2, 2), zgrad.ones(2)), "mat2 must be a matrix"),
    ("bmm-rank", lambda: zgrad.bmm(zgrad.ones(2, 2), zgrad.ones(2, 2)), "batch1 must be a 3D tensor"),
    ("bmm-sizes", lambda: zgrad.bmm(zgrad.ones(2, 2, 3), zgrad.ones(3, 3, 3)),
     "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [3, 3]."),
    ("mv-rank", lambda: zgrad.mv(zgrad.ones(2, 2), zgrad.ones(2, 2)), "vector + matrix @ vector expected, got 1, 2, 2"),
    ("mv-sizes", lambda: zgrad.mv(zgrad.ones(2, 2), zgrad.ones(3)), "size mismatch, got input (2), mat (2x2), vec (3)"),
    ("dot-rank", lambda: zgrad.dot(zgrad.ones(2, 2), zgrad.ones(2, 2)), "1D tensors expected, but got 2D and 2D tensors"),
    ("dot-sizes", lambda: zgrad.dot(zgrad.ones(2), zgrad.ones(3)), "inconsistent tensor size"),
    ("addr-rank", lambda: zgrad.addr(zgrad.ones(2, 3), zgrad.ones(2, 2), zgrad.ones(3)),
     "addr: Expected 1-D argument vec1, but got 2-D"),
    ("outer-rank", lambda: zgrad.outer(zgrad.ones(2, 2), zgrad.ones(2)), "outer: Expected 1-D argument self, but got 2-D"),
    ("inner-sizes", lambda: zgrad.inner(zgrad.ones(2, 2), zgrad.ones(3)),
     "inner() the last dimension must match on both input tensors but got shapes [2, 2] and [3]"),
    ("addmm-input", lambda: zgrad.addmm(zgrad.ones(3), zgrad.ones(2, 2), zgrad.ones(2, 2)), "addmm cannot broadcast"),
    ("tensordot", lambda: zgrad.tensordot(zgrad.ones(2, 2), zgrad.ones(3, 3), 1),
     "contracted dimensions need to match, but first has size 2 in dim 1 and second has size 3 in dim 0"),
    ("cross-size", lambda: zgrad.linalg.cross(zgrad.ones(2, 4), zgrad.ones(2, 4)),
     "linalg.cross: inputs dimension -1 must have length 3. Got 4 and 4"),
    ("cross-none", lambda: zgrad.cross(zgrad.ones(2, 4), zgrad.ones(2, 4)), "no dimension of size 3 in input"),
    ("cross-ndim", lambda: zgrad.linalg.cross(zgrad.ones(3), zgrad.ones(2, 3)),
     "linalg.cross: inputs must have the same number of dimensions."),
    ("cdist-columns", lambda: zgrad.cdist(zgrad.ones(2, 2), zgrad.ones(3, 3)),
     "X1 and X2 must have the same number of columns. X1: 2 X2: 3"),
    ("cdist-rank", lambda: zgrad.cdist(zgrad.ones(2), zgrad.ones(2, 2)), "cdist only supports at least 2D tensors, X1 got: 1D"),
    ("einsum-size", lambda: zgrad.einsum("ij,jk->ik", zgrad.ones(2, 2), zgrad.ones(3, 3)), "contracted dimensions need to match"),
    ("einsum-rank", lambda: zgrad.einsum("ijk", zgrad.ones(2, 2)), "does not match the number of dimensions (2)"),
]


@pytest.mark.parametrize("name, fn, message", SHAPE_ERRORS, ids=[s[0] for s in SHAPE_ERRORS])
def test_shape_errors(name, fn, message):
    with pytest.raises(ShapeError) as info:
        fn()
    assert message in str(info.value)


def test_argument_errors():
    with pytest.raises(ValueError, match="einsum\\(\\): fewer operands were provided than specified in the equation"):
        zgrad.einsum("ij,jk", zgrad.ones(2, 2))
    with pytest.raises(ValueError, match="invalid subscript"):
        zgrad.einsum("i1", zgrad.ones(2, 2))
    with pytest.raises(ValueError, match="output subscript k does not appear"):
        zgrad.einsum("ij->k", zgrad.ones(2, 2))
    with pytest.raises(ValueError, match="cdist only supports non-negative p values"):
        zgrad.cdist(zgrad.ones(2, 2), zgrad.ones(2, 2), p=-1)
    with pytest.raises(DTypeError, match="cdist only supports floating-point dtypes, X1 got: Long"):
        zgrad.cdist(zgrad.ones(2, 2, dtype=zgrad.int64), zgrad.ones(2, 2, dtype=zgrad.int64))


@pytest.mark.torch
@pytest.mark.parametrize("name", ["addmm_", "baddbmm_", "addbmm_", "addmv_", "addr_"])
def test_inplace_products_match_torch(name):
    require = pytest.importorskip("torch")
    shapes = {"addmm_": [(2, 4), (2, 3), (3, 4)], "baddbmm_": [(2, 3, 4), (2, 3, 5), (2, 5, 4)],
              "addbmm_": [(3, 4), (2, 3, 5), (2, 5, 4)], "addmv_": [(2,), (2, 3), (3,)],
              "addr_": [(2, 3), (2,), (3,)]}[name]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    results = []
    for lib in (zgrad, require):
        x = lib.tensor(arrays[0], requires_grad=True)
        factors = [lib.tensor(a, requires_grad=True) for a in arrays[1:]]
        y = x * 1
        assert getattr(y, name)(*factors, beta=0.5, alpha=2) is y
        (y * lib.tensor(np.arange(y.numel()).reshape(y.shape))).sum().backward()
        results.append([y.detach().numpy(), x.grad.numpy()] + [f.grad.numpy() for f in factors])
    for ours, ref in zip(*results):
        np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-12)


def test_inplace_product_on_a_smaller_tensor_is_refused():
    with pytest.raises(RuntimeError, match="output with shape \\[2\\] doesn't match the broadcast shape \\[2, 2\\]"):
        zgrad.ones(2).addmm_(zgrad.ones(2, 3), zgrad.ones(3, 2))

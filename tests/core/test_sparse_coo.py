"""Sparse COO tensors (``zgrad.sparse_coo_tensor``, ``Tensor.to_sparse``, ``zgrad.sparse``): what
they hold, their arithmetic, products, sums and softmax, and the gradients through them, against
torch 2.13 on the same inputs; and the errors for what they do not take."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import require_torch

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")

# an uncoalesced 3 x 4 matrix: (1, 0) is given twice, and the entries are out of order
INDICES = [[1, 0, 2, 1, 0], [0, 3, 1, 0, 1]]
VALUES = [1.5, -2.0, 3.0, 0.25, 4.0]
SIZE = (3, 4)


def sparse(lib, indices=INDICES, values=VALUES, size=SIZE, dtype=None, **kwargs):
    return lib.sparse_coo_tensor(lib.tensor(indices), lib.tensor(values, dtype=dtype or lib.float64), size, **kwargs)


def dense_of(t):
    """A tensor's values as a numpy array, densified when sparse."""
    t = t.detach()
    return (t.to_dense() if t.is_sparse else t).numpy()


def assert_same(got, expected):
    assert got.is_sparse == expected.is_sparse
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_allclose(dense_of(got), dense_of(expected), rtol=1e-12, atol=1e-12)


@pytest.fixture
def torch():
    return require_torch()


def test_a_sparse_tensor_holds_its_parts_and_says_what_it_is():
    s = sparse(zgrad)
    assert isinstance(s, zgrad.Tensor) and s.is_sparse and s.layout is zgrad.sparse_coo
    assert s.shape == SIZE and s.size() == SIZE and s.size(1) == 4 and s.dim() == s.ndim == 2 and len(s) == 3
    assert s.numel() == 12 and s._nnz() == 5 and s.sparse_dim() == 2 and s.dense_dim() == 0
    assert s.dtype == zgrad.float64 and s.device == zgrad.device("cpu") and not s.is_coalesced()
    assert not zgrad.ones(2).is_sparse and zgrad.ones(2).layout is zgrad.strided
    np.testing.assert_array_equal(s._indices().numpy(), INDICES)
    np.testing.assert_array_equal(s._values().numpy(), VALUES)


@pytest.mark.torch
def test_coalesce_sums_repeated_indices_and_sorts_them_as_torch(torch):
    got, expected = sparse(zgrad).coalesce(), sparse(torch).coalesce()
    assert got.is_coalesced() and got.coalesce() is got and got._nnz() == expected._nnz() == 4
    np.testing.assert_array_equal(got.indices().numpy(), expected.indices().numpy())
    np.testing.assert_array_equal(got.values().numpy(), expected.values().numpy())


@pytest.mark.torch
def test_conversions_between_layouts_agree_with_torch(torch):
    rng = np.random.default_rng(0)
    array = rng.standard_normal((4, 3, 2)) * (rng.random((4, 3, 2)) < 0.4)
    array[1, 2] = [0.0, 5.0]
    for sparse_dim in (None, 1, 2, 3):
        args = () if sparse_dim is None else (sparse_dim,)
        got, expected = zgrad.tensor(array).to_sparse(*args), torch.tensor(array).to_sparse(*args)
        assert (got.sparse_dim(), got.dense_dim(), got._nnz()) == (expected.sparse_dim(), expected.dense_dim(),
                                                                   expected._nnz())
        assert got.is_coalesced() and expected.is_coalesced()
        np.testing.assert_array_equal(got.indices().numpy(), expected.indices().numpy())
        np.testing.assert_array_equal(got.values().numpy(), expected.values().numpy())
        np.testing.assert_array_equal(got.to_dense().numpy(), array)
    scalar = zgrad.tensor(2.5).to_sparse()
    assert scalar.shape == () and scalar._nnz() == 1 and float(scalar.to_dense()) == 2.5
    assert sparse(zgrad).to_dense(zgrad.float32).dtype == zgrad.float32
    empty = zgrad.zeros(2, 3).to_sparse()
    assert empty._nnz() == 0 and empty.to_dense().shape == (2, 3) and not empty.to_dense().numpy().any()


@pytest.mark.torch
def test_size_dtype_and_device_are_taken_or_inferred_as_torch(torch):
    for lib in (zgrad, torch):
        inferred = lib.sparse_coo_tensor(lib.tensor(INDICES), lib.tensor(VALUES))
        assert tuple(inferred.shape) == (3, 4)
        typed = lib.sparse_coo_tensor(np.array(INDICES, dtype=np.int32), lib.ones(5), (3, 4), dtype=lib.int64)
        assert typed.dtype == lib.int64 and typed._indices().dtype == lib.int64
        hybrid = lib.sparse_coo_tensor([[0, 2]], [[1.0, 2.0], [3.0, 4.0]], (3, 2))
        assert (hybrid.sparse_dim(), hybrid.dense_dim()) == (1, 1)
    assert sparse(zgrad).to(zgrad.float32).dtype == zgrad.float32 and sparse(zgrad).float().dtype == zgrad.float32
    s = sparse(zgrad)
    assert s.to(zgrad.float64) is s and s.to("cpu") is s and s.cpu() is s


@pytest.mark.torch
def test_repr_is_torchs(torch):
    for dtype in ("float32", "int64", "float64", "int32"):
        got = repr(sparse(zgrad, dtype=getattr(zgrad, dtype)))
        expected = repr(sparse(torch, dtype=getattr(torch, dtype)))
        assert got == expected.replace("dtype=torch.", "dtype=").replace("torch.", "zgrad.")
    assert repr(sparse(zgrad)).endswith("nnz=5, dtype=float64, layout=zgrad.sparse_coo)")
    assert repr(zgrad.zeros(2, 2).to_sparse()) == repr(torch.zeros(2, 2).to_sparse()).replace("torch.", "zgrad.")
    assert f"{sparse(zgrad)}" == repr(sparse(zgrad))
    assert "requires_grad=True" in repr(sparse(zgrad, requires_grad=True))


def other(lib):
    return sparse(lib, [[2, 1, 0], [3, 0, 1]], [1.0, 10.0, 100.0])


def dense_matrix(lib, shape=SIZE, seed=1):
    return lib.tensor(np.random.default_rng(seed).standard_normal(shape))


ARITHMETIC = {
    "sparse + sparse": lambda lib: sparse(lib) + other(lib),
    "sparse - sparse": lambda lib: sparse(lib) - other(lib),
    "add alpha": lambda lib: lib.add(sparse(lib), other(lib), alpha=3),
    "dense + sparse": lambda lib: dense_matrix(lib) + sparse(lib),
    "dense - sparse": lambda lib: dense_matrix(lib) - sparse(lib),
    "add(dense, sparse)": lambda lib: lib.add(dense_matrix(lib), sparse(lib), alpha=-2),
    "float32 dense + int sparse": lambda lib: lib.ones(3, 4) + sparse(lib, dtype=lib.int64),
    "sparse * number": lambda lib: sparse(lib) * 2,
    "number * sparse": lambda lib: 2 * sparse(lib),
    "sparse * 0-d": lambda lib: sparse(lib) * lib.tensor(3.0, dtype=lib.float64),
    "sparse * dense": lambda lib: sparse(lib) * dense_matrix(lib),
    "dense * sparse": lambda lib: lib.mul(dense_matrix(lib), sparse(lib)),
    "sparse * sparse": lambda lib: sparse(lib) * other(lib),
    "sparse / number": lambda lib: sparse(lib) / 4,
    "-sparse": lambda lib: -sparse(lib),
    "pow": lambda lib: sparse(lib).pow(2),
    "sparse @ dense": lambda lib: sparse(lib) @ dense_matrix(lib, (4, 2)),
    "mm": lambda lib: lib.mm(sparse(lib), dense_matrix(lib, (4, 2))),
    "spmm": lambda lib: lib.spmm(sparse(lib), dense_matrix(lib, (4, 2))),
    "sparse.mm": lambda lib: lib.sparse.mm(sparse(lib), dense_matrix(lib, (4, 2))),
    "dense @ sparse": lambda lib: dense_matrix(lib, (2, 3)) @ sparse(lib),
    "sparse @ sparse": lambda lib: lib.sparse.mm(sparse(lib), other(lib).t()),
    "sparse @ vector": lambda lib: lib.matmul(sparse(lib), dense_matrix(lib, (4,))),
    "addmm": lambda lib: lib.addmm(dense_matrix(lib, (3, 2)), sparse(lib), dense_matrix(lib, (4, 2)), beta=2, alpha=3),
    "sparse.addmm": lambda lib: lib.sparse.addmm(dense_matrix(lib, (3, 2)), sparse(lib), dense_matrix(lib, (4, 2))),
    "sum": lambda lib: sparse(lib).sum(),
    "zgrad.sum": lambda lib: lib.sum(sparse(lib)),
    "sparse.sum dim 0": lambda lib: lib.sparse.sum(sparse(lib), 0),
    "sparse.sum dim 1": lambda lib: lib.sparse.sum(sparse(lib), dim=1),
    "sparse.sum all dims": lambda lib: lib.sparse.sum(sparse(lib), (0, 1)),
    "sparse.sum hybrid": lambda lib: lib.sparse.sum(lib.tensor(np.arange(24.0).reshape(2, 3, 4)).to_sparse(1), 2),
    "sum dtype": lambda lib: sparse(lib, dtype=lib.int64).sum(dtype=lib.float64),
    "softmax dim 0": lambda lib: lib.sparse.softmax(sparse(lib), 0),
    "softmax dim 1": lambda lib: lib.sparse.softmax(sparse(lib), 1),
    "log_softmax dim -1": lambda lib: lib.sparse.log_softmax(sparse(lib), -1),
    "softmax of a dense dim": lambda lib: lib.sparse.softmax(lib.tensor(np.arange(6.0).reshape(2, 3)).to_sparse(1), 1),
    "t": lambda lib: sparse(lib).t(),
    "transpose": lambda lib: sparse(lib).transpose(0, 1),
    "sparse_mask": lambda lib: dense_matrix(lib).sparse_mask(sparse(lib).coalesce()),
    "floor division of repeated entries": lambda lib: sparse(lib).div(2, rounding_mode="floor"),
    "//": lambda lib: sparse(lib) // 2,
    "softmax of a dense dim, repeated entries": lambda lib: lib.sparse.softmax(
        lib.sparse_coo_tensor([[0, 0]], [[0.0, 1.0], [2.0, 3.0]], (1, 2), dtype=lib.float64), 1),
    "addmm beta=0 ignores NaN": lambda lib: lib.addmm(lib.full((3, 2), float("nan"), dtype=lib.float64), sparse(lib),
                                                       dense_matrix(lib, (4, 2)), beta=0),
    "sparse @ vector operator": lambda lib: sparse(lib) @ dense_matrix(lib, (4,)),
    "vector @ sparse": lambda lib: dense_matrix(lib, (3,)) @ sparse(lib),
    "mv": lambda lib: sparse(lib).mv(dense_matrix(lib, (4,))),
    "zgrad.mv": lambda lib: lib.mv(sparse(lib), dense_matrix(lib, (4,))),
    "T": lambda lib: sparse(lib).T,
    "mm keywords": lambda lib: lib.mm(input=sparse(lib), mat2=dense_matrix(lib, (4, 2))),
    "zgrad.sqrt": lambda lib: lib.sqrt(lib.abs(sparse(lib))),
    "sin method": lambda lib: sparse(lib).sin(),
    "zgrad.pow": lambda lib: lib.pow(sparse(lib), 3),
    "zgrad.t": lambda lib: lib.t(sparse(lib)),
    "isnan": lambda lib: sparse(lib).isnan(),
    "norm": lambda lib: sparse(lib).norm(),
    "0-d sparse + 0-d sparse": lambda lib: lib.tensor(2.0).to_sparse() + lib.tensor(3.0).to_sparse(),
    "dense + 0-d sparse": lambda lib: lib.tensor(2.0) + lib.tensor(3.0).to_sparse(),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", ARITHMETIC)
def test_operations_agree_with_torch(case, torch):
    got, expected = ARITHMETIC[case](zgrad), ARITHMETIC[case](torch)
    assert_same(got, expected)
    assert str(got.dtype) == str(expected.dtype).removeprefix("torch.")


@pytest.mark.torch
@pytest.mark.parametrize("name", ["abs", "asin", "asinh", "atan", "ceil", "deg2rad", "erf", "expm1", "floor", "frac",
                                  "log1p", "neg", "rad2deg", "relu", "round", "sgn", "sign", "sin", "sinh", "sqrt",
                                  "square", "tan", "tanh", "trunc"])
def test_functions_that_keep_zero_at_zero_apply_to_the_values(name, torch):
    def run(lib):
        s = lib.sparse_coo_tensor([[0, 1, 2, 0], [1, 0, 2, 1]], [0.25, -0.5, 0.75, 0.125], (3, 3), dtype=lib.float64)
        return getattr(s, name)()
    assert_same(run(zgrad), run(torch))


@pytest.mark.torch
def test_gradients_reach_the_values_and_the_dense_operand_as_in_torch(torch):
    def run(lib):
        values = lib.tensor(VALUES, dtype=lib.float64, requires_grad=True)
        right = dense_matrix(lib, (4, 2)).requires_grad_()
        s = lib.sparse_coo_tensor(lib.tensor(INDICES), values, SIZE)
        assert s.requires_grad and not s.is_leaf and s.grad_fn is not None
        loss = (lib.sparse.mm(s, right) ** 2).sum() + (dense_matrix(lib) * s.to_dense()).sum() \
            + (lib.sparse.softmax(s, 1) * s).sum() + lib.sparse.sum(s * s, 0).to_dense().pow(3).sum() \
            + (dense_matrix(lib, (2, 3)) @ s).sum() + (dense_matrix(lib) + s).pow(2).sum()
        loss.backward()
        return loss, values.grad, right.grad
    for got, expected in zip(run(zgrad), run(torch)):
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-10)


@pytest.mark.torch
@pytest.mark.parametrize("product", ["sparse.mm", "mm"])
def test_a_sparse_leafs_gradient_is_sparse_with_its_pattern_as_in_torch(product, torch):
    """As torch.sparse.mm's: zgrad.mm's gradient of a sparse factor has the factor's pattern too,
    where torch.mm's is dense (zgrad keeps a sparse tensor's gradient in its values)."""
    def run(lib, multiply):
        s = sparse(lib, requires_grad=True).coalesce()
        s = s.detach().requires_grad_()
        assert s.is_leaf and s.requires_grad and s.grad is None
        multiply(s, dense_matrix(lib, (4, 2))).pow(2).sum().backward()
        return s.grad
    got = run(zgrad, zgrad.sparse.mm if product == "sparse.mm" else zgrad.mm)
    expected = run(torch, torch.sparse.mm)
    assert got.is_sparse and expected.is_sparse
    np.testing.assert_array_equal(got._indices().numpy(), expected.coalesce().indices().numpy())
    assert_same(got, expected)


@pytest.mark.torch
def test_the_gradient_of_a_leaf_with_repeated_indices_holds_each_position_once_as_torchs(torch):
    def run(lib):
        s = sparse(lib, requires_grad=True)
        (lib.sparse.mm(s, dense_matrix(lib, (4, 2))) ** 2).sum().backward()
        (s.to_dense() * dense_matrix(lib)).sum().backward()
        return s.grad
    got, expected = run(zgrad), run(torch)
    assert got.is_coalesced() and got._nnz() == expected.coalesce()._nnz() == 4
    assert_same(got, expected)


@pytest.mark.torch
def test_an_op_on_a_sparse_leaf_is_not_that_leaf(torch):
    for lib in (zgrad, torch):
        s = sparse(lib, requires_grad=True)
        transposed, coalesced = s.t(), s.coalesce()
        assert not transposed.is_leaf and not coalesced.is_leaf and transposed.grad_fn is not None
        lib.sparse.sum(transposed).backward()
        assert transposed.grad is None and s.grad is not None
        with pytest.raises(RuntimeError, match="leaf"):
            transposed.requires_grad_(False)


def test_copies_and_descriptions():
    import copy
    s = sparse(zgrad, requires_grad=True)
    copied = copy.deepcopy(s)
    assert copied.is_leaf and copied.requires_grad and copied._values() is not s._values()
    assert_same(copied, s)
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
        copy.deepcopy(s * 2)
    assert (s.ndimension(), s.nelement(), s.element_size(), s.itemsize, s.get_device()) == (2, 12, 8, 8, -1)
    assert zgrad.sparse_coo_tensor([[0]], [1.0], (2,), is_coalesced=False).is_coalesced() is False
    assert zgrad.tensor(0.0).to_sparse()._nnz() == 0


def test_a_sparse_leaf_keeps_its_gradient_until_cleared():
    s = sparse(zgrad, requires_grad=True)
    (s.to_dense() * 2).sum().backward()
    np.testing.assert_array_equal(s.grad._values().numpy(), [2.0] * 4)
    np.testing.assert_array_equal(s._values().grad.numpy(), [2.0] * 5)
    s.grad = None
    assert s.grad is None and s._values().grad is None
    s.grad = zgrad.full((3, 4), 3.0, dtype=zgrad.float64).to_sparse()
    np.testing.assert_array_equal(s._values().grad.numpy(), [3.0] * 5)
    with pytest.raises(zgrad.ZgradError, match="can be set to None or to a sparse tensor of its size"):
        s.grad = zgrad.ones(3, 4)


def test_bad_indices_and_sizes_are_refused_with_torchs_messages():
    with pytest.raises(RuntimeError, match="indices and values must have same nnz, but got nnz from indices: 5, nnz "
                                           "from values: 4"):
        zgrad.sparse_coo_tensor(INDICES, VALUES[:4], SIZE)
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 1, size is 3 but found index 3"):
        zgrad.sparse_coo_tensor(INDICES, VALUES, (3, 3))
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 0"):
        zgrad.sparse_coo_tensor([[-1], [0]], [1.0], (2, 2))
    with pytest.raises(RuntimeError, match="indices must be an int64 tensor"):
        zgrad.sparse_coo_tensor(zgrad.tensor(INDICES).double(), VALUES, SIZE)
    with pytest.raises(RuntimeError, match=r"'len\(size\) == sparse_dim \+ dense_dim' is not satisfied"):
        zgrad.sparse_coo_tensor(INDICES, VALUES, (3, 4, 5))
    with pytest.raises(zgrad.ZgradError, match="values has incorrect size"):
        zgrad.sparse_coo_tensor([[0, 1]], [[1.0], [2.0]], (2, 3))
    with pytest.raises(zgrad.ZgradError, match="indices must be a 2-D tensor"):
        zgrad.sparse_coo_tensor([0, 1], [1.0, 2.0], (2,))
    with pytest.raises(RuntimeError, match="is_coalesced=True, but the indices are not sorted"):
        zgrad.sparse_coo_tensor(INDICES, VALUES, SIZE, is_coalesced=True)


def test_what_sparse_tensors_do_not_take_is_refused_naming_the_operation():
    s = sparse(zgrad)
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported. Use add\(dense, sparse\)"):
        s + zgrad.ones(3, 4)
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
        s + 1
    with pytest.raises(zgrad.ZgradError, match="dense-sparse addition does not currently support broadcasting"):
        zgrad.ones(4) + s
    with pytest.raises(RuntimeError, match="Sparse division requires a scalar or zero-dim dense tensor divisor"):
        s / zgrad.ones(3, 4)
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor, please call .coalesce"):
        s.indices()
    with pytest.raises(RuntimeError, match="Cannot get values on an uncoalesced tensor"):
        s.values()
    with pytest.raises(zgrad.ZgradError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x2\)"):
        zgrad.mm(s, zgrad.ones(3, 2, dtype=zgrad.float64))
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        zgrad.mm(s, zgrad.ones(4, 2))
    with pytest.raises(RuntimeError, match="pow: a sparse tensor can be raised to a positive"):
        s.pow(0)
    with pytest.raises(RuntimeError, match="For integral input tensors, argument alpha must not be a floating point"):
        zgrad.add(sparse(zgrad, dtype=zgrad.int64), sparse(zgrad, dtype=zgrad.int64), alpha=2.5)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors is not supported"):
        sparse(zgrad, dtype=zgrad.bool) - sparse(zgrad, dtype=zgrad.bool)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        zgrad.sparse.sum(s, (0, -2))
    with pytest.raises(NotImplementedError, match="\"softmax\" not implemented for 'Long'"):
        zgrad.sparse.softmax(sparse(zgrad, dtype=zgrad.int64), 0)
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        zgrad.addmm(zgrad.ones(3, 2), s, zgrad.ones(4, 2, dtype=zgrad.float64))
    with pytest.raises(RuntimeError, match=r"t\(\) expects a tensor with <= 2 sparse and 0 dense dimensions"):
        zgrad.ones(2, 2, 2).to_sparse().t()
    for operation, name in [(lambda: s.exp(), "exp"), (lambda: zgrad.exp(s), "exp"), (lambda: s[0], "__getitem__"),
                            (lambda: s.reshape(12), "reshape"), (lambda: zgrad.nn.functional.linear(s, s), "linear"),
                            (lambda: s.add_(s), "add_"), (lambda: np.asarray(s), "__array__"),
                            (lambda: zgrad.optim.SGD([s]), "SGD.__init__")]:
        with pytest.raises(NotImplementedError, match=f"^{name}: zgrad's sparse COO tensors do not support"):
            operation()


@requires_cuda
@pytest.mark.parametrize("case", ["mm", "dense @ sparse", "add", "softmax", "sum", "coalesce", "to_sparse"])
def test_sparse_operations_run_on_cuda_as_on_the_cpu(case):
    """In Numba's simulator here: the values stay on the device, only the indices visit the host."""
    def run(lib, values, right):
        s = lib.sparse_coo_tensor(INDICES, values, SIZE)
        result = {"mm": lambda: lib.mm(s, right), "dense @ sparse": lambda: right.t() @ s.t(),
                  "add": lambda: right.t() + s, "softmax": lambda: lib.sparse.softmax(s, 1).to_dense(),
                  "sum": lambda: lib.sparse.sum(s, 0).to_dense(), "coalesce": lambda: s.coalesce().to_dense(),
                  "to_sparse": lambda: (right * (right > 0)).to_sparse()._values()}[case]()
        return result
    check_device(run, [(5,), (4, 3)], dtype=np.float64)

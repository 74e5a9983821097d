"""The tensor API of issue 15: creation, in-place ops (with PyTorch's autograd rules), shape
ops, indexing, math, reductions, comparisons, device moves. Every differentiable op is checked
against PyTorch (float32 and float64, skipped without torch) and float64 finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from zgrad.errors import AutogradError, ZgradError
from helpers import case, check_finite_differences, check_torch, require_torch, torch

POSITIVE = (0.5, 2.0)
IDX = np.array([[0, 2], [1, 1], [2, 0]], dtype=np.int64)  # repeats: gradients must add up
PERM = np.array([[2, 0], [1, 3], [0, 1]], dtype=np.int64)  # no repeats within a row (scatter)
SMALL = np.array([[1], [0]], dtype=np.int64)  # smaller than the input in every dimension


def F(lib):
    return lib.nn.functional


CASES = [
    # element-wise math
    case("remainder_op", lambda lib, a, b: a % b, (3, 4), (3, 4), domain=POSITIVE),
    case("remainder_scalar", lambda lib, a: a % 0.7, (3, 4)),
    case("remainder_fn_negative", lambda lib, a, b: lib.remainder(a * 3, b - 3), (3, 4), (3, 4), domain=POSITIVE),
    case("abs", lambda lib, a: lib.abs(a), (3, 4)),
    case("abs_method", lambda lib, a: abs(a).sum(dim=0), (3, 4)),
    case("sqrt", lambda lib, a: lib.sqrt(a), (3, 4), domain=POSITIVE),
    case("sqrt_method", lambda lib, a: a.sqrt() * a, (5,), domain=POSITIVE),
    case("square", lambda lib, a: lib.square(a), (3, 4)),
    case("square_method", lambda lib, a: a.square().sum(dim=1), (3, 4)),
    case("clamp", lambda lib, a: lib.clamp(a, -0.5, 0.7), (3, 4)),
    case("clamp_min", lambda lib, a: a.clamp(min=-0.3), (3, 4)),
    case("clamp_max", lambda lib, a: a.clamp(max=0.2), (3, 4)),
    case("clip", lambda lib, a: lib.clip(a, 0.0, 1.0), (3, 4)),
    case("maximum", lambda lib, a, b: lib.maximum(a, b), (3, 4), (3, 4)),
    case("maximum_broadcast", lambda lib, a, b: a.maximum(b), (3, 4), (4,)),
    case("minimum", lambda lib, a, b: lib.minimum(a, b), (2, 1, 3), (4, 1)),
    case("max_of_two", lambda lib, a, b: lib.max(a, b), (3, 4), (3, 4)),
    case("min_of_two", lambda lib, a, b: lib.min(a, b), (3, 4), (3, 4)),
    case("where", lambda lib, a, b: lib.where(a > 0, a, b), (3, 4), (3, 4)),
    case("where_broadcast_scalar", lambda lib, a, b: lib.where(b > 0, a, 0.5), (3, 4), (4,)),
    case("where_method", lambda lib, a, b: a.where(a < b, b * 2), (3, 4), (3, 1)),
    case("masked_fill", lambda lib, a: a.masked_fill(a > 0.5, 2.0), (3, 4)),
    case("masked_fill_broadcast", lambda lib, a, m: lib.masked_fill(a, m[0] > 0, -1.0), (3, 4), (1, 4)),
    case("masked_fill_tensor_value", lambda lib, a, v: a.masked_fill(a < 0, v.sum()), (3, 4), (2,)),
    # reductions
    case("max_all", lambda lib, a: a.max() * 2, (3, 4)),
    case("min_all", lambda lib, a: lib.min(a), (2, 3, 2)),
    case("max_dim", lambda lib, a: lib.max(a, dim=1).values, (3, 4)),
    case("max_dim_index", lambda lib, a: a.max(1)[0] * 2, (3, 4)),
    case("min_dim_keepdim", lambda lib, a: a.min(0, keepdim=True).values, (3, 4)),
    case("max_dim_negative_3d", lambda lib, a: lib.max(a, -2)[0], (2, 3, 4)),
    case("var_dim", lambda lib, a: a.var(1), (3, 4)),
    case("var_all", lambda lib, a: lib.var(a), (3, 4)),
    case("var_tuple_biased_keepdim", lambda lib, a: a.var((0, 2), keepdim=True, unbiased=False), (2, 3, 4)),
    case("var_correction", lambda lib, a: a.var(dim=0, correction=2), (5, 3)),
    case("var_unbiased_positional", lambda lib, a: lib.var(a, 1, False), (3, 4)),
    case("std_dim", lambda lib, a: a.std(dim=0), (3, 4)),
    case("std_all", lambda lib, a: lib.std(a), (3, 4)),
    case("std_correction_keepdim", lambda lib, a: a.std(dim=-1, correction=0, keepdim=True), (2, 3, 4)),
    case("logsumexp", lambda lib, a: lib.logsumexp(a, dim=1), (3, 4)),
    case("logsumexp_keepdim", lambda lib, a: a.logsumexp(0, keepdim=True), (3, 4)),
    case("logsumexp_tuple", lambda lib, a: a.logsumexp(dim=(0, 2)), (2, 3, 4)),
    case("logsumexp_large", lambda lib, a: lib.logsumexp(a * 400, dim=-1), (3, 4)),
    # layout
    case("view", lambda lib, a: a.view(4, 3) * 2, (3, 4)),
    case("view_tuple", lambda lib, a: a.view((2, -1)), (3, 4)),
    case("view_as", lambda lib, a, b: a.view_as(b) * b, (3, 4), (2, 6)),
    case("flatten", lambda lib, a: a.flatten(), (2, 3, 4)),
    case("flatten_range", lambda lib, a: lib.flatten(a, 1), (2, 3, 4)),
    case("flatten_start_end", lambda lib, a: a.flatten(0, 1) * 3, (2, 3, 4)),
    case("flatten_negative", lambda lib, a: lib.flatten(a, start_dim=-2, end_dim=-1), (2, 3, 4)),
    case("unsqueeze", lambda lib, a: a.unsqueeze(1) * lib.ones(3, 2, 4), (3, 4)),
    case("unsqueeze_negative", lambda lib, a: lib.unsqueeze(a, -1), (3, 4)),
    case("squeeze_all", lambda lib, a: a.squeeze(), (3, 1, 4, 1)),
    case("squeeze_dim", lambda lib, a: lib.squeeze(a, 1), (3, 1, 4, 1)),
    case("squeeze_dim_not_one", lambda lib, a: a.squeeze(0), (3, 1, 4)),
    case("squeeze_tuple", lambda lib, a: a.squeeze((1, 3)), (3, 1, 4, 1)),
    case("expand", lambda lib, a: a.expand(3, 4) * 2, (3, 1)),
    case("expand_new_dims", lambda lib, a: a.expand(2, -1, 4), (3, 1)),
    case("expand_tuple", lambda lib, a: a.expand((2, 3)), (3,)),
    case("expand_as", lambda lib, a, b: a.expand_as(b) * b, (1, 4), (3, 4)),
    case("split_int", lambda lib, a: lib.cat([p * (i + 1) for i, p in enumerate(a.split(2, dim=1))], dim=1), (3, 5)),
    case("split_sizes", lambda lib, a: lib.split(a, [1, 2], 0)[1] * 2, (3, 4)),
    case("split_unused_piece", lambda lib, a: a.split(1)[2] * 5, (3, 4)),
    case("chunk", lambda lib, a: a.chunk(2, 0)[1] * 3, (3, 4)),
    case("chunk_all", lambda lib, a: lib.stack(lib.chunk(a, 4, dim=1), 0).sum(dim=0), (3, 4)),
    case("t", lambda lib, a: a.t() * 2, (3, 4)),
    case("t_fn_1d", lambda lib, a: lib.t(a), (4,)),
    # indexing
    case("gather_dim1", lambda lib, a: a.gather(1, lib.tensor(IDX)), (3, 4)),
    case("gather_dim0", lambda lib, a: lib.gather(a, 0, lib.tensor(IDX)), (3, 4)),
    case("gather_small_index", lambda lib, a: a.gather(1, lib.tensor(SMALL)), (3, 4)),
    case("gather_3d", lambda lib, a: a.gather(2, lib.tensor(IDX).unsqueeze(0).expand(2, 3, 2)), (2, 3, 4)),
    case("index_select", lambda lib, a: a.index_select(1, lib.tensor([0, 2, 2])), (3, 4)),
    case("index_select_dim0", lambda lib, a: lib.index_select(a, 0, lib.tensor([2, 0, 2, 1])), (3, 4)),
    case("index_select_3d", lambda lib, a: a.index_select(-1, lib.tensor([3, 3, 0])), (2, 3, 4)),
    case("index_integer_tensor", lambda lib, a: a[lib.tensor([[0, 1], [2, 0]])], (3, 4)),
    case("scatter_src", lambda lib, a, b: a.scatter(1, lib.tensor(PERM), b), (3, 4), (3, 2)),
    case("scatter_value", lambda lib, a: a.scatter(1, lib.tensor(PERM), value=2.5), (3, 4)),
    # in place, recorded in the graph
    case("add_alpha_", lambda lib, a, b: (a * 1).add_(b, alpha=2), (3, 4), (3, 4)),
    case("add_broadcast_", lambda lib, a, b: (a * 1).add_(b), (3, 4), (4,)),
    case("sub_", lambda lib, a, b: (a * 2).sub_(b), (3, 4), (3, 4)),
    case("sub_alpha_", lambda lib, a, b: (a * 2).sub_(b, alpha=0.5), (3, 4), (3, 4)),
    case("mul_", lambda lib, a, b: (a + 0).mul_(b).mul_(b), (3, 4), (3, 4)),
    case("div_", lambda lib, a, b: (a * 1).div_(b), (3, 4), (3, 4), domain=POSITIVE),
    case("iadd_isub_imul_idiv", lambda lib, a, b: _augmented(a * 1, b), (3, 4), (3, 4), domain=POSITIVE),
    case("addcmul_", lambda lib, a, b: (a * 1).addcmul_(a, b, value=0.5), (3, 4), (3, 4)),
    case("addcdiv_", lambda lib, a, b: (a * 1).addcdiv_(a, b, value=-2), (3, 4), (3, 4), domain=POSITIVE),
    case("clamp_", lambda lib, a: (a * 2).clamp_(-1, 1), (3, 4)),
    case("relu_", lambda lib, a: (a - 0.1).relu_(), (3, 4)),
    case("masked_fill_", lambda lib, a: (a * 3).masked_fill_(a > 0, 0.5), (3, 4)),
    case("scatter_", lambda lib, a, b: (a * 1).scatter_(1, lib.tensor(PERM), b), (3, 4), (3, 2)),
    case("scatter_value_", lambda lib, a: (a * 1).scatter_(0, lib.tensor(PERM[:2, :1]), 4.0), (3, 4)),
    case("copy_", lambda lib, a, b: (a * 1).copy_(b) * a, (3, 4), (4,)),
    case("fill_", lambda lib, a: (a * 1).fill_(2.0) + a, (3, 4)),
    case("zero_", lambda lib, a: (a * 1).zero_() + a * a, (3, 4)),
    case("setitem_slice", lambda lib, a, b: _setitem(a * 1, (slice(None), 1), b), (3, 4), (3,)),
    case("setitem_mask", lambda lib, a: _setitem(a * 2, a > 0, 0.5), (3, 4)),
    case("setitem_index_tensor", lambda lib, a, b: _setitem(a * 1, lib.tensor([2, 0]), b), (3, 4), (4,)),
    case("gather_noncontiguous", lambda lib, a: a.t().gather(1, lib.tensor(IDX.T.copy())), (3, 4)),
    case("index_select_noncontiguous", lambda lib, a: a.t().index_select(0, lib.tensor([3, 1])), (3, 4)),
    case("buffer_add_", lambda lib, a: lib.zeros(3, 4, dtype=a.dtype).add_(a).mul_(a), (3, 4)),
]


def _setitem(x, index, value):
    x[index] = value
    return x


def _augmented(x, y):
    x += y
    x -= y * 0.5
    x *= y
    x /= y + 1
    return x


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", CASES)
def test_matches_torch(op, dtype):
    check_torch(op.fn, op.shapes, dtype=dtype, domain=op.domain)


@pytest.mark.parametrize("op", CASES)
def test_matches_finite_differences(op):
    check_finite_differences(op.fn, op.shapes, domain=op.domain)


def test_scatter_from_a_larger_src():
    # torch's backward cannot give src a gradient of another shape than index; zgrad pads it with zeros
    check_finite_differences(lambda lib, a, b: lib.scatter(a, 0, lib.tensor(SMALL), b), [(3, 4), (3, 3)])
    out = zgrad.scatter(zgrad.zeros(3, 4), 0, zgrad.tensor(SMALL), zgrad.arange(1.0, 10.0).view(3, 3))
    np.testing.assert_array_equal(out.numpy(), [[4, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]])


def test_reflected_remainder_is_differentiable():
    # torch has no derivative for number % tensor; zgrad's is -grad * floor(a / b)
    check_finite_differences(lambda lib, a: 5.0 % a, [(3, 4)], domain=POSITIVE)
    np.testing.assert_allclose((5.0 % zgrad.tensor([2.0, 3.0])).numpy(), [1.0, 2.0])


# --- ties and edges of the non-smooth ops -------------------------------------------------------

def _grads_vs_torch(fn, values, dtype=np.float64):
    x = zgrad.tensor(np.array(values, dtype=dtype), requires_grad=True)
    out = fn(zgrad, x)
    out.backward(zgrad.ones(out.shape, dtype=out.dtype))
    if torch is not None:
        tx = torch.tensor(np.array(values, dtype=dtype), requires_grad=True)
        tout = fn(torch, tx)
        tout.backward(torch.ones(tout.shape, dtype=tout.dtype))
        np.testing.assert_allclose(out.numpy(), tout.detach().numpy())
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    return out, x.grad.numpy()


def test_full_max_splits_the_gradient_among_ties():
    _, grad = _grads_vs_torch(lambda lib, x: x.max(), [[1.0, 3.0], [3.0, 0.0]])
    np.testing.assert_array_equal(grad, [[0, 0.5], [0.5, 0]])
    _, grad = _grads_vs_torch(lambda lib, x: x.min(), [2.0, -1.0, -1.0, -1.0])
    np.testing.assert_allclose(grad, [0, 1 / 3, 1 / 3, 1 / 3])


def test_max_along_dim_takes_the_first_tie():
    out, grad = _grads_vs_torch(lambda lib, x: lib.max(x, dim=1).values, [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    np.testing.assert_array_equal(grad, [[0, 1, 0], [1, 0, 0]])
    assert zgrad.tensor([[1.0, 3.0, 3.0]]).max(dim=1).indices.tolist() == [1]


def test_maximum_minimum_split_ties_in_halves():
    a = zgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = zgrad.tensor([1.0, 5.0, 0.0], requires_grad=True)
    zgrad.maximum(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.5, 0, 1])
    np.testing.assert_array_equal(b.grad.numpy(), [0.5, 1, 0])
    a.grad = b.grad = None
    zgrad.minimum(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.5, 1, 0])
    np.testing.assert_array_equal(b.grad.numpy(), [0.5, 0, 1])


def test_clamp_abs_std_at_their_kinks_match_torch():
    _grads_vs_torch(lambda lib, x: x.clamp(-1.0, 1.0), [-2.0, -1.0, 0.0, 1.0, 2.0])
    _grads_vs_torch(lambda lib, x: x.abs(), [-1.0, 0.0, 2.0])
    out, grad = _grads_vs_torch(lambda lib, x: x.std(dim=1), [[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]])
    assert out.numpy()[0] == 0 and np.all(grad[0] == 0), "std 0 gives gradient 0, not NaN"


@pytest.mark.torch
def test_nan_propagates_like_torch():
    nan = float("nan")
    values = [[1.0, nan, 3.0], [0.0, 2.0, 1.0]]
    x = zgrad.tensor(values)
    assert np.isnan(x.max().item()) and x.max(dim=1).indices.tolist() == [1, 1]
    assert np.isnan(zgrad.maximum(x, zgrad.zeros(2, 3)).numpy()[0, 1])
    assert np.isnan(x.clamp(0, 1).numpy()[0, 1])
    assert np.isnan(zgrad.logsumexp(x, dim=1).numpy()[0])
    if torch is not None:
        t = torch.tensor(values)
        assert t.max(dim=1).indices.tolist() == [1, 1] and torch.isnan(t.max())


@pytest.mark.torch
def test_logsumexp_of_infinite_rows():
    inf = float("inf")
    x = zgrad.tensor([[-inf, -inf], [inf, 1.0], [0.0, -inf]])
    np.testing.assert_array_equal(zgrad.logsumexp(x, dim=1).numpy(), [-inf, inf, 0.0])
    if torch is not None:
        ref = torch.logsumexp(torch.tensor([[-inf, -inf], [inf, 1.0], [0.0, -inf]]), dim=1)
        np.testing.assert_array_equal(zgrad.logsumexp(x, dim=1).numpy(), ref.numpy())


def test_var_of_one_element_is_nan_unbiased():
    with np.errstate(invalid="ignore", divide="ignore"):
        assert np.isnan(zgrad.tensor([3.0]).var().item())
        assert zgrad.tensor([3.0]).var(unbiased=False).item() == 0


# --- results that are not differentiable --------------------------------------------------------

COMPARISONS = [("eq", "__eq__"), ("ne", "__ne__"), ("lt", "__lt__"), ("le", "__le__"), ("gt", "__gt__"), ("ge", "__ge__")]


@pytest.mark.torch
@pytest.mark.parametrize("name, dunder", COMPARISONS)
def test_comparisons_give_bool_tensors(name, dunder):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, (3, 4)).astype(np.float32)
    b = rng.integers(0, 3, (4,)).astype(np.float32)
    x, y = zgrad.tensor(a, requires_grad=True), zgrad.tensor(b)
    for out, expected in [
        (getattr(zgrad, name)(x, y), getattr(np, {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
                                                  "gt": "greater", "ge": "greater_equal"}[name])(a, b)),
    ]:
        assert out.dtype == np.bool_ and not out.requires_grad and out.grad_fn is None
        np.testing.assert_array_equal(out.numpy(), expected)
        np.testing.assert_array_equal(getattr(x, dunder)(y).numpy(), expected)
        np.testing.assert_array_equal(getattr(x, name)(y).numpy(), expected)
    np.testing.assert_array_equal(getattr(x, dunder)(1.0).numpy(), getattr(a, dunder)(1.0))
    if torch is not None:
        ref = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
        assert ref.dtype == torch.bool
        np.testing.assert_array_equal(getattr(zgrad, name)(x, y).numpy(), ref.numpy())


def test_logical_operators_on_bool_tensors():
    a = zgrad.tensor([True, True, False, False])
    b = zgrad.tensor([True, False, True, False])
    assert (a & b).tolist() == [True, False, False, False]
    assert (a | b).tolist() == [True, True, True, False]
    assert (a ^ b).tolist() == [False, True, True, False]
    assert (~a).tolist() == [False, False, True, True]
    assert zgrad.logical_and(zgrad.tensor([1, 0]), zgrad.tensor([2, 2])).tolist() == [True, False]
    assert zgrad.logical_not(zgrad.tensor([0.0, 1.5])).tolist() == [True, False]
    masked = zgrad.arange(4).float().masked_fill((a & ~b), -1.0)
    assert masked.tolist() == [0.0, -1.0, 2.0, 3.0]
    assert (a & True).tolist() == [True, True, False, False] and (False | b).tolist() == [True, False, True, False]
    assert (zgrad.tensor([1, 2]) & zgrad.tensor([3, 1])).tolist() == [1, 0]  # bitwise on integers
    with pytest.raises(RuntimeError, match="not implemented for 'Float'"):
        ~zgrad.tensor([1.0])


@pytest.mark.torch
def test_argmax_argmin_are_int64_like_torch():
    values = np.array([[1.0, 5.0, 5.0], [7.0, 0.0, 7.0]], dtype=np.float32)
    x = zgrad.tensor(values, requires_grad=True)
    results = {
        "flat": x.argmax(), "dim1": x.argmax(dim=1), "keepdim": zgrad.argmax(x, 1, keepdim=True),
        "flat_keepdim": x.argmax(keepdim=True), "argmin0": x.argmin(0), "argmin_flat": zgrad.argmin(x),
    }
    for name, out in results.items():
        assert out.dtype == np.int64 and not out.requires_grad, name
    assert results["flat"].item() == 3 and results["dim1"].tolist() == [1, 0]
    assert results["keepdim"].shape == (2, 1) and results["flat_keepdim"].shape == (1, 1)
    assert results["argmin0"].tolist() == [0, 1, 0] and results["argmin_flat"].item() == 4
    if torch is not None:
        t = torch.tensor(values)
        refs = {"flat": t.argmax(), "dim1": t.argmax(dim=1), "keepdim": torch.argmax(t, 1, keepdim=True),
                "flat_keepdim": t.argmax(keepdim=True), "argmin0": t.argmin(0), "argmin_flat": torch.argmin(t)}
        for name, ref in refs.items():
            np.testing.assert_array_equal(results[name].numpy(), ref.numpy(), err_msg=name)
            assert results[name].shape == tuple(ref.shape), name


def test_max_with_dim_returns_values_and_indices():
    x = zgrad.tensor([[1.0, 4.0, 2.0], [3.0, 0.0, 3.0]], requires_grad=True)
    result = x.max(dim=1)
    values, indices = result
    assert values is result.values and indices is result.indices and result[0] is values
    assert values.tolist() == [4.0, 3.0] and indices.tolist() == [1, 0] and indices.dtype == np.int64
    assert values.requires_grad and not indices.requires_grad and indices.grad_fn is None
    low = zgrad.min(x, 0, keepdim=True)
    assert low.values.shape == (1, 3) and low.indices.tolist() == [[0, 1, 0]]


@pytest.mark.torch
def test_argmax_over_an_empty_tensor_like_torch():
    empty = zgrad.zeros(0, 3)
    for out in (zgrad.argmax(empty, 1), empty.argmin(dim=-1), zgrad.argmax(empty, 1, keepdim=True)):
        assert out.dtype == np.int64 and out.numel() == 0
    assert zgrad.argmax(empty, 1, keepdim=True).shape == (0, 1)
    assert zgrad.argmax(zgrad.zeros(2, 0, 3), 2).shape == (2, 0)
    values, indices = zgrad.max(empty, 1)
    assert values.shape == indices.shape == (0,) and indices.dtype == np.int64
    with pytest.raises(IndexError, match=r"^argmax\(\): Expected reduction dim 0 to have non-zero size\.$"):
        zgrad.argmax(empty, 0)
    with pytest.raises(IndexError, match=r"^argmin\(\): Expected reduction dim 0 to have non-zero size\.$"):
        zgrad.argmin(empty, -2)
    with pytest.raises(IndexError, match=r"^min\(\): Expected reduction dim 0 to have non-zero size\.$"):
        zgrad.min(empty, 0)
    with pytest.raises(IndexError, match=r"^argmax\(\): Expected reduction dim to be specified for "
                                         r"input\.numel\(\) == 0\.$"):
        zgrad.argmax(empty)
    with pytest.raises(RuntimeError, match=r"^max\(\): Expected reduction dim to be specified for input\.numel\(\) "
                                           r"== 0\. Specify the reduction dim with the 'dim' argument\.$"):
        zgrad.max(empty)
    if torch is not None:
        assert torch.argmax(torch.zeros(0, 3), 1).shape == (0,)


@pytest.mark.torch
@pytest.mark.parametrize("low, high, dtype", [(1.5, None, np.float32), (None, 2.5, np.float32),
                                              (0.5, 2.5, np.float32), (1, 2, np.int64)])
def test_clamp_of_an_integer_tensor_promotes_like_torch(low, high, dtype):
    values = [1, 2, 3]
    out = zgrad.clamp(zgrad.tensor(values), low, high)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), np.clip(np.array(values, dtype), low, high))
    if torch is not None:
        ref = torch.clamp(torch.tensor(values), low, high)
        assert str(ref.dtype) == f"torch.{np.dtype(dtype).name}"
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    bools = zgrad.tensor([True, False]).clamp(0.5)
    assert bools.dtype == np.float32 and bools.tolist() == [1.0, 0.5]


@pytest.mark.torch
@pytest.mark.parametrize("dtype, name", [(np.int64, "long int"), (np.int32, "int"), (np.uint8, "unsigned char"),
                                         (np.bool_, "bool")])
def test_clamp_in_place_of_an_integer_tensor_with_a_float_bound_fails_like_torch(dtype, name):
    x = zgrad.tensor(np.array([1, 0], dtype=dtype))
    with pytest.raises(RuntimeError, match=f"^result type Float can't be cast to the desired output type {name}$"):
        x.clamp_(0.5)
    assert x.tolist() == np.array([1, 0], dtype=dtype).tolist(), "untouched"
    if torch is not None:
        with pytest.raises(RuntimeError, match=f"result type Float can't be cast to the desired output type {name}"):
            torch.tensor(np.array([1, 0], dtype=dtype)).clamp_(0.5)
    if dtype != np.bool_:
        assert zgrad.tensor(np.array([5, 0], dtype=dtype)).clamp_(1, 3).tolist() == [3, 1]


def _clamp_bound(lib, spec, requires_grad):
    if spec == "0-d float64":
        return lib.tensor(1.5, dtype=lib.float64)
    if spec == "0-d float32":
        return lib.tensor(2.5, requires_grad=requires_grad)
    if spec == "1-d float32":
        return lib.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], requires_grad=requires_grad)
    return spec


def _clamped(lib, dtype, low, high, in_place, requires_grad):
    """clamp's (or clamp_'s) dtype, values and the gradients of x and of each bound that requires
    grad, or the kind of error it raised."""
    x = lib.arange(6).to(getattr(lib, dtype))
    if requires_grad:
        x.requires_grad_(True)
    low, high = _clamp_bound(lib, low, requires_grad), _clamp_bound(lib, high, requires_grad)
    try:
        out = (x * 1).clamp_(low, high) if in_place else lib.clamp(x, low, high)
    except TypeError:
        return "TypeError"
    except RuntimeError:
        return "RuntimeError"
    found = [str(out.dtype).rsplit(".", 1)[-1], out.tolist()]
    if requires_grad:
        out.sum().backward()
        found += [t.grad.tolist() for t in (x, low, high) if isinstance(t, lib.Tensor) and t.requires_grad]
    return found


@pytest.mark.torch
@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("dtype, low, high, requires_grad, expected", [
    ("float32", "0-d float64", 3.5, False, ["float32", [1.5, 1.5, 2.0, 3.0, 3.5, 3.5]]),  # 0-d: a number
    ("int64", "0-d float64", 2, False, ["float32", [1.5, 1.5, 2.0, 2.0, 2.0, 2.0]]),
    ("float32", 4.0, "0-d float32", False, ["float32", [2.5] * 6]),
    ("float32", "0-d float32", 4.0, True, "TypeError"),  # requires grad: not a number
    ("float32", 2, "1-d float32", False, "TypeError"),  # a number beside a 1-d tensor
    ("float32", "1-d float32", 1, True, "TypeError"),
    ("float32", "1-d float32", "0-d float32", True,
     ["float32", [1.0, 2.0, 2.5, 2.5, 2.5, 2.5], [0.0] * 6, [1.0, 1.0, 0.0, 0.0, 0.0, 0.0], 4.0]),
    ("float32", None, "1-d float32", True, ["float32", [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [1.0] * 6, [0.0] * 6]),
])
def test_clamp_with_tensor_and_number_bounds_takes_torchs_overload(dtype, low, high, requires_grad, expected, in_place):
    if in_place and isinstance(expected, list) and expected[0] != dtype:
        expected = "RuntimeError"  # the result type does not cast to x's
    assert _clamped(zgrad, dtype, low, high, in_place, requires_grad) == expected
    if torch is not None:
        assert _clamped(torch, dtype, low, high, in_place, requires_grad) == expected


@pytest.mark.torch
def test_a_nan_bound_makes_every_element_nan_as_in_torch():
    nan = float("nan")
    x = zgrad.tensor([1.0, 3.0, 5.0], requires_grad=True)
    for out in (zgrad.clamp(x, 2.0, nan), zgrad.clamp(x, nan, 4.0), zgrad.clamp(x, min=nan),
                zgrad.clamp(zgrad.tensor([1, 2]), 0, nan), zgrad.tensor([1.0, 2.0]).clamp_(max=nan)):
        assert np.isnan(out.detach().numpy()).all()
    zgrad.clamp(x, 2.0, nan).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    if torch is not None:
        t = torch.tensor([1.0, 3.0, 5.0], requires_grad=True)
        torch.clamp(t, 2.0, nan).sum().backward()
        assert torch.clamp(t, 2.0, nan).isnan().all() and t.grad.tolist() == [0.0, 0.0, 0.0]


def test_clamp_in_place_with_tensor_bounds_writes_into_the_tensor():
    x = zgrad.arange(6.0)
    data = x.data_ptr()
    assert x.clamp_(zgrad.tensor([1.0, 1.0, 1.0, 4.0, 4.0, 4.0]), zgrad.tensor(3.5)) is x
    assert x.tolist() == [1.0, 1.0, 2.0, 3.5, 3.5, 3.5] and x.data_ptr() == data
    integers = zgrad.arange(6)
    with pytest.raises(RuntimeError, match="^result type Float can't be cast to the desired output type Long$"):
        integers.clamp_(zgrad.tensor([2.5]))
    assert integers.tolist() == list(range(6)), "untouched"
    y = zgrad.tensor([3.0, 1.0, 2.0, 0.0])
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor refer to a "
                                           "single memory location"):
        y[1:].clamp_(max=y[:-1])  # a bound that overlaps the tensor written, as PyTorch refuses it
    assert y.tolist() == [3.0, 1.0, 2.0, 0.0]


# --- in place: rules, memory, errors ------------------------------------------------------------

def test_inplace_on_leaf_that_requires_grad_is_an_error_outside_no_grad():
    w = zgrad.ones(3, requires_grad=True)
    for update in (lambda: w.add_(1), lambda: w.mul_(2), lambda: w.clamp_(0, 1), lambda: w.fill_(0),
                   lambda: w.zero_(), lambda: w.uniform_(), lambda: w.normal_(), lambda: w.copy_(zgrad.ones(3)),
                   lambda: w.addcmul_(w, w), lambda: w.relu_(), lambda: w.scatter_(0, zgrad.tensor([0]), 1.0),
                   lambda: w.__setitem__(0, 2.0), lambda: w.masked_fill_(w > 0, 0.0)):
        with pytest.raises(AutogradError, match="a leaf Variable that requires grad is being used in an in-place operation"):
            update()
    with pytest.raises(AutogradError, match="a leaf Variable that requires grad"):
        w -= 1
    np.testing.assert_array_equal(w.numpy(), [1, 1, 1])
    with zgrad.no_grad():
        w.add_(zgrad.tensor([1.0, 2.0, 3.0]), alpha=-2).addcmul_(w, w, value=0.5).clamp_(max=0.0)
        w -= 1
    np.testing.assert_array_equal(w.numpy(), [-1.5, -1.0, -1.0])
    assert w.is_leaf and w.requires_grad and w.grad_fn is None


def test_inplace_writes_through_views_into_the_base():
    base = zgrad.zeros(3, 4)
    base[1].fill_(2.0)
    base[:, 0].add_(1.0)
    base.t()[2].mul_(0.5)
    base[2:, 1:3].copy_(zgrad.tensor([7.0, 8.0]))
    expected = np.zeros((3, 4), dtype=np.float32)
    expected[1] = 2
    expected[:, 0] += 1
    expected[:, 2] *= 0.5
    expected[2, 1:3] = [7, 8]
    np.testing.assert_array_equal(base.numpy(), expected)
    strided = zgrad.arange(12.0).view(3, 4).t()
    strided.clamp_(2, 9).relu_().add_(zgrad.ones(4, 3), alpha=2).addcdiv_(zgrad.ones(4, 3), zgrad.full((4, 3), 4.0))
    np.testing.assert_allclose(strided.numpy(), np.clip(np.arange(12.0).reshape(3, 4).T, 2, 9) + 2.25)


def test_inplace_result_is_the_same_tensor_and_keeps_dtype():
    x = zgrad.ones(2, 3, dtype=np.float64)
    assert x.add_(1) is x and x.mul_(zgrad.ones(3)) is x and x.fill_(3) is x and x.zero_() is x
    assert x.dtype == np.float64
    i = zgrad.zeros(3, dtype=zgrad.int64)
    i += 2
    i *= 3
    assert i.tolist() == [6, 6, 6] and i.dtype == np.int64
    f = zgrad.zeros(3)
    f.copy_(zgrad.tensor([1, 2, 3]))
    assert f.dtype == np.float32 and f.tolist() == [1.0, 2.0, 3.0]
    i.copy_(zgrad.tensor([1.9, -2.5, 3.0]))  # copy_ casts any dtype, as PyTorch's
    assert i.tolist() == [1, -2, 3]


@pytest.mark.torch
def test_inplace_shape_and_dtype_errors_match_torch():
    with pytest.raises(ZgradError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        zgrad.zeros(3).add_(zgrad.zeros(2, 3))
    with pytest.raises(ZgradError, match="^result type Float can't be cast to the desired output type Long$"):
        zgrad.zeros(3, dtype=zgrad.int64).add_(1.5)
    with pytest.raises(ZgradError, match="^result type Float can't be cast to the desired output type Long$"):
        zgrad.zeros(3, dtype=zgrad.int64).div_(2)
    with pytest.raises(ZgradError, match="^result type Double can't be cast to the desired output type Int$"):
        zgrad.zeros(3, dtype=zgrad.int32).add_(zgrad.zeros((), dtype=zgrad.float64))
    if torch is not None:
        with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
            torch.zeros(3).add_(torch.zeros(2, 3))
        with pytest.raises(RuntimeError, match="^result type Float can't be cast to the desired output type Long$"):
            torch.zeros(3, dtype=torch.long).add_(1.5)
        with pytest.raises(RuntimeError, match="^result type Float can't be cast to the desired output type Long$"):
            torch.zeros(3, dtype=torch.long).div_(2)
        with pytest.raises(RuntimeError, match="^result type Double can't be cast to the desired output type Int$"):
            torch.zeros(3, dtype=torch.int32).add_(torch.zeros((), dtype=torch.float64))


# In-place writes whose operand lies over the output (PyTorch's TensorIterator checks): each case
# is (name, the write on a fresh arange(6.) x; None where PyTorch refuses it).
_OVERLAPS = [
    ("shifted add_", lambda x: x[2:].add_(x[:-2]), None),
    ("one element of the output", lambda x: x.div_(x[1]), None),
    ("shifted copy_", lambda x: x[1:].copy_(x[:-1]), None),
    ("shifted setitem", lambda x: x.__setitem__(slice(1, None), x[:-1]), None),
    ("transposed onto itself", lambda x: x[:4].view(2, 2).add_(x[:4].view(2, 2).t()), None),
    ("add_ with alpha", lambda x: x[2:].add_(x[:-2], alpha=2), None),
    ("addcmul_", lambda x: x[2:].addcmul_(x[:-2], x[:-2]), None),
    ("itself", lambda x: x.add_(x), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]),
    ("itself as another view", lambda x: x.view(2, 3).mul_(x.view(2, 3)), [0.0, 1.0, 4.0, 9.0, 16.0, 25.0]),
    ("disjoint halves", lambda x: x[:3].add_(x[3:]), [3.0, 5.0, 7.0, 3.0, 4.0, 5.0]),
    ("interleaved strided (not checked)", lambda x: x[::2].add_(x[1::2]), [1.0, 1.0, 5.0, 3.0, 9.0, 5.0]),
]


@pytest.mark.torch
@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize(("name", "write", "expected"), _OVERLAPS, ids=[c[0] for c in _OVERLAPS])
def test_inplace_writes_over_their_own_operands_are_refused_like_torch(name, write, expected, device):
    """An operand partly over the output would be read after its elements were overwritten (on a
    GPU in no fixed order): refused with PyTorch's message; the same memory element for element,
    disjoint memory, and strided layouts are written."""
    if device == "cuda" and not zgrad.cuda.is_available():
        pytest.skip("no CUDA backend")
    x = zgrad.arange(6.0, device=device)
    if expected is None:
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor refer to a "
                                               "single memory location. Please clone"):
            write(x)
        assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # nothing written
    else:
        write(x)
        assert x.tolist() == expected
    if torch is not None:
        t = torch.arange(6.0)
        if expected is None:
            with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
                write(t)
        else:
            write(t)
            assert t.tolist() == expected


@pytest.mark.torch
def test_inplace_writes_into_an_expanded_view_are_refused_like_torch():
    message = "more than one element of the written-to tensor refers to a single memory location"
    with pytest.raises(RuntimeError, match=message):
        zgrad.zeros(3).expand(2, 3).add_(1)
    with pytest.raises(RuntimeError, match=message):
        zgrad.zeros(3).expand(2, 3).copy_(zgrad.ones(2, 3))
    if torch is not None:
        with pytest.raises(RuntimeError, match=message):
            torch.zeros(3).expand(2, 3).add_(1)


def test_inplace_on_graph_tensor_rebases_its_history():
    x = zgrad.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 2
    node = y.grad_fn
    y.mul_(x).add_(1)
    assert y.grad_fn is not node and not y.is_leaf and y.requires_grad
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.array([1.0, -2.0, 3.0]))


def test_inplace_with_a_grad_operand_makes_a_plain_tensor_part_of_the_graph():
    w = zgrad.tensor([1.0, 2.0], requires_grad=True)
    buf = zgrad.zeros(2)
    buf.add_(w, alpha=3)
    assert buf.requires_grad and buf.grad_fn is not None
    (buf * buf).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 18 * np.array([1.0, 2.0]))


@pytest.mark.torch
@pytest.mark.parametrize("make", [
    lambda lib, x: x.exp(), lambda lib, x: x.sigmoid(), lambda lib, x: lib.tanh(x), lambda lib, x: x ** x,
    lambda lib, x: x.sqrt(), lambda lib, x: x.softmax(0),
], ids=["exp", "sigmoid", "tanh", "pow", "sqrt", "softmax"])
def test_modifying_a_saved_output_in_place_fails_backward_like_torch(make):
    for lib, error in [(zgrad, AutogradError)] + ([(torch, RuntimeError)] if torch is not None else []):
        x = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        y = make(lib, x)
        y.mul_(2)  # fine so far: only backward needs the saved value
        with pytest.raises(error, match="one of the variables needed for gradient computation has been modified by an inplace operation"):
            y.sum().backward()
        y = make(lib, x)
        with lib.no_grad():
            y.add_(1)
        with pytest.raises(error, match="modified by an inplace operation"):
            y.sum().backward()


def test_modifying_the_saved_output_of_a_custom_function_fails_backward():
    class Square(zgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x * x
            ctx.save_for_backward(x, out)
            return out

        @staticmethod
        def backward(ctx, grad):
            x, out = ctx.saved_tensors
            return 2 * out / x * grad

    x = zgrad.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(x)
    y.add_(1)
    with pytest.raises(AutogradError, match=r"modified by an inplace operation: a float32 array of shape \[2\], which SquareBackward saved"):
        y.sum().backward()


@pytest.mark.torch
def test_outputs_that_torch_does_not_save_may_change_in_place():
    for lib in [zgrad] + ([torch] if torch is not None else []):
        x = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        y = (x / 3) ** 2
        y.add_(1)
        z = 2 / x
        z.mul_(x * x)  # z = 2x: the gradient through z is 2
        (y.sum() + z.sum()).backward()
        np.testing.assert_allclose(np.asarray(x.grad.numpy()), 2 * np.array([0.5, 1.0, 2.0]) / 9 + 2, rtol=1e-6)


@pytest.mark.torch
def test_fill_of_graph_tensor_cuts_gradient_but_keeps_requires_grad():
    x = zgrad.ones(3, requires_grad=True)
    y = x * 2
    y.fill_(5.0)
    assert y.requires_grad and y.tolist() == [5.0, 5.0, 5.0]
    (y * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5, 5, 5])
    if torch is not None:
        tx = torch.ones(3, requires_grad=True)
        ty = tx * 2
        ty.fill_(5.0)
        (ty * tx).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_detach_and_requires_grad_in_place():
    x = zgrad.ones(2, requires_grad=True)
    y = x * 3
    assert y.detach_() is y and y.is_leaf and not y.requires_grad and y.grad_fn is None
    y.add_(1)  # a plain tensor now: no error, no graph
    assert y.tolist() == [4.0, 4.0]
    assert y.requires_grad_() is y and y.requires_grad
    with pytest.raises(AutogradError, match="only Tensors of floating point dtype can require gradients"):
        zgrad.zeros(2, dtype=zgrad.int64).requires_grad_()
    with pytest.raises(AutogradError, match="you can only change requires_grad flags of leaf variables"):
        (x * 2).requires_grad_(False)


def test_setitem_forms():
    x = zgrad.zeros(3, 4)
    x[0] = 1.0
    x[1, 1:3] = zgrad.tensor([2.0, 3.0])
    x[x > 2.5] = -1.0
    x[zgrad.tensor([2, 2])] = zgrad.arange(4.0)
    x[..., -1] += 10
    np.testing.assert_array_equal(x.numpy(), [[1, 1, 1, 11], [0, 2, -1, 10], [0, 1, 2, 13]])
    i = zgrad.zeros(2, dtype=zgrad.int64)
    i[1] = 7
    assert i.tolist() == [0, 7]


@pytest.mark.torch
def test_scatter_inplace_forward_and_errors():
    x = zgrad.zeros(3, 4)
    x.scatter_(1, zgrad.tensor([[0], [3], [1]]), zgrad.tensor([[1.0], [2.0], [3.0]]))
    x.scatter_(0, zgrad.tensor([[2, 2, 2, 2]]), 9.0)
    x.scatter_(1, zgrad.tensor([[2]]), value=-1.0)
    expected = np.zeros((3, 4), dtype=np.float32)
    expected[0, 0], expected[1, 3], expected[2, 1], expected[2, :], expected[0, 2] = 1, 2, 3, 9, -1
    np.testing.assert_array_equal(x.numpy(), expected)
    if torch is not None:
        t = torch.zeros(3, 4)
        t.scatter_(1, torch.tensor([[0], [3], [1]]), torch.tensor([[1.0], [2.0], [3.0]]))
        t.scatter_(0, torch.tensor([[2, 2, 2, 2]]), 9.0)
        t.scatter_(1, torch.tensor([[2]]), value=-1.0)
        np.testing.assert_array_equal(x.numpy(), t.numpy())
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        x.scatter_(1, zgrad.tensor([[4]]), 0.0)
    with pytest.raises(TypeError, match=r"scatter_\(\): Expected dtype int64 for index, got float32"):
        x.scatter_(1, zgrad.tensor([[1.0]]), 0.0)
    strided = zgrad.zeros(4, 3).t()  # a view: the scatter must land in the base
    strided.scatter_(1, zgrad.tensor([[1], [2]]), 5.0)
    assert strided.numpy()[0, 1] == 5 and strided.numpy()[1, 2] == 5 and strided.numpy().sum() == 10


def test_masked_fill_errors_and_dtype():
    x = zgrad.arange(4)
    assert x.masked_fill(x > 1, 2.7).tolist() == [0, 1, 2, 2] and x.masked_fill(x > 1, 2.7).dtype == np.int64
    with pytest.raises(TypeError, match="masked_fill only supports boolean masks, but got mask with dtype int64"):
        x.masked_fill(x, 0)
    with pytest.raises(ValueError, match="masked_fill only supports a 0-dimensional value tensor"):
        x.masked_fill(x > 1, zgrad.ones(2))
    with pytest.raises(TypeError, match="where only supports boolean masks"):
        zgrad.where(zgrad.ones(2), zgrad.ones(2), zgrad.zeros(2))


# --- random fills -------------------------------------------------------------------------------

def test_random_fills_ranges_and_reproducibility():
    zgrad.manual_seed(7)
    u = zgrad.empty(20000).uniform_(-2, 3)
    n = zgrad.empty(20000, dtype=np.float64).normal_(1.0, 0.5)
    r = zgrad.empty(20000, dtype=zgrad.int64).random_(3, 9)
    r_high = zgrad.zeros(5000).random_(4)
    r_default = zgrad.zeros(1000).random_()
    assert -2 <= u.numpy().min() and u.numpy().max() < 3 and abs(u.numpy().mean() - 0.5) < 0.05
    assert abs(n.numpy().mean() - 1.0) < 0.02 and abs(n.numpy().std() - 0.5) < 0.02 and n.dtype == np.float64
    assert set(np.unique(r.numpy())) == set(range(3, 9))
    assert set(np.unique(r_high.numpy())) == {0.0, 1.0, 2.0, 3.0} and r_high.dtype == np.float32
    assert r_default.numpy().min() >= 0 and r_default.numpy().max() <= 2 ** 24
    assert np.all(r_default.numpy() == np.round(r_default.numpy()))
    zgrad.manual_seed(7)
    np.testing.assert_array_equal(zgrad.empty(20000).uniform_(-2, 3).numpy(), u.numpy())
    view = zgrad.zeros(4, 6)[:, ::2]
    view.uniform_(5, 6)
    assert np.all(view.numpy() >= 5)


def test_random_fill_errors():
    with pytest.raises(TypeError, match="uniform_ expects a floating point tensor, got int64"):
        zgrad.zeros(3, dtype=zgrad.int64).uniform_()
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        zgrad.zeros(3).normal_(0, -1)
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
        zgrad.zeros(3).random_(5, 2)


# --- shape errors -------------------------------------------------------------------------------

def test_shape_errors_name_the_shapes():
    x = zgrad.ones(2, 3)
    with pytest.raises(ValueError, match=r"The expanded size of the tensor \(4\) must match the existing size \(3\) at "
                                         r"non-singleton dimension 1.  Target sizes: \[2, 4\].  Tensor sizes: \[2, 3\]"):
        x.expand(2, 4)
    with pytest.raises(ValueError, match=r"expanded size of the tensor \(-1\) isn't allowed in a leading, non-existing dimension 0"):
        x.expand(-1, 2, 3)
    with pytest.raises(ValueError, match=r"split_with_sizes expects split_sizes to sum exactly to 3 .* split_sizes=\[1, 1\]"):
        x.split([1, 1], dim=1)
    with pytest.raises(ValueError, match="start_dim cannot come after end_dim"):
        zgrad.ones(2, 3, 4).flatten(2, 1)
    with pytest.raises(ValueError, match="t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"):
        zgrad.ones(2, 3, 4).t()
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)"):
        x.unsqueeze(3)
    with pytest.raises(IndexError, match=r"Dimension out of range"):
        x.size(2)
    with pytest.raises(ValueError, match="chunk expects `chunks` to be greater than 0"):
        x.chunk(0)
    with pytest.raises(ValueError, match=r"shape '\[4, 2\]' is invalid for input of size 6"):
        x.view(4, 2)
    with pytest.raises(ValueError, match=r"view size is not compatible with input tensor's size and stride .* Use .reshape"):
        x.t().view(6)
    assert x.t().reshape(6).shape == (6,) and x.t().contiguous().view(6).shape == (6,)


def test_index_errors_name_the_bad_value():
    x = zgrad.ones(3, 4)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.gather(0, zgrad.tensor([[3]]))
    with pytest.raises(IndexError, match="index -1 is out of bounds for dimension 1 with size 4"):
        x.gather(1, zgrad.tensor([[-1]]))
    with pytest.raises(ValueError, match="Index tensor must have the same number of dimensions as input tensor"):
        x.gather(1, zgrad.tensor([1]))
    with pytest.raises(ValueError, match=r"Expected index \[4, 1\] to be smaller than self \[3, 4\] apart from dimension 1"):
        x.gather(1, zgrad.zeros(4, 1, dtype=zgrad.int64))
    with pytest.raises(TypeError, match=r"gather\(\): Expected dtype int64 for index, got float32"):
        x.gather(1, zgrad.ones(3, 1))
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 1 with size 4"):
        x.index_select(1, zgrad.tensor([0, 9]))
    with pytest.raises(ValueError, match="Index is supposed to be a vector"):
        x.index_select(1, zgrad.tensor([[0]]))
    with pytest.raises(ValueError, match=r"to be smaller size than src \[1, 1\]"):
        x.scatter(1, zgrad.tensor([[0, 1]]), zgrad.ones(1, 1))


def test_shape_views_share_memory_like_torch():
    x = zgrad.zeros(2, 6)
    pieces = x.split(3, dim=1)
    pieces[1].fill_(1.0)
    x.view(12)[0:2].fill_(2.0)
    x.unsqueeze(0)[0, 1, 0].fill_(3.0)
    np.testing.assert_array_equal(x.numpy(), [[2, 2, 0, 1, 1, 1], [3, 0, 0, 1, 1, 1]])
    assert x.expand(3, 2, 6).shape == (3, 2, 6) and np.shares_memory(x.expand(3, 2, 6).numpy(), x.numpy())


def test_size_dim_numel():
    x = zgrad.ones(2, 3, 4)
    assert x.size() == (2, 3, 4) and x.size(-1) == 4 and x.size(0) == 2 and x.dim() == 3 and x.numel() == 24
    assert zgrad.tensor(5.0).size() == () and zgrad.tensor(5.0).numel() == 1 and zgrad.tensor(5.0).dim() == 0


# --- creation -----------------------------------------------------------------------------------

@pytest.mark.torch
def test_typed_constructors():
    assert zgrad.LongTensor(2, 3).shape == (2, 3) and zgrad.LongTensor(2, 3).dtype == np.int64
    assert zgrad.FloatTensor(4).dtype == np.float32 and zgrad.FloatTensor(4).shape == (4,)
    assert zgrad.LongTensor([1, 2, 3]).tolist() == [1, 2, 3] and zgrad.LongTensor([1.7]).tolist() == [1]
    assert zgrad.FloatTensor([[1, 2]]).dtype == np.float32 and zgrad.DoubleTensor(1).dtype == np.float64
    assert zgrad.BoolTensor([1, 0]).tolist() == [True, False] and zgrad.IntTensor([3]).dtype == np.int32
    assert zgrad.LongTensor(3).random_(5).numpy().max() < 5
    with pytest.raises(TypeError, match=r"LongTensor\(\) expects sizes"):
        zgrad.LongTensor([1], 2)
    if torch is not None:
        assert torch.LongTensor(2, 3).shape == (2, 3) and torch.LongTensor([1, 2, 3]).tolist() == [1, 2, 3]


@pytest.mark.torch
def test_factories_follow_torch_dtypes():
    cases = [
        (lambda lib: lib.arange(5), np.int64), (lambda lib: lib.arange(1, 4), np.int64),
        (lambda lib: lib.arange(0, 1, 0.25), np.float32), (lambda lib: lib.arange(2.0), np.float32),
        (lambda lib: lib.arange(0, 10, 3, dtype=lib.float64), np.float64),
        (lambda lib: lib.full((2, 2), 3), np.int64), (lambda lib: lib.full((2,), 1.5), np.float32),
        (lambda lib: lib.full((2,), True), np.bool_),
        (lambda lib: lib.zeros_like(lib.ones(2, dtype=lib.float64)), np.float64),
        (lambda lib: lib.ones_like(lib.ones(2), dtype=lib.int64), np.int64),
        (lambda lib: lib.full_like(lib.ones(2, 3), 7), np.float32),
        (lambda lib: lib.arange(-3, 3, 2), np.int64),
    ]
    for make, dtype in cases:
        out = make(zgrad)
        assert out.dtype == dtype
        if torch is not None:
            ref = make(torch)
            np.testing.assert_array_equal(out.numpy(), ref.numpy())
            assert str(ref.dtype).replace("torch.", "") == str(np.dtype(dtype)).replace("bool", "bool")
    assert zgrad.zeros_like(zgrad.ones(2), requires_grad=True).requires_grad
    assert zgrad.rand_like(zgrad.ones(3, 2)).shape == (3, 2) and zgrad.randn_like(zgrad.ones(2)).dtype == np.float32
    assert zgrad.empty_like(zgrad.ones(2, dtype=np.float64)).dtype == np.float64
    with pytest.raises(ValueError, match="arange: step must be nonzero"):
        zgrad.arange(0, 3, 0)


def test_dtype_aliases():
    assert zgrad.long == zgrad.int64 and zgrad.float == zgrad.float32 and zgrad.double == zgrad.float64
    assert zgrad.bool == np.bool_ and zgrad.int == np.int32
    assert zgrad.ones(2).long().dtype == np.int64 and zgrad.tensor([0.0, 2.0]).bool().tolist() == [False, True]
    assert zgrad.tensor([1.5]).int().dtype == np.int32 and zgrad.ones(1).type_as(zgrad.ones(1).double()).dtype == np.float64


# --- conversion and device ----------------------------------------------------------------------

def test_item_tolist_and_index():
    assert zgrad.tensor(True).item() is True and isinstance(zgrad.tensor([2]).item(), int)
    assert zgrad.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]] and zgrad.tensor(2.5).tolist() == 2.5
    assert list(range(10))[zgrad.tensor(3)] == 3 and [0, 1, 2][zgrad.argmax(zgrad.tensor([1.0, 5.0]))] == 1
    with pytest.raises(TypeError, match="only integer tensors of a single element can be converted to an index"):
        [0, 1][zgrad.tensor(1.0)]
    assert repr(zgrad.tensor([True, False])) == "tensor([ True, False])"


def test_device_moves():
    x = zgrad.ones(2, requires_grad=True)
    assert x.cpu() is x and x.to("cpu") is x and x.to(zgrad.device("cpu")) is x and not x.is_cuda and not x.is_xpu
    y = x.to("cpu", zgrad.float64)
    assert y.dtype == np.float64 and y.grad_fn is not None
    assert x.to(zgrad.zeros(1, dtype=np.float64)).dtype == np.float64
    assert x.to(dtype=zgrad.float64, device="cpu").dtype == np.float64
    copy = x.to("cpu", copy=True)
    assert copy is not x and not np.shares_memory(copy.numpy(), x.numpy())
    if zgrad.cuda.is_available():  # the simulator, in this test session (see conftest.py)
        assert x.cuda().is_cuda and x.to("cuda").device == "cuda:0" and zgrad.ones(2, device="cuda").is_cuda
        with pytest.raises(ZgradError, match="invalid device ordinal"):
            x.cuda(1)
    else:
        for move in (lambda: x.cuda(), lambda: x.to("cuda"), lambda: zgrad.ones(2, device="cuda")):
            with pytest.raises(ZgradError, match="CUDA"):
                move()
    with pytest.raises(ValueError, match="Expected one of cpu, cuda device type at start of device string: tpu"):
        x.to("tpu")
    assert repr(zgrad.device("cpu")) == "device(type='cpu')" and zgrad.device("cuda:1").index == 1


LEGACY_TYPES = [("float32", "FloatTensor"), ("float64", "DoubleTensor"), ("float16", "HalfTensor"),
                ("bfloat16", "BFloat16Tensor"), ("int64", "LongTensor"), ("int32", "IntTensor"),
                ("int16", "ShortTensor"), ("int8", "CharTensor"), ("uint8", "ByteTensor"), ("bool", "BoolTensor")]


def test_type_names_and_casts():
    x = zgrad.ones(2, requires_grad=True)
    for dtype, name in LEGACY_TYPES:
        assert x.to(getattr(zgrad, dtype)).type() == f"zgrad.{name}"
        assert x.type(f"zgrad.{name}").dtype == getattr(zgrad, dtype)
    assert x.type(zgrad.float32) is x and x.type("zgrad.FloatTensor") is x
    as_long = x.type(zgrad.LongTensor)  # pytorch/examples' word_language_model: .type(torch.int64)
    assert as_long.dtype == zgrad.int64 and x.type(dtype=zgrad.int64).dtype == zgrad.int64
    y = x.type(zgrad.float64)
    y.sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.tolist() == [1.0, 1.0]
    if zgrad.cuda.is_available():  # the simulator, in this test session
        assert x.cuda().type() == "zgrad.cuda.FloatTensor" and x.type("zgrad.cuda.LongTensor").is_cuda
    for bad in ("foo", "zgrad.FooTensor", "torch.FloatTensor", "float32"):
        with pytest.raises(ValueError, match=f"^invalid type: '{bad}'$"):
            x.type(bad)
    with pytest.raises(TypeError, match="dtype must be a type, str, or dtype object"):
        x.type(3)


@pytest.mark.torch
def test_type_names_as_torch():
    for dtype, _ in LEGACY_TYPES:
        expected = torch.ones(2, dtype=getattr(torch, dtype)).type()
        assert zgrad.ones(2, dtype=getattr(zgrad, dtype)).type() == expected.replace("torch.", "zgrad.")
        assert torch.ones(2).type(expected).dtype == getattr(torch, dtype)


def test_contiguous_and_data_setter():
    x = zgrad.arange(6.0).view(2, 3)
    assert x.contiguous() is x and x.is_contiguous()
    t = x.t()
    assert not t.is_contiguous() and t.contiguous().is_contiguous()
    np.testing.assert_array_equal(t.contiguous().numpy(), t.numpy())
    p = zgrad.nn.Parameter(zgrad.zeros(2))
    p.data = zgrad.ones(2)
    assert p.tolist() == [1.0, 1.0] and p.requires_grad and p.is_leaf


@pytest.mark.torch
def test_user_written_optimizer_step_matches_torch():
    require_torch()
    rng = np.random.default_rng(0)
    w0, g = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)

    def run(lib):
        w = lib.tensor(w0, requires_grad=True)
        m, v = lib.zeros_like(w), lib.zeros_like(w)
        grad = lib.tensor(g)
        with lib.no_grad():
            for step in range(1, 4):
                m.mul_(0.9).add_(grad, alpha=0.1)
                v.mul_(0.999).addcmul_(grad, grad, value=0.001)
                denom = (v / (1 - 0.999 ** step)).sqrt().add_(1e-8)
                w.addcdiv_(m, denom, value=-0.01 / (1 - 0.9 ** step))
                w.clamp_(-1.5, 1.5)
                w -= 0.001 * w
        return w.detach().numpy()

    np.testing.assert_allclose(run(zgrad), run(torch), rtol=1e-6, atol=1e-7)


def test_zero_dim_softmax_empty_mean_and_size_of_a_zero_dim_tensor_as_pytorch():
    x = zgrad.tensor(2.0, requires_grad=True)
    y, z = zgrad.softmax(x, 0), zgrad.log_softmax(x, -1)
    assert (y.shape, y.item(), z.item()) == ((), 1.0, 0.0)
    (y + z).backward()
    assert x.grad.item() == 0.0
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)"):
        zgrad.softmax(x, 1)
    assert np.isnan(zgrad.zeros(0).mean().item())
    assert np.isnan(zgrad.zeros(0, 3).mean(0).numpy()).all() and zgrad.zeros(0, 3).mean(1).shape == (0,)
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dimensions"):
        x.size(0)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)"):
        zgrad.ones(2).size(1)

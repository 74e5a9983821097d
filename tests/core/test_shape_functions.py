"""The shape functions (tril, diag, flip, roll, repeat, movedim, splits and stacks, meshgrid, ...)
against PyTorch and finite differences: values, shapes and gradients of every function and its
Tensor method, copies and views as PyTorch's, the in-place forms, and a subset on CUDA (Numba's
simulator here) against the CPU. Dtypes, edge cases and errors: ``test_shape_torch_agreement``.

A function that returns several tensors is checked through one tensor made of them all
(``_joined``), so every piece's gradient counts.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import case, check_finite_differences, check_torch


def _joined(lib, pieces):
    """One tensor of every piece (flattened, each scaled differently so a swap shows)."""
    return lib.cat([p.reshape(-1) * (i + 1) for i, p in enumerate(pieces)])


CASES = [
    # triangles and diagonals
    case("tril", lambda lib, a: lib.tril(a), (4, 5)),
    case("tril_diagonal_batch", lambda lib, a: lib.tril(a, diagonal=-1), (2, 3, 4)),
    case("triu_method", lambda lib, a: a.triu(2), (4, 3)),
    case("triu_negative", lambda lib, a: lib.triu(a, -2), (2, 4, 4)),
    case("diagonal", lambda lib, a: lib.diagonal(a), (3, 4)),
    case("diagonal_offset_dims", lambda lib, a: lib.diagonal(a, 1, 2, 0), (3, 2, 4)),
    case("diagonal_negative_offset", lambda lib, a: a.diagonal(-1, -1, -2), (2, 4, 3)),
    case("diag_1d", lambda lib, a: lib.diag(a), (4,)),
    case("diag_1d_offset", lambda lib, a: lib.diag(a, -2), (3,)),
    case("diag_2d_offset", lambda lib, a: a.diag(1), (4, 4)),
    case("diag_embed", lambda lib, a: lib.diag_embed(a), (2, 3)),
    case("diag_embed_offset_dims", lambda lib, a: lib.diag_embed(a, 1, 0, 2), (2, 3)),
    case("trace", lambda lib, a: lib.trace(a), (3, 4)),
    case("diagflat", lambda lib, a: lib.diagflat(a, -1), (2, 2)),
    case("block_diag", lambda lib, a, b, c: lib.block_diag(a, b, c), (2, 3), (), (2,)),
    # reordered and repeated copies
    case("flip", lambda lib, a: lib.flip(a, (0, 2)), (2, 3, 4)),
    case("flip_method_varargs", lambda lib, a: a.flip(-1), (3, 4)),
    case("fliplr", lambda lib, a: lib.fliplr(a), (3, 4)),
    case("flipud", lambda lib, a: a.flipud(), (3, 4)),
    case("roll", lambda lib, a: lib.roll(a, 1, 0), (4, 3)),
    case("roll_dims", lambda lib, a: lib.roll(a, (-1, 5), (1, 0)), (3, 4)),
    case("roll_flat", lambda lib, a: a.roll(3), (3, 4)),
    case("rot90", lambda lib, a: lib.rot90(a), (3, 4)),
    case("rot90_k2", lambda lib, a: lib.rot90(a, 2, (1, 2)), (2, 3, 4)),
    case("rot90_k3_negative", lambda lib, a: a.rot90(-1, [0, 1]), (3, 4)),
    case("repeat", lambda lib, a: a.repeat(2, 3), (2, 3)),
    case("repeat_new_dims", lambda lib, a: a.repeat((2, 1, 3)), (4,)),
    case("tile", lambda lib, a: lib.tile(a, (2,)), (2, 3)),
    case("tile_method", lambda lib, a: a.tile(2, 1, 2), (2, 3)),
    case("repeat_interleave", lambda lib, a: lib.repeat_interleave(a, 2), (2, 3)),
    case("repeat_interleave_dim", lambda lib, a: a.repeat_interleave(3, dim=1), (2, 3)),
    case("unfold", lambda lib, a: a.unfold(1, 3, 2), (2, 7)),
    case("unfold_overlapping_first_dim", lambda lib, a: a.unfold(0, 2, 1), (4, 3)),
    case("combinations", lambda lib, a: lib.combinations(a), (4,)),
    case("combinations_with_replacement", lambda lib, a: lib.combinations(a, 3, with_replacement=True), (3,)),
    case("repeat_interleave_tensor", lambda lib, a: lib.repeat_interleave(a, lib.tensor([1, 0, 2]), dim=0), (3, 2)),
    # views
    case("movedim", lambda lib, a: lib.movedim(a, 0, -1), (2, 3, 4)),
    case("movedim_tuple", lambda lib, a: a.movedim((0, 1), (2, 0)), (2, 3, 4)),
    case("moveaxis", lambda lib, a: lib.moveaxis(a, -1, 0) * 2, (2, 3, 4)),
    case("swapaxes", lambda lib, a: lib.swapaxes(a, 0, 2), (2, 3, 4)),
    case("swapdims_method", lambda lib, a: a.swapdims(-1, 0), (2, 3)),
    case("narrow", lambda lib, a: lib.narrow(a, 1, 1, 2), (3, 4)),
    case("narrow_copy", lambda lib, a: a.narrow_copy(1, 2, 2), (3, 4)),
    case("select", lambda lib, a: lib.select(a, 1, -1), (2, 3, 4)),
    case("select_method", lambda lib, a: a.select(0, 1), (2, 3)),
    case("ravel", lambda lib, a: lib.ravel(a.t()), (3, 4)),
    case("slice_scatter", lambda lib, a, b: lib.slice_scatter(a, b, 1, 0, 4, 2), (3, 4), (3, 2)),
    case("slice_scatter_method", lambda lib, a, b: a.slice_scatter(b, start=-1), (3, 4), (1, 4)),
    case("select_scatter", lambda lib, a, b: lib.select_scatter(a, b, -1, 1), (2, 3, 4), (2, 3)),
    case("diagonal_scatter", lambda lib, a, b: lib.diagonal_scatter(a, b, -1, 2, 1), (2, 3, 4), (2, 3)),
    case("adjoint", lambda lib, a: lib.adjoint(a), (2, 3, 4)),
    case("mT_mH_H", lambda lib, a: a.mT + a.mH * 2 + a[0].H.unsqueeze(0), (2, 3, 3)),
    case("cartesian_prod", lambda lib, a, b: lib.cartesian_prod(a, b), (3,), (2,)),
    case("narrow_negative_start", lambda lib, a: a.narrow(0, -2, 2), (3, 4)),
    case("unbind", lambda lib, a: _joined(lib, lib.unbind(a, 1)), (2, 3)),
    case("unbind_some_pieces_unused", lambda lib, a: a.unbind()[1] * 3, (3, 2)),
    case("unflatten", lambda lib, a: lib.unflatten(a, 1, (2, -1)), (3, 4)),
    case("unflatten_method", lambda lib, a: a.unflatten(-1, (2, 2)), (3, 4)),
    case("broadcast_to", lambda lib, a: lib.broadcast_to(a, (2, 3, 4)), (3, 1)),
    case("broadcast_tensors", lambda lib, a, b: _joined(lib, lib.broadcast_tensors(a, b)), (3, 1), (2, 1, 4)),
    case("atleast_1d", lambda lib, a: lib.atleast_1d(a) * 2, ()),
    case("atleast_2d", lambda lib, a, b: _joined(lib, lib.atleast_2d(a, b)), (3,), ()),
    case("atleast_3d", lambda lib, a, b: _joined(lib, lib.atleast_3d([a, b])), (3,), (2, 3)),
    case("meshgrid_ij", lambda lib, a, b: _joined(lib, lib.meshgrid(a, b, indexing="ij")), (3,), (2,)),
    case("meshgrid_xy", lambda lib, a, b, c: _joined(lib, lib.meshgrid([a, b, c], indexing="xy")), (3,), (2,), (4,)),
    case("squeeze_tuple", lambda lib, a: lib.squeeze(a, (0, 2)), (1, 3, 1, 2)),
    case("expand_as", lambda lib, a, b: a.expand_as(b), (3, 1), (2, 3, 4)),
    case("view_as", lambda lib, a, b: a.view_as(b), (3, 4), (2, 6)),
    case("reshape_as", lambda lib, a, b: a.t().reshape_as(b), (3, 4), (2, 6)),
    # splits and stacks
    case("tensor_split_sections", lambda lib, a: _joined(lib, lib.tensor_split(a, 3, 1)), (2, 7)),
    case("tensor_split_indices", lambda lib, a: _joined(lib, a.tensor_split([1, 4])), (6, 2)),
    case("tensor_split_unordered", lambda lib, a: _joined(lib, lib.tensor_split(a, (3, 1, -1))), (5,)),
    case("tensor_split_tensor", lambda lib, a: _joined(lib, lib.tensor_split(a, lib.tensor([2]), dim=-1)), (3, 5)),
    case("hsplit", lambda lib, a: _joined(lib, lib.hsplit(a, 2)), (3, 4)),
    case("vsplit", lambda lib, a: _joined(lib, a.vsplit([1])), (3, 4)),
    case("dsplit", lambda lib, a: _joined(lib, lib.dsplit(a, 2)), (2, 2, 4)),
    case("hstack", lambda lib, a, b: lib.hstack([a, b]), (3, 2), (3, 1)),
    case("hstack_1d", lambda lib, a, b: lib.hstack((a, b)), (3,), ()),
    case("vstack", lambda lib, a, b: lib.vstack([a, b]), (3,), (2, 3)),
    case("row_stack", lambda lib, a, b: lib.row_stack([a, b]), (2, 3), (1, 3)),
    case("dstack", lambda lib, a, b: lib.dstack([a, b]), (2, 3), (2, 3, 2)),
    case("column_stack", lambda lib, a, b, c: lib.column_stack([a, b, c]), (3,), (3, 2), (3,)),
    case("concat", lambda lib, a, b: lib.concat([a, b], dim=1), (2, 3), (2, 1)),
    case("concatenate", lambda lib, a, b: lib.concatenate((a, b), axis=-1), (2, 3), (2, 1)),
    # the core layout functions
    case("split_sizes", lambda lib, a: _joined(lib, lib.split(a, [1, 3], dim=-1)), (2, 4)),
    case("chunk", lambda lib, a: _joined(lib, a.chunk(3, 0)), (5, 2)),
    case("stack_negative_dim", lambda lib, a, b: lib.stack([a, b], -1), (2, 3), (2, 3)),
    case("cat_negative_dim", lambda lib, a, b: lib.cat([a, b], -2), (2, 3), (1, 3)),
    case("flatten_middle", lambda lib, a: lib.flatten(a, 1, -2), (2, 3, 4, 2)),
    case("permute_negative", lambda lib, a: a.permute(-1, 0, 1), (2, 3, 4)),
]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", CASES)
def test_matches_torch(op, dtype):
    check_torch(op.fn, op.shapes, dtype=dtype, domain=op.domain)


@pytest.mark.parametrize("op", CASES)
def test_matches_finite_differences(op):
    check_finite_differences(op.fn, op.shapes, domain=op.domain)


def test_copies_and_views_like_torch():
    x = zgrad.arange(12.0).reshape(3, 4)
    for copy in (zgrad.flip(x, (0,)), x.roll(0, 1), x.repeat(1, 1), zgrad.tril(x), x.rot90(0), zgrad.tile(x, (1,))):
        copy.view(-1)[0] = 100.0
        assert x[0, 0].item() == 0.0
    for view in (zgrad.narrow(x, 1, 0, 2), zgrad.movedim(x, 0, 1), x.unbind()[0], x.unflatten(1, (2, 2)),
                 zgrad.diagonal(x, 1)):
        assert np.shares_memory(view._data, x._data)
    assert not np.shares_memory(zgrad.diag(x, 1)._data, x._data)
    x.diagonal().fill_(-1.0)
    np.testing.assert_array_equal(x.numpy().diagonal(), [-1.0, -1.0, -1.0])


def test_in_place_triangles():
    x = zgrad.tensor(np.arange(9.0).reshape(3, 3))
    assert x.tril_(-1) is x
    np.testing.assert_array_equal(x.numpy(), np.tril(np.arange(9.0).reshape(3, 3), -1))
    leaf = zgrad.tensor(np.ones((3, 3)), requires_grad=True)
    y = leaf * 2
    y.triu_(1)
    y.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), 2 * np.triu(np.ones((3, 3)), 1))


def test_in_place_layout_changes():
    x = zgrad.tensor(np.arange(6.0).reshape(3, 1, 2))
    assert x.squeeze_(1) is x and x.shape == (3, 2)
    x.unsqueeze_(0)
    assert x.shape == (1, 3, 2)
    x.transpose_(0, 2).swapdims_(1, 2).swapaxes_(0, 1)
    assert x.shape == (1, 2, 3)
    leaf = zgrad.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    with pytest.raises(RuntimeError):
        leaf.t_()
    y = leaf * 1.0
    y.t_()
    (y * zgrad.tensor(np.arange(6.0).reshape(3, 2))).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), np.arange(6.0).reshape(3, 2).T)


def test_repeat_interleave_output_size_and_counts():
    x = zgrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = zgrad.repeat_interleave(x, zgrad.tensor([2, 1]), dim=0, output_size=3)
    np.testing.assert_array_equal(out.numpy(), [[1, 2], [1, 2], [3, 4]])
    with pytest.raises(RuntimeError):
        zgrad.repeat_interleave(x, zgrad.tensor([2, 1]), dim=0, output_size=4)


# The CUDA subset of the default run: one case per kind of op; the others carry the full marker.
CUDA_SUBSET = {"tril_diagonal_batch", "diagonal_offset_dims", "diag_embed_offset_dims", "flip", "roll_dims", "repeat",
               "repeat_interleave_tensor", "unbind", "meshgrid_xy", "tensor_split_unordered", "column_stack",
               "block_diag", "unfold", "diagonal_scatter"}


@requires_cuda
@pytest.mark.parametrize("op", [pytest.param(c.values[0], id=c.id,
                                             marks=() if c.id in CUDA_SUBSET else (pytest.mark.full,)) for c in CASES])
def test_on_cuda_matches_cpu(op):
    check_device(op.fn, op.shapes, domain=op.domain)

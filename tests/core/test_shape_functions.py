"""The shape functions (tril, diag, flip, roll, repeat, movedim, splits and stacks, meshgrid, ...)
against PyTorch and finite differences: values, shapes and gradients of every function, its
Tensor method, its result dtype over the dtype grid, its errors (the exception type PyTorch
raises), and a subset on CUDA (Numba's simulator here) against the CPU.

A function that returns several tensors is checked through one tensor made of them all
(``_joined``), so every piece's gradient counts.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import case, check_finite_differences, check_torch, torch


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


# Over the dtype grid: what each function gives (value, dtype, shape) for an integer and a bool tensor.
GRID = {
    "tril": lambda lib, t: lib.tril(t, 1),
    "triu": lambda lib, t: t.triu(),
    "diagonal": lambda lib, t: lib.diagonal(t, 1),
    "diag": lambda lib, t: lib.diag(t.reshape(-1)),
    "diag_embed": lambda lib, t: lib.diag_embed(t),
    "trace": lambda lib, t: lib.trace(t),
    "flip": lambda lib, t: lib.flip(t, [0, 1]),
    "roll": lambda lib, t: lib.roll(t, (1, 2), (0, 1)),
    "rot90": lambda lib, t: lib.rot90(t, 3),
    "repeat": lambda lib, t: t.repeat(2, 1, 2),
    "tile": lambda lib, t: lib.tile(t, (2,)),
    "repeat_interleave": lambda lib, t: lib.repeat_interleave(t, 2, dim=0),
    "movedim": lambda lib, t: lib.movedim(t, 1, 0),
    "narrow": lambda lib, t: t.narrow(1, 1, 2),
    "unbind": lambda lib, t: lib.unbind(t, 1)[2],
    "hstack": lambda lib, t: lib.hstack([t, t]),
    "column_stack": lambda lib, t: lib.column_stack([t[:, 0], t]),
    "tensor_split": lambda lib, t: lib.tensor_split(t, 2, 1)[1],
    "meshgrid": lambda lib, t: lib.meshgrid(t[0], t[1], indexing="xy")[0],
    "block_diag": lambda lib, t: lib.block_diag(t, t[0], t[0, 0]),
    "unfold": lambda lib, t: t.unfold(1, 2, 1),
    "combinations": lambda lib, t: lib.combinations(t[0]),
    "cartesian_prod": lambda lib, t: lib.cartesian_prod(t[0], t[1]),
    "select": lambda lib, t: t.select(1, 2),
    "diagflat": lambda lib, t: lib.diagflat(t[0], 1),
    "slice_scatter": lambda lib, t: lib.slice_scatter(t, t[:, :2].flip(1), 1, 2),
    "select_scatter": lambda lib, t: lib.select_scatter(t, t[2], 0, 0),
    "diagonal_scatter": lambda lib, t: lib.diagonal_scatter(t, t[0, :3], 1),
}
GRID_DATA = {
    "int32": np.arange(12, dtype=np.int32).reshape(3, 4) - 5,
    "uint8": np.arange(12, dtype=np.uint8).reshape(3, 4) * 20,
    "bool": np.arange(12).reshape(3, 4) % 3 == 0,
    "float16": (np.arange(12).reshape(3, 4) / 4).astype(np.float16),
}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", sorted(GRID_DATA))
@pytest.mark.parametrize("name", sorted(GRID))
def test_dtype_grid_matches_torch(name, dtype):
    if torch is None:
        pytest.skip("needs torch")
    data = GRID_DATA[dtype]
    try:
        ref = GRID[name](torch, torch.from_numpy(data.copy())).numpy()
    except Exception as refused:  # noqa: BLE001 - then zgrad must refuse it alike
        with pytest.raises(type(refused)):
            GRID[name](zgrad, zgrad.tensor(data))
        return
    out = GRID[name](zgrad, zgrad.tensor(data))
    assert out.dtype == ref.dtype and out.shape == ref.shape
    np.testing.assert_array_equal(out.numpy(), ref)


# Edge cases (empty dims, 0-d tensors, out-of-range split indices, tensor arguments) by value.
EDGES = {
    "tensor_split_beyond": lambda lib, t: lib.tensor_split(t, [1, 10], dim=1),
    "tensor_split_more_sections_than_elements": lambda lib, t: lib.tensor_split(t, 5, dim=1),
    "tensor_split_no_indices": lambda lib, t: lib.tensor_split(t, [], dim=1),
    "tensor_split_0d_tensor_sections": lambda lib, t: lib.tensor_split(t, lib.tensor(2), dim=2),
    "narrow_tensor_start": lambda lib, t: lib.narrow(t, 2, lib.tensor(1), 2),
    "narrow_empty_at_end": lambda lib, t: lib.narrow(t, 1, 3, 0),
    "repeat_zero": lambda lib, t: t.repeat(0, 1, 2),
    "tile_no_dims": lambda lib, t: lib.tile(t, ()),
    "roll_empty_dim": lambda lib, t: lib.roll(t[:, :0], 2, 1),
    "roll_0d": lambda lib, t: lib.roll(t[0, 0, 0], 1),
    "flip_0d": lambda lib, t: lib.flip(t[0, 0, 0], (0,)),
    "flip_no_dims": lambda lib, t: lib.flip(t, ()),
    "diag_embed_negative_offset_dims": lambda lib, t: lib.diag_embed(t, -2, 2, 0),
    "diagonal_offset_past_the_end": lambda lib, t: lib.diagonal(t, 7, 1, 2),
    "unbind_empty_dim": lambda lib, t: lib.unbind(t[:, :0], 1),
    "unbind_pieces_empty": lambda lib, t: lib.unbind(t[:, :0], 0),
    "movedim_negative": lambda lib, t: lib.movedim(t, (-1, -3), (0, 1)),
    "squeeze_dim_not_1": lambda lib, t: lib.squeeze(t, 1),
    "squeeze_no_dims": lambda lib, t: lib.squeeze(t, ()),
    "unflatten_inferred": lambda lib, t: lib.unflatten(t, -1, (-1, 2)),
    "meshgrid_0d": lambda lib, t: lib.meshgrid(t[0, 0, 0], t[0, 0], indexing="ij"),
    "meshgrid_one_xy": lambda lib, t: lib.meshgrid(t[0, 0], indexing="xy"),
    "atleast_2d_list_of_one": lambda lib, t: lib.atleast_2d([t[0, 0]]),
    "hstack_0d": lambda lib, t: lib.hstack([t[0, 0, 0], t[0, 0, 0]]),
    "column_stack_0d": lambda lib, t: lib.column_stack([t[0, 0, 0], t[0, 0, :1]]),
    "repeat_interleave_0d": lambda lib, t: lib.repeat_interleave(t[0, 0, 0], 3),
    "repeat_interleave_empty": lambda lib, t: lib.repeat_interleave(t[:, :0], 2, dim=1),
    "repeat_interleave_0d_tensor_repeats": lambda lib, t: lib.repeat_interleave(t, lib.tensor(2), dim=1),
    "rot90_negative_dims": lambda lib, t: lib.rot90(t, 1, (-1, 0)),
    "rot90_k5": lambda lib, t: lib.rot90(t, 5, (2, 1)),
    "trace_non_square_long": lambda lib, t: lib.trace(t[0].long()),
    "tril_empty": lambda lib, t: lib.tril(t[:, :0]),
    "hsplit_1d_indices": lambda lib, t: lib.hsplit(t[0, 0], [1, 3]),
    "dstack_1d": lambda lib, t: lib.dstack([t[0, 0], t[1, 0]]),
    "split_empty_dim": lambda lib, t: lib.split(t[:, :0], 2, 1),
    "chunk_more_than_size": lambda lib, t: lib.chunk(t, 5, 2),
    "chunk_empty_dim": lambda lib, t: lib.chunk(t[:, :0], 2, 1),
    "cat_promotes": lambda lib, t: lib.cat([t, t.int()], 0),
    "stack_promotes": lambda lib, t: lib.stack([t.int(), t.bool()], 0),
    "expand_keeps_with_new_dim": lambda lib, t: t.expand(2, -1, 3, 4),
    "broadcast_shapes_with_zero": lambda lib, t: [lib.tensor(list(lib.broadcast_shapes((0, 1), (3,))))],
    "vsplit_tensor_indices": lambda lib, t: lib.vsplit(t, lib.tensor([1])),
    "diag_0d": lambda lib, t: lib.diag(t[0, 0, 0]),
    "block_diag_of_none": lambda lib, t: lib.block_diag(),
    "block_diag_promotes": lambda lib, t: lib.block_diag(t[0].int(), t[1, 0].double()),
    "unfold_0d": lambda lib, t: t[0, 0, 0].unfold(0, 1, 1),
    "unfold_whole_dim": lambda lib, t: t.unfold(-1, 4, 3),
    "combinations_none": lambda lib, t: lib.combinations(t[0, 0], 0),
    "combinations_more_than_elements": lambda lib, t: lib.combinations(t[0, 0], 5),
    "cartesian_prod_one": lambda lib, t: lib.cartesian_prod(t[0, 0]),
    "mT_0d": lambda lib, t: t[0, 0, 0].mT,
    "H_0d": lambda lib, t: t[0, 0, 0].H,
}


def _pieces(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Tensor.(mT|H) is deprecated on 0-D tensors")
@pytest.mark.parametrize("name", sorted(EDGES))
def test_edge_cases_match_torch(name):
    if torch is None:
        pytest.skip("needs torch")
    data = np.arange(24.0).reshape(2, 3, 4)
    try:
        expected = _pieces(EDGES[name](torch, torch.tensor(data)))
    except Exception as refused:  # noqa: BLE001 - then zgrad must refuse it alike
        with pytest.raises(type(refused)):
            EDGES[name](zgrad, zgrad.tensor(data))
        return
    got = _pieces(EDGES[name](zgrad, zgrad.tensor(data)))
    assert len(got) == len(expected)
    for out, ref in zip(got, expected):
        assert out.dtype == ref.numpy().dtype and out.shape == tuple(ref.shape)
        np.testing.assert_array_equal(out.numpy(), ref.numpy())


@pytest.mark.torch
def test_index_functions_match_torch():
    for row, col, offset in [(3, 4, 0), (4, 3, 1), (3, 3, -2), (0, 2, 0), (2, 5, 7)]:
        for name in ("tril_indices", "triu_indices"):
            out = getattr(zgrad, name)(row, col, offset)
            assert out.dtype == np.int64
            expected = np.stack(np.nonzero(np.tri(row, col, offset, dtype=bool) if name == "tril_indices"
                                           else ~np.tri(row, col, offset - 1, dtype=bool)))
            np.testing.assert_array_equal(out.numpy(), expected)
            if torch is not None:
                np.testing.assert_array_equal(out.numpy(), getattr(torch, name)(row, col, offset).numpy())
    assert zgrad.tril_indices(3, 3, dtype=zgrad.int32).dtype == np.int32
    counts = zgrad.tensor([1, 0, 3])
    np.testing.assert_array_equal(zgrad.repeat_interleave(counts).numpy(), [0, 2, 2, 2])
    assert zgrad.broadcast_shapes((3, 1), (2, 1, 4), 4) == (2, 3, 4)


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


# Inputs that PyTorch refuses: zgrad must raise an exception of PyTorch's type (or a subclass).
ERRORS = {
    "tril_1d": lambda lib, t: lib.tril(t[0]),
    "triu_0d": lambda lib, t: lib.triu(t[0, 0]),
    "diagonal_same_dims": lambda lib, t: lib.diagonal(t, 0, 1, -1),
    "diagonal_dim_range": lambda lib, t: lib.diagonal(t, 0, 0, 2),
    "diag_3d": lambda lib, t: lib.diag(t.reshape(1, 3, 4)),
    "trace_1d": lambda lib, t: lib.trace(t[0]),
    "flip_repeated": lambda lib, t: lib.flip(t, (0, -2)),
    "flip_dim_range": lambda lib, t: lib.flip(t, (2,)),
    "flip_int_dims": lambda lib, t: lib.flip(t, 0),
    "flatten_0d_dim_range": lambda lib, t: lib.flatten(t[0, 0, 0], 1),
    "rot90_dim_range": lambda lib, t: lib.rot90(t, 1, (3, 1)),
    "fliplr_1d": lambda lib, t: lib.fliplr(t[0]),
    "flipud_0d": lambda lib, t: lib.flipud(t[0, 0]),
    "roll_misaligned": lambda lib, t: lib.roll(t, (1, 2), 0),
    "roll_dim_range": lambda lib, t: lib.roll(t, 1, 3),
    "rot90_one_dim": lambda lib, t: lib.rot90(t, 1, (0,)),
    "rot90_same_dims": lambda lib, t: lib.rot90(t, 1, (1, 1)),
    "rot90_1d": lambda lib, t: lib.rot90(t[0]),
    "repeat_too_few": lambda lib, t: t.repeat(2),
    "repeat_negative": lambda lib, t: t.repeat(2, -1),
    "repeat_interleave_negative": lambda lib, t: lib.repeat_interleave(t, lib.tensor([1, -1, 1]), dim=0),
    "repeat_interleave_length": lambda lib, t: lib.repeat_interleave(t, lib.tensor([1, 2]), dim=0),
    "repeat_interleave_2d_counts": lambda lib, t: lib.repeat_interleave(t, lib.tensor([[1]]), dim=0),
    "movedim_lengths": lambda lib, t: lib.movedim(t, (0, 1), (1,)),
    "movedim_repeated": lambda lib, t: lib.movedim(t, (0, 0), (0, 1)),
    "movedim_range": lambda lib, t: lib.movedim(t, 2, 0),
    "swapaxes_range": lambda lib, t: lib.swapaxes(t, 0, 2),
    "narrow_too_long": lambda lib, t: lib.narrow(t, 0, 1, 3),
    "narrow_negative_length": lambda lib, t: lib.narrow(t, 0, 0, -1),
    "narrow_start_range": lambda lib, t: lib.narrow(t, 1, 5, 0),
    "narrow_0d": lambda lib, t: lib.narrow(t[0, 0], 0, 0, 1),
    "unbind_range": lambda lib, t: lib.unbind(t, 2),
    "unflatten_product": lambda lib, t: lib.unflatten(t, 1, (3, 2)),
    "unflatten_empty": lambda lib, t: lib.unflatten(t, 1, ()),
    "broadcast_to_mismatch": lambda lib, t: lib.broadcast_to(t, (3, 5)),
    "broadcast_tensors_mismatch": lambda lib, t: lib.broadcast_tensors(t, t[:2]),
    "broadcast_shapes_mismatch": lambda lib, t: lib.broadcast_shapes((3, 4), (2, 4)),
    "meshgrid_2d": lambda lib, t: lib.meshgrid(t, t[0], indexing="ij"),
    "meshgrid_indexing": lambda lib, t: lib.meshgrid(t[0], indexing="yx"),
    "tensor_split_0d": lambda lib, t: lib.tensor_split(t[0, 0], 2),
    "tensor_split_zero": lambda lib, t: lib.tensor_split(t, 0),
    "tensor_split_float_tensor": lambda lib, t: lib.tensor_split(t, lib.tensor([1.0])),
    "hsplit_indivisible": lambda lib, t: lib.hsplit(t, 3),
    "vsplit_1d": lambda lib, t: lib.vsplit(t[0], 2),
    "dsplit_2d": lambda lib, t: lib.dsplit(t, 2),
    "hstack_empty": lambda lib, t: lib.hstack([]),
    "vstack_mismatch": lambda lib, t: lib.vstack([t, t[:, :2]]),
    "reshape_invalid": lambda lib, t: t.reshape(5, 3),
    "view_invalid": lambda lib, t: t.view(-1, 5),
    "view_strided": lambda lib, t: t.t().view(12),
    "permute_repeated": lambda lib, t: t.permute(0, 0),
    "permute_length": lambda lib, t: t.permute(0, 1, 2),
    "permute_range": lambda lib, t: t.permute(0, 2),
    "transpose_range": lambda lib, t: t.transpose(0, 2),
    "expand_mismatch": lambda lib, t: t.expand(2, 3, 5),
    "expand_too_few": lambda lib, t: t.expand(4),
    "split_mismatch": lambda lib, t: lib.split(t, [1, 1], 0),
    "chunk_zero": lambda lib, t: lib.chunk(t, 0),
    "squeeze_range": lambda lib, t: lib.squeeze(t, (0, 2)),
    "unsqueeze_range": lambda lib, t: t.unsqueeze(3),
    "flatten_order": lambda lib, t: lib.flatten(t, 1, 0),
    "t_3d": lambda lib, t: t.reshape(1, 3, 4).t(),
    "stack_mismatch": lambda lib, t: lib.stack([t, t[1:]]),
    "stack_empty": lambda lib, t: lib.stack([]),
    "cat_mismatch": lambda lib, t: lib.cat([t, t[:, :2]], 0),
    "cat_dim_range": lambda lib, t: lib.cat([t, t], 2),
    "cat_empty": lambda lib, t: lib.cat([]),
    "select_range": lambda lib, t: lib.select(t, 1, 4),
    "select_0d": lambda lib, t: lib.select(t[0, 0], 0, 0),
    "ravel_not_a_tensor": lambda lib, t: lib.ravel([1, 2]),
    "mT_1d": lambda lib, t: t[0].mT,
    "mH_1d": lambda lib, t: t[0].mH,
    "H_3d": lambda lib, t: t.reshape(1, 3, 4).H,
    "adjoint_1d": lambda lib, t: lib.adjoint(t[0]),
    "unfold_too_big": lambda lib, t: t.unfold(1, 5, 1),
    "unfold_step_0": lambda lib, t: t.unfold(1, 2, 0),
    "combinations_2d": lambda lib, t: lib.combinations(t),
    "block_diag_3d": lambda lib, t: lib.block_diag(t, t.reshape(1, 3, 4)),
    "cartesian_prod_2d": lambda lib, t: lib.cartesian_prod(t),
    "slice_scatter_shape": lambda lib, t: lib.slice_scatter(t, t[:, :2], 1, 1, 4),
    "slice_scatter_dim_range": lambda lib, t: lib.slice_scatter(t, t, 2),
    "select_scatter_index_range": lambda lib, t: lib.select_scatter(t, t[0], 0, 3),
    "select_scatter_shape": lambda lib, t: lib.select_scatter(t, t[0], 1, 0),
    "diagonal_scatter_shape": lambda lib, t: lib.diagonal_scatter(t, t[0], 0),
    "diagonal_scatter_same_dims": lambda lib, t: lib.diagonal_scatter(t, t[0, :3], 0, 1, 1),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_torch(name):
    if torch is None:
        pytest.skip("needs torch")
    fn = ERRORS[name]
    data = np.arange(12.0).reshape(3, 4)
    with pytest.raises(Exception) as expected:
        fn(torch, torch.tensor(data))
    with pytest.raises(type(expected.value)):
        fn(zgrad, zgrad.tensor(data))


# Functions of a dim (each case a tuple of results), tried at every dim from -5 to 4 on a 3-d
# tensor (and some on a 0-d one): the same values, or the same exception type, as torch.
DIM_FUNCTIONS = {
    "squeeze_unsqueeze": lambda lib, t, d: (lib.squeeze(t.reshape(2, 1, 3, 4), d), t.unsqueeze(d)),
    "flatten": lambda lib, t, d: (lib.flatten(t, d), lib.flatten(t, 0, d)),
    "split_chunk": lambda lib, t, d: (*lib.split(t, 2, d), *lib.chunk(t, 2, d)),
    "cat_stack": lambda lib, t, d: (lib.cat([t, t], d), lib.stack([t, t], d)),
    "transpose_swapaxes": lambda lib, t, d: (lib.transpose(t, d, 0), lib.swapaxes(t, d, -1)),
    "unbind_select": lambda lib, t, d: (*lib.unbind(t, d), lib.select(t, d, 1)),
    "movedim_narrow": lambda lib, t, d: (lib.movedim(t, d, 0), lib.narrow(t, d, 0, 1)),
    "flip_roll": lambda lib, t, d: (lib.flip(t, (d,)), lib.roll(t, 1, d)),
    "unflatten_tensor_split": lambda lib, t, d: (lib.unflatten(t, d, (1, -1)), *lib.tensor_split(t, 2, d)),
    "diagonal_diag_embed": lambda lib, t, d: (lib.diagonal(t, 0, d, 0), lib.diag_embed(t, 0, d, -1)),
    "repeat_interleave_unfold": lambda lib, t, d: (lib.repeat_interleave(t, 2, d), t.unfold(d, 2, 1)),
    "rot90_tril": lambda lib, t, d: (lib.rot90(t, 1, (d, 1)), lib.tril(t, d)),
    "on_0d": lambda lib, t, d: (lib.squeeze(t[0, 0, 0], d), lib.unsqueeze(t[0, 0, 0], d), lib.flatten(t[0, 0, 0], d)),
    "on_0d_joined": lambda lib, t, d: (lib.cat([t[0, 0], t[0, 0]], d), lib.stack([t[0, 0, 0], t[0, 0, 0]], d)),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(DIM_FUNCTIONS))
def test_every_dim_matches_torch(name):
    if torch is None:
        pytest.skip("needs torch")
    data = np.arange(24.0).reshape(2, 3, 4)
    for dim in range(-5, 5):
        try:
            expected = DIM_FUNCTIONS[name](torch, torch.tensor(data), dim)
        except Exception as refused:  # noqa: BLE001 - then zgrad must refuse it alike
            with pytest.raises(type(refused)):
                DIM_FUNCTIONS[name](zgrad, zgrad.tensor(data), dim)
            continue
        got = DIM_FUNCTIONS[name](zgrad, zgrad.tensor(data), dim)
        assert len(got) == len(expected), f"dim {dim}"
        for out, ref in zip(got, expected):
            assert out.shape == tuple(ref.shape), f"dim {dim}"
            np.testing.assert_array_equal(out.numpy(), ref.numpy(), err_msg=f"dim {dim}")


# The CUDA subset of the default run: one case per kind of op; the others carry the full marker.
CUDA_SUBSET = {"tril_diagonal_batch", "diagonal_offset_dims", "diag_embed_offset_dims", "flip", "roll_dims", "repeat",
               "repeat_interleave_tensor", "unbind", "meshgrid_xy", "tensor_split_unordered", "column_stack",
               "block_diag", "unfold", "diagonal_scatter"}


@requires_cuda
@pytest.mark.parametrize("op", [pytest.param(c.values[0], id=c.id,
                                             marks=() if c.id in CUDA_SUBSET else (pytest.mark.full,)) for c in CASES])
def test_on_cuda_matches_cpu(op):
    check_device(op.fn, op.shapes, domain=op.domain)


@requires_cuda
def test_cuda_index_functions_and_int_dtypes():
    x = zgrad.tensor(np.arange(12, dtype=np.int32).reshape(3, 4), device="cuda")
    for name in sorted(GRID):
        out = GRID[name](zgrad, x)
        assert out.device.type == "cuda"
        np.testing.assert_array_equal(out.cpu().numpy(), GRID[name](zgrad, x.cpu()).numpy())
    indices = zgrad.triu_indices(3, 4, 1, device="cuda")
    assert indices.device.type == "cuda"
    np.testing.assert_array_equal(indices.cpu().numpy(), zgrad.triu_indices(3, 4, 1).numpy())

"""The shape functions agree with PyTorch where the gradient checks of ``test_shape_functions``
do not reach: results over the dtype grid, edge cases (empty dims, 0-d tensors, split indices
past the end), every dim from -5 to 4, and the inputs PyTorch refuses (zgrad raises an exception
of PyTorch's type, or a subclass); the index functions; integer dtypes on CUDA (Numba's simulator
here).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda
from helpers import torch

DATA = np.arange(24.0).reshape(2, 3, 4)


def _results(result) -> list:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _assert_same(fn, data: np.ndarray, *args) -> None:
    """``fn(lib, tensor, *args)`` gives zgrad the results torch gets (values, dtypes, shapes), or
    zgrad refuses what torch refuses, with an exception of its type."""
    try:
        expected = _results(fn(torch, torch.from_numpy(data.copy()), *args))
    except Exception as refused:  # noqa: BLE001 - then zgrad must refuse it alike
        with pytest.raises(type(refused)):
            fn(zgrad, zgrad.tensor(data), *args)
        return
    got = _results(fn(zgrad, zgrad.tensor(data), *args))
    assert len(got) == len(expected), f"{args}: {len(got)} results, torch gives {len(expected)}"
    for out, ref in zip(got, expected):
        ref = ref.numpy()
        assert (out.dtype, out.shape) == (ref.dtype, ref.shape), \
            f"{args}: {out.dtype} {out.shape}, torch gives {ref.dtype} {ref.shape}"
        np.testing.assert_array_equal(out.numpy(), ref, err_msg=f"{args}")


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


# Inputs that PyTorch refuses (of a 3 x 4 matrix): zgrad must raise an exception of its type (or a subclass).
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
@pytest.mark.parametrize("dtype", sorted(GRID_DATA))
@pytest.mark.parametrize("name", sorted(GRID))
def test_dtype_grid_matches_torch(name, dtype):
    if torch is None:
        pytest.skip("needs torch")
    _assert_same(GRID[name], GRID_DATA[dtype])


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Tensor.(mT|H) is deprecated on 0-D tensors")
@pytest.mark.parametrize("name", sorted(EDGES))
def test_edge_cases_match_torch(name):
    if torch is None:
        pytest.skip("needs torch")
    _assert_same(EDGES[name], DATA)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_torch(name):
    if torch is None:
        pytest.skip("needs torch")
    matrix = np.arange(12.0).reshape(3, 4)
    with pytest.raises(Exception) as expected:
        ERRORS[name](torch, torch.tensor(matrix))
    with pytest.raises(type(expected.value)):
        ERRORS[name](zgrad, zgrad.tensor(matrix))


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(DIM_FUNCTIONS))
def test_every_dim_matches_torch(name):
    if torch is None:
        pytest.skip("needs torch")
    for dim in range(-5, 5):
        _assert_same(DIM_FUNCTIONS[name], DATA, dim)


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


def test_meshgrid_without_indexing_warns_as_torch():
    a, b = zgrad.arange(3), zgrad.arange(2)
    with pytest.warns(UserWarning) as record:
        grids = zgrad.meshgrid(a, b)
    # torch's text up to its C++ suffix "(Triggered internally at ...)"; torch warns once per process
    assert str(record[0].message) == ("torch.meshgrid: in an upcoming release, it will be required to pass the "
                                      "indexing argument.")
    assert [g.shape for g in grids] == [(3, 2), (3, 2)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zgrad.meshgrid(a, b, indexing="ij")


# Tensor.view(dtype): the same bytes read as another dtype, over layouts PyTorch accepts and refuses.
VIEW_DTYPE_LAYOUTS = {
    "contiguous": lambda t: t,
    "rows_sliced": lambda t: t[1:],
    "columns_from_two": lambda t: t[:, 2:],
    "columns_from_one": lambda t: t[:, 1:3],
    "odd_width": lambda t: t[:, :3],
    "every_other_row": lambda t: t[::2],
    "transposed": lambda t: t.t(),
    "a_0d_element": lambda t: t[1, 1],
    "empty": lambda t: t[:0],
}
VIEW_DTYPES = ("bool", "uint8", "int16", "float16", "bfloat16", "int32", "float32", "float64", "int64")


@pytest.mark.torch
@pytest.mark.parametrize("layout", sorted(VIEW_DTYPE_LAYOUTS))
@pytest.mark.parametrize("source", ("int16", "float32", "float64"))
def test_view_dtype_matches_torch(source, layout):
    """Shape, strides, offset and bits of every result, and PyTorch's error (type and message) for
    every view it refuses; the result never requires grad and writes reach the viewed memory."""
    if torch is None:
        pytest.skip("needs torch")
    bits = np.arange(4 * 8 * 8, dtype=np.uint8).reshape(4, -1)  # 4 rows of 64 bytes, no NaN patterns
    for target in VIEW_DTYPES:
        def view(lib, target=target):
            t = lib.from_numpy(bits.copy()).view(getattr(lib, source))
            t.requires_grad_(t.is_floating_point())
            return VIEW_DTYPE_LAYOUTS[layout](t).view(getattr(lib, target))
        try:
            expected = view(torch)
        except RuntimeError as refused:
            with pytest.raises(RuntimeError) as got:
                view(zgrad)
            assert str(got.value) == str(refused), f"{source} -> {target}"
            continue
        got = view(zgrad)
        assert (got.shape, got.stride(), got.storage_offset()) == \
               (tuple(expected.shape), expected.stride(), expected.storage_offset()), f"{source} -> {target}"
        assert not got.requires_grad and not expected.requires_grad
        as_bytes = {"bfloat16": "int16", "bool": "uint8"}.get(target, target)
        np.testing.assert_array_equal(got.view(getattr(zgrad, as_bytes)).numpy(),
                                      expected.view(getattr(torch, as_bytes)).numpy(), err_msg=f"{source} -> {target}")
    x = zgrad.zeros(2, 4, dtype=zgrad.float16)
    x[:, 2:].view(zgrad.float32).fill_(1.0)
    np.testing.assert_array_equal(x.view(zgrad.int16).numpy()[:, 2:], [[0, 16256]] * 2)
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        x.view(zgrad.float32, 2)


@requires_cuda
def test_cuda_view_dtype_reads_and_writes_the_same_bytes():
    """On CUDA (Numba's simulator here) a view of another element size at an offset, and one whose
    allocation does not hold a whole number of the wider elements, read and write the right bytes
    through the element-wise kernels; a view of part of an allocation is never its sole view."""
    from zgrad.kernels.cuda.array import DeviceArray
    host = np.arange(12, dtype=np.float16).reshape(2, 6)
    x = zgrad.tensor(host, device="cuda")
    wide = x[:, 2:4].view(zgrad.float32)
    np.testing.assert_array_equal(wide.cpu().numpy(), host[:, 2:4].copy().view(np.float32))
    wide.mul_(zgrad.tensor([[1.0], [2.0]], device="cuda"))  # the n-d kernel at an offset
    expected = host.copy()
    expected[:, 2:4] = (expected[:, 2:4].copy().view(np.float32) * np.array([[1.0], [2.0]], np.float32)).view(np.float16)
    np.testing.assert_array_equal(x.cpu().numpy(), expected)
    odd = zgrad.tensor(np.arange(9, dtype=np.float16), device="cuda")  # 18 bytes: four whole float32
    other = np.arange(4, dtype=np.float32).reshape(2, 2)
    odd[:8].reshape(2, 4).view(zgrad.float32).add_(zgrad.tensor(other, device="cuda").t())  # the n-d kernel
    expected = np.arange(9, dtype=np.float16)
    expected[:8] = (expected[:8].view(np.float32) + other.T.reshape(-1)).view(np.float16)
    np.testing.assert_array_equal(odd.cpu().numpy(), expected)
    half = DeviceArray.empty((4,), np.dtype(np.float32)).view(np.float16)[:4]  # half of the bytes
    assert not half.is_sole_view()
    whole = DeviceArray.empty((4,), np.dtype(np.float32)).view(np.float16)  # (no name keeps the float32 view)
    assert whole.is_sole_view()

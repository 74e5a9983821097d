"""What a tensor says about its memory and type (issue 32): strides, storage offsets, sizes in
bytes, legacy type names, ``new``, ``resize_``, ``sum_to_size``, shared and pinned memory; each
against PyTorch where it is installed."""

from __future__ import annotations

import os

import numpy as np
import pytest

import zgrad
from zgrad.errors import AutogradError
from cuda_helpers import requires_cuda
from helpers import require_torch, torch

LAYOUTS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.transpose(0, 2),
    "sliced": lambda x: x[1:, :, 1:3],
    "row": lambda x: x[1],
    "column": lambda x: x[:, 1],
    "expanded": lambda x: x[:1].expand(3, 3, 4),
    "unsqueezed": lambda x: x[:, :, 2].unsqueeze(1),
    "permuted-slice": lambda x: x.permute(2, 0, 1)[1:3],
    "scalar": lambda x: x[1, 2, 3],
}


@pytest.mark.torch
@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_strides_and_offsets_match_torch(layout):
    require_torch()
    base, theirs_base = zgrad.arange(36.0).reshape(3, 3, 4), torch.arange(36.0).reshape(3, 3, 4)
    ours, theirs = layout(base), layout(theirs_base)
    assert ours.stride() == theirs.stride() and ours.storage_offset() == theirs.storage_offset()
    assert ours.is_contiguous() == theirs.is_contiguous()
    assert [ours.stride(d) for d in range(-ours.ndim, ours.ndim)] == [theirs.stride(d) for d in range(-theirs.ndim,
                                                                                                     theirs.ndim)]
    assert ours.data_ptr() - base.data_ptr() == theirs.data_ptr() - theirs_base.data_ptr()


def test_data_ptr_moves_with_the_view_and_is_0_without_elements():
    x = zgrad.zeros(4, 5, dtype=zgrad.float64)
    assert x[1].data_ptr() - x.data_ptr() == 5 * 8 and x.numpy().ctypes.data == x.data_ptr()
    assert zgrad.zeros(0).data_ptr() == 0


def test_stride_of_a_bad_dim_is_refused():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        zgrad.zeros(2, 3).stride(2)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                                   "float32", "float64"])
def test_sizes_and_types_match_torch(dtype):
    require_torch()
    ours, theirs = zgrad.zeros(2, 3, dtype=getattr(zgrad, dtype)), torch.zeros(2, 3, dtype=getattr(torch, dtype))
    for query in ("element_size", "nelement", "ndimension", "is_signed", "is_complex", "is_inference", "dim"):
        assert getattr(ours, query)() == getattr(theirs, query)(), query
    assert (ours.itemsize, ours.nbytes, ours.is_cpu) == (theirs.itemsize, theirs.nbytes, theirs.is_cpu)
    assert ours.type() == theirs.type().replace("torch.", "zgrad.")
    for name in ("byte", "char", "short", "int", "long", "float", "double", "half", "bool"):
        assert str(getattr(ours, name)().dtype) == str(getattr(theirs, name)().dtype).removeprefix("torch.")


@pytest.mark.torch
def test_the_tensor_itself_where_torch_returns_it_for_a_real_tensor():
    """Generic code written for complex tensors (x.conj(), x.real, +x) or asking for a new view
    (squeeze or expand with nothing to change) gets what it gets from torch."""
    require_torch()
    identities = {
        "+x": lambda x: +x, "conj": lambda x: x.conj(), "conj_physical": lambda x: x.conj_physical(),
        "resolve_conj": lambda x: x.resolve_conj(), "resolve_neg": lambda x: x.resolve_neg(), "real": lambda x: x.real,
        "flatten(0, 0)": lambda x: x.flatten(0, 0), "squeeze()": lambda x: x.squeeze(),
        "squeeze(0)": lambda x: x.squeeze(0), "expand(2, 3)": lambda x: x.expand(2, 3),
        "expand_as": lambda x: x.expand_as(x), "broadcast_to": lambda x: x.broadcast_to((2, 3)),
        "movedim(0, 0)": lambda x: x.movedim(0, 0), "view(2, 3)": lambda x: x.view(2, 3),
    }
    for lib in (torch, zgrad):
        x = lib.ones(2, 3)
        found = {name: f(x) is x for name, f in identities.items()}
        if lib is torch:
            expected = found
        else:
            assert found == expected
        assert lib.conj(x) is x and lib.real(x) is x and not lib.is_conj(x) and not x.is_neg()
        with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
            x.imag  # noqa: B018
    with pytest.raises(RuntimeError, match=r"The `\+` operator, on a bool tensor is not supported"):
        +zgrad.ones(2, dtype=zgrad.bool)


def test_a_new_view_with_nothing_to_change_takes_part_in_autograd():
    x = zgrad.ones(2, 3, requires_grad=True)
    y = x * 1
    for view in (y.squeeze(), y.expand(2, 3), y.movedim(1, 1)):
        assert view is not y and view._base is y
    z = y.squeeze()
    z.mul_(3)  # reaches y, as through any view
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 3.0))


def test_type_converts_to_a_dtype_a_name_or_a_constructor():
    x = zgrad.ones(2, requires_grad=True)
    assert x.type(zgrad.float32) is x
    for target in (zgrad.float64, "zgrad.DoubleTensor", zgrad.DoubleTensor):
        y = x.type(target)
        assert y.dtype == zgrad.float64 and y.grad_fn is not None
    assert x.type(zgrad.LongTensor).type() == "zgrad.LongTensor"
    with pytest.raises(ValueError, match="invalid type: 'zgrad.ComplexTensor'"):
        x.type("zgrad.ComplexTensor")


@pytest.mark.torch
def test_is_nonzero_and_is_same_size_match_torch():
    require_torch()
    for lib in (zgrad, torch):
        assert lib.tensor([2]).is_nonzero() and not lib.tensor(0.0).is_nonzero()
        assert lib.ones(2, 3).is_same_size(lib.zeros(2, 3)) and not lib.ones(2, 3).is_same_size(lib.ones(3, 2))
    for values in ([1, 2], []):
        with pytest.raises(RuntimeError) as ours:
            zgrad.tensor(values).is_nonzero()
        with pytest.raises(RuntimeError) as theirs:
            torch.tensor(values).is_nonzero()
        assert str(ours.value) == str(theirs.value)


@pytest.mark.torch
def test_new_matches_torch():
    require_torch()
    for lib in (zgrad, torch):
        x = lib.ones(2, dtype=lib.float64)
        made = [x.new(), x.new(2, 3), x.new([1, 2]), x.new((4, 5))]
        assert [tuple(m.shape) for m in made] == [(0,), (2, 3), (2,), (2,)]
        assert all(str(m.dtype).endswith("float64") for m in made) and made[3].tolist() == [4.0, 5.0]


@pytest.mark.torch
@pytest.mark.parametrize("steps", [
    [(2, 2), (3, 3)],           # shrink keeps the storage, growing again finds the old elements
    [(6,), (2, 3)],             # same count: a reshape in place
    [(4, 4)],                   # grow: the old elements first
    [(0,), (2,)],
], ids=["shrink-grow", "same", "grow", "empty"])
def test_resize_matches_torch(steps):
    require_torch()
    ours, theirs = zgrad.arange(6.0), torch.arange(6.0)
    for shape in steps:
        assert ours.resize_(*shape) is ours
        theirs.resize_(*shape)
        assert ours.shape == tuple(theirs.shape) and ours.is_contiguous()
        kept = min(6, theirs.numel())
        assert ours.reshape(-1)[:kept].tolist() == theirs.reshape(-1)[:kept].tolist()


def test_resize_of_a_view_reads_the_memory_from_its_offset():
    base = zgrad.arange(10.0)
    view = base[2:]
    view.resize_(2, 2)
    assert view.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    view.fill_(-1)
    assert base[2:6].tolist() == [-1.0] * 4  # the memory is still shared
    t = zgrad.arange(6.0).reshape(2, 3).t()
    t.resize_as_(zgrad.zeros(3, 2))  # the same shape changes nothing
    assert t.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_resize_of_a_tensor_that_requires_grad_is_refused():
    with pytest.raises(AutogradError, match="cannot resize variables that require grad"):
        zgrad.ones(2, requires_grad=True).resize_(3)


@pytest.mark.torch
@pytest.mark.parametrize("size", [(3, 1), (4,), (1, 3, 1), (2, 3, 4), (1, 1)])
def test_sum_to_size_matches_torch(size):
    require_torch()
    data = np.random.default_rng(0).standard_normal((2, 3, 4))
    ours, theirs = zgrad.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    out_ours, out_theirs = ours.sum_to_size(*size), theirs.sum_to_size(size)
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy())
    weights = np.arange(out_theirs.numel(), dtype=np.float64).reshape(out_theirs.shape)
    (out_ours * zgrad.tensor(weights)).sum().backward()
    (out_theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy())


def test_sum_to_size_of_a_shape_it_does_not_expand_from_is_refused():
    with pytest.raises(RuntimeError, match=r"size \{\[3, 2\]\} is not expandable to size \{\[2, 3, 4\]\}\."):
        zgrad.ones(2, 3, 4).sum_to_size(3, 2)


def test_share_memory_puts_the_elements_where_a_forked_child_writes_to_them():
    x = zgrad.arange(4.0)
    assert not x.is_shared()
    assert x.share_memory_() is x and x.is_shared() and x.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert x[1:].is_shared()  # views of shared memory are shared
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        x.fill_(7)
        os._exit(0)
    os.waitpid(pid, 0)
    assert x.tolist() == [7.0] * 4
    x.share_memory_()
    assert x.tolist() == [7.0] * 4


@requires_cuda
def test_pin_memory_copies_into_page_locked_memory():
    x = zgrad.arange(4.0)
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned() and pinned.tolist() == x.tolist()
    assert pinned.data_ptr() != x.data_ptr() and pinned[1:].is_pinned()
    with pytest.raises(RuntimeError, match="cannot pin 'zgrad.cuda.FloatTensor' only dense CPU tensors can be pinned"):
        x.cuda().pin_memory()
    assert x.cuda().is_shared() and not x.cuda().is_pinned()


@requires_cuda
def test_cuda_strides_offsets_and_pointers():
    x = zgrad.arange(24.0).reshape(2, 3, 4).cuda()
    view = x.transpose(0, 2)[1:]
    assert view.stride() == (1, 4, 12) and view.storage_offset() == 1
    assert x[1].data_ptr() - x.data_ptr() == 12 * 4 and x.type() == "zgrad.cuda.FloatTensor"
    y = zgrad.arange(6.0).cuda()
    y.resize_(3, 3)
    assert y.shape == (3, 3) and y.cpu().reshape(-1)[:6].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_an_expand_with_nothing_to_broadcast_stays_writable():
    x = zgrad.ones(2, 3)
    x.expand(2, 3).add_(1)
    x.expand_as(x).mul_(2)
    x.broadcast_to((2, 3)).sub_(1)
    assert x.tolist() == [[3.0] * 3] * 2


def test_stack_and_cat_take_any_iterable_of_tensors():
    x = zgrad.ones(2)
    assert zgrad.stack(t for t in (x, x)).shape == (2, 2) and zgrad.cat(iter([x, x])).shape == (4,)

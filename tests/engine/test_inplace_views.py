"""In-place changes through views: the base of a changed view, and the other views of a changed
base, carry the change in their gradients (PyTorch's CopySlices and regenerated view histories).

Each case runs a program twice: as written (in place, through views) and rewritten out of place
(the reference); the gradients must agree. The torch-marked cases run the same programs on
PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from zgrad.errors import AutogradError


def _inputs(lib, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = lib.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    t = lib.tensor(rng.standard_normal((3, 3)), requires_grad=True)
    w = lib.tensor(rng.standard_normal((4, 3)))
    return a, t, w


# Programs of (lib, a, t, w) -> loss. Each changes something in place through a view (or a base
# with live views) and then uses the base and the views.
def slice_copy(lib, a, t, w):
    b = a * 2
    b[1:].copy_(t * 3)
    return (b * w).sum()


def slice_mul_then_base(lib, a, t, w):
    b = a * 2
    b[1:].mul_(t)
    return (b * w).sum()


def view_of_view(lib, a, t, w):
    b = a * 1.5
    b[1:][::2].add_(t[:2])
    return (b * w).sum() + b[2].sum()


def transposed_select(lib, a, t, w):
    b = a * 1.5 + 0.2
    b.t()[1].mul_(t[0].sum())
    return (b * w).sum()


def flat_view_window(lib, a, t, w):
    b = a * 1
    b.view(-1)[2:5].mul_(t[1])
    return (b ** 2 * w).sum()


def narrow_relu(lib, a, t, w):
    b = a - 0.1
    b.narrow(1, 1, 2).relu_()
    return (b * w).sum()


def diagonal_add(lib, a, t, w):
    b = a[:3] * 1
    b.diagonal().add_(t[2])
    return (b * w[:3]).sum()


def base_changed_view_used(lib, a, t, w):
    b = a * 2
    v = b[1:]
    b.mul_(5)
    return (v * w[1:]).sum()


def view_changed_other_view_used(lib, a, t, w):
    b = a * 2
    u = b[:3]
    v = b[2:]
    v.mul_(t[0])
    return (u * w[:3]).sum() + (v * w[2:]).sum()


def view_changed_twice(lib, a, t, w):
    b = a + 1
    v = b[:, 0]
    v.mul_(t[:, 0].sum())
    v.add_(a[:, 1])
    return (b * w).sum() + v.sum()


def buffer_filled_through_views(lib, a, t, w):
    buf = lib.zeros(4, 3, dtype=lib.float64)
    buf[:, 1].copy_(a[:, 0] * 2)
    buf.narrow(0, 1, 3)[:, 2].copy_(t[:, 1])
    return (buf * w).sum()


def setitem_on_view(lib, a, t, w):
    b = a.sin()
    v = b[1:]
    v[0] = t[1]
    return (b * w).sum() + (v ** 2).sum()


def view_backward_after_base_change(lib, a, t, w):
    b = a * 3
    v = b[1:].reshape(-1)
    b[0].mul_(2)
    b.add_(1)
    return (v * w[1:].reshape(-1)).sum()


def expanded_view_then_base_changed(lib, a, t, w):
    b = a[:, :1] * 1
    e = b.expand(4, 3)
    b[0].mul_(2)
    b.mul_(t[0, 0])
    return (e * w).sum()


def changed_view_as_the_other_operand(lib, a, t, w):
    buf = lib.zeros(5, dtype=lib.float64)
    window = buf[2:4]
    buf[3].add_(t[0, 0])
    d = lib.zeros(2, dtype=lib.float64)
    d.add_(window)
    return (d * w[0, :2]).sum() + a.sum()


def base_detached_in_place(lib, a, t, w):
    b = a * 2
    v = b[1]
    b.detach_()
    return (v * w[1]).sum() + (a * t[0, 0]).sum()


def scaled_column_written_over_another(lib, a, t, w):
    b = a * 1
    b[:, 0] = b[:, 1] * 3
    return (b * w).sum()


PROGRAMS = [slice_copy, slice_mul_then_base, view_of_view, transposed_select, flat_view_window, narrow_relu,
            diagonal_add, base_changed_view_used, view_changed_other_view_used, view_changed_twice,
            buffer_filled_through_views, setitem_on_view, view_backward_after_base_change,
            expanded_view_then_base_changed, changed_view_as_the_other_operand, base_detached_in_place,
            scaled_column_written_over_another]


def _out_of_place(program):
    """The reference: the same program on tensors whose views are copies joined back by hand."""
    return REFERENCES[program.__name__]


def _ref_slice_copy(a, t, w):
    b = zgrad.cat([a[:1] * 2, (t * 3)])
    return (b * w).sum()


def _ref_slice_mul_then_base(a, t, w):
    b = a * 2
    b = zgrad.cat([b[:1], b[1:] * t])
    return (b * w).sum()


def _ref_view_of_view(a, t, w):
    b = a * 1.5
    b = zgrad.stack([b[0], b[1] + t[0], b[2], b[3] + t[1]])
    return (b * w).sum() + b[2].sum()


def _ref_transposed_select(a, t, w):
    b = a * 1.5 + 0.2
    b = zgrad.stack([b[:, 0], b[:, 1] * t[0].sum(), b[:, 2]], dim=1)
    return (b * w).sum()


def _ref_flat_view_window(a, t, w):
    flat = (a * 1).reshape(-1)
    flat = zgrad.cat([flat[:2], flat[2:5] * t[1], flat[5:]])
    return (flat.reshape(4, 3) ** 2 * w).sum()


def _ref_narrow_relu(a, t, w):
    b = a - 0.1
    b = zgrad.cat([b[:, :1], b[:, 1:].relu()], dim=1)
    return (b * w).sum()


def _ref_diagonal_add(a, t, w):
    b = a[:3] * 1
    return (b * w[:3]).sum() + (t[2] * w[:3].diagonal()).sum()


def _ref_base_changed_view_used(a, t, w):
    return ((a * 2 * 5)[1:] * w[1:]).sum()


def _ref_view_changed_other_view_used(a, t, w):
    b = a * 2
    b = zgrad.cat([b[:2], b[2:] * t[0]])
    return (b[:3] * w[:3]).sum() + (b[2:] * w[2:]).sum()


def _ref_view_changed_twice(a, t, w):
    b = a + 1
    column = b[:, 0] * t[:, 0].sum() + a[:, 1]
    b = zgrad.cat([column[:, None], b[:, 1:]], dim=1)
    return (b * w).sum() + column.sum()


def _ref_buffer_filled_through_views(a, t, w):
    zero = zgrad.zeros(4, dtype=zgrad.float64)
    column2 = zgrad.cat([zero[:1], t[:, 1]])
    buf = zgrad.stack([zero, a[:, 0] * 2, column2], dim=1)
    return (buf * w).sum()


def _ref_setitem_on_view(a, t, w):
    b = a.sin()
    b = zgrad.cat([b[:1], t[1:2], b[2:]])
    return (b * w).sum() + (b[1:] ** 2).sum()


def _ref_view_backward_after_base_change(a, t, w):
    b = a * 3
    b = zgrad.cat([b[:1] * 2, b[1:]]) + 1
    return (b[1:].reshape(-1) * w[1:].reshape(-1)).sum()


def _ref_expanded_view_then_base_changed(a, t, w):
    column = a[:, :1] * 1
    column = zgrad.cat([column[:1] * 2, column[1:]]) * t[0, 0]
    return (column.expand(4, 3) * w).sum()


def _ref_changed_view_as_the_other_operand(a, t, w):
    return w[0, 1] * t[0, 0] + a.sum()


def _ref_base_detached_in_place(a, t, w):
    return ((a * 2)[1] * w[1]).sum() + (a * t[0, 0]).sum()


def _ref_scaled_column_written_over_another(a, t, w):
    b = a * 1
    b = zgrad.stack([b[:, 1] * 3, b[:, 1], b[:, 2]], dim=1)
    return (b * w).sum()


REFERENCES = {name[len("_ref_"):]: f for name, f in globals().items() if name.startswith("_ref_")}


def _grads(loss, *tensors):
    loss.backward()
    return [None if x.grad is None else x.grad.numpy().copy() for x in tensors]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_in_place_through_a_view_equals_the_out_of_place_program(program):
    a, t, w = _inputs(zgrad)
    loss = program(zgrad, a, t, w)
    got = _grads(loss, a, t)
    a2, t2, w2 = _inputs(zgrad)
    expected_loss = _out_of_place(program)(a2, t2, w2)
    expected = _grads(expected_loss, a2, t2)
    np.testing.assert_allclose(loss.item(), expected_loss.item(), rtol=1e-12)
    for g, e in zip(got, expected):
        if e is None:
            assert g is None or not g.any()
        else:
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_in_place_through_a_view_matches_torch(program):
    import torch

    a, t, w = _inputs(zgrad)
    got = _grads(program(zgrad, a, t, w), a, t)
    ta, tt, tw = _inputs(torch)
    expected = _grads(program(torch, ta, tt, tw), ta, tt)
    for g, e in zip(got, expected):
        if e is None:
            assert g is None or not g.any()
        else:
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_views_know_their_base():
    a = zgrad.randn(4, 3, requires_grad=True)
    b = a * 2
    v = b[1:].t()
    assert v._base is b and v._is_view() and b._base is None and not b._is_view()
    assert b.view(-1)._base is b and b.reshape(12)._base is b and b.unbind(0)[1]._base is b
    assert b.detach()._base is None and (b + 1)._base is None
    assert b.reshape(3, 4).t().reshape(12)._base is None  # a copy: not a view


def test_a_buffer_that_did_not_require_grad_takes_a_view_s_history():
    x = zgrad.randn(3, requires_grad=True)
    buf = zgrad.zeros(2, 3, dtype=x.dtype)
    row = buf[1]
    assert not buf.requires_grad
    row.copy_(x)
    assert buf.requires_grad and row.requires_grad and buf.grad_fn.name == "CopySlices"
    other = buf[0]
    (buf.sum() + other.sum() * 10).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3))


def test_a_view_made_without_grad_is_not_changed_or_used_stale_with_grad_as_in_torch():
    leaf = zgrad.randn(3, requires_grad=True)
    with zgrad.no_grad():
        view = leaf[1:]
    with pytest.raises(AutogradError, match="A view was created in no_grad mode and is being modified inplace"):
        view.mul_(2)
    with zgrad.no_grad():
        view.mul_(2)  # what optimizers do
    assert leaf.grad_fn is None
    b = leaf * 2
    with zgrad.no_grad():
        row = b[1:]
    b.mul_(3)
    with zgrad.no_grad():
        (row * 2).sum()  # without grad the stale view is only values
    with pytest.raises(AutogradError, match="A view was created in no_grad mode and its base .* has been modified"):
        (row * 2).sum()


def test_a_view_whose_base_took_new_memory_is_a_view_no_more():
    b = zgrad.randn(3, requires_grad=True) * 1
    v = b[1:]
    b.data = zgrad.zeros(3, dtype=b.dtype)
    v.mul_(2)
    assert not v._is_view()


def _second_order(loss, a, t):
    """The gradients of the squared first-order gradients (a double backward)."""
    first = zgrad.autograd.grad(loss, (a, t), create_graph=True, allow_unused=True)
    total = sum((g * g).sum() for g in first if g is not None and g.requires_grad)
    if not isinstance(total, zgrad.Tensor):
        return [None, None]
    return [None if g is None else g.numpy() for g in zgrad.autograd.grad(total, (a, t), allow_unused=True)]


# Not diagonal_add, setitem_on_view, scaled_column_written_over_another: diagonal and index_put have
# no double backward yet (their own, not the view nodes').
TWICE_DIFFERENTIABLE = [p for p in PROGRAMS if p not in (diagonal_add, setitem_on_view, scaled_column_written_over_another)]


@pytest.mark.parametrize("program", TWICE_DIFFERENTIABLE, ids=lambda p: p.__name__)
def test_double_backward_through_a_changed_view_equals_the_out_of_place_program(program):
    a, t, w = _inputs(zgrad, seed=1)
    got = _second_order(program(zgrad, a, t, w), a, t)
    a2, t2, w2 = _inputs(zgrad, seed=1)
    expected = _second_order(_out_of_place(program)(a2, t2, w2), a2, t2)
    for g, e in zip(got, expected):
        if e is None or g is None:
            assert (g is None or not g.any()) and (e is None or not e.any())
        else:
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_in_place_through_a_view_on_the_cuda_simulator():
    if not zgrad.cuda.is_available():
        pytest.skip("no CUDA device or simulator")
    a = zgrad.tensor([1.0, 2.0, 3.0], device="cuda", requires_grad=True)
    t = zgrad.tensor([5.0, 6.0], device="cuda", requires_grad=True)
    b = a * 2
    b[1:].mul_(t)
    (b * zgrad.tensor([1.0, 10.0, 100.0], device="cuda")).sum().backward()
    np.testing.assert_array_equal(a.grad.cpu().numpy(), [2.0, 100.0, 1200.0])
    np.testing.assert_array_equal(t.grad.cpu().numpy(), [40.0, 600.0])


def test_copying_a_leaf_of_the_same_shape_records_the_copy():
    x = zgrad.randn(3, requires_grad=True)
    b = zgrad.zeros(3, dtype=x.dtype)
    b.copy_(x)
    assert not b.is_leaf
    (b * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    assert b.grad is None


def test_filling_with_a_0_d_tensor_that_requires_grad_sends_it_the_gradient():
    value = zgrad.tensor(2.0, requires_grad=True)
    b = zgrad.zeros(3) * 1
    b.fill_(value)
    (b * 3).sum().backward()
    assert value.grad.item() == 9.0


@pytest.mark.parametrize("overwrite", ["copy_", "copy_ a number", "fill_", "zero_"])
def test_an_overwritten_history_gets_a_zero_gradient_not_none(overwrite):
    """As PyTorch's CopyBackwards and fills: the tensors upstream of the old value still receive a
    gradient (zeros), so optimizers and DDP see the same parameters used."""
    leaf = zgrad.ones(3, requires_grad=True)
    src = zgrad.full((3,), 2.0, requires_grad=True)
    b = leaf * 1
    {"copy_": lambda: b.copy_(src), "copy_ a number": lambda: b.copy_(5), "fill_": lambda: b.fill_(4.0),
     "zero_": b.zero_}[overwrite]()
    (b * 3).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [0.0, 0.0, 0.0])
    expected = {"copy_": [6.0] * 3, "copy_ a number": [15.0] * 3, "fill_": [12.0] * 3, "zero_": [0.0] * 3}
    np.testing.assert_array_equal((b * 3).detach().numpy(), expected[overwrite])
    if overwrite == "copy_":
        np.testing.assert_array_equal(src.grad.numpy(), [3.0, 3.0, 3.0])


def test_copying_a_broadcast_source_of_another_dtype_sums_its_gradient_in_its_dtype():
    src = zgrad.tensor([1.0, 2.0], dtype=zgrad.float64, requires_grad=True)
    b = zgrad.zeros(3, 2, requires_grad=True) * 1
    b.copy_(src)
    assert b.dtype == zgrad.float32
    (b * 2).sum().backward()
    assert src.grad.dtype == zgrad.float64
    np.testing.assert_array_equal(src.grad.numpy(), [6.0, 6.0])


def test_a_product_by_a_number_saves_nothing_the_input_may_change():
    a = zgrad.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    c = b * 3 + b / 4
    b.add_(1)
    c.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [3.25, 3.25])


def test_an_empty_transposed_tensor_changes_in_place():
    x = zgrad.zeros(0, 3).t()
    x.mul_(zgrad.ones(3, 1))
    assert x.shape == (3, 0)

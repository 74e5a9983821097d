"""Version counters (PyTorch's): a backward that needs a value changed in place since it was
saved fails, whether the change went through the tensor, through a view of its memory, or through
an input the op consumed; an in-place change through a view of a leaf that requires grad is
refused; changes nothing saved are free. Each case is run on torch too where it is installed, so
the two agree on which programs fail."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import torch
from zgrad.errors import AutogradError

MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace operation"
LIBS = [zgrad] + ([torch] if torch is not None else [])


def raises(lib):
    return pytest.raises(AutogradError if lib is zgrad else RuntimeError, match=MODIFIED)


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
def test_an_input_changed_after_an_op_consumed_it(lib):
    y = lib.tensor([1.0, 2.0], requires_grad=True) * 1
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    z = y * w  # saves y for w's gradient
    y.add_(1)
    with raises(lib):
        z.sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
def test_a_change_through_a_view_of_saved_memory(lib):
    x = lib.tensor([[0.5, 1.0], [2.0, 3.0]], requires_grad=True)
    y = x.exp()  # saves its output
    y[0].mul_(2)
    with raises(lib):
        y.sum().backward()
    s = x.softmax(0)  # saved along a dimension that is not the last: the output is a view
    s.mul_(2)
    with raises(lib):
        s.sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
def test_an_lstm_output_changed_in_place(lib):
    lib.manual_seed(0)
    lstm = lib.nn.LSTM(3, 4)
    out, _ = lstm(lib.randn(5, 2, 3))
    out.mul_(2)  # the output views the states the LSTM's backward keeps
    with raises(lib):
        out.sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
def test_embedding_indices_changed_before_backward(lib):
    emb = lib.nn.Embedding(5, 2)
    idx = lib.tensor([1, 2])
    out = emb(idx)
    idx.fill_(3)
    with raises(lib):
        out.sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
def test_a_view_of_a_leaf_cannot_change_in_place_unless_grad_is_off(lib):
    w = lib.nn.Parameter(lib.ones(2, 3))
    with pytest.raises(AutogradError if lib is zgrad else RuntimeError, match="a view of a leaf Variable that requires grad"):
        w[0].add_(1)
    with lib.no_grad():
        w[0].add_(1)
    assert w.detach().numpy()[0].tolist() == [2.0, 2.0, 2.0]
    d = w.detach()  # shares the memory but is no view in the graph: allowed, as in PyTorch
    d.add_(1)
    assert w.detach().numpy()[1].tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.__name__)
def test_changes_nobody_needs_are_free_and_recorded_in_place_ops_are_exact(lib):
    x0 = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = lib.tensor([0.5, 4.0, -1.0], requires_grad=True)
    x = x0 * 1  # Mul saves x0 and 1, not x
    x.mul_(y)  # in-place on a non-leaf: recorded, its original kept for y's gradient
    x.add_(2)
    x.sum().backward()
    assert np.allclose(y.grad.numpy(), x0.detach().numpy()) and np.allclose(x0.grad.numpy(), y.detach().numpy())
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = a.exp()
    b.sum().backward()
    b.add_(1)  # after its backward: nothing needs it any more
    c = a * 3
    c.sub_(1)
    c.sum().backward()
    assert np.allclose(a.grad.numpy(), np.exp([1.0, 2.0]) + 3)


def test_the_error_names_the_array_and_the_node():
    x = zgrad.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = x.tanh()
    y.mul_(2)
    with pytest.raises(AutogradError, match=r"a float32 array of shape \[3\], which TanhBackward0 saved for its backward, "
                                            r"is at version 1; expected version 0 instead"):
        y.sum().backward()


def test_a_leaf_whose_data_left_the_host_owns_no_host_memory():
    """The leaf registry is keyed by the memory a leaf had when it was marked. Once its data is
    replaced by a device array (``Module.cuda()``, ``.data =``), a lookup of that old memory (or of
    another array that took its id) finds no leaf instead of failing on the device array."""
    from zgrad.engine.versions import leaf_owning

    class DeviceData:  # what a device tensor's data looks like to the registry: no numpy ``base``
        shape = (2,)

    w = zgrad.tensor([1.0, 2.0], requires_grad=True)
    old = w._data
    assert leaf_owning(old[:1]) is w
    w._data = DeviceData()
    assert leaf_owning(old[:1]) is None

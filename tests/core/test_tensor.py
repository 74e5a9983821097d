"""The Tensor API: factories, dtypes, memory sharing, DLPack, seeding, attributes, identity, no_grad."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import zgrad
from helpers import require_torch


# --- factories ----------------------------------------------------------------------------------

def test_tensor_from_numpy_array_keeps_dtype_and_copies():
    for dtype in (np.float64, np.float32, np.int32, np.int64, np.bool_):
        array = np.ones((2, 3), dtype=dtype)
        t = zgrad.tensor(array)
        assert t.dtype == dtype and t.shape == (2, 3)
        array[0, 0] = 0
        assert t.numpy()[0, 0] == 1, "zgrad.tensor must copy its input"


def test_tensor_from_python_values():
    assert zgrad.tensor([1.0, 2.0]).dtype == zgrad.float32
    assert zgrad.tensor(3.5).dtype == np.float32 and zgrad.tensor(3.5).shape == ()
    assert zgrad.tensor([[1, 2], [3, 4]]).dtype == zgrad.int64
    assert zgrad.tensor([1, 2.5]).dtype == np.float32
    assert zgrad.tensor([1, 2], dtype=zgrad.float64).dtype == np.float64
    assert zgrad.tensor(zgrad.ones(2, dtype=np.float64)).dtype == np.float64


@pytest.mark.parametrize("factory", [zgrad.zeros, zgrad.ones, zgrad.rand, zgrad.randn, zgrad.empty])
def test_shape_factories(factory):
    assert factory(2, 3).shape == (2, 3)
    assert factory((2, 3)).shape == (2, 3)
    assert factory([4]).shape == (4,)
    assert factory().shape == ()
    t = factory(2, 3)
    assert t.dtype == zgrad.float32 and not t.requires_grad and t.is_leaf
    assert factory(3, dtype=zgrad.float64).dtype == np.float64
    r = factory(2, 2, requires_grad=True)
    assert r.requires_grad and r.is_leaf and r.grad is None and r.grad_fn is None


def test_factory_values():
    assert np.all(zgrad.zeros(3).numpy() == 0) and np.all(zgrad.ones(2, 2).numpy() == 1)
    u = zgrad.rand(1000).numpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.05
    n = zgrad.randn(4000, dtype=np.float64).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    assert np.all(zgrad.full((2, 2), 7.0).numpy() == 7)
    assert zgrad.zeros_like(zgrad.ones(2, dtype=np.float64)).dtype == np.float64
    np.testing.assert_array_equal(zgrad.arange(4).numpy(), np.arange(4))


def test_manual_seed_reproducible():
    zgrad.manual_seed(1234)
    a, b = zgrad.randn(5).numpy(), zgrad.rand(3).numpy()
    w = zgrad.nn.Linear(3, 2).weight.numpy().copy()
    zgrad.manual_seed(1234)
    np.testing.assert_array_equal(a, zgrad.randn(5).numpy())
    np.testing.assert_array_equal(b, zgrad.rand(3).numpy())
    np.testing.assert_array_equal(w, zgrad.nn.Linear(3, 2).weight.numpy())
    zgrad.manual_seed(4321)
    assert not np.array_equal(a, zgrad.randn(5).numpy())


# --- memory sharing and DLPack -----------------------------------------------------------------

def test_from_numpy_shares_memory():
    array = np.zeros(3, dtype=np.float64)
    t = zgrad.from_numpy(array)
    assert t.dtype == np.float64
    array[1] = 5
    assert t.numpy()[1] == 5
    t.numpy()[2] = 7
    assert array[2] == 7


def test_numpy_works_on_tensors_that_require_grad():
    t = zgrad.ones(2, 2, requires_grad=True)
    assert isinstance(t.numpy(), np.ndarray)
    y = t * 3
    np.testing.assert_array_equal(y.numpy(), np.full((2, 2), 3.0))
    np.testing.assert_array_equal(np.asarray(y), y.numpy())


def test_from_dlpack_of_numpy_shares_memory():
    array = np.arange(6.0).reshape(2, 3)
    t = zgrad.from_dlpack(array)
    assert t.shape == (2, 3) and t.dtype == np.float64
    array[0, 0] = 42
    assert t.numpy()[0, 0] == 42


def test_dlpack_round_trip_through_zgrad():
    t = zgrad.randn(3, 4)
    back = zgrad.from_dlpack(t)
    np.testing.assert_array_equal(back.numpy(), t.numpy())
    assert np.shares_memory(back.numpy(), t.numpy())
    assert np.shares_memory(np.from_dlpack(t), t.numpy())


@pytest.mark.torch
def test_from_dlpack_of_torch_tensor():
    torch = require_torch()
    source = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = zgrad.from_dlpack(source)
    assert t.shape == (2, 3) and t.dtype == np.float32
    source[1, 2] = 100
    assert t.numpy()[1, 2] == 100


@pytest.mark.torch
def test_torch_from_dlpack_of_zgrad_tensor():
    torch = require_torch()
    t = zgrad.tensor(np.arange(6, dtype=np.float64).reshape(3, 2), requires_grad=True)
    shared = torch.from_dlpack(t)
    assert shared.dtype == torch.float64 and tuple(shared.shape) == (3, 2)
    np.testing.assert_array_equal(shared.numpy(), t.numpy())
    shared[0, 0] = -1
    assert t.numpy()[0, 0] == -1


# --- attributes ---------------------------------------------------------------------------------

def test_attributes():
    t = zgrad.ones(2, 3, requires_grad=True)
    assert t.shape == (2, 3) and t.ndim == 2 and t.dim() == 2 and t.numel() == 6 and len(t) == 2
    assert t.size() == (2, 3) and t.size(1) == 3
    assert t.dtype == zgrad.float32
    assert t.device == "cpu" and str(t.device) == "cpu" and t.device == zgrad.device("cpu")
    assert t.requires_grad and t.is_leaf and t.grad is None and t.grad_fn is None
    y = t * 2
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    assert y.grad_fn.name == y.grad_fn.name() == "MulBackward0" and "grad_fn=<MulBackward0>" in repr(y)


def test_next_functions_point_at_input_nodes():
    a = zgrad.ones(2, requires_grad=True)
    b = zgrad.ones(2)
    c = a * b
    d = c + a
    (mul_node, mul_nr), (acc_node, acc_nr) = d.grad_fn.next_functions
    assert mul_node is c.grad_fn and mul_nr == 0
    assert type(acc_node).__name__ == "AccumulateGrad" and acc_node.variable is a
    assert c.grad_fn.next_functions[0][0] is acc_node, "one accumulator per leaf"
    assert c.grad_fn.next_functions[1] == (None, 0), "b does not require grad"


def test_item():
    assert zgrad.tensor(2.5).item() == 2.5 and isinstance(zgrad.tensor(2.5).item(), float)
    assert zgrad.tensor([[3]]).item() == 3 and isinstance(zgrad.tensor([[3]]).item(), int)
    assert zgrad.ones(1, requires_grad=True).item() == 1.0
    assert float(zgrad.tensor([1.5])) == 1.5


def test_detach_shares_memory_and_drops_history():
    x = zgrad.ones(3, requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert np.shares_memory(d.numpy(), y.numpy())
    assert not x.detach().requires_grad and np.shares_memory(x.detach().numpy(), x.numpy())


def test_requires_grad_():
    t = zgrad.zeros(2)
    assert t.requires_grad_() is t and t.requires_grad
    t.requires_grad_(False)
    assert not t.requires_grad
    t.requires_grad = True
    assert t.requires_grad
    assert not zgrad.zeros(2, dtype=zgrad.int64).requires_grad_(False).requires_grad


def test_integer_index_gives_an_array_backed_tensor():
    t = zgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    element = t[1]
    assert element.shape == () and isinstance(element.numpy(), np.ndarray)
    element.backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0, 1, 0])


def test_casts_are_differentiable():
    x = zgrad.ones(3, requires_grad=True)
    y = x.double()
    assert y.dtype == np.float64 and x.to(np.float32) is x
    (y * 2).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])


def test_comparisons_give_tensors():
    t = zgrad.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal((t > 1.5).numpy(), [False, True, True])
    np.testing.assert_array_equal((t == zgrad.tensor([1.0, 0.0, 3.0])).numpy(), [True, False, True])
    assert zgrad.tensor([[1.0, 5.0], [7.0, 0.0]]).argmax(dim=1).tolist() == [1, 0]


# --- identity hashing ---------------------------------------------------------------------------

def test_tensors_hash_by_identity():
    a = zgrad.ones(3)
    b = zgrad.ones(3)
    table = {a: "a", b: "b"}
    assert len(table) == 2 and table[a] == "a" and table[b] == "b"
    assert hash(a) != hash(b) or a is b
    assert a in {a} and b not in {a}
    scalar1, scalar2 = zgrad.tensor(1.0), zgrad.tensor(1.0)
    assert len({scalar1: 1, scalar2: 2}) == 2


# --- no_grad ------------------------------------------------------------------------------------

def test_no_grad_context():
    x = zgrad.ones(2, requires_grad=True)
    assert zgrad.is_grad_enabled()
    with zgrad.no_grad():
        assert not zgrad.is_grad_enabled()
        y = x * 2
        with zgrad.enable_grad():
            z = x * 2
    assert zgrad.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None


def test_no_grad_restores_on_exception():
    with pytest.raises(KeyError):
        with zgrad.no_grad():
            raise KeyError("boom")
    assert zgrad.is_grad_enabled()


def test_no_grad_decorator():
    @zgrad.no_grad()
    def forward(t):
        assert not zgrad.is_grad_enabled()
        return t * 2

    x = zgrad.ones(2, requires_grad=True)
    assert not forward(x).requires_grad
    assert zgrad.is_grad_enabled()
    assert forward.__name__ == "forward"


def test_set_grad_enabled_context():
    x = zgrad.ones(2, requires_grad=True)
    with zgrad.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    with zgrad.set_grad_enabled(True):
        assert (x * 2).requires_grad


def test_no_grad_is_thread_local():
    x = zgrad.ones(2, requires_grad=True)
    entered, checked = threading.Event(), threading.Event()
    seen = {}

    def other_thread():
        entered.wait(timeout=10)
        seen["enabled"] = zgrad.is_grad_enabled()
        seen["requires_grad"] = (x * 2).requires_grad
        checked.set()

    worker = threading.Thread(target=other_thread)
    worker.start()
    with zgrad.no_grad():
        entered.set()
        assert checked.wait(timeout=10)
        assert not (x * 2).requires_grad
    worker.join(timeout=10)
    assert seen == {"enabled": True, "requires_grad": True}


# --- in-place updates ---------------------------------------------------------------------------

def test_inplace_updates_under_no_grad():
    w = zgrad.ones(3, requires_grad=True)
    with zgrad.no_grad():
        w.sub_(zgrad.tensor([1.0, 2.0, 3.0])).mul_(2).add_(1)
    np.testing.assert_array_equal(w.numpy(), [1, -1, -3])
    assert w.requires_grad and w.is_leaf
    plain = zgrad.zeros(2)
    plain.fill_(3.0)
    plain.copy_(zgrad.tensor([1.0, 2.0]) + plain)
    np.testing.assert_array_equal(plain.numpy(), [4, 5])
    assert np.all(plain.zero_().numpy() == 0)


def test_grad_mode_forms_all_restore_the_previous_mode():
    x = zgrad.ones(2, requires_grad=True)

    @zgrad.no_grad
    def bare(t):
        return (t * 2).requires_grad

    @zgrad.no_grad()
    def called(t):
        return (t * 2).requires_grad

    assert bare(x) is False and called(x) is False and (x * 2).requires_grad
    zgrad.set_grad_enabled(False)
    assert not zgrad.is_grad_enabled()
    zgrad.set_grad_enabled(True)
    with zgrad.set_grad_enabled(False):
        assert not zgrad.is_grad_enabled()
        with zgrad.enable_grad():
            assert zgrad.is_grad_enabled()
        assert not zgrad.is_grad_enabled()
    assert zgrad.is_grad_enabled()


def test_deepcopy_copies_leaves_and_refuses_graph_tensors():
    import copy

    weight = zgrad.nn.Parameter(zgrad.ones(2, 3))
    weight.grad = zgrad.full((2, 3), 2.0)
    twin = copy.deepcopy(weight)
    assert type(twin) is zgrad.nn.Parameter and twin.requires_grad and twin.is_leaf
    twin.detach().add_(1)
    twin.grad.add_(1)
    np.testing.assert_array_equal(weight.detach().numpy(), np.ones((2, 3)))  # its own memory
    np.testing.assert_array_equal(weight.grad.numpy(), np.full((2, 3), 2.0))
    pair = copy.deepcopy([weight, weight])
    assert pair[0] is pair[1]  # one object copied once, as the memo asks
    with pytest.raises(RuntimeError, match=r"Only Tensors created explicitly by the user \(graph leaves\)"):
        copy.deepcopy(weight * 2)


def test_a_0_d_tensor_formats_as_its_number():
    """Training logs write f"{loss:.4f}" and "{:+.2f}".format(w) (PyTorch formats a 0-d tensor as
    its item); a tensor with elements formats only with an empty spec."""
    assert f"{zgrad.tensor(2.0):.1f}" == "2.0" and "{:+.2f}".format(zgrad.tensor(3)) == "+3.00"
    assert f"{zgrad.tensor(True)}" == "True" and f"{zgrad.ones(2)}" == str(zgrad.ones(2))
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        f"{zgrad.ones(2):.1f}"


@pytest.mark.parametrize("method", ["add_", "sub_", "addcmul_", "addcdiv_"])
def test_an_in_place_scale_given_as_a_one_element_tensor_is_read_as_its_number(method):
    p = zgrad.zeros(3)
    one = zgrad.ones(3)
    if method in ("add_", "sub_"):
        getattr(p, method)(one, alpha=zgrad.tensor(0.5))
    else:
        getattr(p, method)(one, one, value=zgrad.tensor(0.5))
    assert p.tolist() == [-0.5 if method == "sub_" else 0.5] * 3


def test_the_mps_backend_is_never_available():
    """The device-choosing idiom ``elif torch.backends.mps.is_available():`` runs."""
    assert zgrad.backends.mps.is_available() is False and zgrad.backends.mps.is_built() is False

"""The local autograd engine: reachability, accumulation, retain_graph, hooks, custom Functions,
and the GraphTask pieces the distributed engine reuses (extra roots, feed, idleness, leaf sink)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import zgrad
from zgrad.autograd import Function
from zgrad.engine import Edge, GraphTask
from zgrad.errors import AutogradError
from helpers import check, torch


class Counted(Function):
    """Identity that counts how often its backward runs."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        Counted.calls += 1
        return grad


def leaf(*values, dtype=np.float64):
    return zgrad.tensor(np.array(values, dtype=dtype), requires_grad=True)


# --- graph execution ----------------------------------------------------------------------------

def test_only_nodes_reachable_from_the_root_run():
    Counted.calls = 0
    x = leaf(1.0, 2.0)
    used = Counted.apply(x) * 2
    unused = Counted.apply(x) * 3  # shares the leaf but is not reachable from the root
    used.sum().backward()
    assert Counted.calls == 1
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2])
    assert unused.requires_grad


def test_diamond_sums_gradients():
    x = leaf(0.5, -1.0, 2.0)
    a = x * 2
    b = x.exp()
    y = (a * b + a - b).sum()
    y.backward()
    ex = np.exp(x.numpy())
    np.testing.assert_allclose(x.grad.numpy(), 2 * ex + 2 * x.numpy() * ex + 2 - ex)


def test_tensor_used_twice_in_one_op():
    x = leaf(3.0, -2.0)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6, -4])


def test_diamond_against_torch_and_finite_differences():
    check(lambda lib, x, w: ((x @ w).tanh() * (x @ w).sigmoid() + x.sum(dim=1, keepdim=True)).mean(), [(3, 4), (4, 2)])


def test_retain_graph_false_frees_saved_tensors():
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"retain_graph=True") as info:
        y.backward()
    assert isinstance(info.value, AutogradError)
    assert "backward through the graph a second time" in str(info.value)


def test_retain_graph_true_accumulates_into_leaf_grad():
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), [2, 4])
    y.backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), [4, 8])
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6, 12])


def test_grad_accumulates_across_separate_graphs():
    x = leaf(1.0, 2.0)
    (x * 3).sum().backward()
    first = x.grad
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5, 7])
    assert x.grad is first, "accumulation happens in place into the existing .grad"


def test_backward_with_gradient_for_non_scalar():
    x = leaf(1.0, 2.0, 3.0)
    y = x * x
    y.backward(gradient=zgrad.tensor([1.0, 0.5, -1.0], dtype=np.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, -6])


def test_backward_gradient_of_another_dtype_is_cast():
    x = leaf(1.0, 2.0, dtype=np.float32)
    y = x * 2
    y.backward(np.array([1.0, 1.0]))  # float64 gradient for a float32 output
    assert x.grad.dtype == np.float32


def test_non_scalar_root_without_gradient_is_an_error():
    y = leaf(1.0, 2.0) * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()


def test_intermediate_tensors_get_no_grad():
    x = leaf(1.0)
    y = x * 2
    (y * 3).backward()
    assert y.grad is None and x.grad.item() == 6


def test_backward_ignores_inputs_without_grad():
    x = leaf(1.0, 2.0)
    c = zgrad.tensor([5.0, 6.0], dtype=np.float64)
    (x * c).sum().backward()
    assert c.grad is None
    np.testing.assert_array_equal(x.grad.numpy(), [5, 6])


# --- hooks --------------------------------------------------------------------------------------

def test_leaf_hook_sees_and_replaces_gradient():
    x = leaf(1.0, 2.0)
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    np.testing.assert_array_equal(seen[0], [3, 3])
    np.testing.assert_array_equal(x.grad.numpy(), [30, 30])


def test_non_leaf_hook_replaces_gradient_flowing_on():
    x = leaf(1.0, 2.0)
    y = x * 2
    seen = []

    def hook(g):
        seen.append(g.numpy().copy())
        return g + 1

    y.register_hook(hook)
    (y * 3).sum().backward()
    np.testing.assert_array_equal(seen[0], [3, 3])
    np.testing.assert_array_equal(x.grad.numpy(), [8, 8])


def test_hook_on_root():
    x = leaf(2.0)
    y = x * x
    y.register_hook(lambda g: g * 0.5)
    y.backward()
    assert x.grad.item() == 2.0


def test_hook_handle_remove():
    x = leaf(1.0)
    handle = x.register_hook(lambda g: g * 100)
    handle.remove()
    handle.remove()  # idempotent
    (x * 2).backward()
    assert x.grad.item() == 2.0


@pytest.mark.torch
def test_hooks_match_torch():
    torch_ = pytest.importorskip("torch")
    results = []
    for lib in (zgrad, torch_):
        x = lib.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
        y = x * x
        y.register_hook(lambda g: g * 2)
        x.register_hook(lambda g: g - 1)
        (y.exp() * x).sum().backward()
        results.append(x.grad.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


# --- custom Functions ---------------------------------------------------------------------------

class ScaledProduct(Function):
    """x * y * alpha: tensors, a Python number, and needs_input_grad."""

    seen_needs = None

    @staticmethod
    def forward(ctx, x, y, alpha):
        ctx.save_for_backward(x, y)
        ctx.alpha = alpha
        return x * y * alpha

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        ScaledProduct.seen_needs = ctx.needs_input_grad
        gx = grad * y * ctx.alpha if ctx.needs_input_grad[0] else None
        gy = grad * x * ctx.alpha if ctx.needs_input_grad[1] else None
        return gx, gy, None


def test_custom_function_gradients():
    x, y = leaf(1.0, 2.0, 3.0), leaf(-1.0, 0.5, 2.0)
    out = ScaledProduct.apply(x, y, 3.0)
    assert out.requires_grad and out.grad_fn.name == "ScaledProductBackward"
    assert len(out.grad_fn.next_functions) == 2  # the tensor arguments only, as PyTorch lists them
    out.sum().backward()
    assert ScaledProduct.seen_needs == (True, True, False)
    np.testing.assert_allclose(x.grad.numpy(), 3 * y.numpy())
    np.testing.assert_allclose(y.grad.numpy(), 3 * x.numpy())


def test_custom_function_needs_input_grad_skips_constant():
    x, c = leaf(1.0, 2.0), zgrad.tensor([4.0, 5.0], dtype=np.float64)
    ScaledProduct.apply(x, c, 2.0).sum().backward()
    assert ScaledProduct.seen_needs == (True, False, False)
    np.testing.assert_allclose(x.grad.numpy(), [8, 10])


def test_custom_function_against_torch_and_finite_differences():
    def fn(lib, x, y):
        if lib is zgrad:
            return ScaledProduct.apply(x.tanh(), y, 1.5).sum(dim=0)
        return (x.tanh() * y * 1.5).sum(dim=0)

    check(fn, [(3, 2), (3, 2)])


def test_custom_function_without_grad_records_nothing():
    x = leaf(1.0)
    with zgrad.no_grad():
        out = ScaledProduct.apply(x, x, 2.0)
    assert not out.requires_grad and out.grad_fn is None


def test_custom_function_saved_tensors_freed_after_backward():
    x = leaf(1.0, 2.0)
    out = ScaledProduct.apply(x, x, 1.0).sum()
    out.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        out.backward()


class MultiOutput(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g_double, g_triple):
        return g_double * 2 + g_triple * 3


def test_custom_function_with_two_outputs():
    x = leaf(1.0, 2.0)
    double, triple = MultiOutput.apply(x)
    (double.sum() + triple.sum() * 2).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [8, 8])
    x.grad = None
    double, _ = MultiOutput.apply(x)
    double.sum().backward()  # the unused output's gradient arrives as zeros
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2])


def _returning(value_fn):
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, grad):
            return value_fn(grad)

    Bad.__name__ = "Bad"
    return Bad


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("materialize", [True, False])
def test_custom_function_non_differentiable_outputs_and_materialized_grads_as_torch(materialize):
    def run(lib):
        seen = []

        class ArgmaxAndScale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(materialize)
                index = x.argmax()
                ctx.mark_non_differentiable(index)
                return x * 2, index, x * 3

            @staticmethod
            def backward(ctx, g_double, g_index, g_triple):
                seen.append(tuple(None if g is None else g.tolist() for g in (g_double, g_index, g_triple)))
                return g_double * 2 + (0 if g_triple is None else g_triple * 3)

        x = lib.tensor([1.0, 3.0, 2.0], dtype=lib.float64, requires_grad=True)
        double, index, _ = ArgmaxAndScale.apply(x)
        assert not index.requires_grad and index.grad_fn is None
        double.sum().backward()
        return seen, x.grad.tolist()

    assert run(zgrad) == run(torch)


def test_mark_non_differentiable_follows_the_tensor_not_its_id():
    class Marked(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_non_differentiable(x * 2)  # freed at once: its id may be the output's
            return x * 3

        @staticmethod
        def backward(ctx, grad):
            return grad * 3

    x = zgrad.ones(3, requires_grad=True)
    for _ in range(20):
        assert Marked.apply(x).requires_grad


def test_custom_function_wrong_gradient_count_is_named():
    Bad = _returning(lambda g: g)
    out = Bad.apply(leaf(1.0, 2.0), leaf(3.0, 4.0))
    with pytest.raises(AutogradError, match=r"BadBackward returned an incorrect number of gradients \(expected 2, got 1\)"):
        out.sum().backward()


def test_custom_function_wrong_gradient_shape_is_named():
    Bad = _returning(lambda g: (g, zgrad.ones(2, 3, dtype=np.float64)))
    out = Bad.apply(leaf(1.0, 2.0), leaf(3.0, 4.0))
    with pytest.raises(AutogradError) as info:
        out.sum().backward()
    message = str(info.value)
    assert "BadBackward" in message and "index 1" in message
    assert "got [2, 3]" in message and "expected shape compatible with [2]" in message


def test_custom_function_gradient_of_wrong_type_is_named():
    Bad = _returning(lambda g: (g, "oops"))
    out = Bad.apply(leaf(1.0, 2.0), leaf(3.0, 4.0))
    with pytest.raises(AutogradError, match="invalid gradient at index 1 - expected a Tensor or None, got str"):
        out.sum().backward()


def test_custom_function_broadcast_gradient_is_summed_down():
    Wide = _returning(lambda g: (zgrad.ones(4, 2, dtype=np.float64), zgrad.ones(1, 2, dtype=np.float32)))
    x, y = leaf(1.0, 2.0), leaf(3.0, 4.0)
    Wide.apply(x, y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4, 4])
    np.testing.assert_array_equal(y.grad.numpy(), [1, 1])
    assert y.grad.dtype == np.float64, "a float32 gradient is cast to the input's float64"


# --- GraphTask as a reusable engine -------------------------------------------------------------

def test_graph_task_extra_root_fed_later():
    x = leaf(1.0, 2.0)
    local = x * 2  # runs from the task's own root
    remote = x * 3  # stands in for a send function whose gradient arrives over the network
    accumulator = local.grad_fn.next_functions[0][0]
    task = GraphTask()
    task.add_roots([remote.grad_fn])
    task.add_roots([remote.grad_fn])  # idempotent
    task.start([Edge(local.grad_fn, 0)], [np.ones(2)])
    assert not task.is_idle()
    task.run()
    assert task.is_idle()
    assert task.waiting_nodes() == [accumulator], "the leaf still waits for the extra root's gradient"
    assert x.grad is None
    task.feed(remote.grad_fn, [np.array([1.0, 10.0])])
    assert not task.is_idle()
    task.run()
    assert task.is_idle() and task.waiting_nodes() == []
    np.testing.assert_array_equal(x.grad.numpy(), [5, 32])


def test_graph_task_only_fed_roots():
    x = leaf(1.0, 2.0)
    square = x * x
    a, b = x * 2, square.sum()
    task = GraphTask(retain_graph=True)
    task.add_roots([a.grad_fn, b.grad_fn])
    assert task.is_idle()
    assert set(task.waiting_nodes()) == {square.grad_fn, a.grad_fn.next_functions[0][0]}
    task.feed(b.grad_fn, [np.array(1.0)])
    task.run()
    assert x.grad is None and task.waiting_nodes()
    task.feed(a.grad_fn, [np.ones(2)])
    task.run()
    np.testing.assert_array_equal(x.grad.numpy(), [4, 6])
    assert task.nodes_run == 4  # two roots, MulBackward of x*x, the accumulator


def test_graph_task_feed_validates():
    x = leaf(1.0, 2.0)
    y = x * 2
    task = GraphTask()
    with pytest.raises(AutogradError, match="is not part of this backward pass"):
        task.feed(y.grad_fn, [np.ones(2)])
    task.add_roots([y.grad_fn])
    with pytest.raises(AutogradError, match=r"expected shape compatible with \[2\]"):
        task.feed(y.grad_fn, [np.ones(3)])
    task.feed(y.grad_fn, [np.ones((4, 2), dtype=np.float32)])  # reducible and castable
    task.run()
    np.testing.assert_array_equal(x.grad.numpy(), [8, 8])
    assert x.grad.dtype == np.float64


def test_graph_task_leaf_sink_replaces_grad_and_leaf_hooks_still_run():
    x, w = leaf(1.0, 2.0), leaf(3.0)
    x.register_hook(lambda g: g * 10)
    y = (x * w).sum()
    sunk = {}

    def sink(variable, grad):
        sunk[variable] = sunk.get(variable, 0) + np.asarray(grad)

    task = GraphTask(leaf_sink=sink)
    task.start([Edge(y.grad_fn, 0)], [np.array(1.0)])
    task.run()
    assert x.grad is None and w.grad is None, "with a sink, .grad is left alone"
    np.testing.assert_array_equal(sunk[x], [30, 30])
    np.testing.assert_array_equal(sunk[w], [3])
    assert set(sunk) == {x, w}


def test_graph_task_fed_and_run_from_several_threads():
    x = leaf(1.0, 2.0)
    branches = [x * float(k) for k in range(1, 9)]  # eight extra roots, as if eight send functions
    task = GraphTask()
    task.add_roots([b.grad_fn for b in branches])
    start = threading.Barrier(4)

    def worker(mine):
        start.wait(timeout=10)
        for branch in mine:
            task.feed(branch.grad_fn, [np.ones(2)])
            task.run()

    threads = [threading.Thread(target=worker, args=(branches[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert task.is_idle() and task.waiting_nodes() == []
    np.testing.assert_array_equal(x.grad.numpy(), [36, 36])


def test_graph_task_keeps_the_error_of_a_failing_node():
    class Boom(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("boom in backward")

    y = Boom.apply(leaf(1.0)).sum()
    task = GraphTask()
    task.start([Edge(y.grad_fn, 0)], [np.array(1.0)])
    with pytest.raises(ValueError, match="boom in backward"):
        task.run()
    assert isinstance(task.error, ValueError)
    with pytest.raises(ValueError):
        task.run()


@pytest.mark.torch
def test_gradients_match_torch_on_a_reused_graph():
    if torch is None:
        pytest.skip("torch is not installed")
    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((4, 3)), rng.standard_normal((3, 3))
    grads = []
    for lib in (zgrad, torch):
        x, w = lib.tensor(xs, requires_grad=True), lib.tensor(ws, requires_grad=True)
        h = (x @ w).tanh()
        loss = (h @ w).sum() + (h * h).mean()
        loss.backward(retain_graph=True)
        loss.backward()
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for mine, ref in zip(*grads):
        np.testing.assert_allclose(mine, ref, rtol=1e-10)


def test_a_first_gradient_nothing_else_holds_becomes_grad_without_a_copy(monkeypatch):
    """As PyTorch's AccumulateGrad steals a gradient no one else references: saves a copy of every
    parameter's gradient per step (tens of MB for a conv net). A gradient still held elsewhere
    (here: two leaves receiving one array) is copied, so the two .grad never share memory."""
    copies = []  # _accumulate_grad copies a first gradient (and adds later ones)
    real_accumulate = zgrad.Tensor._accumulate_grad
    monkeypatch.setattr(zgrad.Tensor, "_accumulate_grad", lambda self, g: copies.append(1) or real_accumulate(self, g))
    w = zgrad.randn(64, 32, requires_grad=True)
    x = zgrad.randn(64, 32)
    (w * x).sum().backward()
    assert copies == [] and w.grad.numpy().flags.writeable
    np.testing.assert_allclose(w.grad.numpy(), x.numpy())
    a, b = zgrad.randn(3, requires_grad=True), zgrad.randn(3, requires_grad=True)
    (a + b).sum().backward()  # Add's backward hands the same array to both leaves
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    (w * x).sum().backward()  # a second pass accumulates into the kept array
    np.testing.assert_allclose(w.grad.numpy(), 2 * x.numpy())
    assert copies == [1, 1, 1]  # a's and b's first gradients (one array, held twice), w's second


def _count_in_place_sums(monkeypatch) -> list:
    from zgrad.kernels import dispatch
    added = []
    real = dispatch.add_inplace
    monkeypatch.setattr(dispatch, "add_inplace", lambda out, other: added.append(out.shape) or real(out, other))
    return added


def test_a_node_adds_its_second_gradient_into_the_first_in_place_when_the_pass_owns_it(monkeypatch):
    """A residual connection's two gradients meet in a node's input buffer: as PyTorch's input
    buffer does, the second is added into the first when nothing else holds or views the first."""
    added = _count_in_place_sums(monkeypatch)
    x, w = (zgrad.randn(*shape, dtype=zgrad.float64, requires_grad=True) for shape in ((4, 5), (5, 5)))
    h = x @ w
    (h.relu() + h.tanh()).sum().backward()
    assert added == [(4, 5)]
    hv = x.detach().numpy() @ w.detach().numpy()
    through_h = (hv > 0) + (1 - np.tanh(hv) ** 2)
    # atol: an element of order 1e-4 sums terms of order 1, whose last bits differ with the order of
    # summation and an ulp of tanh (random inputs: rtol alone failed once in CI at 2.2e-12)
    np.testing.assert_allclose(x.grad.numpy(), through_h @ w.detach().numpy().T, rtol=1e-12, atol=1e-13)


def test_a_gradient_someone_else_holds_is_never_added_into(monkeypatch):
    """The user's gradient reaches a node that later receives a second one: it stays the user's
    (a sum in place would change it); one array routed to both inputs of one node is not doubled
    in place either."""
    added = _count_in_place_sums(monkeypatch)
    x = zgrad.randn(6, dtype=zgrad.float64, requires_grad=True)
    u = x.exp()
    g = zgrad.full((6,), 2.0, dtype=zgrad.float64)
    (u + u.sin()).backward(g)
    np.testing.assert_array_equal(g.numpy(), np.full(6, 2.0))
    ux = np.exp(x.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * (1 + np.cos(ux)) * ux, rtol=1e-12)
    a = zgrad.randn(3, requires_grad=True)
    b = a * 2
    (b + b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(3, 4.0))
    assert added == []

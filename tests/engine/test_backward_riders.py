"""What rides on a backward pass: post-accumulate hooks, final callbacks, leaf gradients through
the running graph task (DDP's reducer needs all three), and module buffers."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from zgrad import nn
from zgrad.engine.dist.context import DistAutogradContext
from zgrad.engine.graph_task import GraphTask, current_graph_task
from zgrad.errors import AutogradError


def test_post_accumulate_hook_sees_the_accumulated_grad():
    w = zgrad.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.numpy().copy()))
    (w * 3).sum().backward()
    (w * 3).sum().backward()
    np.testing.assert_array_equal(seen[0], [3.0, 3.0])
    np.testing.assert_array_equal(seen[1], [6.0, 6.0])  # after accumulation
    handle.remove()
    (w * 3).sum().backward()
    assert len(seen) == 2


def test_post_accumulate_hook_only_on_leaves_that_require_grad():
    w = zgrad.tensor([1.0], requires_grad=True)
    with pytest.raises(AutogradError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(AutogradError, match="doesn't require gradient"):
        zgrad.tensor([1.0]).register_post_accumulate_grad_hook(lambda p: None)


def test_final_callback_runs_after_every_leaf_and_before_backward_returns():
    a = zgrad.tensor([1.0], requires_grad=True)
    b = zgrad.tensor([2.0], requires_grad=True)
    order = []

    def first_hook(p):
        order.append("hook")
        task = current_graph_task()
        if not any(o == "queued" for o in order):
            order.append("queued")
            task.queue_callback(lambda: order.append(("callback", a.grad is not None and b.grad is not None)))

    a.register_post_accumulate_grad_hook(first_hook)
    b.register_post_accumulate_grad_hook(first_hook)
    (a * b).sum().backward()
    assert order[-1] == ("callback", True)
    assert order.count("hook") == 2
    assert current_graph_task() is None


def test_a_failing_final_callback_fails_backward():
    a = zgrad.tensor([1.0], requires_grad=True)

    def boom():
        raise ValueError("reducer says no")

    a.register_post_accumulate_grad_hook(lambda p: current_graph_task().queue_callback(boom))
    with pytest.raises(ValueError, match="reducer says no"):
        (a * 2).sum().backward()


def test_leaf_gradient_goes_through_the_store_when_the_task_has_one():
    a = zgrad.tensor([1.0, 1.0], requires_grad=True)
    (a * 2).sum().backward()
    local = GraphTask()
    np.testing.assert_array_equal(local.leaf_gradient(a), [2.0, 2.0])
    local.set_leaf_gradient(a, np.array([5.0, 6.0]))
    np.testing.assert_array_equal(a.grad.numpy(), [5.0, 6.0])

    ctx = DistAutogradContext(1)
    task = GraphTask(leaf_sink=ctx.accumulate_grad, sink_keeps=True, leaf_store=ctx)
    assert task.leaf_gradient(a) is None
    ctx.accumulate_grad(a, np.array([1.0, 2.0]))
    np.testing.assert_array_equal(task.leaf_gradient(a), [1.0, 2.0])
    task.set_leaf_gradient(a, np.array([0.5, 1.0]))
    np.testing.assert_array_equal(ctx.gradients()[a], [0.5, 1.0])
    np.testing.assert_array_equal(a.grad.numpy(), [5.0, 6.0])  # .grad untouched


def test_tensor_div_inplace():
    t = zgrad.tensor([2.0, 4.0])
    assert t.div_(2) is t
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.register_buffer("running", zgrad.zeros(2))
        self.register_buffer("scratch", zgrad.ones(1), persistent=False)


def test_module_buffers():
    m = WithBuffer()
    assert [n for n, _ in m.named_buffers()] == ["running", "scratch"]
    assert list(m.state_dict()) == ["running", "fc.weight", "fc.bias"]  # PyTorch: own state first, then children
    m.running = zgrad.ones(2)  # assignment replaces the buffer
    np.testing.assert_array_equal(dict(m.named_buffers())["running"].numpy(), [1.0, 1.0])
    state = m.state_dict()
    state["running"] = zgrad.tensor([7.0, 8.0])
    m.load_state_dict(state)
    np.testing.assert_array_equal(m.running.numpy(), [7.0, 8.0])
    outer = nn.Sequential(m)
    assert [n for n, _ in outer.named_buffers()] == ["0.running", "0.scratch"]
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("fc", zgrad.zeros(1))
    with pytest.raises(TypeError, match="cannot assign 'list' object to buffer"):
        m.register_buffer("bad", [1.0])


def test_an_accumulate_grad_destination_receives_a_new_gradient_once():
    w = zgrad.tensor([1.0, 2.0], requires_grad=True)
    slot = np.full(2, -1.0)
    node = w._grad_accumulator()
    node.destination = lambda: slot
    (w * 3).sum().backward()
    assert w.grad._data is slot and node.destination is None  # no new array: straight into the slot
    np.testing.assert_array_equal(slot, [3.0, 3.0])
    node.destination = lambda: np.zeros(2)
    (w * 3).sum().backward()  # .grad exists: it accumulates as always, the destination is dropped
    assert w.grad._data is slot and node.destination is None
    np.testing.assert_array_equal(slot, [6.0, 6.0])

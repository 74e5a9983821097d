"""Hooks on backward nodes (``grad_fn.register_hook`` / ``register_prehook``), as PyTorch's."""

from __future__ import annotations

import pytest

import zgrad
from helpers import require_torch
from zgrad.errors import AutogradError


def _run(lib):
    log = []
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = lib.tensor([4.0, 5.0, 6.0], requires_grad=True)
    c = a * b
    c.grad_fn.register_prehook(lambda go: log.append(("pre", [g.tolist() for g in go])) or (go[0] * 2,))
    c.grad_fn.register_hook(lambda gi, go: log.append(("post", [g.tolist() for g in gi], [g.tolist() for g in go]))
                            or (gi[0], gi[1] * 10))
    c.sum().backward()
    return log, a.grad.tolist(), b.grad.tolist()


def test_node_hooks_see_and_replace_the_gradients():
    log, a_grad, b_grad = _run(zgrad)
    assert log == [("pre", [[1.0, 1.0, 1.0]]), ("post", [[8.0, 10.0, 12.0], [2.0, 4.0, 6.0]], [[2.0, 2.0, 2.0]])]
    assert a_grad == [8.0, 10.0, 12.0] and b_grad == [20.0, 40.0, 60.0]


@pytest.mark.torch
def test_node_hooks_match_pytorch():
    import torch

    assert _run(zgrad) == _run(torch)


def test_removed_node_hooks_do_not_run_and_recorded_passes_hand_tensors_with_graphs():
    x = zgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    handle = y.grad_fn.register_hook(lambda gi, go: (gi[0] * 0,))
    handle.remove()
    seen = []
    y.grad_fn.register_prehook(lambda go: seen.append(go[0].grad_fn is not None))
    (g,) = zgrad.autograd.grad(y.sum(), x, create_graph=True)
    assert seen == [False] and zgrad.allclose(g, x.exp())
    (gg,) = zgrad.autograd.grad(g.sum(), x)
    assert zgrad.allclose(gg, x.exp())


def test_node_hook_results_are_checked():
    a = zgrad.ones(3, requires_grad=True)
    d = a * 2  # the number's entry has no gradient
    d.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
    with pytest.raises(AutogradError, match="can't replace a None gradient with a non-None value"):
        d.sum().backward()
    e = a.exp()
    e.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
    with pytest.raises(AutogradError, match=r"has returned an incorrect number of values \(got 2, but expected 1\)"):
        e.sum().backward()
    f = a.exp()
    f.grad_fn.register_prehook(lambda go: [go[0]])  # PyTorch wants a tuple
    with pytest.raises(TypeError, match="expected tuple, but hook returned 'list'"):
        f.sum().backward()


def _replacements_run(lib):
    """Post-hooks see gradients summed to the inputs' shapes, and may not change a size or a type."""
    a, b = lib.ones(2, 3, requires_grad=True), lib.ones(3, requires_grad=True)
    seen, messages = [], []
    y = a * b
    y.grad_fn.register_hook(lambda gi, go: seen.append([tuple(g.shape) for g in gi]))
    y.sum().backward()
    for hook in (lambda gi, go: (gi[0], lib.ones(2, 3)), lambda gi, go: (gi[0], gi[1].double()),
                 lambda gi, go: (gi[0], gi[1].int())):
        y = a + b
        y.grad_fn.register_hook(hook)
        try:
            y.sum().backward()
        except RuntimeError as error:
            messages.append(str(error).replace("torch.", "zgrad."))
    y = a * 2
    y.grad_fn.register_prehook(lambda go: (lib.ones(5),))
    try:
        y.sum().backward()
    except RuntimeError as error:
        messages.append(str(error))
    return seen, messages


def test_a_hook_may_not_change_a_gradients_size_or_type():
    seen, messages = _replacements_run(zgrad)
    assert seen == [[(2, 3), (3,)]]
    assert messages == ["hook '<lambda>' has changed the size of value",
                        "hook '<lambda>' has changed the type of value (was zgrad.FloatTensor got zgrad.DoubleTensor)",
                        "hook '<lambda>' has changed the type of value (was zgrad.FloatTensor got zgrad.IntTensor)",
                        "hook '<lambda>' has changed the size of value"]


@pytest.mark.torch
def test_hook_replacements_are_checked_as_torchs():
    torch = require_torch()
    assert _replacements_run(zgrad) == _replacements_run(torch)


def test_node_hooks_see_none_where_no_gradient_arrived_and_tensor_arguments_only():
    seen = []
    x = zgrad.ones(4, requires_grad=True)
    a, _unused = x.split(2)
    a.grad_fn.register_prehook(lambda go: seen.append(("pre", [g is None for g in go])))
    a.grad_fn.register_hook(lambda gi, go: seen.append(("post", len(gi), [g is None for g in go])))
    (a * 2).sum().backward()
    assert seen == [("pre", [False, True]), ("post", 1, [False, True])]

    class Scale(zgrad.autograd.Function):
        @staticmethod
        def forward(ctx, t, factor):
            ctx.factor = factor
            return t * factor

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.factor, None

    y = Scale.apply(x, 3.0)
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 2,))  # one entry: the tensor argument's
    x.grad = None
    y.sum().backward()
    assert zgrad.equal(x.grad, zgrad.full((4,), 6.0))


def test_retained_grad_is_taken_after_every_tensor_hook():
    a = zgrad.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    b.retain_grad()
    b.register_hook(lambda g: g * 2)
    (b * 5).sum().backward()
    assert b.grad.tolist() == [10.0, 10.0] and a.grad.tolist() == [10.0, 10.0]


def _accumulator_hooks(lib):
    log = []
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    acc = (x * 1).grad_fn.next_functions[0][0]
    first = acc.register_prehook(lambda gs: log.append(("pre", [g.tolist() for g in gs])) or (gs[0] * 10,))
    acc.register_hook(lambda gi, go: log.append(("post", len(gi), [g.tolist() for g in go], x.grad.tolist())))
    x.register_post_accumulate_grad_hook(lambda t: log.append(("post_acc", t.grad.tolist())))
    (x * 3).sum().backward()
    first.remove()
    (x * 2).sum().backward()
    log.append(x.grad.tolist())
    log.append(type(acc).__name__)
    return log


@pytest.mark.torch
def test_a_leafs_accumulator_takes_node_hooks_as_torchs():
    """``AccumulateGrad.register_prehook`` (its result replaces the gradient) and ``register_hook``
    (after the accumulation and the post-accumulate hooks), in PyTorch's order."""
    torch = require_torch()
    assert _accumulator_hooks(zgrad) == _accumulator_hooks(torch)

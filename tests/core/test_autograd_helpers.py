"""Autograd helpers, as PyTorch's: ``set_grad_enabled`` (call and context), ``inference_mode``
(context and decorator) with ``is_inference_mode_enabled``, ``no_grad`` / ``enable_grad`` as
decorators, ``zgrad.autograd.grad`` (against ``torch.autograd.grad``), ``register_hook``'s handle,
``retain_grad`` / ``retains_grad`` and ``requires_grad_``.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import zgrad
from helpers import torch


def _leaf(lib, values, **kwargs):
    return lib.tensor(values, dtype=lib.float64, requires_grad=True, **kwargs)


# --- grad modes -----------------------------------------------------------------------------------

def test_set_grad_enabled_as_call_and_as_context():
    x = _leaf(zgrad, [1.0])
    try:
        zgrad.set_grad_enabled(False)
        assert not zgrad.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        zgrad.set_grad_enabled(True)
    with zgrad.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert zgrad.is_grad_enabled() and (x * 2).requires_grad


def test_inference_mode_as_context_and_decorator():
    x = _leaf(zgrad, [1.0, 2.0])
    assert not zgrad.is_inference_mode_enabled()
    with zgrad.inference_mode():
        assert zgrad.is_inference_mode_enabled() and not zgrad.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert not zgrad.is_inference_mode_enabled() and zgrad.is_grad_enabled()
    with zgrad.inference_mode(False):
        assert not zgrad.is_inference_mode_enabled() and (x * 2).requires_grad

    @zgrad.inference_mode
    def bare(t):
        return t * 2, zgrad.is_inference_mode_enabled()

    @zgrad.inference_mode()
    def called(t):
        return t * 2

    out, inside = bare(x)
    assert inside and not out.requires_grad and not called(x).requires_grad
    assert bare.__name__ == "bare" and zgrad.autograd.inference_mode is zgrad.inference_mode


def test_grad_modes_are_per_thread():
    seen = []
    with zgrad.inference_mode():
        worker = threading.Thread(target=lambda: seen.append((zgrad.is_grad_enabled(), zgrad.is_inference_mode_enabled())))
        worker.start()
        worker.join(timeout=10)
    assert seen == [(True, False)]


def test_no_grad_and_enable_grad_as_decorators():
    x = _leaf(zgrad, [1.0])

    @zgrad.no_grad
    def off(t):
        return t * 2

    @zgrad.no_grad()
    def off_called(t):
        return t * 2

    @zgrad.enable_grad()
    def on(t):
        return t * 2

    assert not off(x).requires_grad and not off_called(x).requires_grad
    with zgrad.no_grad():
        assert on(x).requires_grad


# --- autograd.grad against PyTorch ----------------------------------------------------------------

def _graph(lib):
    """Leaves a, b, c (c unused), a non-leaf h and two outputs."""
    a = _leaf(lib, [[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]])
    b = _leaf(lib, [2.0, -1.0, 0.5])
    c = _leaf(lib, [4.0])
    h = lib.tanh(a * b)
    y1 = (h * h).sum()
    y2 = (h + b).exp()
    return dict(a=a, b=b, c=c, h=h, y1=y1, y2=y2)


# name: fn(lib, graph) -> autograd.grad's result
GRAD_CASES = {
    "leaves": lambda lib, g: lib.autograd.grad(g["y1"], [g["a"], g["b"]]),
    "single_input": lambda lib, g: lib.autograd.grad(g["y1"], g["b"]),
    "non_leaf": lambda lib, g: lib.autograd.grad(g["y1"], [g["h"], g["a"]]),
    "grad_outputs": lambda lib, g: lib.autograd.grad(
        [g["y1"], g["y2"]], [g["a"], g["h"]], grad_outputs=[None, lib.ones(2, 3, dtype=lib.float64) * 0.5]),
    "tensor_grad_output": lambda lib, g: lib.autograd.grad(g["y2"], g["b"], lib.full((2, 3), 2.0, dtype=lib.float64)),
    "allow_unused": lambda lib, g: lib.autograd.grad(g["y1"], [g["a"], g["c"]], allow_unused=True),
    "materialize": lambda lib, g: lib.autograd.grad(g["y1"], [g["c"], g["b"]], materialize_grads=True),
    "retain_graph": lambda lib, g: (lib.autograd.grad(g["y1"], g["a"], retain_graph=True)
                                    + lib.autograd.grad(g["y1"], g["a"])),
    "batched": lambda lib, g: lib.autograd.grad(
        [g["y2"], g["y1"]], [g["a"], g["h"], g["c"]], is_grads_batched=True, allow_unused=True,
        grad_outputs=[lib.arange(24, dtype=lib.float64).reshape(4, 2, 3) / 7, lib.tensor([1.0, -2.0, 0.5, 3.0],
                                                                                         dtype=lib.float64)]),
    "batched_materialized": lambda lib, g: lib.autograd.grad(
        g["y1"], [g["b"], g["c"]], lib.tensor([2.0, 3.0], dtype=lib.float64), is_grads_batched=True,
        materialize_grads=True),
    "batched_create_graph": lambda lib, g: lib.autograd.grad(
        lib.autograd.grad(g["y2"], g["b"], lib.ones(3, 2, 3, dtype=lib.float64) * lib.tensor([1.0, 2.0, 3.0],
                          dtype=lib.float64).reshape(3, 1, 1), is_grads_batched=True, create_graph=True)[0].sum(),
        g["a"]),
}


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_autograd_grad_matches_pytorch(name):
    ours_graph, their_graph = _graph(zgrad), _graph(torch)
    ours, theirs = GRAD_CASES[name](zgrad, ours_graph), GRAD_CASES[name](torch, their_graph)
    assert isinstance(ours, tuple) and len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert (o is None) == (t is None)
        if o is not None:
            assert o.shape == tuple(t.shape) and str(o.dtype) == "float64"
            np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-14)
    for leaf in "abc":  # grad() returns gradients; it leaves .grad alone
        assert ours_graph[leaf].grad is None and their_graph[leaf].grad is None


# name: fn(lib, graph) that PyTorch refuses
GRAD_ERRORS = {
    "unused": lambda lib, g: lib.autograd.grad(g["y1"], [g["a"], g["c"]]),
    "input_without_grad": lambda lib, g: lib.autograd.grad(g["y1"], [lib.ones(2)]),
    "output_without_grad": lambda lib, g: lib.autograd.grad(lib.ones(2).sum(), [g["a"]]),
    "non_scalar_output": lambda lib, g: lib.autograd.grad(g["y2"], [g["a"]]),
    "grad_output_shape": lambda lib, g: lib.autograd.grad(g["y2"], [g["a"]], lib.ones(3, dtype=lib.float64)),
    "freed_graph": lambda lib, g: (lib.autograd.grad(g["y1"], g["a"]), lib.autograd.grad(g["y1"], g["a"])),
    "materialize_without_unused": lambda lib, g: lib.autograd.grad(g["y1"], g["a"], allow_unused=False,
                                                                   materialize_grads=True),
    "batched_shape": lambda lib, g: lib.autograd.grad(g["y2"], g["a"], lib.ones(2, 3, dtype=lib.float64),
                                                      is_grads_batched=True),
    "batched_without_grad_output": lambda lib, g: lib.autograd.grad(g["y1"], g["a"], is_grads_batched=True),
}


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", sorted(GRAD_ERRORS))
def test_autograd_grad_errors_match_pytorch(name):
    with pytest.raises(Exception) as theirs:
        GRAD_ERRORS[name](torch, _graph(torch))
    with pytest.raises(theirs.type):
        GRAD_ERRORS[name](zgrad, _graph(zgrad))


# name: fn(lib, graph) running autograd.backward; the leaves' and h's .grad are compared after it
BACKWARD_CASES = {
    "all_leaves": lambda lib, g: lib.autograd.backward(g["y1"]),
    "two_tensors": lambda lib, g: lib.autograd.backward([g["y1"], g["y2"]],
                                                        [None, lib.full((2, 3), 0.5, dtype=lib.float64)]),
    "inputs_leaf": lambda lib, g: lib.autograd.backward(g["y1"], inputs=[g["b"]]),
    "inputs_non_leaf": lambda lib, g: lib.autograd.backward(g["y1"], inputs=[g["h"], g["a"]]),
    "twice": lambda lib, g: (lib.autograd.backward(g["y1"], retain_graph=True), lib.autograd.backward(g["y1"])),
}


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", sorted(BACKWARD_CASES))
def test_autograd_backward_matches_pytorch(name):
    ours, theirs = _graph(zgrad), _graph(torch)
    BACKWARD_CASES[name](zgrad, ours)
    BACKWARD_CASES[name](torch, theirs)
    for key in "abch" if name == "inputs_non_leaf" else "abc":  # (torch warns when a non-leaf's .grad is read)
        o, t = ours[key].grad, theirs[key].grad
        assert (o is None) == (t is None), key
        if o is not None:
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12, atol=1e-14)


def test_autograd_backward_errors():
    g = _graph(zgrad)
    with pytest.raises(ValueError, match="'inputs' argument to backward\\(\\) cannot be empty"):
        zgrad.autograd.backward(g["y1"], inputs=[])
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        zgrad.autograd.backward(zgrad.ones(1))


def test_autograd_grad_messages():
    g = _graph(zgrad)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph. Set allow_unused=True"):
        zgrad.autograd.grad(g["y1"], [g["c"]], retain_graph=True)
    with pytest.raises(RuntimeError, match=r"mismatch was detected: grad_output\[0\] has a shape of "
                                           r"zgrad.Size\(\[2\]\)"):
        zgrad.autograd.grad(g["y1"], [g["a"]], grad_outputs=[zgrad.ones(2, 2)], is_grads_batched=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        zgrad.autograd.grad(g["y2"], [g["a"]])


def test_autograd_grad_sees_tensor_hooks_and_removes_its_own():
    a = _leaf(zgrad, [1.0, 2.0])
    h = a * 3
    h.register_hook(lambda grad: grad * 10)
    (grad_h, grad_a) = zgrad.autograd.grad((h * h).sum(), [h, a], retain_graph=True)
    np.testing.assert_allclose(grad_h.numpy(), [60.0, 120.0])  # 2h, then the hook's * 10
    np.testing.assert_allclose(grad_a.numpy(), [180.0, 360.0])
    assert len(h.grad_fn.pre_hooks[0]) == 1


def _pruned_pass(lib):
    """autograd.grad / backward(inputs=) to a non-leaf h and to leaf c, with hooks everywhere:
    which ran, and whether the graph upstream of h is still there afterwards."""
    seen = []

    class Traced(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, grad):
            seen.append("Traced.backward")
            return grad * 2

    a, b, c = _leaf(lib, [1.0, -2.0]), _leaf(lib, [0.5, 3.0]), _leaf(lib, [4.0, 0.25])
    a.register_hook(lambda g: seen.append("a"))
    m = Traced.apply(a) * b
    m.register_hook(lambda g: seen.append("m"))
    m.grad_fn.register_prehook(lambda gs: seen.append("m node"))
    h = m.tanh()
    h.register_hook(lambda g: seen.append("h"))
    h.grad_fn.register_prehook(lambda gs: seen.append("h node"))
    grads = lib.autograd.grad((h * h * c).sum(), [h, c])
    first = list(seen)
    seen.clear()
    (h * 2).sum().backward(inputs=[h], retain_graph=True)
    second = list(seen)
    seen.clear()
    (h * 2).sum().backward()  # the graph upstream of h was not freed: it was never run
    return grads, first, second, seen, a.grad, h.grad


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_grad_to_a_non_leaf_runs_nothing_beyond_it_as_pytorchs():
    ours, theirs = _pruned_pass(zgrad), _pruned_pass(torch)
    for o, t in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-12)
    assert ours[1:4] == theirs[1:4]
    assert ours[1] == ["h"] and "Traced.backward" in ours[3]
    np.testing.assert_allclose(ours[4].numpy(), theirs[4].numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours[5].numpy(), theirs[5].numpy(), rtol=1e-12)


def _inputs_given_twice_and_leaf_hooks(lib):
    seen = []
    w = _leaf(lib, [1.0, 2.0])
    w.register_post_accumulate_grad_hook(lambda t: seen.append("post accumulate"))
    w.register_hook(lambda g: seen.append("tensor hook"))
    a, b = lib.autograd.grad((w * w).sum(), [w, w])
    h = w * 2
    c, d = lib.autograd.grad((h * h).sum(), [h, h])
    (w * w).sum().backward(inputs=[w, w])
    return [a.tolist(), a is b, c.tolist(), c is d, w.grad.tolist(), seen]


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_an_input_given_twice_and_a_leafs_hooks_under_grad_as_pytorchs():
    """grad() returns the same tensor for an input given twice, runs a leaf's tensor hooks but
    not its post-accumulate hooks (nothing is accumulated); backward(inputs=) accumulates once."""
    assert _inputs_given_twice_and_leaf_hooks(zgrad) == _inputs_given_twice_and_leaf_hooks(torch)


# --- hooks, retain_grad, requires_grad_ -----------------------------------------------------------

@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_hooks_and_retain_grad_match_pytorch():
    def run(lib):
        a = _leaf(lib, [1.0, -2.0, 3.0])
        h = a * a
        assert not h.retains_grad
        h.retain_grad()
        h.retain_grad()  # twice: still one hook
        a.retain_grad()  # a leaf: nothing to do
        seen = []
        handle = h.register_hook(lambda grad: seen.append(grad.numpy().copy()))
        y = (h * 2).sum()
        y.backward(retain_graph=True)
        handle.remove()
        y.backward()  # accumulates into the retained gradient; the removed hook stays silent
        return h.retains_grad, a.retains_grad, h.grad.numpy(), a.grad.numpy(), len(seen)

    ours, theirs = run(zgrad), run(torch)
    assert ours[:2] == theirs[:2] and ours[4] == theirs[4] == 1
    for o, t in zip(ours[2:4], theirs[2:4]):
        np.testing.assert_allclose(o, t)


def test_retain_grad_and_requires_grad_errors():
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        zgrad.ones(2).retain_grad()
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        zgrad.ones(2, dtype=zgrad.int64).requires_grad_()
    x = zgrad.ones(2)
    assert x.requires_grad_() is x and x.requires_grad
    assert not x.requires_grad_(False).requires_grad
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        (_leaf(zgrad, [1.0]) * 2).requires_grad_(False)

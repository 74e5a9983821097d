"""zgrad.utils.checkpoint: both variants give the gradients of the plain run (dropout included),
run the function once more in backward, keep no activations, and refuse what PyTorch refuses."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest

import zgrad
from zgrad import nn
from zgrad.errors import AutogradError
from zgrad.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential

VARIANTS = [pytest.param(True, id="reentrant"), pytest.param(False, id="non_reentrant")]


def model(seed: int = 0) -> nn.Module:
    zgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.3), nn.Linear(8, 3), nn.Dropout(0.2)).double()


def gradients(m: nn.Module, x: zgrad.Tensor, run) -> tuple:
    """The output, the input's gradient and the parameters' after ``run(m, x)`` from seed 7."""
    m.zero_grad()
    x = x.detach().requires_grad_()
    zgrad.manual_seed(7)
    out = run(m, x)
    (out ** 2).sum().backward()
    after = zgrad.rand(1)  # the random stream after forward and backward
    return out.detach(), x.grad, [p.grad.clone() for p in m.parameters()], after


@pytest.mark.parametrize("reentrant", VARIANTS)
def test_gradients_and_random_stream_equal_the_plain_run(reentrant):
    m, x = model(), zgrad.randn(5, 4, dtype=zgrad.float64)
    plain = gradients(m, x, lambda m, x: m(x))
    checked = gradients(m, x, lambda m, x: checkpoint(m, x, use_reentrant=reentrant))
    assert zgrad.equal(plain[0], checked[0]) and zgrad.equal(plain[1], checked[1])
    assert all(zgrad.equal(a, b) for a, b in zip(plain[2], checked[2]))
    assert zgrad.equal(plain[3], checked[3])


@pytest.mark.parametrize("reentrant", VARIANTS)
def test_the_function_runs_again_in_backward_and_keeps_nothing(reentrant):
    calls, inner = [], []

    def f(x):
        calls.append(zgrad.is_grad_enabled())
        hidden = x.exp()
        inner.append(weakref.ref(hidden))
        return hidden.sin()

    x = zgrad.randn(6, dtype=zgrad.float64, requires_grad=True)
    y = checkpoint(f, x, use_reentrant=reentrant)
    gc.collect()
    assert inner[0]() is None  # the first run's activation is gone
    assert len(calls) == 1
    y.sum().backward()
    assert calls == [not reentrant, True]
    np.testing.assert_allclose(x.grad.numpy(), (x.exp().cos() * x.exp()).detach().numpy(), rtol=1e-12)


def test_non_reentrant_gives_parameter_gradients_to_autograd_grad_and_leaves_grad_alone():
    m = model()
    m.eval()
    x = zgrad.randn(3, 4, dtype=zgrad.float64)  # the input needs no gradient: the parameters still get theirs
    out = checkpoint(m, x, use_reentrant=False)
    found = zgrad.autograd.grad(out.sum(), list(m.parameters()))
    expected = zgrad.autograd.grad(m(x).sum(), list(m.parameters()))
    assert all(zgrad.allclose(a, b) for a, b in zip(found, expected))
    assert all(p.grad is None for p in m.parameters())


def test_reentrant_refuses_autograd_grad_and_an_input_free_call():
    m = model()
    x = zgrad.randn(3, 4, dtype=zgrad.float64, requires_grad=True)
    out = checkpoint(m, x, use_reentrant=True)
    with pytest.raises(AutogradError, match=r"checkpoint is incompatible with \.grad\(\)"):
        zgrad.autograd.grad(out.sum(), [x])
    out = checkpoint(m, x, use_reentrant=True)  # the parameters are not on the graph: the pass does not run
    with pytest.raises(AutogradError, match="Tensor at index 0 appears to not have been used in the graph"):
        zgrad.autograd.grad(out.sum(), list(m.parameters()))
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        out = checkpoint(m, zgrad.randn(3, 4, dtype=zgrad.float64), use_reentrant=True)
    assert not out.requires_grad  # as PyTorch's: the parameters get nothing through this call


def test_arguments_pytorch_refuses():
    f = zgrad.sin
    x = zgrad.randn(2, requires_grad=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(f, x, use_reentrant=True, scale=2)
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        checkpoint(f, x, use_reentrant=True, debug=True)
    with pytest.raises(ValueError, match="determinism_check should be one of"):
        checkpoint(f, x, use_reentrant=False, determinism_check="strict")
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly") as caught:
        checkpoint(f, x)
    assert caught[0].filename == __file__


def test_keyword_arguments_nested_and_non_tensor_outputs():
    def f(pair, *, scale, label):
        a, b = pair
        return {"sum": (a * scale + b).tanh(), "label": label, "parts": [a.exp(), zgrad.arange(3)]}

    a = zgrad.randn(3, dtype=zgrad.float64, requires_grad=True)
    b = zgrad.randn(3, dtype=zgrad.float64, requires_grad=True)
    out = checkpoint(f, (a, b), use_reentrant=False, scale=2.0, label="x")
    assert out["label"] == "x" and out["parts"][1].dtype == zgrad.int64 and not out["parts"][1].requires_grad
    (out["sum"].sum() + out["parts"][0].sum()).backward()
    t = (a.detach() * 2 + b.detach()).tanh()
    np.testing.assert_allclose(a.grad.numpy(), (2 * (1 - t ** 2) + a.detach().exp()).numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), (1 - t ** 2).numpy(), rtol=1e-12)


def test_a_second_run_that_differs_raises_checkpoint_error_unless_unchecked():
    runs = []

    def f(x):
        runs.append(1)
        return x[: len(runs) + 1].exp()

    x = zgrad.randn(4, requires_grad=True)
    with pytest.raises(CheckpointError, match="Recomputed values have different metadata"):
        checkpoint(f, x, use_reentrant=False).sum().backward()


def test_an_input_changed_in_place_before_backward_is_caught():
    x = zgrad.randn(4, requires_grad=True)
    h = x * 1
    y = checkpoint(zgrad.exp, h, use_reentrant=False)
    h.add_(1)
    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        y.sum().backward()


def _closing_over_a_non_leaf(lib, returns_it):
    w = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
    x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
    scale = w * 2  # made before the call, closed over by the function
    linear = lib.nn.Linear(3, 3).double()
    with lib.no_grad():
        linear.weight.copy_(lib.tensor(np.arange(9.0).reshape(3, 3) / 10 - 0.3, dtype=lib.float64))
        linear.bias.copy_(lib.tensor([0.1, -0.2, 0.3], dtype=lib.float64))

    def part(t):
        out = linear(t * scale).sin() * scale
        return (out, scale) if returns_it else out

    out = lib.utils.checkpoint.checkpoint(part, x, use_reentrant=False)
    (out[0].sum() + (out[1] * 3).sum() if returns_it else out.sum()).backward()
    return [x.grad.numpy(), w.grad.numpy(), linear.weight.grad.numpy(), linear.bias.grad.numpy()]


@pytest.mark.torch
@pytest.mark.parametrize("returns_it", [False, True])
def test_non_reentrant_differentiates_a_non_leaf_tensor_it_closes_over(returns_it):
    torch = pytest.importorskip("torch")
    for ours, theirs in zip(_closing_over_a_non_leaf(zgrad, returns_it), _closing_over_a_non_leaf(torch, returns_it)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_double_backward_through_a_non_reentrant_checkpoint():
    x = zgrad.randn(5, dtype=zgrad.float64, requires_grad=True)
    y = checkpoint(lambda t: t.sin() * 2, x * 1, use_reentrant=False)
    (g,) = zgrad.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = zgrad.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), (-2 * x.sin()).detach().numpy(), rtol=1e-12)


def test_under_no_grad_the_function_just_runs():
    with zgrad.no_grad():
        y = checkpoint(zgrad.exp, zgrad.randn(3, requires_grad=True), use_reentrant=False)
    assert y.grad_fn is None and not y.requires_grad


@pytest.mark.parametrize("reentrant", VARIANTS)
@pytest.mark.parametrize("segments", [1, 2, 3, 5])
def test_checkpoint_sequential_equals_the_plain_model(reentrant, segments):
    m = model()
    x = zgrad.randn(5, 4, dtype=zgrad.float64)
    plain = gradients(m, x, lambda m, x: m(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checked = gradients(m, x, lambda m, x: checkpoint_sequential(m, segments, x, use_reentrant=reentrant))
    assert zgrad.equal(plain[0], checked[0]) and zgrad.equal(plain[1], checked[1])
    assert all(zgrad.equal(a, b) for a, b in zip(plain[2], checked[2]))


@pytest.mark.torch
@pytest.mark.parametrize("reentrant", VARIANTS)
def test_matches_torch(reentrant):
    import torch
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2)).double()
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)).double()
    m.load_state_dict({k: zgrad.tensor(v.numpy()) for k, v in reference.state_dict().items()})
    data = np.random.default_rng(0).standard_normal((6, 4))
    tx = torch.tensor(data, requires_grad=True)
    torch_checkpoint(reference, tx, use_reentrant=reentrant).pow(2).sum().backward()
    x = zgrad.tensor(data, requires_grad=True)
    checkpoint(m, x, use_reentrant=reentrant).pow(2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    for p, q in zip(m.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("reentrant", VARIANTS)
def test_an_input_can_change_in_place_after_the_call_and_after_backward(reentrant):
    x = zgrad.randn(4, requires_grad=True)
    h = x * 1
    y = checkpoint(zgrad.exp, h, use_reentrant=reentrant)
    y.sum().backward()
    h.add_(1)  # the copies checkpoint made of h are gone: h's memory is no leaf's
    assert zgrad.allclose(x.grad, x.detach().exp())


def test_tensors_returned_in_a_dataclass_carry_the_gradient():
    import dataclasses

    @dataclasses.dataclass
    class Output:
        value: zgrad.Tensor
        note: str = "kept"

    x = zgrad.tensor([1.0, 2.0], dtype=zgrad.float64, requires_grad=True)
    out = checkpoint(lambda t: Output(t * 3), x, use_reentrant=False)
    assert out.note == "kept"
    out.value.sum().backward()
    assert zgrad.equal(x.grad, zgrad.full((2,), 3.0, dtype=zgrad.float64))


def _closures_with_hooks(T):
    out = []
    cp = T.utils.checkpoint.checkpoint
    def fresh():
        return (T.tensor([1.0, 2.0], dtype=T.float64, requires_grad=True),
                T.tensor([0.5, -1.5], dtype=T.float64, requires_grad=True))
    w, x = fresh()
    h = w * w
    cp(lambda a: a * h + a * w, x, use_reentrant=False).sum().backward()
    out.append((w.grad.tolist(), x.grad.tolist()))
    w, x = fresh()
    h = w * w
    gw, gx = T.autograd.grad(cp(lambda a: a * h + a * w, x, use_reentrant=False).sum(), [w, x])
    out.append((gw.tolist(), gx.tolist()))
    w, x = fresh()
    h = w.exp()
    h.register_hook(lambda g: g * 2)
    cp(lambda a: (a * h).sin(), x, use_reentrant=False).sum().backward()
    out.append(w.grad.tolist())
    w, x = fresh()
    h = w.exp()
    h.retain_grad()
    y = cp(lambda a: (a * h).sin(), x, use_reentrant=False)
    (y + h).sum().backward()
    out.append(h.grad.tolist())
    w, x = fresh()
    w.register_hook(lambda g: g * 3)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    cp(lambda a: (a * w).sin(), x, use_reentrant=False).sum().backward()
    out.append((w.grad.tolist(), seen))
    w, x = fresh()
    h = w.exp()
    y = cp(lambda a: (a * h).sin(), x, use_reentrant=False)
    y.sum().backward(inputs=[h])
    out.append(h.grad.tolist())
    w, x = fresh()
    h = w * 2
    y = cp(lambda a: (a * h).sin(), x, use_reentrant=False)
    (g,) = T.autograd.grad(y.sum(), x, create_graph=True)
    out.append(T.autograd.grad(g.sum(), w)[0].tolist())
    return out


@pytest.mark.torch
def test_non_reentrant_closures_with_hooks_and_shared_leaves_as_torchs():
    """A closed-over non-leaf built from a leaf the function also uses, hooks and retain_grad on
    such a tensor and on a leaf (each runs once: the recomputation's pass stops at the tensors from
    outside the call, raw), backward(inputs=) to it, and double backward through it."""
    torch = pytest.importorskip("torch")
    for ours, theirs in zip(_closures_with_hooks(zgrad), _closures_with_hooks(torch)):
        np.testing.assert_allclose(_flat(ours), _flat(theirs), rtol=1e-12)


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flat(item)]
    return [value]

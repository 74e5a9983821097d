"""Module hooks as PyTorch's: forward pre-hooks and hooks (kwargs, prepend, always_call, results
replacing arguments and outputs), full backward hooks and pre-hooks (what they see, what they
replace, when they fire), and handles."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from zgrad import nn


def test_forward_hooks_order_kwargs_and_replacements():
    calls = []
    layer = nn.Linear(3, 2)
    layer.register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 0,))
    layer.register_forward_pre_hook(lambda m, args: calls.append("first"), prepend=True)
    layer.register_forward_hook(lambda m, args, kwargs, out: calls.append(("kw", kwargs)), with_kwargs=True)
    handle = layer.register_forward_hook(lambda m, args, out: out + 1)
    out = layer(zgrad.ones(1, 3))
    assert calls == ["first", "pre", ("kw", {})]
    assert zgrad.allclose(out, layer.bias + 1)  # the input was zeroed, the output shifted
    handle.remove()
    with layer.register_forward_hook(lambda m, args, out: out * 0):
        assert zgrad.equal(layer(zgrad.ones(1, 3)), zgrad.zeros(1, 2))
    assert zgrad.allclose(layer(zgrad.zeros(1, 3)), layer.bias)


def test_a_pre_hook_with_kwargs_replaces_both_and_checks_its_result():
    class Scale(nn.Module):
        def forward(self, x, *, factor=1.0):
            return x * factor

    module = Scale()
    handle = module.register_forward_pre_hook(lambda m, args, kwargs: (args, {"factor": 3.0}), with_kwargs=True)
    assert zgrad.equal(module(zgrad.ones(2), factor=2.0), zgrad.full((2,), 3.0))
    handle.remove()
    module.register_forward_pre_hook(lambda m, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"forward pre-hook must return None or a tuple of \(new_args, new_kwargs\)"):
        module(zgrad.ones(1), factor=1.0)


def test_always_call_hooks_run_when_forward_raises():
    class Failing(nn.Module):
        def forward(self, x):
            raise ValueError("broken")

    seen = []
    module = Failing()
    module.register_forward_hook(lambda m, args, out: seen.append(("always", out)), always_call=True)
    module.register_forward_hook(lambda m, args, out: seen.append("normal"))
    with pytest.raises(ValueError, match="broken"):
        module(zgrad.ones(1))
    assert seen == [("always", None)]


@pytest.mark.torch
def test_backward_hooks_see_and_replace_what_pytorchs_do():
    import torch

    def build(lib, log):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2)).double()
        model[2].register_full_backward_hook(lambda m, gi, go: log.append(
            ("hook", [None if g is None else g.detach().numpy().copy() for g in gi], [g.detach().numpy().copy()
                                                                                        for g in go])))
        model[0].register_full_backward_hook(lambda m, gi, go: (gi[0] * 3,) if gi[0] is not None else None)
        model[2].register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))
        model.register_full_backward_pre_hook(lambda m, go: log.append(("pre", go[0].detach().numpy().copy())))
        return model

    ours, theirs = [], []
    model, reference = build(zgrad, ours), build(torch, theirs)
    model.load_state_dict({k: zgrad.tensor(v.numpy()) for k, v in reference.state_dict().items()})
    data = np.random.default_rng(1).standard_normal((5, 3))
    x, tx = zgrad.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    model(x).pow(2).sum().backward()
    reference(tx).pow(2).sum().backward()
    assert [entry[0] for entry in ours] == [entry[0] for entry in theirs] == ["pre", "hook"]
    np.testing.assert_allclose(ours[0][1], theirs[0][1], rtol=1e-12)
    for a, b in zip(ours[1][1] + ours[1][2], theirs[1][1] + theirs[1][2]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def _hooked_call(lib, case):
    """What a module's backward pre-hook and hook see for one kind of call (see the cases)."""
    seen = []

    def values(grads):
        return tuple(None if g is None else g.detach().numpy().tolist() for g in grads)

    class Probe(lib.nn.Module):
        def forward(self, a, b, c=None):
            return {"constant_argument": lambda: a * 2 + b, "unused_output": lambda: (a * 2, a * 3),
                    "constant_output": lambda: (a * 2, b * 1, a * 4), "list_output": lambda: [a * 2, a * 3],
                    "unused_argument": lambda: a * 2, "integer_output": lambda: (a * 2, a.argmax())}[case]()

    probe = Probe()
    probe.register_full_backward_pre_hook(lambda m, go: seen.append(("pre", values(go))))
    probe.register_full_backward_hook(lambda m, gi, go: seen.append(("hook", values(gi), values(go))))
    a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    b = lib.tensor([3.0, 4.0], dtype=lib.float64, requires_grad=case == "unused_argument")
    out = probe(a, b, 5)
    loss = out.sum() if isinstance(out, lib.Tensor) else out[0].sum()
    if case == "constant_output":
        loss = loss + out[2].sum()
    loss.backward()
    return seen


@pytest.mark.torch
@pytest.mark.parametrize("case", ["constant_argument", "unused_output", "constant_output", "list_output",
                                  "unused_argument", "integer_output"])
def test_backward_hook_arguments_are_pytorchs(case):
    """Zeros for a tensor argument without grad, None for an output no gradient reached or that
    does not require grad, and no hooks at all for a list output: as PyTorch's."""
    import torch
    assert _hooked_call(zgrad, case) == _hooked_call(torch, case)


def test_backward_hook_without_input_gradients_fires_at_the_output_and_warns():
    seen = []
    layer = nn.Linear(2, 2)
    layer.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go[0].shape)))
    with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are computed with respect to"):
        layer(zgrad.ones(3, 2)).sum().backward()
    assert seen == [((None,), (3, 2))]


def test_a_backward_hook_returning_the_wrong_number_of_gradients_fails():
    layer = nn.Linear(2, 2)
    layer.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="Backward hook returned an invalid number of grad_input, got 2, but "
                                           "expected 1"):
        layer(zgrad.ones(3, 2, requires_grad=True)).sum().backward()


def test_no_backward_hooks_under_no_grad_and_hooks_leave_with_their_handles():
    seen = []
    layer = nn.Linear(2, 2)
    handle = layer.register_full_backward_hook(lambda m, gi, go: seen.append(1))
    with zgrad.no_grad():
        out = layer(zgrad.ones(1, 2, requires_grad=True))
    assert out.grad_fn is None
    handle.remove()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer(zgrad.ones(1, 2, requires_grad=True)).sum().backward()
    assert seen == [] and not layer._backward_hooks


def _hook_outputs_and_double_backward(lib):
    out = []
    x = lib.tensor([0.5, -1.5], dtype=lib.float64, requires_grad=True)

    class M(lib.nn.Module):
        def forward(self, a):
            return a ** 3

    m = M()
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10,))
    g, = lib.autograd.grad(m(x).sum(), x, create_graph=True)
    out.append(lib.autograd.grad(g.sum(), x)[0].tolist())

    class N(lib.nn.Module):
        def forward(self, a):
            return (a * 2, 3, a * 3)

    n, seen = N(), []
    n.register_full_backward_hook(lambda mod, gi, go: seen.append([None if t is None else t.tolist() for t in go]))
    r = n(x)
    (r[0].sum() + r[2].sum()).backward()
    out.append(seen)
    n2 = N()
    n2.register_full_backward_pre_hook(lambda mod, go: (go[0],))
    r = n2(x)
    try:
        r[0].sum().backward()
    except RuntimeError as error:
        out.append(str(error))
    lstm, lens = lib.nn.LSTM(2, 3), []
    lstm.register_full_backward_hook(lambda mod, gi, go: lens.append(len(go)))
    o, (h, c) = lstm(lib.randn(4, 1, 2))
    o.sum().backward()
    out.append(lens)
    return out


@pytest.mark.torch
def test_backward_hooks_see_none_for_non_tensor_outputs_and_fire_once_per_pass():
    """grad_output has a slot (None) for every item of a tuple output, an LSTM's (h, c) included;
    a pre-hook's replacement is checked against that length; and a later pass that does not come
    through the module's output (double backward) does not fire its hooks again."""
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _hook_outputs_and_double_backward(zgrad) == _hook_outputs_and_double_backward(torch)


def _deprecated_hook_run(lib):
    """A one-op module and a two-op one with PyTorch's deprecated ``register_backward_hook``:
    what the hooks see and replace, the warnings, and mixing it with full hooks."""

    class Scale(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lib.nn.Parameter(lib.tensor([2.0, 3.0]))

        def forward(self, x):
            return x * self.w

    class Twice(lib.nn.Module):
        def forward(self, x):
            return {"out": (x * 2).sum(0)}

    seen = []
    scale, twice = Scale(), Twice()
    scale.register_backward_hook(lambda m, gi, go: seen.append(
        ("scale", [g.tolist() for g in gi], [g.tolist() for g in go])))
    handle = twice.register_backward_hook(lambda m, gi, go: (gi[0] * 10,))
    x = lib.tensor([[1.0, 1.0], [2.0, 2.0]], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = scale(x)
        z = twice(x)["out"]
    (y.sum() + z.sum()).backward()
    grad = x.grad.tolist()
    handle.remove()
    x.grad = None
    twice(x)["out"].sum().backward()
    errors = []
    for register in (scale.register_full_backward_hook, lib.nn.Linear(1, 1).register_backward_hook):
        try:
            register(lambda *a: None)
        except RuntimeError as e:
            errors.append(str(e))
    mixed = lib.nn.Linear(1, 1)
    mixed.register_full_backward_hook(lambda *a: None)
    try:
        mixed.register_backward_hook(lambda *a: None)
    except RuntimeError as e:
        errors.append(str(e))
    return seen, grad, x.grad.tolist(), [(w.category, str(w.message)) for w in caught], errors


@pytest.mark.torch
def test_the_deprecated_backward_hook_sees_the_last_nodes_gradients_as_torchs():
    from helpers import torch
    seen, grad, plain_grad, warned, errors = _deprecated_hook_run(zgrad)
    assert seen == [("scale", [[[2.0, 3.0], [2.0, 3.0]], [3.0, 3.0]], [[[1.0, 1.0], [1.0, 1.0]]])]
    assert grad == [[22.0, 23.0], [22.0, 23.0]] and plain_grad == [[2.0, 2.0], [2.0, 2.0]]
    assert warned == [(FutureWarning, "Using a non-full backward hook when the forward contains multiple autograd "
                       "Nodes is deprecated and will be removed in future versions. This hook will be missing some "
                       "grad_input. Please use register_full_backward_hook to get the documented behavior."),
                      (FutureWarning, "Using non-full backward hooks on a Module that does not return a single Tensor "
                       "or a tuple of Tensors is deprecated and will be removed in future versions. This hook will be "
                       "missing some of the grad_output. Please use register_full_backward_hook to get the documented "
                       "behavior.")]
    assert errors == ["Cannot use both regular backward hooks and full backward hooks on a single Module. Please use "
                      "only one of them."] * 2
    if torch is not None:
        assert (seen, grad, plain_grad, warned, errors) == _deprecated_hook_run(torch)

"""zgrad.func: the transforms and functional_call give torch.func's values (per-sample gradients,
ensembles, Jacobians, Hessians, vjp/jvp), compose, and refuse what torch.func refuses."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from zgrad import func, nn


def _mlp(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.Tanh(), lib.nn.Linear(5, 3)).double()


def _per_sample_grads(lib, model, x, y):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi, yi):
        out = lib.func.functional_call(model, p, (xi.unsqueeze(0),))
        return lib.nn.functional.cross_entropy(out, yi.unsqueeze(0))

    return lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)


def test_per_sample_gradients_equal_one_backward_per_sample():
    model = _mlp(zgrad)
    x, y = zgrad.randn(6, 4, dtype=zgrad.float64), zgrad.tensor([0, 1, 2, 0, 1, 2])
    grads = _per_sample_grads(zgrad, model, x, y)
    for i in range(6):
        model.zero_grad()
        nn.functional.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        for name, p in model.named_parameters():
            np.testing.assert_allclose(grads[name][i].numpy(), p.grad.numpy(), rtol=1e-12, atol=1e-15)
    assert all(p.grad is not None for p in model.parameters()) and grads["0.weight"].grad_fn is None


@pytest.mark.torch
def test_transforms_match_torch_func():
    import torch

    reference, model = _mlp(torch), _mlp(zgrad)
    model.load_state_dict({k: zgrad.tensor(v.detach().numpy()) for k, v in reference.state_dict().items()})
    data, target = np.random.default_rng(0).standard_normal((6, 4)), np.array([0, 1, 2, 0, 1, 2])
    ours = _per_sample_grads(zgrad, model, zgrad.tensor(data), zgrad.tensor(target))
    theirs = _per_sample_grads(torch, reference, torch.tensor(data), torch.tensor(target))
    for name in theirs:
        np.testing.assert_allclose(ours[name].numpy(), theirs[name].numpy(), rtol=1e-10, atol=1e-14)

    x = np.random.default_rng(1).standard_normal(3)

    def scalar(lib):
        return lambda t: (t.sin() * t.sum()).sum() * t[0]

    def pair(lib):
        return lambda a, b: (a * b.exp(), a.sum() * b)

    np.testing.assert_allclose(func.hessian(scalar(zgrad))(zgrad.tensor(x)).numpy(),
                               torch.func.hessian(scalar(torch))(torch.tensor(x)).numpy(), rtol=1e-12)
    ours = func.jacrev(pair(zgrad), argnums=(0, 1))(zgrad.tensor(x), zgrad.tensor(x[::-1].copy()))
    theirs = torch.func.jacrev(pair(torch), argnums=(0, 1))(torch.tensor(x), torch.tensor(x[::-1].copy()))
    for our_row, their_row in zip(ours, theirs):
        for a, b in zip(our_row, their_row):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-15)
    value, vjp_fn = func.vjp(zgrad.sin, zgrad.tensor(x))
    np.testing.assert_allclose(vjp_fn(zgrad.ones(3, dtype=zgrad.float64))[0].numpy(), np.cos(x), rtol=1e-12)
    _, tangent = func.jvp(zgrad.sin, (zgrad.tensor(x),), (zgrad.ones(3, dtype=zgrad.float64),))
    np.testing.assert_allclose(tangent.numpy(), np.cos(x), rtol=1e-12)


def test_grad_composes_with_itself_and_keeps_aux():
    x = zgrad.tensor([1.0, 2.0, -1.0], dtype=zgrad.float64)
    second = func.grad(lambda t: func.grad(lambda u: (u ** 3).sum())(t).sum())(x)
    np.testing.assert_allclose(second.numpy(), (6 * x).numpy())
    gradient, aux = func.grad(lambda t: ((t ** 2).sum(), "aux"), has_aux=True)(x)
    assert aux == "aux" and zgrad.allclose(gradient, 2 * x)
    (ga, gb), value = func.grad_and_value(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, x + 1)
    assert zgrad.allclose(ga, x + 1) and zgrad.allclose(gb, x) and float(value) == float((x * (x + 1)).sum())


def test_ensembles_through_stack_module_state_and_functional_call():
    models = [nn.Linear(3, 2) for _ in range(4)]
    params, buffers = func.stack_module_state(models)
    assert params["weight"].shape == (4, 2, 3) and params["weight"].is_leaf and params["weight"].requires_grad

    def run(p, b, x):
        return func.functional_call(models[0], (p, b), (x,))

    x = zgrad.randn(5, 3)
    out = func.vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    for i, model in enumerate(models):
        assert zgrad.allclose(out[i], model(x))
    assert models[0].weight is not params["weight"]  # the model is as it was


def test_functional_call_ties_weights_and_checks_strictly():
    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False))
    model[1].weight = model[0].weight
    replaced = func.functional_call(model, {"0.weight": zgrad.zeros(2, 2)}, zgrad.ones(1, 2))
    assert zgrad.equal(replaced, zgrad.zeros(1, 2))
    untied = func.functional_call(model, {"0.weight": zgrad.eye(2)}, (zgrad.ones(1, 2),), tie_weights=False)
    assert zgrad.allclose(untied, model[1](zgrad.ones(1, 2)))
    with pytest.raises(RuntimeError, match=r"Error\(s\) in reparametrizing for Sequential:\n\tUnexpected key\(s\): "
                                           r"'bogus'.\n\tMissing key\(s\): '0.weight', '1.weight'."):
        func.functional_call(model, {"bogus": zgrad.ones(1)}, (zgrad.ones(1, 2),), strict=True)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        func.functional_call(model, ({"0.weight": zgrad.eye(2)}, {"0.weight": zgrad.eye(2)}), (zgrad.ones(1, 2),))


def test_vmap_dims_randomness_and_errors():
    assert func.vmap(lambda t: t * 2, in_dims=1, out_dims=1)(zgrad.ones(2, 3)).shape == (2, 3)
    assert zgrad.equal(func.vmap(lambda t: t.sum())(zgrad.ones(2, 3)), zgrad.full((2,), 3.0))
    with pytest.raises(RuntimeError, match="vmap: called random operation while in randomness error mode"):
        func.vmap(lambda t: zgrad.rand(3) + t)(zgrad.ones(2, 3))
    same = func.vmap(lambda t: zgrad.rand(3) + t, randomness="same")(zgrad.zeros(2, 3))
    different = func.vmap(lambda t: zgrad.rand(3) + t, randomness="different")(zgrad.zeros(2, 3))
    assert zgrad.equal(same[0], same[1]) and not zgrad.equal(different[0], different[1])
    with pytest.raises(ValueError, match="Expected all tensors to have the same size in the mapped dimension, got "
                                         r"sizes \[2, 3\]"):
        func.vmap(lambda a, b: a + b)(zgrad.ones(2, 3), zgrad.ones(3, 3))
    with pytest.raises(ValueError, match="must only return Tensors, got type <class 'int'>"):
        func.vmap(lambda t: 3)(zgrad.ones(2, 3))
    with pytest.raises(ValueError, match="Got in_dim=2 for some input, but that input is a Tensor of dimensionality 2"):
        func.vmap(lambda t: t, in_dims=2)(zgrad.ones(2, 3))
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims"):
        func.grad(lambda t: t * 2)(zgrad.ones(2))

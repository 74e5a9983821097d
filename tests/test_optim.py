"""SGD and Adam, step by step, against torch.optim and a plain numpy implementation of the formulas."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import torch

SHAPES = [(3, 4), (5,)]
STEPS = 6

CONFIGS = [
    pytest.param("SGD", dict(lr=0.1), id="sgd"),
    pytest.param("SGD", dict(lr=0.1, momentum=0.9), id="sgd_momentum"),
    pytest.param("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3), id="sgd_dampening"),
    pytest.param("SGD", dict(lr=0.05, momentum=0.8, nesterov=True), id="sgd_nesterov"),
    pytest.param("SGD", dict(lr=0.1, weight_decay=0.05), id="sgd_weight_decay"),
    pytest.param("SGD", dict(lr=0.1, momentum=0.5, weight_decay=0.1, nesterov=True), id="sgd_all"),
    pytest.param("Adam", dict(lr=0.01), id="adam"),
    pytest.param("Adam", dict(lr=0.02, weight_decay=0.1), id="adam_weight_decay"),
    pytest.param("Adam", dict(lr=0.01, betas=(0.8, 0.99), amsgrad=True), id="adam_amsgrad"),
    pytest.param("Adam", dict(lr=0.01, eps=1e-6, weight_decay=0.05, amsgrad=True), id="adam_all"),
]
TOLERANCE = {np.float32: dict(rtol=1e-5, atol=1e-7), np.float64: dict(rtol=1e-10, atol=1e-13)}


def problem(dtype, seed=0):
    """Initial parameters and a gradient sequence whose scale varies (so AMSGrad's max matters)."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    scales = [1.0, 3.0, 0.2, 0.5, 2.0, 0.1, 1.0, 0.7][:STEPS]
    grads = [[(rng.standard_normal(s) * k).astype(dtype) for s in SHAPES] for k in scales]
    return params, grads


def run_zgrad(name, options, params, grads):
    tensors = [zgrad.tensor(p, requires_grad=True) for p in params]
    optimizer = getattr(zgrad.optim, name)(tensors, **options)
    history = []
    for step_grads in grads:
        optimizer.zero_grad()
        for t, g in zip(tensors, step_grads):
            t.grad = zgrad.tensor(g)
        optimizer.step()
        history.append([t.numpy().copy() for t in tensors])
    return history


def run_torch(name, options, params, grads):
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    optimizer = getattr(torch.optim, name)(tensors, **options)
    history = []
    for step_grads in grads:
        optimizer.zero_grad()
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g)
        optimizer.step()
        history.append([t.detach().numpy().copy() for t in tensors])
    return history


def sgd_reference(params, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    params = [p.astype(np.float64) for p in params]
    buffers = [None] * len(params)
    history = []
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            d = g.astype(np.float64) + weight_decay * params[i]
            if momentum:
                buffers[i] = d.copy() if buffers[i] is None else momentum * buffers[i] + (1 - dampening) * d
                d = d + momentum * buffers[i] if nesterov else buffers[i]
            params[i] = params[i] - lr * d
        history.append([p.copy() for p in params])
    return history


def adam_reference(params, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
    beta1, beta2 = betas
    params = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    v_max = [np.zeros_like(p) for p in params]
    history = []
    for step, step_grads in enumerate(grads, start=1):
        for i, g in enumerate(step_grads):
            g = g.astype(np.float64) + weight_decay * params[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            if amsgrad:
                v_max[i] = np.maximum(v_max[i], v[i])
            second = v_max[i] if amsgrad else v[i]
            m_hat = m[i] / (1 - beta1 ** step)
            v_hat = second / (1 - beta2 ** step)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
        history.append([p.copy() for p in params])
    return history


REFERENCES = {"SGD": sgd_reference, "Adam": adam_reference}


def assert_histories_close(mine, reference, dtype, what):
    for step, (got, expected) in enumerate(zip(mine, reference), start=1):
        for i, (p, q) in enumerate(zip(got, expected)):
            assert p.dtype == dtype
            np.testing.assert_allclose(p, q, err_msg=f"param {i} after step {step} differs from {what}",
                                       **TOLERANCE[dtype])


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name, options", CONFIGS)
def test_matches_torch_optim(name, options, dtype):
    if torch is None:
        pytest.skip("torch is not installed")
    params, grads = problem(dtype)
    assert_histories_close(run_zgrad(name, options, params, grads), run_torch(name, options, params, grads),
                           dtype, "torch.optim")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name, options", CONFIGS)
def test_matches_numpy_formulas(name, options, dtype):
    params, grads = problem(dtype)
    mine = run_zgrad(name, options, params, grads)
    reference = REFERENCES[name](params, grads, **options)
    tolerance = TOLERANCE[np.float64] if dtype == np.float64 else dict(rtol=2e-5, atol=1e-6)
    for step, (got, expected) in enumerate(zip(mine, reference), start=1):
        for p, q in zip(got, expected):
            np.testing.assert_allclose(p, q, err_msg=f"step {step}", **tolerance)


@pytest.mark.parametrize("name, options", CONFIGS)
def test_params_without_grad_are_unchanged(name, options):
    a, b = zgrad.ones(3, requires_grad=True), zgrad.ones(2, requires_grad=True)
    optimizer = getattr(zgrad.optim, name)([a, b], **options)
    for _ in range(3):
        a.grad = zgrad.ones(3)
        optimizer.step()
    assert np.all(b.numpy() == 1) and not np.all(a.numpy() == 1)
    assert b not in optimizer.state or not optimizer.state[b]


def test_zero_grad():
    a = zgrad.ones(3, requires_grad=True)
    optimizer = zgrad.optim.SGD([a], lr=0.1)
    (a * 2).sum().backward()
    optimizer.zero_grad(set_to_none=False)
    assert a.grad is not None and np.all(a.grad.numpy() == 0)
    optimizer.zero_grad()
    assert a.grad is None


def test_step_uses_backward_gradients_and_closure():
    a = zgrad.tensor([1.0, -2.0], requires_grad=True)
    optimizer = zgrad.optim.SGD([a], lr=0.25)

    def closure():
        optimizer.zero_grad()
        loss = (a * a).sum()
        loss.backward()
        return loss

    assert optimizer.step(closure).item() == 5.0
    np.testing.assert_allclose(a.numpy(), [0.5, -1.0])


def test_param_groups_have_their_own_options():
    a, b = zgrad.ones(2, requires_grad=True), zgrad.ones(2, requires_grad=True)
    optimizer = zgrad.optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    for p in (a, b):
        p.grad = zgrad.ones(2)
    optimizer.step()
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.numpy(), [0.0, 0.0])


def test_step_with_gradients_takes_explicit_gradients():
    a, b = zgrad.ones(2, requires_grad=True), zgrad.ones(2, requires_grad=True)
    optimizer = zgrad.optim.SGD([a, b], lr=0.5)
    a.grad = zgrad.full(2, 100.0)  # ignored: step_with_gradients reads its argument, not .grad
    optimizer.step_with_gradients({a: np.array([1.0, 2.0])})
    np.testing.assert_allclose(a.numpy(), [0.5, 0.0])
    assert np.all(b.numpy() == 1)
    with pytest.raises(ValueError, match=r"gradient of shape \[3\] for a parameter of shape \[2\]"):
        optimizer.step_with_gradients({b: np.ones(3)})


def test_gradient_of_another_dtype_is_cast():
    a = zgrad.ones(2, requires_grad=True)
    optimizer = zgrad.optim.Adam([a], lr=0.1)
    a.grad = zgrad.ones(2, dtype=np.float64)
    optimizer.step()
    assert a.dtype == np.float32
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9], rtol=1e-6)


INVALID = [
    (zgrad.optim.SGD, dict(lr=-0.1), "Invalid learning rate: -0.1"),
    (zgrad.optim.SGD, dict(lr=0.1, momentum=-1), "Invalid momentum value: -1"),
    (zgrad.optim.SGD, dict(lr=0.1, weight_decay=-1), "Invalid weight_decay value: -1"),
    (zgrad.optim.SGD, dict(lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    (zgrad.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov momentum requires"),
    (zgrad.optim.Adam, dict(lr=-1e-3), "Invalid learning rate: -0.001"),
    (zgrad.optim.Adam, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (zgrad.optim.Adam, dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    (zgrad.optim.Adam, dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (zgrad.optim.Adam, dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
]


@pytest.mark.parametrize("cls, options, message", INVALID)
def test_invalid_hyper_parameters(cls, options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cls([zgrad.ones(2, requires_grad=True)], **options)


def test_invalid_parameter_lists():
    with pytest.raises(ValueError, match="empty parameter list"):
        zgrad.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        zgrad.optim.SGD([zgrad.ones(2, requires_grad=True) * 2], lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors, but one of the params is ndarray"):
        zgrad.optim.SGD([np.ones(2)], lr=0.1)
    with pytest.raises(TypeError, match="params argument given to the optimizer should be an iterable of Tensors"):
        zgrad.optim.SGD(zgrad.ones(2, requires_grad=True), lr=0.1)
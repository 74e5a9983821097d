"""The first steps of NAdam, RAdam, Adamax, ASGD, Rprop and Adafactor worked out by hand from
their update rules (no torch, no reference implementation): the quantities each rule is built
from, checked on small float64 parameters."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad

P = np.array([1.0, -2.0, 0.25])
G = np.array([0.5, -1.5, 2.0])


def steps(name, grads, param=P, **options):
    """The parameter after each step of zgrad.optim.<name> over ``grads``, and the optimizer's
    state of it at the end."""
    tensor = zgrad.tensor(np.array(param, dtype=np.float64), requires_grad=True)
    optimizer = getattr(zgrad.optim, name)([tensor], **options)
    history = []
    for grad in grads:
        tensor.grad = zgrad.tensor(np.array(grad, dtype=np.float64))
        optimizer.step()
        history.append(tensor.numpy().copy())
    return history, optimizer.state[tensor]


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def nadam_mu(step, beta1=0.9, momentum_decay=4e-3):
    return beta1 * (1 - 0.5 * 0.96 ** (step * momentum_decay))


def test_nadam_first_step():
    (got,), state = steps("NAdam", [G])
    lr, eps = 2e-3, 1e-8
    mu1, mu2 = nadam_mu(1), nadam_mu(2)
    mu_product = float(np.float32(mu1))  # PyTorch's product is a float32 tensor
    # After one step m = 0.1 g and v / (1 - beta2) = g², so the denominator is |g| + eps.
    denom = np.abs(G) + eps
    want = P - lr * (1 - mu1) / (1 - mu_product) * G / denom - lr * mu2 / (1 - mu_product * mu2) * 0.1 * G / denom
    close(got, want)
    assert state["step"] == 1 and state["mu_product"] == mu_product
    close(state["exp_avg"], 0.1 * G)
    close(state["exp_avg_sq"], 0.001 * G * G)


def test_radam_steps_with_momentum_alone_until_rho_t_exceeds_5():
    history, state = steps("RAdam", [G] * 6)
    lr = 1e-3
    # A constant gradient: the bias-corrected momentum is g itself, so each of the first five
    # steps (rho_t <= 5) moves the parameter by lr * g.
    for t in range(1, 6):
        close(history[t - 1], P - t * lr * G)
    # Step 6 is rectified: sqrt(1 - beta2**6) / sqrt(v) = 1/|g| (eps aside), times r_6.
    beta2, t = 0.999, 6
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
    assert 5 < rho_t < 6
    r_t = np.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
    adaptive = np.sqrt(1 - beta2**t) / (np.sqrt((1 - beta2**t) * G * G) + 1e-8)
    close(history[5], P - 5 * lr * G - lr * G * adaptive * r_t)
    assert state["step"] == 6 and sorted(state) == ["exp_avg", "exp_avg_sq", "step"]


def test_adamax_first_steps():
    history, state = steps("Adamax", [G, -G])
    lr, eps = 2e-3, 1e-8
    # Step 1: m = 0.1 g, u = |g| + eps, and the rate lr / (1 - 0.9) undoes m's 0.1.
    close(history[0], P - lr * G / (np.abs(G) + eps))
    # Step 2: m = 0.09 g - 0.1 g = -0.01 g; u = max(0.999 (|g| + eps), |g| + eps) = |g| + eps.
    close(history[1], history[0] - lr / (1 - 0.81) * (-0.01 * G) / (np.abs(G) + eps))
    close(state["exp_inf"], np.abs(G) + eps)


def test_asgd_steps_and_its_average():
    lr, lambd, alpha = 0.05, 0.01, 0.5
    history, state = steps("ASGD", [G, 2 * G, -G], lr=lr, lambd=lambd, alpha=alpha, t0=0)
    eta = float(np.float32(lr))
    p = P * (1 - lambd * eta) - eta * G
    close(history[0], p)
    # Each step's eta is lr / (1 + lambd lr t)**alpha of the step before, kept in float32.
    etas = [float(np.float32(lr / (1 + lambd * lr * t) ** alpha)) for t in (1, 2, 3)]
    p2 = p * (1 - lambd * etas[0]) - etas[0] * 2 * G
    close(history[1], p2)
    p3 = p2 * (1 - lambd * etas[1]) + etas[1] * G
    close(history[2], p3)
    # With t0 = 0, mu = 1 / max(1, t) after step t: ax copies the parameter through step 2, then
    # step 3 averages with mu = 1/2.
    close(state["ax"], (p2 + p3) / 2)
    assert state["eta"] == etas[2] and state["mu"] == float(np.float32(1 / 3)) and isinstance(state["mu"], float)


def test_rprop_grows_shrinks_and_skips_steps_by_the_gradient_s_sign():
    history, state = steps("Rprop", [G, G, -G, G], lr=0.01)
    sign = np.sign(G)
    close(history[0], P - 0.01 * sign)               # no previous gradient: the step size stays lr
    close(history[1], history[0] - 0.012 * sign)     # same sign: times 1.2
    close(history[2], history[1])                    # sign flipped: times 0.5, and no step
    close(history[3], history[2] - 0.006 * sign)     # after a skipped step: neither grown nor shrunk
    close(state["step_size"], np.full(3, 0.006))
    close(state["prev"], G)


def test_rprop_step_sizes_are_clamped():
    history, state = steps("Rprop", [G, G, -G], lr=0.01, step_sizes=(0.008, 0.011))
    close(history[1] - history[0], -0.011 * np.sign(G))
    close(state["step_size"], np.full(3, 0.008))  # 0.011 * 0.5 raised to the minimum


def test_adafactor_first_step_of_a_vector():
    (got,), state = steps("Adafactor", [G])
    # Step 1: beta2_1 = 0, so V = g² and U = g / |g|; RMS(U) = 1 is not clipped (d = 1).
    alpha = max(1e-3, np.sqrt(np.mean(P * P))) * min(1e-2, 1.0)
    close(got, P - alpha * np.sign(G))
    close(state["variance"], G * G)


def test_adafactor_factors_a_matrix_s_second_moment():
    param = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    grad = np.outer([1.0, -2.0], [0.5, 1.5, -3.0])  # g² is rank one: its factored estimate is exact
    (got,), state = steps("Adafactor", [grad], param=param, lr=0.05, weight_decay=0.1)
    close(state["row_var"], np.mean(grad * grad, axis=1, keepdims=True))
    close(state["col_var"], np.mean(grad * grad, axis=0, keepdims=True))
    alpha = max(1e-3, np.sqrt(np.mean(param * param))) * 0.05  # RMS before the weight decay
    close(got, param * (1 - 0.05 * 0.1) - alpha * np.sign(grad))


def test_adafactor_scales_tiny_parameters_by_eps2_and_floors_v_at_eps1_squared():
    tiny = np.array([1e-5, -1e-5, 2e-5])
    grad = np.array([1.0, 1e-3, 0.0])
    (got,), _ = steps("Adafactor", [grad], param=tiny, eps=(1e-2, 1e-3))
    # V = g² floored at eps1² = 1e-4: U = (1, 0.1, 0); alpha = eps2 * rho_1, eps2 exceeding RMS(p).
    close(got, tiny - 1e-3 * 1e-2 * np.array([1.0, 0.1, 0.0]))


@pytest.mark.parametrize("d", [1.0, 2.0])
def test_adafactor_clips_updates_whose_rms_exceeds_d(d):
    weight = 2**-0.8  # 1 - beta2_t at step 2
    history, _ = steps("Adafactor", [np.zeros(3), G], d=d)
    close(history[0], P)  # a zero gradient: U = 0
    # Step 2: V = weight * g², so U = sign(g) / sqrt(weight), whose RMS 1.32 is clipped to 1 by
    # d = 1 and left alone by d = 2.
    alpha = max(1e-3, np.sqrt(np.mean(P * P))) * min(1e-2, 1 / np.sqrt(2))
    scale = 1.0 if d == 1.0 else 1 / np.sqrt(weight)
    close(history[1], P - alpha * scale * np.sign(G))


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax", "ASGD", "Rprop", "Adafactor"])
def test_converges_on_a_quadratic(name):
    """Each optimizer, with its defaults save the learning rate, brings sum((p - c)²) near 0."""
    target = np.array([1.5, -0.5, 3.0])
    lr = {"ASGD": 0.1, "Rprop": 0.01, "Adafactor": 0.5}.get(name, 0.1)
    p = zgrad.tensor(np.zeros(3), requires_grad=True)
    optimizer = getattr(zgrad.optim, name)([p], lr=lr)
    for _ in range(500):
        optimizer.zero_grad()
        loss = ((p - zgrad.tensor(target)) ** 2).sum()
        loss.backward()
        optimizer.step()
    np.testing.assert_allclose(p.numpy(), target, atol=2e-2)

"""PyTorch's single-tensor optimizer updates written with numpy, for the tests without torch.

One function per optimizer, ``name(param, grad, state, **options)``: one step on ``param`` in
place, in its dtype (hyper-parameters rounded to it), with the state in ``state`` under PyTorch's
names (created on the first step), following ``torch/optim/*.py``'s ``_single_tensor_*`` order
of operations. Options and defaults are PyTorch's. The scalars PyTorch keeps in 0-d float32
tensors (NAdam's ``mu_product``, ASGD's ``eta`` and ``mu``) are floats rounded to float32.
"""

from __future__ import annotations

import numpy as np

__all__ = ["REFERENCES", "adadelta", "adafactor", "adagrad", "adam", "adamax", "adamw", "asgd", "nadam", "radam",
           "rmsprop", "rprop", "sgd"]


def _gradient(param, grad, weight_decay, maximize):
    dt = param.dtype.type
    g = -grad if maximize else grad.copy()
    return g + dt(weight_decay) * param if weight_decay != 0 else g


def _lerp(start, end, weight):
    """ATen's lerp_ with a scalar weight, in the arrays' dtype."""
    dt = start.dtype.type
    w = dt(weight)
    return start + w * (end - start) if abs(weight) < 0.5 else end - (end - start) * (dt(1) - w)


def sgd(param, grad, state, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False):
    dt = param.dtype.type
    d_p = _gradient(param, grad, weight_decay, maximize)
    if momentum != 0:
        buf = state.get("momentum_buffer")
        if buf is None:
            state["momentum_buffer"] = buf = d_p.copy()
        else:
            buf[...] = buf * dt(momentum) + dt(1 - dampening) * d_p
        d_p = d_p + dt(momentum) * buf if nesterov else buf
    param -= dt(lr) * d_p


def _adam_moments(param, grad, state, lr, betas, weight_decay, maximize, decoupled_weight_decay):
    """The first part of Adam, NAdam and RAdam: weight decay (L2 or decoupled, on ``param``
    in place), then the moments' update; returns the gradient used."""
    dt = param.dtype.type
    beta1, beta2 = betas
    if decoupled_weight_decay and weight_decay != 0:
        param *= dt(1 - lr * weight_decay)
        g = _gradient(param, grad, 0, maximize)
    else:
        g = _gradient(param, grad, weight_decay, maximize)
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m[...] = _lerp(m, g, 1 - beta1)
    v[...] = v * dt(beta2) + dt(1 - beta2) * g * g
    return g


def adam(param, grad, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False,
         decoupled_weight_decay=False):
    dt = param.dtype.type
    beta1, beta2 = betas
    if not state:
        state.update(step=0, exp_avg=np.zeros_like(param), exp_avg_sq=np.zeros_like(param))
        if amsgrad:
            state["max_exp_avg_sq"] = np.zeros_like(param)
    state["step"] += 1
    step = state["step"]
    _adam_moments(param, grad, state, lr, betas, weight_decay, maximize, decoupled_weight_decay)
    m, v = state["exp_avg"], state["exp_avg_sq"]
    if amsgrad:
        np.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
    denom = np.sqrt(state["max_exp_avg_sq"] if amsgrad else v) / dt((1 - beta2**step) ** 0.5) + dt(eps)
    param -= dt(lr / (1 - beta1**step)) * m / denom


def adamw(param, grad, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
          maximize=False):
    adam(param, grad, state, lr, betas, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay=True)


def rmsprop(param, grad, state, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
            maximize=False):
    dt = param.dtype.type
    if not state:
        state.update(step=0, square_avg=np.zeros_like(param))
        if momentum > 0:
            state["momentum_buffer"] = np.zeros_like(param)
        if centered:
            state["grad_avg"] = np.zeros_like(param)
    state["step"] += 1
    g = _gradient(param, grad, weight_decay, maximize)
    v = state["square_avg"]
    v[...] = v * dt(alpha) + dt(1 - alpha) * g * g
    if centered:
        state["grad_avg"][...] = _lerp(state["grad_avg"], g, 1 - alpha)
        avg = np.sqrt(v - state["grad_avg"] * state["grad_avg"]) + dt(eps)
    else:
        avg = np.sqrt(v) + dt(eps)
    if momentum > 0:
        buf = state["momentum_buffer"]
        buf[...] = buf * dt(momentum) + g / avg
        param -= dt(lr) * buf
    else:
        param -= dt(lr) * g / avg


def adagrad(param, grad, state, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
            maximize=False):
    dt = param.dtype.type
    if not state:
        state.update(step=0, sum=np.full_like(param, initial_accumulator_value))
    state["step"] += 1
    g = _gradient(param, grad, weight_decay, maximize)
    state["sum"] += g * g
    clr = lr / (1 + (state["step"] - 1) * lr_decay)
    param -= dt(clr) * g / (np.sqrt(state["sum"]) + dt(eps))


def adadelta(param, grad, state, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
    dt = param.dtype.type
    if not state:
        state.update(step=0, square_avg=np.zeros_like(param), acc_delta=np.zeros_like(param))
    state["step"] += 1
    g = _gradient(param, grad, weight_decay, maximize)
    v, u = state["square_avg"], state["acc_delta"]
    v[...] = v * dt(rho) + dt(1 - rho) * g * g
    delta = np.sqrt(u + dt(eps)) / np.sqrt(v + dt(eps)) * g
    u[...] = u * dt(rho) + dt(1 - rho) * delta * delta
    param -= dt(lr) * delta


def _float32(value):
    return float(np.float32(value))


def nadam(param, grad, state, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
          decoupled_weight_decay=False, maximize=False):
    dt = param.dtype.type
    beta1, beta2 = betas
    if not state:
        state.update(step=0, mu_product=1.0, exp_avg=np.zeros_like(param), exp_avg_sq=np.zeros_like(param))
    state["step"] += 1
    step = state["step"]
    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
    state["mu_product"] = mu_product = _float32(np.float32(state["mu_product"]) * np.float32(mu))
    g = _adam_moments(param, grad, state, lr, betas, weight_decay, maximize, decoupled_weight_decay)
    m, v = state["exp_avg"], state["exp_avg_sq"]
    denom = np.sqrt(v / dt(1 - beta2**step)) + dt(eps)
    param += dt(-lr * (1.0 - mu) / (1.0 - mu_product)) * g / denom
    param += dt(-lr * mu_next / (1.0 - mu_product * mu_next)) * m / denom


def radam(param, grad, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
          maximize=False):
    dt = param.dtype.type
    beta1, beta2 = betas
    if not state:
        state.update(step=0, exp_avg=np.zeros_like(param), exp_avg_sq=np.zeros_like(param))
    state["step"] += 1
    step = state["step"]
    _adam_moments(param, grad, state, lr, betas, weight_decay, maximize, decoupled_weight_decay)
    m, v = state["exp_avg"], state["exp_avg_sq"]
    bias_correction2 = 1 - beta2**step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * beta2**step / bias_correction2
    update = m / dt(1 - beta1**step) * dt(lr)
    if rho_t > 5:
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
        update = update * (dt(1) / (np.sqrt(v) + dt(eps)) * dt(bias_correction2**0.5)) * dt(rect)
    param -= update


def adamax(param, grad, state, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False):
    dt = param.dtype.type
    beta1, beta2 = betas
    if not state:
        state.update(step=0, exp_avg=np.zeros_like(param), exp_inf=np.zeros_like(param))
    state["step"] += 1
    g = _gradient(param, grad, weight_decay, maximize)
    m, u = state["exp_avg"], state["exp_inf"]
    m[...] = _lerp(m, g, 1 - beta1)
    u[...] = np.maximum(u * dt(beta2), np.abs(g) + dt(eps))
    param -= dt(lr / (1 - beta1 ** state["step"])) * m / u


def asgd(param, grad, state, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False):
    dt = param.dtype.type
    if not state:
        state.update(step=0, eta=_float32(lr), mu=1.0, ax=np.zeros_like(param))
    state["step"] += 1
    step, eta, mu = state["step"], state["eta"], state["mu"]
    g = _gradient(param, grad, weight_decay, maximize)
    param *= dt(1 - lambd * eta)
    param -= dt(eta) * g
    ax = state["ax"]
    ax[...] = ax + (param - ax) * dt(mu) if mu != 1 else param
    state["eta"] = _float32(lr / (1 + lambd * lr * step) ** alpha)
    state["mu"] = _float32(1 / max(1, step - t0))


def rprop(param, grad, state, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    dt = param.dtype.type
    if not state:
        state.update(step=0, prev=np.zeros_like(param), step_size=np.full_like(param, lr))
    state["step"] += 1
    g = _gradient(param, grad, 0, maximize)
    product = g * state["prev"]
    factor = np.where(product > 0, dt(etas[1]), np.where(product < 0, dt(etas[0]), dt(1)))
    step_size = state["step_size"]
    step_size[...] = np.clip(step_size * factor, dt(step_sizes[0]), dt(step_sizes[1]))
    g[product < 0] = 0
    param -= np.sign(g) * step_size
    state["prev"][...] = g


def adafactor(param, grad, state, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0,
              maximize=False):
    dt = param.dtype.type
    eps1, eps2 = eps
    if eps1 is None:
        eps1 = float(np.finfo(param.dtype).eps)
    g = -grad if maximize else grad
    if not state:
        state["step"] = 0
        if g.ndim > 1:
            state.update(row_var=np.zeros((*g.shape[:-1], 1), param.dtype),
                         col_var=np.zeros((*g.shape[:-2], 1, g.shape[-1]), param.dtype))
        else:
            state["variance"] = np.zeros_like(param)
    state["step"] += 1
    step = state["step"]
    weight = step**beta2_decay
    alpha = max(eps2, float(np.sqrt(np.sum(param * param)) / param.size**0.5)) * min(lr, 1 / step**0.5)
    if weight_decay != 0:
        param *= dt(1 - lr * weight_decay)
    if g.ndim > 1:
        row_var, col_var = state["row_var"], state["col_var"]
        row_var[...] = _lerp(row_var, np.mean(g * g, axis=-1, keepdims=True), weight)
        col_var[...] = _lerp(col_var, np.mean(g * g, axis=-2, keepdims=True), weight)
        variance = row_var * col_var / np.maximum(row_var.mean(axis=-2, keepdims=True), dt(eps1))
    else:
        state["variance"][...] = _lerp(state["variance"], g * g, weight)
        variance = state["variance"]
    update = g / np.sqrt(np.maximum(variance, dt(eps1 * eps1)))
    clip = max(1.0, float(np.sqrt(np.sum(update * update))) / (update.size**0.5 * d))
    param -= dt(alpha / clip) * update


REFERENCES = {"SGD": sgd, "Adam": adam, "AdamW": adamw, "RMSprop": rmsprop, "Adagrad": adagrad, "Adadelta": adadelta,
              "NAdam": nadam, "RAdam": radam, "Adamax": adamax, "ASGD": asgd, "Rprop": rprop, "Adafactor": adafactor}

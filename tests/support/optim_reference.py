"""PyTorch's single-tensor optimizer updates written with numpy, for the tests without torch.

One function per optimizer, ``name(param, grad, state, **options)``: one step on ``param`` in
place, in its dtype (hyper-parameters rounded to it), with the state in ``state`` under PyTorch's
names (created on the first step), following ``torch/optim/*.py``'s ``_single_tensor_*`` order
of operations. Options and defaults are PyTorch's.
"""

from __future__ import annotations

import numpy as np

__all__ = ["REFERENCES", "adadelta", "adagrad", "adam", "adamw", "rmsprop", "sgd"]


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
    if decoupled_weight_decay and weight_decay != 0:
        param *= dt(1 - lr * weight_decay)
        g = _gradient(param, grad, 0, maximize)
    else:
        g = _gradient(param, grad, weight_decay, maximize)
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m[...] = _lerp(m, g, 1 - beta1)
    v[...] = v * dt(beta2) + dt(1 - beta2) * g * g
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


REFERENCES = {"SGD": sgd, "Adam": adam, "AdamW": adamw, "RMSprop": rmsprop, "Adagrad": adagrad, "Adadelta": adadelta}

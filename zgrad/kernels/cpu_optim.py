"""Fused optimizer updates: one pass over parameter, gradient and state, in place.

The update rules and their order of operations are those of PyTorch's single-tensor SGD and Adam
(``torch/optim/sgd.py``, ``torch/optim/adam.py``, and ATen's ``lerp``/``addcmul``/``addcdiv``):
hyper-parameters are rounded to the parameter's dtype and every step is computed in that dtype,
as PyTorch does for float32 and float64 tensors.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from zgrad.kernels._jit import parallel_kernel

__all__ = ["adam_step", "sgd_step"]


@parallel_kernel()
def _sgd_update(param, grad, momentum_buf, lr, momentum, dampening, weight_decay, nesterov, first_step):
    """The element loop of :func:`sgd_step`."""
    use_momentum = momentum != 0
    if grad.size != param.size or (use_momentum and momentum_buf.size != param.size):
        raise ValueError("sgd_step: grad and momentum_buf must have as many elements as param")
    to_dtype = param.dtype.type
    lr_, momentum_ = to_dtype(lr), to_dtype(momentum)
    keep, weight_decay_ = to_dtype(1 - dampening), to_dtype(weight_decay)
    for i in prange(param.size):
        d_p = grad[i]
        if weight_decay != 0:
            d_p = d_p + weight_decay_ * param[i]
        if use_momentum:
            buf = d_p if first_step else momentum_buf[i] * momentum_ + keep * d_p
            momentum_buf[i] = buf
            d_p = d_p + momentum_ * buf if nesterov else buf
        param[i] = param[i] - lr_ * d_p


def sgd_step(param: np.ndarray, grad: np.ndarray, momentum_buf: np.ndarray, lr: float, momentum: float,
             dampening: float, weight_decay: float, nesterov: bool, first_step: bool) -> None:
    """One SGD step on 1-D ``param`` in place (and on ``momentum_buf``, unless momentum == 0).

    d_p = grad + weight_decay * param; buf = d_p on the first step, else
    momentum * buf + (1 - dampening) * d_p; d_p = d_p + momentum * buf if nesterov else buf;
    param -= lr * d_p. ``grad`` is not modified; with momentum == 0 ``momentum_buf`` is not
    touched (it may be empty).

    Raises:
        ValueError: ``grad`` (or, with momentum, ``momentum_buf``) differs in size from ``param``.
    """
    # Plain Python scalars: one compiled specialisation per dtype, whatever numeric types come in.
    _sgd_update(param, grad, momentum_buf, float(lr), float(momentum), float(dampening), float(weight_decay),
                bool(nesterov), bool(first_step))


@parallel_kernel()
def _adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lerp_weight, beta2, step_size,
                 bias_correction2_sqrt, eps, weight_decay, amsgrad):
    """The element loop of :func:`adam_step` (scalars already bias-corrected, in float64)."""
    n = param.size
    if grad.size != n or exp_avg.size != n or exp_avg_sq.size != n or (amsgrad and max_exp_avg_sq.size != n):
        raise ValueError("adam_step: grad and every state array must have as many elements as param")
    to_dtype = param.dtype.type
    one = to_dtype(1)
    weight = to_dtype(lerp_weight)
    one_minus_weight = one - weight
    small_weight = abs(lerp_weight) < 0.5  # ATen's lerp switches formula at |weight| = 0.5
    beta2_, one_minus_beta2 = to_dtype(beta2), to_dtype(1 - beta2)
    step_size_, bias_correction2_sqrt_ = to_dtype(step_size), to_dtype(bias_correction2_sqrt)
    eps_, weight_decay_ = to_dtype(eps), to_dtype(weight_decay)
    for i in prange(n):
        g = grad[i]
        if weight_decay != 0:
            g = g + weight_decay_ * param[i]
        m = exp_avg[i]
        m = m + weight * (g - m) if small_weight else g - (g - m) * one_minus_weight
        exp_avg[i] = m
        v = exp_avg_sq[i] * beta2_ + one_minus_beta2 * g * g
        exp_avg_sq[i] = v
        if amsgrad:
            v_max = max_exp_avg_sq[i]
            if v > v_max or v != v:  # torch.maximum: NaN wins
                v_max = v
            max_exp_avg_sq[i] = v_max
            v = v_max
        denom = np.sqrt(v) / bias_correction2_sqrt_ + eps_
        param[i] = param[i] - step_size_ * m / denom


def adam_step(param: np.ndarray, grad: np.ndarray, exp_avg: np.ndarray, exp_avg_sq: np.ndarray,
              max_exp_avg_sq: np.ndarray, step: int, lr: float, beta1: float, beta2: float, eps: float,
              weight_decay: float, amsgrad: bool) -> None:
    """One Adam step on 1-D ``param`` and its state arrays, in place.

    Args:
        step: the step count after incrementing (>= 1), as in ``state["step"]``.
        max_exp_avg_sq: updated only when ``amsgrad``; may be empty otherwise.

    g = grad + weight_decay * param; exp_avg.lerp_(g, 1 - beta1);
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g; param -= step_size * exp_avg / denom
    with step_size = lr / (1 - beta1**step) and
    denom = sqrt(exp_avg_sq (or its running max)) / sqrt(1 - beta2**step) + eps.

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    step = int(step)
    if step < 1:
        raise ValueError(f"adam_step: step must be the incremented step count (>= 1), got {step}")
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    step_size = lr / bias_correction1
    bias_correction2_sqrt = bias_correction2**0.5
    _adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, float(1 - beta1), float(beta2),
                 float(step_size), float(bias_correction2_sqrt), float(eps), float(weight_decay), bool(amsgrad))

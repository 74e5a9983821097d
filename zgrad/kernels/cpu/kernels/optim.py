"""Fused optimizer updates: one pass over parameter, gradient and state, in place.

The update rules and their order of operations are those of PyTorch's single-tensor optimizers
(``torch/optim/sgd.py``, ``adam.py``, ``rmsprop.py``, ``adagrad.py``, ``adadelta.py``,
``nadam.py``, ``radam.py``, ``adamax.py``, ``asgd.py``, ``rprop.py``, and ATen's
``lerp``/``addcmul``/``addcdiv``/``sign``): hyper-parameters are rounded to the parameter's dtype
and every step is computed in that dtype, as PyTorch does for float32 and float64 tensors.
``maximize`` negates the gradient before anything else, as PyTorch does.

The options that decide which state arrays a step writes (SGD's momentum, AMSGrad, RMSprop's
momentum and centering) are fixed when an element loop compiles: each combination has its own
loop (built by a ``_*_loop`` function, its options closed over as constants), a straight loop that
LLVM vectorises. A loop that tested them per element was vectorised, or not, depending on small
changes of its body.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from zgrad.kernels._jit import PARALLEL_MIN_SIZE_MULTI_STREAM, kernel, parallel_kernel
from zgrad.kernels.optim_host import (
    adagrad_learning_rate, adam_bias_corrections, adamax_learning_rate, check_sizes, nadam_coefficients, radam_scalars,
)

__all__ = ["adadelta_step", "adagrad_step", "adam_step", "adamax_step", "asgd_step", "nadam_step",
           "non_finite_check_and_unscale", "radam_step", "rmsprop_step", "rprop_step", "sgd_step"]


@kernel
def _lerp(start, end, weight, one_minus_weight, small_weight):
    """ATen's ``lerp``: from ``start`` while |weight| < 0.5, from ``end`` beyond (fewer roundings)."""
    return start + weight * (end - start) if small_weight else end - (end - start) * one_minus_weight


def _sgd_loop(use_momentum: bool):
    """The element loop of :func:`sgd_step`, with or without a momentum buffer."""
    def sgd_update(param, grad, momentum_buf, lr, momentum, dampening, weight_decay, nesterov, first_step, maximize):
        to_dtype = param.dtype.type
        lr_, momentum_ = to_dtype(lr), to_dtype(momentum)
        keep, weight_decay_ = to_dtype(1 - dampening), to_dtype(weight_decay)
        for i in prange(param.size):
            d_p = -grad[i] if maximize else grad[i]
            if weight_decay != 0:
                d_p = d_p + weight_decay_ * param[i]
            if use_momentum:
                buf = d_p if first_step else momentum_buf[i] * momentum_ + keep * d_p
                momentum_buf[i] = buf
                d_p = d_p + momentum_ * buf if nesterov else buf
            param[i] = param[i] - lr_ * d_p

    return sgd_update


# SGD's loop (three arrays, a multiply-add each) gains from a second thread only from 2**21
# elements, the other optimizers' from 2**20 (bench/README.md, Design figures).
_SGD_UPDATES = {use_momentum: parallel_kernel()(_sgd_loop(use_momentum)) for use_momentum in (False, True)}


def sgd_step(param: np.ndarray, grad: np.ndarray, momentum_buf: np.ndarray, lr: float, momentum: float,
             dampening: float, weight_decay: float, nesterov: bool, first_step: bool, maximize: bool) -> None:
    """One SGD step on 1-D ``param`` in place (and on ``momentum_buf``, unless momentum == 0).

    d_p = ±grad + weight_decay * param; buf = d_p on the first step, else
    momentum * buf + (1 - dampening) * d_p; d_p = d_p + momentum * buf if nesterov else buf;
    param -= lr * d_p. ``grad`` is not modified; with momentum == 0 ``momentum_buf`` is not
    touched (it may be empty).

    Raises:
        ValueError: ``grad`` (or, with momentum, ``momentum_buf``) differs in size from ``param``.
    """
    check_sizes("sgd_step", param, grad=grad, **({"momentum_buf": momentum_buf} if momentum != 0 else {}))
    # Plain Python scalars: one compiled specialisation per dtype, whatever numeric types come in.
    _SGD_UPDATES[bool(momentum != 0)](param, grad, momentum_buf, float(lr), float(momentum), float(dampening),
                                float(weight_decay), bool(nesterov), bool(first_step), bool(maximize))


def _adam_loop(amsgrad: bool):
    """The element loop of :func:`adam_step` (scalars already bias-corrected, in float64), with or
    without AMSGrad's running maximum."""
    def adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lerp_weight, beta2, step_size,
                    bias_correction2_sqrt, eps, weight_decay, decay_factor, maximize, decoupled):
        n = param.size
        to_dtype = param.dtype.type
        weight = to_dtype(lerp_weight)
        one_minus_weight = to_dtype(1) - weight
        small_weight = abs(lerp_weight) < 0.5
        beta2_, one_minus_beta2 = to_dtype(beta2), to_dtype(1 - beta2)
        step_size_, bias_correction2_sqrt_ = to_dtype(step_size), to_dtype(bias_correction2_sqrt)
        eps_, weight_decay_, decay_factor_ = to_dtype(eps), to_dtype(weight_decay), to_dtype(decay_factor)
        for i in prange(n):
            p = param[i]
            g = -grad[i] if maximize else grad[i]
            if weight_decay != 0:
                if decoupled:
                    p = p * decay_factor_
                else:
                    g = g + weight_decay_ * p
            m = _lerp(exp_avg[i], g, weight, one_minus_weight, small_weight)
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
            param[i] = p - step_size_ * m / denom

    return adam_update


_ADAM_UPDATES = {amsgrad: parallel_kernel(min_size=PARALLEL_MIN_SIZE_MULTI_STREAM)(_adam_loop(amsgrad))
                 for amsgrad in (False, True)}


def adam_step(param: np.ndarray, grad: np.ndarray, exp_avg: np.ndarray, exp_avg_sq: np.ndarray,
              max_exp_avg_sq: np.ndarray, step: int, lr: float, beta1: float, beta2: float, eps: float,
              weight_decay: float, amsgrad: bool, maximize: bool, decoupled_weight_decay: bool) -> None:
    """One Adam (or AdamW) step on 1-D ``param`` and its state arrays, in place.

    Args:
        step: the step count after incrementing (>= 1), as in ``state["step"]``.
        max_exp_avg_sq: updated only when ``amsgrad``; may be empty otherwise.
        decoupled_weight_decay: AdamW's decay, param *= 1 - lr * weight_decay, instead of adding
            weight_decay * param to the gradient.

    g = ±grad (+ weight_decay * param); exp_avg.lerp_(g, 1 - beta1);
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g; param -= step_size * exp_avg / denom
    with step_size = lr / (1 - beta1**step) and
    denom = sqrt(exp_avg_sq (or its running max)) / sqrt(1 - beta2**step) + eps.

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    step_size, bias_correction2_sqrt = adam_bias_corrections(step, lr, beta1, beta2)
    check_sizes("adam_step", param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq,
                **({"max_exp_avg_sq": max_exp_avg_sq} if amsgrad else {}))
    _ADAM_UPDATES[bool(amsgrad)](param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, float(1 - beta1), float(beta2),
                                 float(step_size), float(bias_correction2_sqrt), float(eps), float(weight_decay),
                                 float(1 - lr * weight_decay), bool(maximize), bool(decoupled_weight_decay))


def _rmsprop_loop(centered: bool, use_momentum: bool):
    """The element loop of :func:`rmsprop_step`, centered or not, with or without momentum."""
    def rmsprop_update(param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps, weight_decay, momentum,
                       maximize):
        n = param.size
        to_dtype = param.dtype.type
        alpha_, lr_, eps_ = to_dtype(alpha), to_dtype(lr), to_dtype(eps)
        weight = to_dtype(1 - alpha)
        one_minus_weight = to_dtype(1) - weight
        small_weight = abs(1 - alpha) < 0.5
        weight_decay_, momentum_ = to_dtype(weight_decay), to_dtype(momentum)
        for i in prange(n):
            g = -grad[i] if maximize else grad[i]
            if weight_decay != 0:
                g = g + weight_decay_ * param[i]
            v = square_avg[i] * alpha_ + weight * g * g
            square_avg[i] = v
            if centered:
                g_avg = _lerp(grad_avg[i], g, weight, one_minus_weight, small_weight)
                grad_avg[i] = g_avg
                v = v - g_avg * g_avg
            avg = np.sqrt(v) + eps_
            if use_momentum:
                buf = momentum_buffer[i] * momentum_ + g / avg
                momentum_buffer[i] = buf
                param[i] = param[i] - lr_ * buf
            else:
                param[i] = param[i] - lr_ * g / avg

    return rmsprop_update


_RMSPROP_UPDATES = {(centered, use_momentum):
                    parallel_kernel(min_size=PARALLEL_MIN_SIZE_MULTI_STREAM)(_rmsprop_loop(centered, use_momentum))
                    for centered in (False, True) for use_momentum in (False, True)}


def rmsprop_step(param: np.ndarray, grad: np.ndarray, square_avg: np.ndarray, grad_avg: np.ndarray,
                 momentum_buffer: np.ndarray, lr: float, alpha: float, eps: float, weight_decay: float,
                 momentum: float, centered: bool, maximize: bool) -> None:
    """One RMSprop step on 1-D ``param`` and its state arrays, in place.

    g = ±grad + weight_decay * param; square_avg = alpha * square_avg + (1 - alpha) * g * g;
    avg = sqrt(square_avg - grad_avg**2) + eps with grad_avg.lerp_(g, 1 - alpha) if centered,
    else sqrt(square_avg) + eps; with momentum > 0 buf = momentum * buf + g / avg and
    param -= lr * buf, else param -= lr * g / avg. ``grad_avg`` (not centered) and
    ``momentum_buffer`` (momentum == 0) are not touched and may be empty.

    Raises:
        ValueError: an array that is used differs in size from ``param``.
    """
    check_sizes("rmsprop_step", param, grad=grad, square_avg=square_avg, **({"grad_avg": grad_avg} if centered else {}),
                **({"momentum_buffer": momentum_buffer} if momentum > 0 else {}))
    update = _RMSPROP_UPDATES[bool(centered), bool(momentum > 0)]
    update(param, grad, square_avg, grad_avg, momentum_buffer, float(lr), float(alpha), float(eps), float(weight_decay),
           float(momentum), bool(maximize))


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_MULTI_STREAM)
def _adagrad_update(param, grad, state_sum, clr, weight_decay, eps, maximize):
    """The element loop of :func:`adagrad_step` (``clr``: the decayed learning rate)."""
    n = param.size
    to_dtype = param.dtype.type
    clr_, weight_decay_, eps_ = to_dtype(clr), to_dtype(weight_decay), to_dtype(eps)
    for i in prange(n):
        g = -grad[i] if maximize else grad[i]
        if weight_decay != 0:
            g = g + weight_decay_ * param[i]
        s = state_sum[i] + g * g
        state_sum[i] = s
        param[i] = param[i] - clr_ * g / (np.sqrt(s) + eps_)


def adagrad_step(param: np.ndarray, grad: np.ndarray, state_sum: np.ndarray, step: int, lr: float,
                 lr_decay: float, weight_decay: float, eps: float, maximize: bool) -> None:
    """One Adagrad step on 1-D ``param`` and its ``state_sum``, in place.

    Args:
        step: the step count after incrementing (>= 1), as in ``state["step"]``.

    g = ±grad + weight_decay * param; state_sum += g * g;
    param -= clr * g / (sqrt(state_sum) + eps) with clr = lr / (1 + (step - 1) * lr_decay).

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    clr = adagrad_learning_rate(step, lr, lr_decay)
    check_sizes("adagrad_step", param, grad=grad, state_sum=state_sum)
    _adagrad_update(param, grad, state_sum, float(clr), float(weight_decay), float(eps), bool(maximize))


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_MULTI_STREAM)
def _adadelta_update(param, grad, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize):
    """The element loop of :func:`adadelta_step`."""
    n = param.size
    to_dtype = param.dtype.type
    lr_, rho_, one_minus_rho = to_dtype(lr), to_dtype(rho), to_dtype(1 - rho)
    eps_, weight_decay_ = to_dtype(eps), to_dtype(weight_decay)
    for i in prange(n):
        g = -grad[i] if maximize else grad[i]
        if weight_decay != 0:
            g = g + weight_decay_ * param[i]
        v = square_avg[i] * rho_ + one_minus_rho * g * g
        square_avg[i] = v
        acc = acc_delta[i]
        delta = np.sqrt(acc + eps_) / np.sqrt(v + eps_) * g
        acc_delta[i] = acc * rho_ + one_minus_rho * delta * delta
        param[i] = param[i] - lr_ * delta


def adadelta_step(param: np.ndarray, grad: np.ndarray, square_avg: np.ndarray, acc_delta: np.ndarray, lr: float,
                  rho: float, eps: float, weight_decay: float, maximize: bool) -> None:
    """One Adadelta step on 1-D ``param`` and its state arrays, in place.

    g = ±grad + weight_decay * param; square_avg = rho * square_avg + (1 - rho) * g * g;
    delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g;
    acc_delta = rho * acc_delta + (1 - rho) * delta * delta; param -= lr * delta.

    Raises:
        ValueError: an array's size differs from ``param``'s.
    """
    check_sizes("adadelta_step", param, grad=grad, square_avg=square_avg, acc_delta=acc_delta)
    _adadelta_update(param, grad, square_avg, acc_delta, float(lr), float(rho), float(eps), float(weight_decay),
                     bool(maximize))


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_MULTI_STREAM)
def _nadam_update(param, grad, exp_avg, exp_avg_sq, lerp_weight, beta2, bias_correction2, grad_coefficient,
                  exp_avg_coefficient, eps, weight_decay, decay_factor, maximize, decoupled):
    """The element loop of :func:`nadam_step` (scalars from ``nadam_coefficients``, in float64)."""
    n = param.size
    to_dtype = param.dtype.type
    weight = to_dtype(lerp_weight)
    one_minus_weight = to_dtype(1) - weight
    small_weight = abs(lerp_weight) < 0.5
    beta2_, one_minus_beta2, bias_correction2_ = to_dtype(beta2), to_dtype(1 - beta2), to_dtype(bias_correction2)
    grad_coefficient_, exp_avg_coefficient_ = to_dtype(grad_coefficient), to_dtype(exp_avg_coefficient)
    eps_, weight_decay_, decay_factor_ = to_dtype(eps), to_dtype(weight_decay), to_dtype(decay_factor)
    for i in prange(n):
        p = param[i]
        g = -grad[i] if maximize else grad[i]
        if weight_decay != 0:
            if decoupled:
                p = p * decay_factor_
            else:
                g = g + weight_decay_ * p
        m = _lerp(exp_avg[i], g, weight, one_minus_weight, small_weight)
        exp_avg[i] = m
        v = exp_avg_sq[i] * beta2_ + one_minus_beta2 * g * g
        exp_avg_sq[i] = v
        denom = np.sqrt(v / bias_correction2_) + eps_
        p = p + grad_coefficient_ * g / denom
        param[i] = p + exp_avg_coefficient_ * m / denom


def nadam_step(param: np.ndarray, grad: np.ndarray, exp_avg: np.ndarray, exp_avg_sq: np.ndarray, step: int,
               mu_product: float, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
               momentum_decay: float, maximize: bool, decoupled_weight_decay: bool) -> None:
    """One NAdam step on 1-D ``param`` and its state arrays, in place.

    Args:
        step: the step count after incrementing (>= 1), as in ``state["step"]``.
        mu_product: the product of the momentum coefficients through this step
            (``optim_host.nadam_mu_product``), as in ``state["mu_product"]`` after the step.
        decoupled_weight_decay: param *= 1 - lr * weight_decay instead of adding
            weight_decay * param to the gradient.

    g = ±grad (+ weight_decay * param); exp_avg.lerp_(g, 1 - beta1);
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g; denom = sqrt(exp_avg_sq / (1 - beta2**step)) + eps;
    param += c_g * g / denom, then param += c_m * exp_avg / denom, with the coefficients of
    ``optim_host.nadam_coefficients``.

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    bias_correction2, grad_coefficient, exp_avg_coefficient = nadam_coefficients(step, mu_product, lr, beta1, beta2,
                                                                                  momentum_decay)
    check_sizes("nadam_step", param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
    _nadam_update(param, grad, exp_avg, exp_avg_sq, float(1 - beta1), float(beta2), float(bias_correction2),
                  float(grad_coefficient), float(exp_avg_coefficient), float(eps), float(weight_decay),
                  float(1 - lr * weight_decay), bool(maximize), bool(decoupled_weight_decay))


def _radam_loop(rectified: bool):
    """The element loop of :func:`radam_step`, with the rectified adaptive step (rho_t > 5) or
    with the bias-corrected momentum alone."""
    def radam_update(param, grad, exp_avg, exp_avg_sq, lerp_weight, beta2, bias_correction1, lr,
                     bias_correction2_sqrt, eps, rectification, weight_decay, decay_factor, maximize, decoupled):
        n = param.size
        to_dtype = param.dtype.type
        weight = to_dtype(lerp_weight)
        one_minus_weight = to_dtype(1) - weight
        small_weight = abs(lerp_weight) < 0.5
        beta2_, one_minus_beta2 = to_dtype(beta2), to_dtype(1 - beta2)
        bias_correction1_, lr_ = to_dtype(bias_correction1), to_dtype(lr)
        bias_correction2_sqrt_ = to_dtype(bias_correction2_sqrt)
        eps_, rectification_ = to_dtype(eps), to_dtype(rectification)
        weight_decay_, decay_factor_ = to_dtype(weight_decay), to_dtype(decay_factor)
        for i in prange(n):
            p = param[i]
            g = -grad[i] if maximize else grad[i]
            if weight_decay != 0:
                if decoupled:
                    p = p * decay_factor_
                else:
                    g = g + weight_decay_ * p
            m = _lerp(exp_avg[i], g, weight, one_minus_weight, small_weight)
            exp_avg[i] = m
            v = exp_avg_sq[i] * beta2_ + one_minus_beta2 * g * g
            exp_avg_sq[i] = v
            update = m / bias_correction1_ * lr_
            if rectified:
                # PyTorch's bias_correction2_sqrt / (sqrt(v) + eps) is a reciprocal times a scalar
                adaptive_lr = to_dtype(1) / (np.sqrt(v) + eps_) * bias_correction2_sqrt_
                update = update * adaptive_lr * rectification_
            param[i] = p - update

    return radam_update


_RADAM_UPDATES = {rectified: parallel_kernel(min_size=PARALLEL_MIN_SIZE_MULTI_STREAM)(_radam_loop(rectified))
                  for rectified in (False, True)}


def radam_step(param: np.ndarray, grad: np.ndarray, exp_avg: np.ndarray, exp_avg_sq: np.ndarray, step: int, lr: float,
               beta1: float, beta2: float, eps: float, weight_decay: float, maximize: bool,
               decoupled_weight_decay: bool) -> None:
    """One RAdam step on 1-D ``param`` and its state arrays, in place.

    Args:
        step: the step count after incrementing (>= 1), as in ``state["step"]``.
        decoupled_weight_decay: param *= 1 - lr * weight_decay instead of adding
            weight_decay * param to the gradient.

    g = ±grad (+ weight_decay * param); exp_avg.lerp_(g, 1 - beta1);
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g; with rho_t > 5 (see
    ``optim_host.radam_scalars``) param -= exp_avg / bc1 * lr * (sqrt(bc2) / (sqrt(exp_avg_sq) + eps)) * rect,
    else param -= exp_avg / bc1 * lr.

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    bias_correction1, bias_correction2_sqrt, rectification = radam_scalars(step, beta1, beta2)
    check_sizes("radam_step", param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
    rectified = rectification is not None
    _RADAM_UPDATES[rectified](param, grad, exp_avg, exp_avg_sq, float(1 - beta1), float(beta2),
                              float(bias_correction1), float(lr), float(bias_correction2_sqrt), float(eps),
                              float(rectification) if rectified else 1.0, float(weight_decay),
                              float(1 - lr * weight_decay), bool(maximize), bool(decoupled_weight_decay))


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_MULTI_STREAM)
def _adamax_update(param, grad, exp_avg, exp_inf, lerp_weight, beta2, clr, eps, weight_decay, maximize):
    """The element loop of :func:`adamax_step` (``clr``: the bias-corrected learning rate)."""
    n = param.size
    to_dtype = param.dtype.type
    weight = to_dtype(lerp_weight)
    one_minus_weight = to_dtype(1) - weight
    small_weight = abs(lerp_weight) < 0.5
    beta2_, clr_, eps_, weight_decay_ = to_dtype(beta2), to_dtype(clr), to_dtype(eps), to_dtype(weight_decay)
    for i in prange(n):
        g = -grad[i] if maximize else grad[i]
        if weight_decay != 0:
            g = g + weight_decay_ * param[i]
        m = _lerp(exp_avg[i], g, weight, one_minus_weight, small_weight)
        exp_avg[i] = m
        decayed, bound = exp_inf[i] * beta2_, abs(g) + eps_
        u = decayed if decayed > bound or decayed != decayed else bound  # torch.maximum: NaN wins
        exp_inf[i] = u
        param[i] = param[i] - clr_ * m / u


def adamax_step(param: np.ndarray, grad: np.ndarray, exp_avg: np.ndarray, exp_inf: np.ndarray, step: int, lr: float,
                beta1: float, beta2: float, eps: float, weight_decay: float, maximize: bool) -> None:
    """One Adamax step on 1-D ``param`` and its state arrays, in place.

    Args:
        step: the step count after incrementing (>= 1), as in ``state["step"]``.

    g = ±grad + weight_decay * param; exp_avg.lerp_(g, 1 - beta1);
    exp_inf = max(beta2 * exp_inf, |g| + eps); param -= clr * exp_avg / exp_inf with
    clr = lr / (1 - beta1**step).

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    clr = adamax_learning_rate(step, lr, beta1)
    check_sizes("adamax_step", param, grad=grad, exp_avg=exp_avg, exp_inf=exp_inf)
    _adamax_update(param, grad, exp_avg, exp_inf, float(1 - beta1), float(beta2), float(clr), float(eps),
                   float(weight_decay), bool(maximize))


def _asgd_loop(averaging: bool):
    """The element loop of :func:`asgd_step`: ax averages the parameters, or (mu == 1) copies them."""
    def asgd_update(param, grad, ax, eta, decay_factor, mu, weight_decay, maximize):
        n = param.size
        to_dtype = param.dtype.type
        eta_, decay_factor_ = to_dtype(eta), to_dtype(decay_factor)
        mu_, weight_decay_ = to_dtype(mu), to_dtype(weight_decay)
        for i in prange(n):
            p = param[i]
            g = -grad[i] if maximize else grad[i]
            if weight_decay != 0:
                g = g + weight_decay_ * p
            p = p * decay_factor_
            p = p - eta_ * g
            param[i] = p
            if averaging:
                a = ax[i]
                ax[i] = a + (p - a) * mu_
            else:
                ax[i] = p

    return asgd_update


_ASGD_UPDATES = {averaging: parallel_kernel(min_size=PARALLEL_MIN_SIZE_MULTI_STREAM)(_asgd_loop(averaging))
                 for averaging in (False, True)}


def asgd_step(param: np.ndarray, grad: np.ndarray, ax: np.ndarray, eta: float, mu: float, lambd: float,
              weight_decay: float, maximize: bool) -> None:
    """One ASGD step on 1-D ``param`` and its average ``ax``, in place.

    Args:
        eta, mu: the state's step size and averaging rate before this step (``state["eta"]``,
            ``state["mu"]``; ``optim_host.asgd_schedules`` gives the next ones).

    g = ±grad + weight_decay * param; param = param * (1 - lambd * eta) - eta * g;
    ax += (param - ax) * mu, or ax = param when mu == 1.

    Raises:
        ValueError: an array's size differs from ``param``'s.
    """
    check_sizes("asgd_step", param, grad=grad, ax=ax)
    _ASGD_UPDATES[bool(mu != 1)](param, grad, ax, float(eta), float(1 - lambd * eta), float(mu), float(weight_decay),
                                 bool(maximize))


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_MULTI_STREAM)
def _rprop_update(param, grad, prev, step_size, etaminus, etaplus, step_size_min, step_size_max, maximize):
    """The element loop of :func:`rprop_step`."""
    n = param.size
    to_dtype = param.dtype.type
    etaminus_, etaplus_, one, zero = to_dtype(etaminus), to_dtype(etaplus), to_dtype(1), to_dtype(0)
    low, high = to_dtype(step_size_min), to_dtype(step_size_max)
    for i in prange(n):
        g = -grad[i] if maximize else grad[i]
        product = g * prev[i]
        # ATen's sign is 0 for NaN: such a product keeps the step size and the gradient
        factor = etaplus_ if product > zero else (etaminus_ if product < zero else one)
        s = step_size[i] * factor
        s = low if s < low else s  # clamp: NaN stays
        s = high if s > high else s
        step_size[i] = s
        if product < zero:
            g = zero
        direction = one if g > zero else (-one if g < zero else zero)
        param[i] = param[i] - direction * s
        prev[i] = g


def rprop_step(param: np.ndarray, grad: np.ndarray, prev: np.ndarray, step_size: np.ndarray, etaminus: float,
               etaplus: float, step_size_min: float, step_size_max: float, maximize: bool) -> None:
    """One Rprop step on 1-D ``param`` and its state arrays, in place.

    g = ±grad; where g * prev > 0 step_size *= etaplus, where < 0 step_size *= etaminus and g = 0;
    step_size clamped to [step_size_min, step_size_max]; param -= sign(g) * step_size; prev = g.

    Raises:
        ValueError: an array's size differs from ``param``'s.
    """
    check_sizes("rprop_step", param, grad=grad, prev=prev, step_size=step_size)
    _rprop_update(param, grad, prev, step_size, float(etaminus), float(etaplus), float(step_size_min),
                  float(step_size_max), bool(maximize))


@kernel
def non_finite_check_and_unscale(grad, found_inf, inv_scale):
    """grad *= inv_scale in place and found_inf[0] = 1 (an int32 flag) if any element of ``grad`` is
    inf or NaN, in one pass (GradScaler's ``unscale_``; PyTorch's
    ``_amp_foreach_non_finite_check_and_unscale_``).

    ``inv_scale`` is a float32 value; the product of it and a float32 or float64 element is exact in
    float64, so storing it rounds once, as PyTorch's multiplication in the gradient's dtype does.
    """
    found = False
    for i in range(grad.size):
        value = grad[i]
        found = found | (not np.isfinite(value))
        grad[i] = value * inv_scale
    if found:
        found_inf[0] = 1

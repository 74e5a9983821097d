"""The CUDA backend's fused optimizer steps (host side of :mod:`kernels.optim`).

Each function takes the arguments of its CPU twin in :mod:`zgrad.kernels.cpu.kernels.optim` and raises
the same errors: it checks the sizes and takes the step-dependent scalars with
:mod:`zgrad.kernels.optim_host`, rounds every scalar to the parameter's dtype and launches one
kernel over the flat parameter, updating it and its state in place. Part of
:mod:`zgrad.kernels.cuda.backend`.
"""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda.multi_tensor import groupable
from zgrad.kernels.cuda.pointwise import copy
from zgrad.kernels.cuda.reduce import contiguous
from zgrad.kernels.optim_host import (
    adagrad_learning_rate, adam_bias_corrections, adamax_learning_rate, check_sizes, nadam_coefficients, radam_scalars,
)

__all__ = ["sgd_step", "adam_step", "adam_steps", "rmsprop_step", "adagrad_step", "adadelta_step", "nadam_step",
           "radam_step", "adamax_step", "asgd_step", "rprop_step", "non_finite_check_and_unscale"]


def _launch(name: str, param: Any, grad: Any, state: Sequence[Any], *scalars: Any) -> None:
    """Launch kernel ``name`` on (param, grad, *state, *scalars), arrays flattened; nothing for an
    empty ``param``. State arrays are updated in place, so they must be C-contiguous (the
    optimizers allocate them so); ``grad`` may be strided."""
    if param.size:
        arrays = [param, contiguous(grad), *state]
        rt.launch(getattr(kernels.optim, name), rt.grid_1d(param.size),
                  *(a.reshape(-1).arg() for a in arrays), *scalars)


def sgd_step(param, grad, momentum_buf, lr, momentum, dampening, weight_decay, nesterov, first_step, maximize):
    check_sizes("sgd_step", param, grad=grad, **({"momentum_buf": momentum_buf} if momentum != 0 else {}))
    t = param.dtype.type
    _launch("sgd_step", param, grad, [momentum_buf], t(lr), t(momentum), t(1 - dampening), t(weight_decay),
            bool(nesterov), bool(first_step), bool(maximize))


def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay, amsgrad,
              maximize, decoupled_weight_decay):
    """One Adam or AdamW step (see :func:`zgrad.kernels.cpu.kernels.optim.adam_step`).

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    step_size, bias_correction2_sqrt = adam_bias_corrections(step, lr, beta1, beta2)
    check_sizes("adam_step", param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq,
                **({"max_exp_avg_sq": max_exp_avg_sq} if amsgrad else {}))
    t = param.dtype.type
    weight = 1 - beta1
    _launch("adam_step", param, grad, [exp_avg, exp_avg_sq, max_exp_avg_sq], t(weight), abs(weight) < 0.5,
            t(beta2), t(step_size), t(bias_correction2_sqrt), t(eps), t(weight_decay), t(1 - lr * weight_decay),
            bool(amsgrad), bool(maximize), bool(decoupled_weight_decay))


def adam_steps(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay, amsgrad,
               maximize, decoupled_weight_decay):
    """:func:`adam_step` of several parameters at the same ``step`` (lists of arrays), a launch
    per group of up to ``MAX_TENSORS`` parameters where every array is C-contiguous, non-empty and
    of one floating dtype (a strided gradient is copied first); otherwise a launch per parameter.

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from its parameter's.
    """
    step_size, bias_correction2_sqrt = adam_bias_corrections(step, lr, beta1, beta2)
    for param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq in zip(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs):
        check_sizes("adam_step", param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq,
                    **({"max_exp_avg_sq": max_exp_avg_sq} if amsgrad else {}))
    dtype = params[0].dtype
    if not groupable([*params, *exp_avgs, *exp_avg_sqs, *(max_exp_avg_sqs if amsgrad else ())], dtype):
        for arrays in zip(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs):
            adam_step(*arrays, step, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay)
        return
    t = dtype.type
    weight = 1 - beta1
    scalars = (t(weight), abs(weight) < 0.5, t(beta2), t(step_size), t(bias_correction2_sqrt), t(eps), t(weight_decay),
               t(1 - lr * weight_decay), bool(amsgrad), bool(maximize), bool(decoupled_weight_decay))
    most = kernels.multi_tensor.MAX_TENSORS
    blocks, block = rt.grid_1d(max(p.size for p in params))
    for start in range(0, len(params), most):
        part = slice(start, start + most)
        group = [tuple(a.flat_arg() for a in arrays[part]) for arrays in (params, exp_avgs, exp_avg_sqs)]
        gradients = tuple(contiguous(g).flat_arg() for g in grads[part])
        maxima = tuple((a.flat_arg() if amsgrad else a.arg()) for a in max_exp_avg_sqs[part])  # unused: (0,), cached
        rt.launch(kernels.optim.adam_steps, ((blocks, len(gradients)), block), group[0], gradients, group[1], group[2],
                  maxima, *scalars)


def rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps, weight_decay, momentum,
                 centered, maximize):
    check_sizes("rmsprop_step", param, grad=grad, square_avg=square_avg, **({"grad_avg": grad_avg} if centered else {}),
                **({"momentum_buffer": momentum_buffer} if momentum > 0 else {}))
    t = param.dtype.type
    weight = 1 - alpha
    _launch("rmsprop_step", param, grad, [square_avg, grad_avg, momentum_buffer], t(lr), t(alpha), t(weight),
            abs(weight) < 0.5, t(eps), t(weight_decay), t(momentum), bool(centered), bool(maximize))


def adagrad_step(param, grad, state_sum, step, lr, lr_decay, weight_decay, eps, maximize):
    """One Adagrad step (see :func:`zgrad.kernels.cpu.kernels.optim.adagrad_step`).

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    check_sizes("adagrad_step", param, grad=grad, state_sum=state_sum)
    t = param.dtype.type
    _launch("adagrad_step", param, grad, [state_sum], t(adagrad_learning_rate(step, lr, lr_decay)),
            t(weight_decay), t(eps), bool(maximize))


def adadelta_step(param, grad, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize):
    check_sizes("adadelta_step", param, grad=grad, square_avg=square_avg, acc_delta=acc_delta)
    t = param.dtype.type
    _launch("adadelta_step", param, grad, [square_avg, acc_delta], t(lr), t(rho), t(eps), t(weight_decay),
            bool(maximize))


def nadam_step(param, grad, exp_avg, exp_avg_sq, step, mu_product, lr, beta1, beta2, eps, weight_decay, momentum_decay,
               maximize, decoupled_weight_decay):
    """One NAdam step (see :func:`zgrad.kernels.cpu.kernels.optim.nadam_step`).

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    bias_correction2, grad_coefficient, exp_avg_coefficient = nadam_coefficients(step, mu_product, lr, beta1, beta2,
                                                                                  momentum_decay)
    check_sizes("nadam_step", param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
    t = param.dtype.type
    weight = 1 - beta1
    _launch("nadam_step", param, grad, [exp_avg, exp_avg_sq], t(weight), abs(weight) < 0.5, t(beta2),
            t(bias_correction2), t(grad_coefficient), t(exp_avg_coefficient), t(eps), t(weight_decay),
            t(1 - lr * weight_decay), bool(maximize), bool(decoupled_weight_decay))


def radam_step(param, grad, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay, maximize,
               decoupled_weight_decay):
    """One RAdam step (see :func:`zgrad.kernels.cpu.kernels.optim.radam_step`).

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    bias_correction1, bias_correction2_sqrt, rectification = radam_scalars(step, beta1, beta2)
    check_sizes("radam_step", param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
    t = param.dtype.type
    weight = 1 - beta1
    rectified = rectification is not None
    _launch("radam_step", param, grad, [exp_avg, exp_avg_sq], t(weight), abs(weight) < 0.5, t(beta2),
            t(bias_correction1), t(lr), t(bias_correction2_sqrt), t(eps), t(rectification if rectified else 1.0),
            rectified, t(weight_decay), t(1 - lr * weight_decay), bool(maximize), bool(decoupled_weight_decay))


def adamax_step(param, grad, exp_avg, exp_inf, step, lr, beta1, beta2, eps, weight_decay, maximize):
    """One Adamax step (see :func:`zgrad.kernels.cpu.kernels.optim.adamax_step`).

    Raises:
        ValueError: ``step`` < 1, or an array's size differs from ``param``'s.
    """
    clr = adamax_learning_rate(step, lr, beta1)
    check_sizes("adamax_step", param, grad=grad, exp_avg=exp_avg, exp_inf=exp_inf)
    t = param.dtype.type
    weight = 1 - beta1
    _launch("adamax_step", param, grad, [exp_avg, exp_inf], t(weight), abs(weight) < 0.5, t(beta2), t(clr), t(eps),
            t(weight_decay), bool(maximize))


def asgd_step(param, grad, ax, eta, mu, lambd, weight_decay, maximize):
    check_sizes("asgd_step", param, grad=grad, ax=ax)
    t = param.dtype.type
    _launch("asgd_step", param, grad, [ax], t(eta), t(1 - lambd * eta), t(mu), bool(mu != 1), t(weight_decay),
            bool(maximize))


def rprop_step(param, grad, prev, step_size, etaminus, etaplus, step_size_min, step_size_max, maximize):
    check_sizes("rprop_step", param, grad=grad, prev=prev, step_size=step_size)
    t = param.dtype.type
    _launch("rprop_step", param, grad, [prev, step_size], t(etaminus), t(etaplus), t(step_size_min),
            t(step_size_max), bool(maximize))


def non_finite_check_and_unscale(grad, found_inf, inv_scale: float):
    """grad *= inv_scale in place; found_inf[0] = 1 where grad holds an inf or NaN (a strided grad
    is unscaled in a contiguous copy, then copied back)."""
    if grad.size:
        work = contiguous(grad)
        rt.launch(kernels.optim.non_finite_check_and_unscale, rt.grid_1d(grad.size), work.reshape(-1).arg(),
                  found_inf.reshape(-1).arg(), grad.dtype.type(inv_scale))
        if work is not grad:
            copy(work, grad)
    return grad

"""CUDA kernels of the fused optimizer updates: one grid-stride pass over a flat parameter, its
gradient and its state, in place.

Each follows its CPU twin in :mod:`zgrad.kernels.cpu.kernels.optim` (PyTorch's order of operations, every
step in the parameter's dtype). The host (:mod:`zgrad.kernels.cuda.optim`) rounds every
hyper-parameter to that dtype and folds the step-dependent ones (bias corrections, Adagrad's
and Adamax's decayed rates, NAdam's coefficients, RAdam's rectification) before the launch, so no
kernel computes in float64 for a float32 parameter. Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import device, kernel, math
from zgrad.kernels.cuda.kernels.vectors import VECTOR, fits4, load4, store4

__all__ = ["sgd_step", "adam_step", "adam_steps", "rmsprop_step", "adagrad_step", "adadelta_step", "nadam_step",
           "radam_step", "adamax_step", "asgd_step", "rprop_step", "non_finite_check_and_unscale"]


@device
def _lerp(start, end, weight, one_minus_weight, small_weight):
    """ATen's ``lerp`` (see :func:`zgrad.kernels.cpu.kernels.optim._lerp`)."""
    return start + weight * (end - start) if small_weight else end - (end - start) * one_minus_weight


@device
def _decayed(p, g, weight_decay, decay_factor, maximize, decoupled, T):
    """The Adam family's (param, grad) before the moments: the gradient negated under ``maximize``,
    then L2 weight decay added to it or, ``decoupled``, the parameter scaled; ``T`` the scalar type."""
    if maximize:
        g = -g
    if weight_decay != T(0):
        if decoupled:
            p = p * decay_factor
        else:
            g = g + weight_decay * p
    return p, g


@device
def _moments(m, v, g, weight, one_minus_weight, small_weight, beta2, one_minus_beta2):
    """The Adam family's (exp_avg, exp_avg_sq) after the step: exp_avg lerped toward the gradient,
    exp_avg_sq decayed by beta2 plus (1 - beta2) g²."""
    return _lerp(m, g, weight, one_minus_weight, small_weight), v * beta2 + one_minus_beta2 * g * g


@kernel
def sgd_step(param, grad, momentum_buf, lr, momentum, keep, weight_decay, nesterov, first_step, maximize):
    """One SGD step (see :func:`zgrad.kernels.cpu.kernels.optim.sgd_step`); ``keep`` = 1 - dampening."""
    T = param.dtype.type
    use_momentum = momentum != T(0)
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        d_p = -grad[i] if maximize else grad[i]
        if weight_decay != T(0):
            d_p = d_p + weight_decay * param[i]
        if use_momentum:
            buf = d_p if first_step else momentum_buf[i] * momentum + keep * d_p
            momentum_buf[i] = buf
            d_p = d_p + momentum * buf if nesterov else buf
        param[i] = param[i] - lr * d_p


@device
def _adam_values(p, g, m, v, v_max, weight, small_weight, beta2, step_size, bias_correction2_sqrt, eps, weight_decay,
                 decay_factor, amsgrad, maximize, decoupled, T):
    """Adam's update of one element: (param, exp_avg, exp_avg_sq, max_exp_avg_sq) after the step,
    from their values and the gradient's before it (see :func:`adam_step`); ``T`` the scalar type."""
    p, g = _decayed(p, g, weight_decay, decay_factor, maximize, decoupled, T)
    m, v = _moments(m, v, g, weight, T(1) - weight, small_weight, beta2, T(1) - beta2)
    largest = v
    if amsgrad:
        if not (v > v_max or v != v):
            largest = v_max
        v_max = largest
    denom = math.sqrt(largest) / bias_correction2_sqrt + eps
    return p - step_size * m / denom, m, v, v_max


@device
def _adam_element(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, i, weight, small_weight, beta2, step_size,
                  bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize, decoupled):
    """Adam's update of element ``i`` (see :func:`adam_step`)."""
    v_max = max_exp_avg_sq[i] if amsgrad else exp_avg_sq[i]
    p, m, v, v_max = _adam_values(param[i], grad[i], exp_avg[i], exp_avg_sq[i], v_max, weight, small_weight, beta2,
                                  step_size, bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize,
                                  decoupled, param.dtype.type)
    param[i], exp_avg[i], exp_avg_sq[i] = p, m, v
    if amsgrad:
        max_exp_avg_sq[i] = v_max


@device
def _adam_group(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, j, weight, small_weight, beta2, step_size,
                bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize, decoupled):
    """Adam's update of elements j .. j + 3, each array read and written 4 elements at once
    (vectors.load4; j a multiple of 4, every array fits4)."""
    p0, p1, p2, p3 = load4(param, j)
    g0, g1, g2, g3 = load4(grad, j)
    m0, m1, m2, m3 = load4(exp_avg, j)
    v0, v1, v2, v3 = load4(exp_avg_sq, j)
    w0, w1, w2, w3 = load4(max_exp_avg_sq, j) if amsgrad else (v0, v1, v2, v3)
    hyper = (weight, small_weight, beta2, step_size, bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad,
             maximize, decoupled, param.dtype.type)
    p0, m0, v0, w0 = _adam_values(p0, g0, m0, v0, w0, *hyper)
    p1, m1, v1, w1 = _adam_values(p1, g1, m1, v1, w1, *hyper)
    p2, m2, v2, w2 = _adam_values(p2, g2, m2, v2, w2, *hyper)
    p3, m3, v3, w3 = _adam_values(p3, g3, m3, v3, w3, *hyper)
    store4(param, j, p0, p1, p2, p3)
    store4(exp_avg, j, m0, m1, m2, m3)
    store4(exp_avg_sq, j, v0, v1, v2, v3)
    if amsgrad:
        store4(max_exp_avg_sq, j, w0, w1, w2, w3)


@device
def _adam_run(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, start, step, weight, small_weight, beta2, step_size,
              bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize, decoupled):
    """Adam's update of the elements ``start``, ``start + step``, ... of one parameter: by groups of
    4 where every array it touches fits4, then (or else) one element at a time."""
    n, i = param.size, start
    if fits4(param) and fits4(grad) and fits4(exp_avg) and fits4(exp_avg_sq) and (not amsgrad or fits4(max_exp_avg_sq)):
        groups = n // VECTOR
        while i < groups:
            _adam_group(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, VECTOR * i, weight, small_weight, beta2,
                        step_size, bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize, decoupled)
            i += step
        i = VECTOR * groups + start
    while i < n:
        _adam_element(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, i, weight, small_weight, beta2, step_size,
                      bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize, decoupled)
        i += step


@kernel
def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, weight, small_weight, beta2, step_size,
              bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize, decoupled):
    """One Adam or AdamW step (see :func:`zgrad.kernels.cpu.kernels.optim.adam_step`); scalars
    bias-corrected, ``decay_factor`` = 1 - lr * weight_decay. ``max_exp_avg_sq`` is read only for
    amsgrad."""
    _adam_run(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, cuda.grid(1), cuda.gridsize(1), weight, small_weight,
              beta2, step_size, bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize, decoupled)


@kernel
def adam_steps(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, weight, small_weight, beta2, step_size,
               bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize, decoupled):
    """:func:`adam_step` of a group of parameters at the same step (tuples of flat arrays, as the
    kernels of :mod:`multi_tensor` take them; grid y picks the parameter)."""
    k = cuda.blockIdx.y
    _adam_run(params[k], grads[k], exp_avgs[k], exp_avg_sqs[k], max_exp_avg_sqs[k],
              cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, cuda.gridDim.x * cuda.blockDim.x, weight,
              small_weight, beta2, step_size, bias_correction2_sqrt, eps, weight_decay, decay_factor, amsgrad, maximize,
              decoupled)


@kernel
def rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, weight, small_weight, eps,
                 weight_decay, momentum, centered, maximize):
    """One RMSprop step (see :func:`zgrad.kernels.cpu.kernels.optim.rmsprop_step`); ``weight`` = 1 - alpha."""
    T = param.dtype.type
    one_minus_weight = T(1) - weight
    use_momentum = momentum > T(0)
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        g = -grad[i] if maximize else grad[i]
        if weight_decay != T(0):
            g = g + weight_decay * param[i]
        v = square_avg[i] * alpha + weight * g * g
        square_avg[i] = v
        if centered:
            g_avg = _lerp(grad_avg[i], g, weight, one_minus_weight, small_weight)
            grad_avg[i] = g_avg
            v = v - g_avg * g_avg
        avg = math.sqrt(v) + eps
        if use_momentum:
            buf = momentum_buffer[i] * momentum + g / avg
            momentum_buffer[i] = buf
            param[i] = param[i] - lr * buf
        else:
            param[i] = param[i] - lr * g / avg


@kernel
def adagrad_step(param, grad, state_sum, clr, weight_decay, eps, maximize):
    """One Adagrad step (see :func:`zgrad.kernels.cpu.kernels.optim.adagrad_step`); ``clr`` the decayed rate."""
    T = param.dtype.type
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        g = -grad[i] if maximize else grad[i]
        if weight_decay != T(0):
            g = g + weight_decay * param[i]
        s = state_sum[i] + g * g
        state_sum[i] = s
        param[i] = param[i] - clr * g / (math.sqrt(s) + eps)


@kernel
def adadelta_step(param, grad, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize):
    """One Adadelta step (see :func:`zgrad.kernels.cpu.kernels.optim.adadelta_step`)."""
    T = param.dtype.type
    one_minus_rho = T(1) - rho
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        g = -grad[i] if maximize else grad[i]
        if weight_decay != T(0):
            g = g + weight_decay * param[i]
        v = square_avg[i] * rho + one_minus_rho * g * g
        square_avg[i] = v
        acc = acc_delta[i]
        delta = math.sqrt(acc + eps) / math.sqrt(v + eps) * g
        acc_delta[i] = acc * rho + one_minus_rho * delta * delta
        param[i] = param[i] - lr * delta


@kernel
def nadam_step(param, grad, exp_avg, exp_avg_sq, weight, small_weight, beta2, bias_correction2, grad_coefficient,
               exp_avg_coefficient, eps, weight_decay, decay_factor, maximize, decoupled):
    """One NAdam step (see :func:`zgrad.kernels.cpu.kernels.optim.nadam_step`); ``weight`` = 1 - beta1,
    ``decay_factor`` = 1 - lr * weight_decay."""
    T = param.dtype.type
    one_minus_weight, one_minus_beta2 = T(1) - weight, T(1) - beta2
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        p, g = _decayed(param[i], grad[i], weight_decay, decay_factor, maximize, decoupled, T)
        m, v = _moments(exp_avg[i], exp_avg_sq[i], g, weight, one_minus_weight, small_weight, beta2, one_minus_beta2)
        exp_avg[i] = m
        exp_avg_sq[i] = v
        denom = math.sqrt(v / bias_correction2) + eps
        p = p + grad_coefficient * g / denom
        param[i] = p + exp_avg_coefficient * m / denom


@kernel
def radam_step(param, grad, exp_avg, exp_avg_sq, weight, small_weight, beta2, bias_correction1, lr,
               bias_correction2_sqrt, eps, rectification, rectified, weight_decay, decay_factor, maximize, decoupled):
    """One RAdam step (see :func:`zgrad.kernels.cpu.kernels.optim.radam_step`); ``rectified``: rho_t > 5,
    ``weight`` = 1 - beta1, ``decay_factor`` = 1 - lr * weight_decay."""
    T = param.dtype.type
    one_minus_weight, one_minus_beta2 = T(1) - weight, T(1) - beta2
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        p, g = _decayed(param[i], grad[i], weight_decay, decay_factor, maximize, decoupled, T)
        m, v = _moments(exp_avg[i], exp_avg_sq[i], g, weight, one_minus_weight, small_weight, beta2, one_minus_beta2)
        exp_avg[i] = m
        exp_avg_sq[i] = v
        update = m / bias_correction1 * lr
        if rectified:
            update = update * (T(1) / (math.sqrt(v) + eps) * bias_correction2_sqrt) * rectification
        param[i] = p - update


@kernel
def adamax_step(param, grad, exp_avg, exp_inf, weight, small_weight, beta2, clr, eps, weight_decay, maximize):
    """One Adamax step (see :func:`zgrad.kernels.cpu.kernels.optim.adamax_step`); ``weight`` = 1 - beta1,
    ``clr`` the bias-corrected rate."""
    T = param.dtype.type
    one_minus_weight = T(1) - weight
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        g = -grad[i] if maximize else grad[i]
        if weight_decay != T(0):
            g = g + weight_decay * param[i]
        m = _lerp(exp_avg[i], g, weight, one_minus_weight, small_weight)
        exp_avg[i] = m
        decayed, bound = exp_inf[i] * beta2, abs(g) + eps
        u = decayed if decayed > bound or decayed != decayed else bound  # torch.maximum: NaN wins
        exp_inf[i] = u
        param[i] = param[i] - clr * m / u


@kernel
def asgd_step(param, grad, ax, eta, decay_factor, mu, averaging, weight_decay, maximize):
    """One ASGD step (see :func:`zgrad.kernels.cpu.kernels.optim.asgd_step`); ``decay_factor`` =
    1 - lambd * eta; ``averaging``: mu != 1 (else ax copies the parameter)."""
    T = param.dtype.type
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        p = param[i]
        g = -grad[i] if maximize else grad[i]
        if weight_decay != T(0):
            g = g + weight_decay * p
        p = p * decay_factor
        p = p - eta * g
        param[i] = p
        if averaging:
            a = ax[i]
            ax[i] = a + (p - a) * mu
        else:
            ax[i] = p


@kernel
def rprop_step(param, grad, prev, step_size, etaminus, etaplus, step_size_min, step_size_max, maximize):
    """One Rprop step (see :func:`zgrad.kernels.cpu.kernels.optim.rprop_step`)."""
    T = param.dtype.type
    one, zero = T(1), T(0)
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        g = -grad[i] if maximize else grad[i]
        product = g * prev[i]
        factor = etaplus if product > zero else (etaminus if product < zero else one)  # NaN: sign 0
        s = step_size[i] * factor
        s = step_size_min if s < step_size_min else s  # clamp: NaN stays
        s = step_size_max if s > step_size_max else s
        step_size[i] = s
        if product < zero:
            g = zero
        direction = one if g > zero else (-one if g < zero else zero)
        param[i] = param[i] - direction * s
        prev[i] = g


@kernel
def non_finite_check_and_unscale(grad, found_inf, inv_scale):
    """grad *= inv_scale in place, and found_inf[0] = 1 (an int32 flag) if an element is inf or NaN,
    in one pass (see :func:`zgrad.kernels.cpu.kernels.optim.non_finite_check_and_unscale`);
    ``inv_scale`` has the gradient's dtype. Every thread that finds one writes the same 1, so the
    race is harmless."""
    one = found_inf.dtype.type(1)
    for i in range(cuda.grid(1), grad.size, cuda.gridsize(1)):
        value = grad[i]
        if math.isinf(value) or math.isnan(value):
            found_inf[0] = one
        grad[i] = value * inv_scale


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64."""
    from numba import types

    cases = []
    b = types.boolean
    for dt in (types.float32, types.float64):
        v = dt[::1]
        cases += [
            ("sgd_step", sgd_step.py_func, (v, v, v, dt, dt, dt, dt, b, b, b)),
            ("adam_step", adam_step.py_func, (v, v, v, v, v, dt, b, dt, dt, dt, dt, dt, dt, b, b, b)),
            *(("adam_steps", adam_steps.py_func,
               (*[types.UniTuple(v, count)] * 5, dt, b, dt, dt, dt, dt, dt, dt, b, b, b)) for count in (8, 1)),
            ("rmsprop_step", rmsprop_step.py_func, (v, v, v, v, v, dt, dt, dt, b, dt, dt, dt, b, b)),
            ("adagrad_step", adagrad_step.py_func, (v, v, v, dt, dt, dt, b)),
            ("adadelta_step", adadelta_step.py_func, (v, v, v, v, dt, dt, dt, dt, b)),
            ("nadam_step", nadam_step.py_func, (v, v, v, v, dt, b, dt, dt, dt, dt, dt, dt, dt, b, b)),
            ("radam_step", radam_step.py_func, (v, v, v, v, dt, b, dt, dt, dt, dt, dt, dt, b, dt, dt, b, b)),
            ("adamax_step", adamax_step.py_func, (v, v, v, v, dt, b, dt, dt, dt, dt, b)),
            ("asgd_step", asgd_step.py_func, (v, v, v, dt, dt, dt, b, dt, b)),
            ("rprop_step", rprop_step.py_func, (v, v, v, v, dt, dt, dt, dt, b)),
            ("non_finite_check_and_unscale", non_finite_check_and_unscale.py_func, (v, types.int32[::1], dt)),
        ]
    return cases

"""What the CPU and CUDA backends' optimizer steps share on the host: the argument checks and the
step-dependent scalars.

PyTorch computes those scalars on the host in float64 (Python floats) from the incremented step
count, before any tensor op; both backends take them from here and round them to the parameter's
dtype. The scalar state PyTorch keeps in 0-d float32 tensors (NAdam's ``mu_product``, ASGD's
``eta`` and ``mu``) is computed here too, and rounded to float32 as PyTorch stores it; the
optimizers keep it as Python floats. The size checks run here rather than in the kernels: in a
CPU element loop, a size test of a state array that only some options use kept LLVM from
vectorising the loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["adam_bias_corrections", "adagrad_learning_rate", "adamax_learning_rate", "asgd_schedules", "check_sizes",
           "float32_scalar", "nadam_coefficients", "nadam_mu_product", "radam_scalars"]

# RAdam rectifies the adaptive step only once the length of the approximated simple moving
# average exceeds this (PyTorch's threshold); before, it steps with the bias-corrected momentum.
RADAM_RECTIFY_ABOVE = 5.0


def check_sizes(kernel_name: str, param: Any, **arrays: Any) -> None:
    """Raise ValueError naming the first of ``arrays`` (those the step uses) whose size is not
    ``param``'s."""
    for name, array in arrays.items():
        if array.size != param.size:
            raise ValueError(f"{kernel_name}: {name} has {array.size} elements; expected as many as param "
                             f"({param.size})")


def _checked_step(kernel_name: str, step: int) -> int:
    step = int(step)
    if step < 1:
        raise ValueError(f"{kernel_name}: step must be the incremented step count (>= 1), got {step}")
    return step


def adam_bias_corrections(step: int, lr: float, beta1: float, beta2: float) -> tuple[float, float]:
    """(step_size, bias_correction2_sqrt) of Adam's step ``step``: lr / (1 - beta1**step) and
    sqrt(1 - beta2**step).

    Raises:
        ValueError: ``step`` < 1 (the state's count is incremented before the update).
    """
    step = _checked_step("adam_step", step)
    return lr / (1 - beta1**step), (1 - beta2**step) ** 0.5


def adagrad_learning_rate(step: int, lr: float, lr_decay: float) -> float:
    """Adagrad's decayed learning rate at step ``step``: lr / (1 + (step - 1) * lr_decay).

    Raises:
        ValueError: ``step`` < 1 (the state's count is incremented before the update).
    """
    step = _checked_step("adagrad_step", step)
    return lr / (1 + (step - 1) * lr_decay)


def float32_scalar(value: float) -> float:
    """``value`` rounded to float32, as a 0-d float32 state tensor of PyTorch's holds it."""
    return float(np.float32(value))


def _nadam_momentum(step: int, beta1: float, momentum_decay: float) -> float:
    """NAdam's momentum coefficient mu at step ``step``: beta1 * (1 - 0.5 * 0.96**(step * momentum_decay))."""
    return beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))


def nadam_mu_product(mu_product: float, step: int, beta1: float, momentum_decay: float) -> float:
    """NAdam's running product of the momentum coefficients through step ``step``, from the
    product before it, rounded as PyTorch's float32 ``mu_product`` tensor multiplies (both factors
    in float32; their product is exact in float64, so one rounding).

    Raises:
        ValueError: ``step`` < 1 (the state's count is incremented before the update).
    """
    step = _checked_step("nadam_step", step)
    return float32_scalar(float32_scalar(mu_product) * float32_scalar(_nadam_momentum(step, beta1, momentum_decay)))


def nadam_coefficients(step: int, mu_product: float, lr: float, beta1: float, beta2: float,
                       momentum_decay: float) -> tuple[float, float, float]:
    """(bias_correction2, grad_coefficient, exp_avg_coefficient) of NAdam's step ``step``, whose
    ``mu_product`` (from :func:`nadam_mu_product`) already includes this step's mu:
    1 - beta2**step, -lr * (1 - mu) / (1 - mu_product) and
    -lr * mu_next / (1 - mu_product * mu_next), mu_next being the next step's coefficient.

    Raises:
        ValueError: ``step`` < 1 (the state's count is incremented before the update).
    """
    step = _checked_step("nadam_step", step)
    mu = _nadam_momentum(step, beta1, momentum_decay)
    mu_next = _nadam_momentum(step + 1, beta1, momentum_decay)
    grad_coefficient = -lr * (1.0 - mu) / (1.0 - mu_product)
    exp_avg_coefficient = (-lr * mu_next) / (1.0 - mu_product * mu_next)
    return 1 - beta2**step, grad_coefficient, exp_avg_coefficient


def radam_scalars(step: int, beta1: float, beta2: float) -> tuple[float, float, float | None]:
    """(bias_correction1, sqrt(bias_correction2), rectification) of RAdam's step ``step``: the
    rectification term when the approximated SMA length rho_t exceeds RADAM_RECTIFY_ABOVE, else
    None (the step then uses the bias-corrected momentum alone).

    Raises:
        ValueError: ``step`` < 1 (the state's count is incremented before the update).
    """
    step = _checked_step("radam_step", step)
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
    rectification = None
    if rho_t > RADAM_RECTIFY_ABOVE:
        rectification = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
    return bias_correction1, bias_correction2**0.5, rectification


def adamax_learning_rate(step: int, lr: float, beta1: float) -> float:
    """Adamax's bias-corrected learning rate at step ``step``: lr / (1 - beta1**step).

    Raises:
        ValueError: ``step`` < 1 (the state's count is incremented before the update).
    """
    step = _checked_step("adamax_step", step)
    return lr / (1 - beta1**step)


def asgd_schedules(step: int, lr: float, lambd: float, alpha: float, t0: float) -> tuple[float, float]:
    """ASGD's (eta, mu) for the step after step ``step``: lr / (1 + lambd * lr * step)**alpha and
    1 / max(1, step - t0), each rounded to float32 as PyTorch stores them.

    Raises:
        ValueError: ``step`` < 1 (the state's count is incremented before the update).
    """
    step = _checked_step("asgd_step", step)
    eta = lr / ((1 + lambd * lr * step) ** alpha)
    mu = 1 / max(1, step - t0)
    return float32_scalar(eta), float32_scalar(mu)

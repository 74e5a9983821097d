"""Negative log-likelihood losses of a distribution's parameters in ``zgrad.nn.functional``:
``poisson_nll_loss`` and ``gaussian_nll_loss``, composed of differentiable ops with PyTorch's
formulas, arguments and error texts."""

from __future__ import annotations

import math
from typing import Any

from zgrad import ops
from zgrad.creation import full_like
from zgrad.ops._args import tensor_arg
from zgrad.ops.loss_functions import check_legacy, check_reduction
from zgrad.ops.loss_pointwise import reduce_loss

__all__ = ["gaussian_nll_loss", "poisson_nll_loss"]


def poisson_nll_loss(input: Any, target: Any, log_input: bool = True, full: bool = False,  # noqa: A002
                     size_average: Any = None, eps: float = 1e-8, reduce: Any = None,
                     reduction: str = "mean") -> Any:
    """The Poisson negative log-likelihood of ``target``: exp(input) - target * input with
    ``log_input`` (input is the log of the rate), else input - target * log(input + eps); ``full``
    adds Stirling's approximation target * log(target) - target + log(2 pi target) / 2 where
    target > 1. As ``torch.nn.functional.poisson_nll_loss``.

    Raises:
        ValueError: an unknown ``reduction``. RuntimeError: sizes that do not broadcast.
        NotImplementedError: ``size_average`` or ``reduce``.
    """
    check_legacy(size_average, reduce)
    check_reduction(reduction)
    x, t = tensor_arg(input, "poisson_nll_loss", "input"), tensor_arg(target, "poisson_nll_loss", "target")
    loss = ops.exp(x) - t * x if log_input else x - t * ops.log(x + eps)
    if full:
        # read at 1 where it is masked, so a target of 0 makes no 0 * log(0) (NaN, in its gradient too)
        counts = ops.where(t <= 1, 1.0, t)
        stirling = counts * ops.log(counts) - counts + 0.5 * ops.log(2 * math.pi * counts)
        loss = loss + ops.where(t <= 1, 0.0, stirling)
    return reduce_loss(loss, reduction)


def _gaussian_variance(input: Any, var: Any) -> Any:  # noqa: A002
    """``var`` as a tensor that broadcasts to ``input``: a number filled in, one dimension short
    unsqueezed; checked as PyTorch checks it.

    Raises:
        ValueError: a negative entry, or a size that is neither input's, input's without its last
            dimension, nor input's with one dimension of size 1.
    """
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        return full_like(input, float(var))
    var = tensor_arg(var, "gaussian_nll_loss", "var")
    if bool(ops.any(var < 0).item()):
        raise ValueError("var has negative entry/entries")
    if var.shape == input.shape:
        return var
    if tuple(input.shape[:-1]) == tuple(var.shape):
        return ops.unsqueeze(var, -1)
    if input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1:
        return var
    raise ValueError("var is of incorrect size")


def gaussian_nll_loss(input: Any, target: Any, var: Any, full: bool = False, eps: float = 1e-6,  # noqa: A002
                      reduction: str = "mean") -> Any:
    """The Gaussian negative log-likelihood of ``target`` under mean ``input`` and variance
    ``var``: (log(var) + (input - target)^2 / var) / 2, plus log(2 pi) / 2 with ``full``; var is
    clamped to >= ``eps`` without that clamp reaching its gradient (as PyTorch). As
    ``torch.nn.functional.gaussian_nll_loss``.

    Args:
        var: a tensor of input's shape, of input's shape without its last dimension or with one
            dimension of size 1 (homoscedastic), or a non-negative number.

    Raises:
        ValueError: a negative or wrongly sized ``var``, an unknown ``reduction`` (PyTorch's
            messages).
    """
    x, t = tensor_arg(input, "gaussian_nll_loss", "input"), tensor_arg(target, "gaussian_nll_loss", "target")
    var = _gaussian_variance(x, var)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # PyTorch clamps a clone under no_grad: the value is eps below it, the gradient var's own (1)
    fixed = var.detach()
    var = ops.where(fixed < eps, var - fixed + eps, var)
    loss = 0.5 * (ops.log(var) + (x - t) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)

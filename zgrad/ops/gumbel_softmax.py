"""``gumbel_softmax``: a differentiable sample from a categorical distribution, as PyTorch's.

The Gumbel-max trick: adding independent Gumbel(0, 1) noise, -log(E) with E ~ Exponential(1), to
the logits and taking the arg max draws a category with probability softmax(logits). The softmax
of the perturbed logits divided by a temperature ``tau`` is its differentiable relaxation; with
``hard=True`` the forward value is the one-hot arg max and the gradient is the relaxation's (the
straight-through estimator). The noise comes from zgrad's generator.
"""

from __future__ import annotations

import warnings
from typing import Any

from zgrad import ops
from zgrad.creation import empty_like, zeros_like
from zgrad.ops._args import tensor_arg

__all__ = ["gumbel_softmax"]


def gumbel_softmax(logits: Any, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Any:
    """A sample from the Gumbel-softmax distribution over ``dim`` of ``logits`` (unnormalized log
    probabilities), as ``torch.nn.functional.gumbel_softmax``: softmax((logits + g) / tau) with g
    Gumbel noise; with ``hard``, the one-hot vector of its arg max, differentiated as the soft
    sample. ``eps`` is deprecated and unused (a warning says so, as in PyTorch).

    Raises:
        TypeError: ``logits`` is not a tensor.
    """
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", UserWarning, stacklevel=2)
    x = tensor_arg(logits, "gumbel_softmax", "logits")
    gumbels = -ops.log(empty_like(x).exponential_())
    soft = ops.softmax((x + gumbels) / tau, dim)
    if not hard:
        return soft
    one_hot = zeros_like(x).scatter_(dim, soft.argmax(dim, keepdim=True), 1.0)
    return one_hot - soft.detach() + soft

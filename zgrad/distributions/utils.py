"""``zgrad.distributions.utils``: the helpers the distributions share, under torch.distributions.utils's
names: broadcasting parameters, probabilities to and from logits, lazily derived attributes, and
triangular matrices to and from vectors."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from zgrad.creation import tensor, zeros
from zgrad.creation_random import randn
from zgrad.engine.grad_mode import enable_grad
from zgrad.kernels.promotion import get_default_dtype
from zgrad.memory_formats import Size
from zgrad.ops.functions import sigmoid, softmax
from zgrad.ops.layout import broadcast_tensors
from zgrad.random import numpy_generator
from zgrad.tensor import Tensor
from zgrad.type_info import finfo

__all__ = ["broadcast_all", "clamp_probs", "euler_constant", "lazy_property", "logits_to_probs", "probs_to_logits",
           "tril_matrix_to_vec", "vec_to_tril_matrix"]

euler_constant = 0.57721566490153286060
"""The Euler-Mascheroni constant."""

NUMBER_TYPES = (bool, int, float)  # what PyTorch counts as a number parameter (numpy floats subclass float)


def broadcast_all(*values: Tensor | float) -> tuple[Tensor, ...]:
    """``values`` broadcast against each other; numbers become tensors of the first tensor's dtype and
    device (of the default dtype when all are numbers).

    Raises:
        ValueError: a value that is neither a Tensor nor a number.
    """
    if not all(isinstance(v, (Tensor, *NUMBER_TYPES)) for v in values):
        raise ValueError("Input arguments must all be instances of Number or zgrad.Tensor.")
    if all(isinstance(v, Tensor) for v in values):
        return tuple(broadcast_tensors(*values))
    first = next((v for v in values if isinstance(v, Tensor)), None)
    dtype, device = (get_default_dtype(), None) if first is None else (first.dtype, first.device)
    tensors = [v if isinstance(v, Tensor) else tensor(v, dtype=dtype, device=device) for v in values]
    return tuple(broadcast_tensors(*tensors))


def _standard_normal(shape: Sequence[int], dtype: Any, device: Any) -> Tensor:
    """N(0, 1) draws of ``shape`` from the default generator of ``device``."""
    return randn(tuple(shape), dtype=dtype, device=device)


def _draw_on_host(like: Tensor, draw: Callable[[np.random.Generator], np.ndarray], dtype: Any = None) -> Tensor:
    """``draw(generator)`` made with the numpy generator behind the default generator of ``like``'s
    device, as a tensor on that device of ``dtype`` (default: ``like``'s); for the samplers zgrad's
    kernels have no fill for (Gamma, Poisson, binomial draws)."""
    values = np.asarray(draw(numpy_generator(device=like.device)))
    return tensor(values.astype(like.dtype if dtype is None else dtype), device=like.device)


def _sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """``value`` summed over its ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.ndim - dim]) + (-1,)).sum(-1)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from log-odds (``is_binary``: sigmoid) or from unnormalized log-probabilities
    along the last dimension (softmax)."""
    if is_binary:
        return sigmoid(logits)
    return softmax(logits, -1)


def clamp_probs(probs: Tensor) -> Tensor:
    """``probs`` clamped to [eps, 1 - eps] of its dtype, so that their logs and log-odds are finite."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds (``is_binary``) or log-probabilities of the clamped ``probs``."""
    clamped = clamp_probs(probs)
    if is_binary:
        return clamped.log() - (-clamped).log1p()
    return clamped.log()


class lazy_property:
    """A read-once attribute: the decorated method runs (with gradients recorded) on first access
    and its value replaces the descriptor on the instance. Distribution validation skips such
    attributes until they are computed (a parameter derived from the one that was given)."""

    def __init__(self, wrapped: Callable[[Any], Any]) -> None:
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _tril_mask(n: int, diag: int) -> np.ndarray:
    rows = np.arange(n)
    return rows[None, :] < rows[:, None] + (diag + 1)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower-triangular entries (below ``diag``'s diagonal included) of each ``D x D`` matrix of
    ``mat``, in row order.

    Raises:
        ValueError: ``diag`` outside [-D, D - 1].
    """
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    rows, cols = np.nonzero(_tril_mask(n, diag))
    return mat[..., tensor(rows, device=mat.device), tensor(cols, device=mat.device)]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The ``D x D`` lower-triangular matrices whose entries (row order) are ``vec``'s last dimension;
    the inverse of :func:`tril_matrix_to_vec`.

    Raises:
        ValueError: a last dimension that is no triangle's size.
    """
    # the positive root of D**2 + (1 + 2 diag) D - |diag| (diag + 1) - 2 len = 0
    b = 1 + 2 * diag
    n = (-b + (b * b + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as the lower "
                         "triangular part of a square D x D matrix.")
    n = round(n)
    flat = vec.reshape(-1, vec.shape[-1])
    mat = zeros((flat.shape[0], n * n), dtype=vec.dtype, device=vec.device)
    positions = tensor(np.nonzero(_tril_mask(n, diag).reshape(-1))[0], device=vec.device)
    mat = mat.index_add(1, positions, flat)
    return mat.reshape(Size(tuple(vec.shape[:-1]) + (n, n)))

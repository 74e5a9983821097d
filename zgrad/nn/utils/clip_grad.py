"""Gradient clipping, as ``torch.nn.utils.clip_grad``: ``clip_grad_norm_`` (``get_total_norm``
then ``clip_grads_with_norm_``) and ``clip_grad_value_``.

Each gradient's norm is one fused pass of a norm kernel, written into one vector of norms
(``dispatch_reduce.vector_norms``; on CUDA one launch per group of gradients, as PyTorch's
``_foreach_norm``), and the total norm is the norm of those norms, as PyTorch computes it; scaling
is one in-place pass per gradient (on CUDA per group), skipped when the factor is exactly 1. Under
DistributedDataParallel, ``backward()`` returns with the gradients already averaged over the
ranks, so every rank computes the same total norm and clips alike.
"""

from __future__ import annotations

import math
import types
import warnings
from typing import Iterable

import numpy as np

from zgrad.kernels import dispatch, dispatch_pointwise, dispatch_reduce
from zgrad.tensor import Tensor

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _as_list(tensors: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _grads(parameters: list[Tensor]) -> list[Tensor]:
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors: Tensor | Iterable[Tensor], norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The ``norm_type``-norm of ``tensors`` taken together, as if concatenated into one vector.

    Args:
        tensors: a tensor or an iterable of tensors (the gradients, not the parameters).
        norm_type: p of the p-norm; ``inf`` (or ``"inf"``) for the largest absolute value.
        error_if_nonfinite: raise if the norm is NaN or infinite.
        foreach: accepted for PyTorch's signature (zgrad groups the tensors where the backend can).

    Returns:
        A 0-d tensor on the first tensor's device (``tensor(0.)`` for no tensors). Blocks.

    Raises:
        RuntimeError: ``error_if_nonfinite`` and the norm is not finite (PyTorch's message).
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor(dispatch.full((), 0.0, dispatch.DEFAULT_FLOAT))
    device = dispatch.device_type_of(tensors[0]._data)
    arrays = [t._data for t in tensors]
    if all(dispatch.device_type_of(a) == device and a.dtype == arrays[0].dtype for a in arrays):
        norms = dispatch_reduce.vector_norms(arrays, norm_type)
    else:  # PyTorch's grouping by device and dtype: each norm moved to the first tensor's device
        norms = dispatch.stack([dispatch.to_device(dispatch_reduce.vector_norm(a, norm_type), device) for a in arrays], 0)
    total = dispatch_reduce.vector_norm(norms, norm_type)
    if error_if_nonfinite and not math.isfinite(float(dispatch.to_device(total, "cpu"))):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                           "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return Tensor(total)


def clip_grads_with_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale the gradients of ``parameters`` in place by min(max_norm / (total_norm + 1e-6), 1),
    computed in ``total_norm``'s dtype as PyTorch does. A CPU norm is read on the host (a
    coefficient of exactly 1 then changes nothing and is skipped); a CUDA norm's coefficient is
    computed and applied on the device, without waiting for it."""
    grads = _grads(_as_list(parameters))
    if not grads:
        return
    norm = total_norm._data if isinstance(total_norm, Tensor) else np.asarray(total_norm)
    scalar = norm.dtype.type
    if dispatch.device_type_of(norm) != "cpu":
        # A device's norm: the coefficient is computed and applied there, with no wait for it.
        # (Python floats: they compute in the norm's dtype, as the scalars below do)
        coefficient = dispatch.binary("minimum", dispatch.binary(
            "div", float(max_norm), dispatch.binary("add", norm, 1e-6)), 1.0)
        dispatch_pointwise.mul_each_([g._data for g in grads], coefficient)
        return
    coefficient = np.minimum(scalar(float(max_norm)) / (norm + scalar(1e-6)), scalar(1.0))
    if coefficient != 1.0:  # multiplying by exactly 1 changes nothing (a NaN coefficient is applied)
        # An infinite gradient (a step GradScaler will skip) times the zero coefficient is NaN, as
        # in PyTorch, which does not warn about it either.
        with np.errstate(invalid="ignore"):
            for g in grads:
                dispatch_pointwise.inplace_binary("mul", g._data, float(coefficient))


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Clip the gradients of ``parameters`` so that their total ``norm_type``-norm is at most
    ``max_norm`` (in place; parameters without ``.grad`` are skipped).

    Returns:
        The total norm of the gradients before clipping, a 0-d tensor. Blocks.

    Raises:
        RuntimeError: ``error_if_nonfinite`` and the total norm is NaN or infinite.

    Warns:
        UserWarning: ``parameters`` is an empty generator (PyTorch's warning).
    """
    generator = isinstance(parameters, types.GeneratorType)
    parameters = _as_list(parameters)
    if generator and not parameters:
        warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=3)
    total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters: Tensor | Iterable[Tensor], max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_` (PyTorch's ``FutureWarning``)."""
    warnings.warn("`zgrad.nn.utils.clip_grad_norm` is now deprecated in favor of `zgrad.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient of ``parameters`` into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    for g in _grads(_as_list(parameters)):
        dispatch_pointwise.clamp(g._data, -clip_value, clip_value, out=g._data)

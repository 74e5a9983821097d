"""Sampling from tensors of parameters: ``normal``, ``bernoulli``, ``multinomial``, as PyTorch's.

Draws come from ``generator`` (a :class:`zgrad.Generator`; None: the default generator). A sample
is not differentiable in its parameters, but PyTorch records it: the result of ``normal(mean,
std)`` or ``bernoulli(p)`` on tensors that require grad has a ``grad_fn`` whose gradient is zero
for every parameter (``Sampled`` below), so ``.grad`` becomes zeros rather than staying None.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.autograd.function import Op
from zgrad.creation import size_arg
from zgrad.creation_random import check_floating, random_tensor
from zgrad.errors import DTypeError, ShapeError, ZgradError
from zgrad.generator import Generator
from zgrad.kernels import dispatch, dispatch_pointwise
from zgrad.kernels.promotion import get_default_dtype, is_floating, result_type
from zgrad.ops._args import tensor_arg
from zgrad.random import numpy_generator
from zgrad.tensor import Tensor

__all__ = ["Sampled", "bernoulli", "binomial", "multinomial", "normal", "poisson"]


class Sampled(Op):
    """A sample drawn from the parameters that follow it: the sample as is, zero gradients."""

    @staticmethod
    def forward(ctx, sample, *parameters):
        ctx.parameters = [(p.shape, p.dtype, dispatch.device_type_of(p)) if hasattr(p, "shape") else None
                          for p in parameters]
        return sample

    @staticmethod
    def backward(ctx, grad):
        zeros = (None if meta is None else dispatch.full(meta[0], 0, meta[1], meta[2]) for meta in ctx.parameters)
        return (None, *zeros)


def _draw(shape: tuple[int, ...], dtype: np.dtype, device: Any, generator: Generator | None,
          fill: Any) -> Any:
    """A new array of ``shape`` and ``dtype`` on ``device`` that ``fill(array, numpy_generator)`` writes."""
    return random_tensor(shape, dtype, device, False, generator, fill)._data


def normal(mean: Any, std: Any = 1.0, size: Any = None, *, generator: Generator | None = None, dtype: Any = None,
           device: Any = None, requires_grad: bool = False) -> Tensor:
    """Samples of N(mean, std^2), in PyTorch's four forms: ``normal(mean_tensor, std_tensor)``
    (broadcast together), ``normal(mean_tensor, std=1.0)``, ``normal(mean, std_tensor)``, and
    ``normal(mean, std, size)`` for numbers (``dtype``, ``device``, ``requires_grad`` apply to this
    form only). Differentiable (zero gradients) in tensor parameters, as PyTorch's.

    Raises:
        ZgradError: a negative ``std``.
        DTypeError: integer parameters.
        TypeError: numbers for both without a ``size``.
    """
    tensors = [p for p in (mean, std) if isinstance(p, Tensor)]
    if not isinstance(std, Tensor) and std < 0:
        raise ZgradError(f"normal expects std >= 0.0, but found std {std}")
    if not tensors:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments - got (float, float): pass a "
                            "tensor mean or std, or a size: normal(mean, std, size)")
        dtype = np.dtype(dtype or get_default_dtype())
        check_floating(dtype, "normal")
        return random_tensor(size_arg((size,)), dtype, device, requires_grad, generator,
                             lambda out, g: dispatch_pointwise.random_normal_(out, float(mean), float(std), g))
    for p in tensors:
        check_floating(p.dtype, "normal")
    if isinstance(std, Tensor) and std.numel() and std._data.min() < 0:
        raise ZgradError("normal expects all elements of std >= 0.0")
    arrays = [p._data if isinstance(p, Tensor) else p for p in (mean, std)]
    shape = dispatch.broadcast_shape(*(getattr(a, "shape", ()) for a in arrays))
    out_dtype = result_type(*(t._data for t in tensors))
    device = tensors[0].device
    noise = _draw(shape, out_dtype, device, generator,
                  lambda out, g: dispatch_pointwise.random_normal_(out, 0.0, 1.0, g))
    sample = dispatch.binary("add", dispatch.binary("mul", noise, arrays[1], out_dtype), arrays[0], out_dtype)
    return Sampled.apply(sample, mean, std)


def bernoulli(input: Tensor, p: float | None = None, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """0/1 samples of ``input``'s dtype and shape: 1 with probability ``input`` (element-wise), or
    with probability ``p`` everywhere when given. Differentiable (zero gradient) in ``input``.

    Raises:
        DTypeError: a non-floating ``input`` without ``p``.
        ZgradError: a probability outside [0, 1].
    """
    tensor_arg(input, "bernoulli")
    if p is None:
        check_floating(input.dtype, "bernoulli")
        probs = input._data
        if input.numel() and not 0 <= probs.min() <= probs.max() <= 1:
            raise ZgradError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    else:
        probs = check_probability(p, "bernoulli")
    sample = bernoulli_draw(input.shape, input.dtype, input.device, probs, generator)
    return Sampled.apply(sample, input)


def check_probability(p: Any, what: str) -> float:
    """``p`` as a float in [0, 1].

    Raises:
        ZgradError: ``p`` outside [0, 1].
    """
    if not 0.0 <= p <= 1.0:
        raise ZgradError(f"{what} expects p to be in [0, 1], but got p={p}")
    return float(p)


def bernoulli_draw(shape: tuple[int, ...], dtype: np.dtype, device: Any, probs: Any, generator: Generator | None) -> Any:
    """An array of ``shape`` and ``dtype`` on ``device``, 1 where a uniform draw falls below
    ``probs`` (a number, or an array that broadcasts to ``shape``), else 0."""
    draw_dtype = dtype if is_floating(dtype) else np.dtype(np.float64)
    uniform = _draw(shape, draw_dtype, device, generator,
                    lambda out, g: dispatch_pointwise.random_uniform_(out, 0.0, 1.0, g))
    return dispatch.cast(dispatch_pointwise.compare("lt", uniform, probs), dtype)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator: Generator | None = None) -> Tensor:
    """``num_samples`` int64 category indices per row of ``input`` (1-D: one distribution; 2-D:
    one per row), drawn with probability proportional to the (non-negative) weights, with or
    without replacement. Without replacement, zero-weight categories come last, as PyTorch's.

    Raises:
        DTypeError: a non-floating ``input``.
        ShapeError: ``input`` is not 1-D or 2-D, ``num_samples`` < 1, or more samples than
            categories without replacement.
        ZgradError: a negative, infinite or NaN weight, or a row that sums to 0 (checked where
            the draws are made).
    """
    tensor_arg(input, "multinomial")
    if not is_floating(input.dtype):
        raise DTypeError(f"multinomial only supports floating-point dtypes for input, got: "
                         f"{dispatch.scalar_type_name(input.dtype)}")
    if input.ndim not in (1, 2):
        raise ShapeError("prob_dist must be 1 or 2 dim")
    if num_samples <= 0:
        raise ShapeError("cannot sample n_sample <= 0 samples")
    categories = input.shape[-1]
    if not replacement and num_samples > categories:
        raise ShapeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    probs = input._data if input.ndim == 2 else input._data.reshape(1, categories)
    out = dispatch_pointwise.multinomial(probs, int(num_samples), bool(replacement),
                                         numpy_generator(generator, input.device))
    return Tensor(out if input.ndim == 2 else out.reshape(num_samples))


def _host_values(x: Tensor) -> np.ndarray:
    return np.asarray(dispatch.host_buffer(x._data), np.float64)


def _sampled(values: np.ndarray, like: Tensor, *parameters: Tensor) -> Tensor:
    """``values`` as a sample of ``like``'s dtype and device, with zero gradients to ``parameters``."""
    sample = dispatch.to_device(values.astype(like.dtype), dispatch.device_type_of(like._data))
    return Sampled.apply(sample, *parameters)


def poisson(input: Tensor, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """A Poisson draw per element of the rates ``input``, of its dtype and shape (a zero gradient
    to ``input``, as PyTorch's).

    Raises:
        NotImplementedError: a non-floating ``input`` (PyTorch's message).
        ZgradError: a negative rate (PyTorch's message).
    """
    tensor_arg(input, "poisson")
    if not is_floating(input.dtype):
        raise NotImplementedError(f"\"poisson_{input.device.type}\" not implemented for "
                                  f"'{dispatch.scalar_type_name(input.dtype)}'")
    rates = _host_values(input)
    if (rates < 0).any():
        raise ZgradError("invalid Poisson rate, expected rate to be non-negative")
    return _sampled(numpy_generator(generator, input.device).poisson(rates), input, input)


def binomial(count: Tensor, prob: Tensor, generator: Generator | None = None) -> Tensor:
    """A binomial draw per element: successes in ``count`` trials of probability ``prob`` (broadcast
    together), of ``count``'s dtype; counts below zero draw 0 and probabilities are clamped to
    [0, 1], as PyTorch's kernel does. Zero gradients to both.

    Raises:
        ValueError: a non-floating ``count`` or ``prob`` (PyTorch's error and message).
    """
    tensor_arg(count, "binomial", "count")
    tensor_arg(prob, "binomial", "prob")
    for name, x in (("count", count), ("prob", prob)):
        if not is_floating(x.dtype):
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: "
                             f"{dispatch.scalar_type_name(x.dtype)}")
    counts = np.floor(np.maximum(_host_values(count), 0)).astype(np.int64)
    probs = np.clip(_host_values(prob), 0.0, 1.0)
    counts, probs = np.broadcast_arrays(counts, probs)
    return _sampled(numpy_generator(generator, count.device).binomial(counts, probs), count, count, prob)

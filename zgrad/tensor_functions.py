"""The ``zgrad.<name>`` forms of tensor queries and methods PyTorch also offers as functions:
``is_tensor``, ``is_floating_point``, ``numel``, ``clone``, ``detach``, ``fill``, ``zero_``,
``rsub``, ``split_with_sizes``, ... Each applies the method of the same name (or its op), so a
function and its method cannot disagree."""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad import ops
from zgrad.kernels import dispatch
from zgrad.memory_formats import preserve_format
from zgrad.tensor import Tensor

__all__ = ["is_tensor", "is_floating_point", "is_complex", "is_nonzero", "is_same_size", "is_signed", "is_neg",
           "is_inference", "numel", "clone", "detach", "fill",
           "fill_", "zero_", "rsub", "split_with_sizes", "unsafe_chunk", "unsafe_split", "conj", "conj_physical",
           "resolve_conj", "resolve_neg", "is_conj", "real", "imag", "isreal"]


def _tensor(x: Any, name: str) -> Tensor:
    """``x`` if it is a Tensor.

    Raises:
        TypeError: anything else (PyTorch's message).
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    return x


def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a zgrad Tensor (a Parameter included)."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Any) -> bool:  # noqa: A002 - PyTorch's argument names
    """Whether ``input``'s dtype is a floating point one (float16, bfloat16, float32, float64)."""
    return _tensor(input, "is_floating_point").is_floating_point()


def is_complex(input: Any) -> bool:  # noqa: A002
    """Whether ``input``'s dtype is complex: always False, zgrad has no complex dtypes."""
    return _tensor(input, "is_complex").is_complex()


def isreal(input: Any) -> Tensor:  # noqa: A002
    """True for every element, as a bool tensor: zgrad's dtypes are all real."""
    return _tensor(input, "isreal").isreal()


def conj(input: Any) -> Tensor:  # noqa: A002
    """``input`` itself: the conjugate of a real tensor (zgrad's dtypes are all real)."""
    return _tensor(input, "conj").conj()


def conj_physical(input: Any) -> Tensor:  # noqa: A002
    """``input`` itself, as :func:`conj`."""
    return _tensor(input, "conj_physical").conj_physical()


def resolve_conj(input: Any) -> Tensor:  # noqa: A002
    """``input`` itself: a real tensor has no conjugate bit to resolve."""
    return _tensor(input, "resolve_conj").resolve_conj()


def resolve_neg(input: Any) -> Tensor:  # noqa: A002
    """``input`` itself: a real tensor has no negative bit to resolve."""
    return _tensor(input, "resolve_neg").resolve_neg()


def is_conj(input: Any) -> bool:  # noqa: A002
    """False: a real tensor's conjugate bit is never set."""
    return _tensor(input, "is_conj").is_conj()


def real(input: Any) -> Tensor:  # noqa: A002
    """``input`` itself: the real part of a real tensor."""
    return _tensor(input, "real").real


def imag(input: Any) -> Tensor:  # noqa: A002
    """Refused for real tensors, as PyTorch refuses it.

    Raises:
        RuntimeError: always (zgrad's dtypes are all real).
    """
    return _tensor(input, "imag").imag


def is_same_size(input: Any, other: Any) -> bool:  # noqa: A002
    """Whether ``input`` and ``other`` have the same shape."""
    return tuple(_tensor(input, "is_same_size").shape) == tuple(_tensor(other, "is_same_size").shape)


def is_signed(input: Any) -> bool:  # noqa: A002
    """Whether ``input``'s dtype holds negative values (every dtype but bool and uint8)."""
    return _tensor(input, "is_signed").is_signed()


def is_neg(input: Any) -> bool:  # noqa: A002
    """Whether ``input`` is a lazily negated view: never in zgrad, which has no negative bit."""
    return _tensor(input, "is_neg").is_neg()


def is_inference(input: Any) -> bool:  # noqa: A002
    """Whether ``input`` was made in inference mode."""
    return _tensor(input, "is_inference").is_inference()


def is_nonzero(input: Any) -> bool:  # noqa: A002
    """Whether the single element of ``input`` is not zero.

    Raises:
        RuntimeError: ``input`` has no element or more than one (PyTorch's message).
    """
    return _tensor(input, "is_nonzero").is_nonzero()


def numel(input: Any) -> int:  # noqa: A002
    """The number of elements of ``input``."""
    return _tensor(input, "numel").numel()


def clone(input: Any, *, memory_format: Any = preserve_format) -> Tensor:  # noqa: A002
    """``input.clone(memory_format=...)``: a differentiable copy, laid out as ``input`` where it is
    dense, or as ``memory_format`` says."""
    return _tensor(input, "clone").clone(memory_format=memory_format)


def detach(input: Any) -> Tensor:  # noqa: A002
    """``input.detach()``: the same memory, out of the graph."""
    return _tensor(input, "detach").detach()


def fill(input: Any, value: Any) -> Tensor:  # noqa: A002
    """A new tensor of ``input``'s shape and dtype with every element ``value`` (a number or a
    0-dim tensor); differentiable (zero gradient to ``input``, the sum to a tensor ``value``).

    Raises:
        RuntimeError: a ``value`` tensor of one or more dimensions (PyTorch's message).
    """
    x = _tensor(input, "fill")
    if not isinstance(value, Tensor):
        return ops.clone(x).fill_(value)
    if value.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
    everywhere = Tensor(dispatch.full((), True, np.bool_, dispatch.device_type_of(x._data)))
    return ops.where(everywhere, ops.expand(ops.cast(value, x.dtype), x.shape), x)


def fill_(input: Any, value: Any) -> Tensor:  # noqa: A002
    """``input.fill_(value)``."""
    return _tensor(input, "fill_").fill_(value)


def zero_(input: Any) -> Tensor:  # noqa: A002
    """``input.zero_()``."""
    return _tensor(input, "zero_").zero_()


def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``other - alpha * input`` (``sub`` with its operands swapped)."""
    return ops.sub(other, input, alpha=alpha)


def split_with_sizes(input: Any, split_sizes: Any, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """Views of ``input`` along ``dim`` of the sizes in ``split_sizes``.

    Raises:
        ShapeError: a negative size, or sizes that do not add up to the dimension (PyTorch's messages).
    """
    return ops.split(input, list(split_sizes), dim)


def unsafe_split(tensor: Any, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """:func:`zgrad.split` (PyTorch's form that skips its view checks; zgrad's views need none)."""
    return ops.split(tensor, split_size_or_sections, dim)


def unsafe_chunk(input: Any, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """:func:`zgrad.chunk` (PyTorch's form that skips its view checks; zgrad's views need none)."""
    return ops.chunk(input, chunks, dim)

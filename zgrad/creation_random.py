"""Random tensor factories: ``rand``, ``randn``, ``randint``, ``randperm`` and their ``*_like``
forms, as PyTorch's.

Every one draws from ``generator`` (a :class:`zgrad.Generator`; None: the default generator of
the new tensor's device, which ``zgrad.manual_seed`` seeds) and fills the new tensor on its device through the kernel
layer's random fills. The numbers differ from PyTorch's for the same seed (the streams differ);
shapes, dtypes, ranges and distributions are PyTorch's.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from zgrad.creation import device_arg, factory_size, size_arg, wrap
from zgrad.errors import DTypeError, ShapeError, ZgradError
from zgrad.generator import Generator
from zgrad.kernels import dispatch, dispatch_pointwise
from zgrad.kernels.promotion import get_default_dtype, is_floating
from zgrad.random import numpy_generator
from zgrad.tensor import Tensor

__all__ = ["rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "random_tensor",
           "check_floating"]

_INT64 = np.dtype(np.int64)


def check_floating(dtype: np.dtype, what: str) -> None:
    """Raise unless ``dtype`` is a floating one (what PyTorch's continuous samplers take).

    Raises:
        DTypeError: an integer or bool dtype.
    """
    if not is_floating(dtype):
        raise DTypeError(f"{what} expects a floating point tensor, got {dtype}")


def random_tensor(shape: tuple[int, ...], dtype: Any, device: Any, requires_grad: bool, generator: Generator | None,
                  fill: Callable[[Any, np.random.Generator], Any]) -> Tensor:
    """A new leaf tensor of ``shape`` and ``dtype`` on ``device`` (None: the default device) that
    ``fill(array, numpy_generator)`` writes.

    Raises:
        ZgradError: ``generator`` is for another device type.
    """
    device = device_arg(device)
    out = dispatch.empty(shape, np.dtype(dtype), device.type)
    fill(out, numpy_generator(generator, device))
    return wrap(out, requires_grad)


def rand(*sizes: Any, size: Any = None, generator: Generator | None = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """Samples of U[0, 1); the size as ints, one tuple, or ``size=``.

    Raises:
        DTypeError: a non-floating ``dtype``.
    """
    dtype = np.dtype(dtype or get_default_dtype())
    check_floating(dtype, "rand")
    return random_tensor(factory_size(sizes, size, "rand"), dtype, device, requires_grad, generator,
                         lambda out, g: dispatch_pointwise.random_uniform_(out, 0.0, 1.0, g))


def randn(*sizes: Any, size: Any = None, generator: Generator | None = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples; the size as ints, one tuple, or ``size=``.

    Raises:
        DTypeError: a non-floating ``dtype``.
    """
    dtype = np.dtype(dtype or get_default_dtype())
    check_floating(dtype, "randn")
    return random_tensor(factory_size(sizes, size, "randn"), dtype, device, requires_grad, generator,
                         lambda out, g: dispatch_pointwise.random_normal_(out, 0.0, 1.0, g))


def _integer_bounds(low: int, high: int, dtype: np.dtype) -> None:
    """PyTorch's checks of ``randint``'s [low, high) for ``dtype``.

    Raises:
        ZgradError: ``low >= high``, or bounds ``dtype`` cannot hold.
    """
    if low >= high:
        raise ZgradError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if dtype.kind in "biu":
        info = np.iinfo(dtype) if dtype.kind != "b" else np.iinfo(np.uint8)
        lowest, highest = (info.min, info.max) if dtype.kind != "b" else (0, 1)
        if low < lowest or high - 1 > highest:
            name = "from" if low < lowest else "to - 1"
            raise ZgradError(f"{name} is out of bounds for {dispatch.scalar_type_name(dtype)}")


def _integer_tensor(shape: tuple[int, ...], low: Any, high: Any, dtype: np.dtype, device: Any, requires_grad: bool,
                    generator: Generator | None) -> Tensor:
    low, high = int(low), int(high)
    _integer_bounds(low, high, dtype)
    return random_tensor(shape, dtype, device, requires_grad, generator,
                         lambda out, g: dispatch_pointwise.random_integers_(out, low, high, g))


def randint(low: int = 0, high: Any = None, size: Any = None, *, generator: Generator | None = None,
            dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Integers uniform in [``low``, ``high``), int64 unless ``dtype`` says: ``randint(high, size)``
    or ``randint(low, high, size)``.

    Raises:
        ZgradError: ``low >= high``, or bounds ``dtype`` cannot hold.
        TypeError: no ``size``.
    """
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=size)
        low, high = 0, low
    if size is None or high is None:
        raise TypeError("randint() missing its 'high' and 'size' arguments: randint(high, size) or "
                        "randint(low, high, size)")
    dtype = np.dtype(dtype) if dtype is not None else _INT64
    return _integer_tensor(size_arg((size,)), low, high, dtype, device, requires_grad, generator)


def randperm(n: int, *, generator: Generator | None = None, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of 0, ..., n - 1 (int64 unless ``dtype`` says).

    Raises:
        ShapeError: ``n`` is negative.
    """
    if n < 0:
        raise ShapeError(f"n must be non-negative, got {n}")
    dtype = np.dtype(dtype) if dtype is not None else _INT64
    device = device_arg(device)
    permutation = numpy_generator(generator, device).permutation(int(n)).astype(dtype)
    return wrap(dispatch.to_device(permutation, device.type) if device.type != "cpu" else permutation, requires_grad)


def _like_args(input: Tensor, dtype: Any, device: Any) -> tuple[np.dtype, Any]:  # noqa: A002
    return (np.dtype(dtype) if dtype is not None else input.dtype), (input.device if device is None else device)


def rand_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None, device: Any = None,  # noqa: A002
              requires_grad: bool = False) -> Tensor:
    """U[0, 1) samples in ``input``'s shape (and dtype and device, unless given)."""
    dtype, device = _like_args(input, dtype, device)
    return rand(input.shape, generator=generator, dtype=dtype, device=device, requires_grad=requires_grad)


def randn_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None, device: Any = None,  # noqa: A002
               requires_grad: bool = False) -> Tensor:
    """Standard normal samples in ``input``'s shape (and dtype and device, unless given)."""
    dtype, device = _like_args(input, dtype, device)
    return randn(input.shape, generator=generator, dtype=dtype, device=device, requires_grad=requires_grad)


def randint_like(input: Tensor, low: int = 0, high: int | None = None, *, generator: Generator | None = None,  # noqa: A002
                 dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Integers uniform in [``low``, ``high``) in ``input``'s shape (and dtype and device, unless
    given): ``randint_like(input, high)`` or ``randint_like(input, low, high)``.

    Raises:
        ZgradError: ``low >= high``, or bounds the dtype cannot hold.
    """
    if high is None:
        low, high = 0, low
    dtype, device = _like_args(input, dtype, device)
    return _integer_tensor(input.shape, low, high, dtype, device, requires_grad, generator)

"""Smooth activations composed of existing kernels: SiLU (x * sigmoid(x)), Softplus
(log(1 + exp(beta x)) / beta, linear above ``threshold``) and Mish (x * tanh(softplus(x)))."""

from __future__ import annotations

from typing import Any, Callable

from zgrad import ops
from zgrad.kernels import dispatch_pointwise
from zgrad.ops._args import require_kinds, tensor_arg

__all__ = ["mish", "silu", "softplus"]


def _silu(x: Any) -> Any:
    return x * ops.sigmoid(x)


def _softplus(x: Any, beta: float, threshold: float) -> Any:
    """x where beta x > threshold, else log1p(exp(beta x)) / beta; exp reads min(beta x, threshold),
    so a large x gives no inf (whose zero gradient would turn into NaN)."""
    scaled = x * beta
    smooth = ops.log1p(ops.exp(ops.clamp(scaled, max=threshold)))
    return ops.where(scaled > threshold, x, smooth / beta if beta != 1.0 else smooth)


def _mish(x: Any) -> Any:
    return x * ops.tanh(_softplus(x, 1.0, 20.0))


def _apply(name: str, input: Any, inplace: bool, fn: Callable[[Any], Any]) -> Any:  # noqa: A002
    """``fn(input)``, or written into ``input`` (recorded in the graph where it must be)."""
    x = require_kinds(tensor_arg(input, name), name, "f")
    if not inplace:
        return fn(x)
    return x._inplace(lambda: dispatch_pointwise.write(x._data, fn(x.detach())._data), fn)


def silu(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """x * sigmoid(x), as ``torch.nn.functional.silu``; ``inplace`` writes into ``input``.

    Raises:
        DTypeError: a non-floating input.
    """
    return _apply("silu", input, inplace, _silu)


def mish(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """x * tanh(softplus(x)), as ``torch.nn.functional.mish``; ``inplace`` writes into ``input``.

    Raises:
        DTypeError: a non-floating input.
    """
    return _apply("mish", input, inplace, _mish)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:  # noqa: A002
    """log(1 + exp(beta x)) / beta, and x itself where beta x > ``threshold``, as
    ``torch.nn.functional.softplus``.

    Raises:
        DTypeError: a non-floating input.
    """
    return _apply("softplus", input, False, lambda x: _softplus(x, float(beta), float(threshold)))

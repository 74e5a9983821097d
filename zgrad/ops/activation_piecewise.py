"""Piecewise activations of ``zgrad.nn.functional``: ``hardtanh``, ``relu6``, ``hardsigmoid``,
``hardswish``, ``threshold``, ``softshrink`` and ``hardshrink``, composed of differentiable ops.

PyTorch's gradients of these are 0 exactly on the kinks (hardtanh's at min_val and max_val,
hardsigmoid's at -3 and 3, hardswish's at -3, threshold's at the threshold), where clamp's would be
1; the composed values keep their gradient only where PyTorch's backward passes it
(:func:`_gradient_where`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from zgrad import ops
from zgrad.kernels import dispatch_pointwise
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.kernels.promotion import is_floating
from zgrad.ops._args import require_kinds, tensor_arg
from zgrad.tensor import tensor_methods

__all__ = ["apply_inplace", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "relu6", "softshrink", "threshold"]


def apply_inplace(x: Any, fn: Callable[[Any], Any], inplace: bool) -> Any:
    """``fn(x)``, or with ``inplace`` its value written into ``x`` under PyTorch's in-place rules
    (an error on a leaf that requires grad; recorded in the graph where it must be)."""
    if not inplace:
        return fn(x)
    return x._inplace(lambda: dispatch_pointwise.write(x._data, fn(x.detach())._data), fn)


def _gradient_where(passes: Any, y: Any) -> Any:
    """``y``, with its gradient kept only where ``passes`` (a constant elsewhere)."""
    return ops.where(passes, y, y.detach())


def _scalar(x: Any, value: float) -> Any:
    """``value`` as a scalar of ``x``'s kind, so an integer input keeps its dtype (as PyTorch's)."""
    return value if is_floating(x.dtype) else int(value)


def _hardtanh(x: Any, min_val: Any, max_val: Any) -> Any:
    inside = ~((x <= min_val) | (x >= max_val))
    return _gradient_where(inside, ops.clamp(x, min_val, max_val))


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Any:  # noqa: A002
    """``input`` clamped to [min_val, max_val], as ``torch.nn.functional.hardtanh``; the gradient
    is 0 at min_val and max_val themselves. ``inplace`` writes into ``input``.

    Raises:
        ValueError: ``min_val`` > ``max_val`` (PyTorch's message).
    """
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    x = tensor_arg(input, "hardtanh")
    low, high = _scalar(x, min_val), _scalar(x, max_val)
    return apply_inplace(x, lambda t: _hardtanh(t, low, high), inplace)


def relu6(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """min(max(0, x), 6), as ``torch.nn.functional.relu6`` (``hardtanh(input, 0, 6)``).

    Raises:
        TypeError: a non-tensor input.
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def _hardsigmoid(x: Any) -> Any:
    return _gradient_where((x > -3) & (x < 3), ops.clamp(x + 3, 0, 6) / 6)


def hardsigmoid(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """min(max(x + 3, 0), 6) / 6, as ``torch.nn.functional.hardsigmoid``; the gradient is 1/6
    strictly inside (-3, 3), else 0. ``inplace`` writes into ``input``.

    Raises:
        DTypeError: a non-floating input.
    """
    x = require_kinds(tensor_arg(input, "hardsigmoid"), "hardsigmoid", "f")
    return apply_inplace(x, _hardsigmoid, inplace)


def _hardswish(x: Any) -> Any:
    """PyTorch's gradient: 0 where x <= -3, x / 3 + 1/2 inside (-3, 3), 1 where x >= 3."""
    scale = ops.clamp(x + 3, 0, 6)
    linear = x * scale.detach() / 6  # y's value (PyTorch's order of operations), gradient 1 where x >= 3; inf stays inf
    return ops.where(x >= 3, linear, _gradient_where(x > -3, x * scale / 6))


def hardswish(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """x * min(max(x + 3, 0), 6) / 6, as ``torch.nn.functional.hardswish``; ``inplace`` writes
    into ``input``.

    Raises:
        DTypeError: a non-floating input.
    """
    x = require_kinds(tensor_arg(input, "hardswish"), "hardswish", "f")
    return apply_inplace(x, _hardswish, inplace)


def threshold(input: Any, threshold: float, value: float, inplace: bool = False) -> Any:  # noqa: A002
    """``value`` where x <= ``threshold``, else x, as ``torch.nn.functional.threshold`` (NaN stays
    NaN); the gradient is 0 where x <= threshold. ``inplace`` writes into ``input``.

    Raises:
        TypeError: a non-tensor input.
    """
    x = tensor_arg(input, "threshold")
    level, fill = _scalar(x, threshold), _scalar(x, value)
    return apply_inplace(x, lambda t: ops.where(t <= level, fill, t), inplace)


def softshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0, as
    ``torch.nn.functional.softshrink``; the gradient is 0 on [-lambd, lambd].

    Raises:
        DTypeError: a non-floating input.
        RuntimeError: a negative ``lambd`` (PyTorch's message).
    """
    x = require_kinds(tensor_arg(input, "softshrink"), "softshrink", "f")
    if not 0 <= lambd <= float(np.finfo(x.dtype).max):
        raise RuntimeError(f"lambda must be in range [0, {float(np.finfo(x.dtype).max):g}] for input dtype "
                           f"{scalar_type_name(x.dtype)}, but found {lambd:g}")
    return ops.where(ops.abs(x) <= lambd, 0.0, x - lambd * ops.sign(x))  # NaN stays NaN, with gradient 1


def hardshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """0 where -lambd <= x <= lambd, else x, as ``torch.nn.functional.hardshrink`` (the gradient
    is 0 on that closed interval).

    Raises:
        DTypeError: a non-floating input.
    """
    x = require_kinds(tensor_arg(input, "hardshrink"), "hardshrink", "f")
    return ops.where((x >= -lambd) & (x <= lambd), 0.0, x)


@tensor_methods
class _ShrinkMethods:
    def hardshrink(self, lambd: float = 0.5) -> Any:
        """:func:`hardshrink` of this tensor."""
        return hardshrink(self, lambd)

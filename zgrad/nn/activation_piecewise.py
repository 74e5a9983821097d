"""Piecewise activation modules: ``Hardtanh``, ``ReLU6``, ``Hardsigmoid``, ``Hardswish``,
``Threshold``, ``Softshrink`` and ``Hardshrink``, as PyTorch's."""

from __future__ import annotations

import warnings
from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.activation_piecewise import hardshrink, hardsigmoid, hardswish, hardtanh, softshrink, threshold

__all__ = ["Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "ReLU6", "Softshrink", "Threshold"]


def _inplace_suffix(inplace: bool, first: bool = False) -> str:
    return ("inplace=True" if first else ", inplace=True") if inplace else ""


class Hardtanh(Module):
    """``input`` clamped to [min_val, max_val] (``min_value``/``max_value``: PyTorch's deprecated
    names); ``inplace=True`` overwrites the input.

    Raises:
        AssertionError: ``max_val`` <= ``min_val`` (as PyTorch).
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: float | None = None, max_value: float | None = None) -> None:
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({self.max_val}) must be greater than min_val ({self.min_val})")

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_suffix(self.inplace)}"


class ReLU6(Hardtanh):
    """min(max(0, x), 6); ``inplace=True`` overwrites the input."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace_suffix(self.inplace, first=True)


class Hardsigmoid(Module):
    """min(max(x + 3, 0), 6) / 6; ``inplace=True`` overwrites the input."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return hardsigmoid(input, self.inplace)


class Hardswish(Module):
    """x * min(max(x + 3, 0), 6) / 6; ``inplace=True`` overwrites the input."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return hardswish(input, self.inplace)


class Threshold(Module):
    """``value`` where x <= ``threshold``, else x; ``inplace=True`` overwrites the input."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}{_inplace_suffix(self.inplace)}"


class Softshrink(Module):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Any) -> Any:  # noqa: A002
        return softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Module):
    """0 on [-lambd, lambd], else x."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Any) -> Any:  # noqa: A002
        return hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"

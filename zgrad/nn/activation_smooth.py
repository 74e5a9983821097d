"""Smooth activation modules: ``SiLU``, ``Mish`` and ``Softplus``."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.activation_smooth import mish, silu, softplus

__all__ = ["Mish", "SiLU", "Softplus"]


class SiLU(Module):
    """x * sigmoid(x); ``inplace=True`` overwrites the input."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return silu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Mish(Module):
    """x * tanh(softplus(x)); ``inplace=True`` overwrites the input."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return mish(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Softplus(Module):
    """log(1 + exp(beta x)) / beta, linear where beta x > ``threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Any) -> Any:  # noqa: A002
        return softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"

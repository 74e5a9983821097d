"""Dropout layers: ``Dropout`` and ``Dropout2d`` (identity in eval mode)."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.dropout import check_probability, dropout, dropout2d

__all__ = ["Dropout", "Dropout2d"]


class _DropoutBase(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        self.p = check_probability(p)
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutBase):
    """In training mode, zero each element with probability ``p`` and scale the others by 1/(1-p).

    Raises:
        ValueError: ``p`` outside [0, 1] ("dropout probability has to be between 0 and 1, but got ...").
    """

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return dropout(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutBase):
    """In training mode, zero whole channels of (N, C, H, W) input with probability ``p`` and scale
    the others by 1/(1-p)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return dropout2d(input, self.p, self.training, self.inplace)

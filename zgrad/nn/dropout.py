"""Dropout layers: ``Dropout`` and the channel-wise ``Dropout1d``/``2d``/``3d`` (identity in eval mode)."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.dropout import check_probability, dropout, dropout1d, dropout2d, dropout3d

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


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


class Dropout1d(_DropoutBase):
    """In training mode, zero whole channels of (N, C, L) or (C, L) input with probability ``p`` and
    scale the others by 1/(1-p)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutBase):
    """In training mode, zero whole channels of (N, C, H, W) input with probability ``p`` and scale
    the others by 1/(1-p) (other ranks: :func:`zgrad.nn.functional.dropout2d`)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutBase):
    """In training mode, zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with
    probability ``p`` and scale the others by 1/(1-p)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return dropout3d(input, self.p, self.training, self.inplace)

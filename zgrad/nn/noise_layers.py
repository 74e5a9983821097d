"""``AlphaDropout``, ``FeatureAlphaDropout`` and ``RReLU``: layers with training-time noise, as
PyTorch's (arguments, reprs), over the functions of :mod:`zgrad.ops.noise_layers`."""

from __future__ import annotations

from typing import Any

from zgrad.nn.dropout import _DropoutBase
from zgrad.nn.module import Module
from zgrad.ops.noise_layers import alpha_dropout, feature_alpha_dropout, rrelu

__all__ = ["AlphaDropout", "FeatureAlphaDropout", "RReLU"]


class AlphaDropout(_DropoutBase):
    """In training mode, alpha dropout: dropped elements take SELU's saturation value and all are
    rescaled to keep a zero mean and unit variance.

    Raises:
        ValueError: ``p`` outside [0, 1] (PyTorch's message).
    """

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutBase):
    """In training mode, alpha dropout of whole channels of (N, C, ...) input.

    Raises:
        ValueError: ``p`` outside [0, 1] (PyTorch's message).
    """

    def forward(self, input: Any) -> Any:  # noqa: A002
        return feature_alpha_dropout(input, self.p, self.training, self.inplace)


class RReLU(Module):
    """x where x > 0, else a * x: a drawn from U[lower, upper) per element in training mode,
    (lower + upper) / 2 in evaluation mode; ``inplace=True`` overwrites the input."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")

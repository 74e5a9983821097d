"""Activation modules with a parameter: ``GELU``, ``LeakyReLU``, ``Softmax``, ``LogSoftmax``."""

from __future__ import annotations

from typing import Any

from zgrad import ops
from zgrad.nn.module import Module
from zgrad.ops.activation import GELU_APPROXIMATIONS, gelu, leaky_relu

__all__ = ["GELU", "LeakyReLU", "LogSoftmax", "Softmax"]


class GELU(Module):
    """x * Phi(x); ``approximate='tanh'`` for the tanh formula."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in GELU_APPROXIMATIONS:
            raise RuntimeError("approximate argument must be either none or tanh.")
        self.approximate = approximate

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    """max(0, x) + negative_slope * min(0, x)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Softmax(Module):
    """Softmax over ``dim`` (None: PyTorch's legacy choice, 0 for 0/1/3-D input, else 1)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:  # noqa: A002
        return ops.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log(softmax(x)) over ``dim``, computed stably (None: as :class:`Softmax`)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:  # noqa: A002
        return ops.log_softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"

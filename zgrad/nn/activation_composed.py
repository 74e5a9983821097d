"""Activation modules of exp, log, sigmoid, tanh and softmax: ``SELU``, ``CELU``, ``GLU``,
``LogSigmoid``, ``Softsign``, ``Tanhshrink``, ``Softmin`` and ``Softmax2d``, as PyTorch's."""

from __future__ import annotations

from typing import Any

from zgrad import ops
from zgrad.nn.module import Module
from zgrad.ops.activation_composed import celu, glu, logsigmoid, selu, softmin, softsign, tanhshrink

__all__ = ["CELU", "GLU", "LogSigmoid", "SELU", "Softmax2d", "Softmin", "Softsign", "Tanhshrink"]


class SELU(Module):
    """SELU_SCALE * elu(x, SELU_ALPHA); ``inplace=True`` overwrites the input."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return selu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class CELU(Module):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); ``inplace=True`` overwrites the input."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GLU(Module):
    """The first half of the input along ``dim`` times the sigmoid of the second."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:  # noqa: A002
        return glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSigmoid(Module):
    """log(sigmoid(x)), computed stably."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return logsigmoid(input)


class Softsign(Module):
    """x / (|x| + 1)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return softsign(input)


class Tanhshrink(Module):
    """x - tanh(x)."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return tanhshrink(input)


class Softmin(Module):
    """softmax(-x) over ``dim`` (None: PyTorch's legacy choice, 0 for 0/1/3-D input, else 1)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:  # noqa: A002
        return softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels (dimension -3) of a (C, H, W) or (N, C, H, W) input.

    Raises:
        ValueError: an input of other than 3 or 4 dimensions (PyTorch's message).
    """

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return ops.softmax(input, -3)

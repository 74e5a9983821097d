"""Activation modules with a parameter: ``GELU``, ``LeakyReLU``, ``ELU``, ``PReLU``, ``Softmax``,
``LogSoftmax``."""

from __future__ import annotations

from typing import Any

from zgrad import ops
from zgrad.creation import empty
from zgrad.nn.init import constant_
from zgrad.nn.module import Module, Parameter
from zgrad.ops.activation import GELU_APPROXIMATIONS, elu, gelu, leaky_relu, prelu

__all__ = ["ELU", "GELU", "LeakyReLU", "LogSoftmax", "PReLU", "Softmax"]


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


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        return elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """max(0, x) + weight * min(0, x) with a learnable slope: one (``num_parameters=1``) or one per
    channel (dimension 1 of the input); ``weight`` starts at ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(empty(num_parameters, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set every slope to ``init``."""
        constant_(self.weight, self.init)

    def forward(self, input: Any) -> Any:  # noqa: A002
        return prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"

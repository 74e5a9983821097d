"""Pooling layers: ``MaxPool2d``, ``AvgPool2d``, ``AdaptiveAvgPool2d``.

Each passes itself as the name its errors start with: its repr is built only if one is raised.
"""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.pool import adaptive_avg_pool2d_layer, avg_pool2d_layer, max_pool2d_layer

__all__ = ["AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d"]


class MaxPool2d(Module):
    """Max pooling, as ``torch.nn.MaxPool2d`` (see :func:`zgrad.nn.functional.max_pool2d`).

    With ``return_indices`` the call returns (output, int64 flat argmax per window).
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Any) -> Any:
        return max_pool2d_layer(self, input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                                self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Average pooling, as ``torch.nn.AvgPool2d`` (see :func:`zgrad.nn.functional.avg_pool2d`)."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Any) -> Any:
        return avg_pool2d_layer(self, input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size, as ``torch.nn.AdaptiveAvgPool2d``.

    Args:
        output_size: an int (square) or an (oh, ow) pair; None in the pair keeps the input's size.
    """

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Any) -> Any:
        return adaptive_avg_pool2d_layer(self, input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

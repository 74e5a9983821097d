"""The 3-D convolution and pooling layers: ``Conv3d``, ``ConvTranspose3d``, ``MaxPool3d``, ``AvgPool3d``
and ``AdaptiveAvgPool3d``, as PyTorch's (parameters, defaults, reprs), over the functions of
:mod:`zgrad.ops.three_dimensional`. Each passes itself as the name its errors start with."""

from __future__ import annotations

from typing import Any

from zgrad.nn.conv import ConvNd, ConvTransposeNd
from zgrad.nn.module import Module
from zgrad.ops.three_dimensional import (
    adaptive_avg_pool3d_layer, avg_pool3d_layer, conv3d_layer, conv_transpose3d_layer, max_pool3d_layer, triple,
)

__all__ = ["Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d"]


class Conv3d(ConvNd):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W) input, as ``torch.nn.Conv3d``: weight
    (out_channels, in_channels / groups, kD, kH, kW), initialized as PyTorch's.

    Args:
        kernel_size, stride, dilation: an int or a (d, h, w) triple.
        padding: an int, a triple, ``'valid'`` or ``'same'`` (stride 1 only).
        padding_mode: ``'zeros'``, ``'reflect'``, ``'replicate'`` or ``'circular'``.

    Raises:
        ValueError: channels not divisible by ``groups``, a bad padding string or padding mode,
            ``'same'`` padding with a stride.
    """

    window = staticmethod(triple)
    layer = staticmethod(conv3d_layer)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)


class ConvTranspose3d(ConvTransposeNd):
    """3-D transposed convolution over (N, C, D, H, W) or (C, D, H, W) input, as
    ``torch.nn.ConvTranspose3d``: weight (in_channels, out_channels / groups, kD, kH, kW).
    ``forward(input, output_size=None)``: an ``output_size`` (its last three entries are used) picks
    the output padding that reaches it.

    Raises:
        ValueError: channels not divisible by ``groups``, a padding mode other than 'zeros', an
            ``output_size`` out of reach.
    """

    window = staticmethod(triple)
    layer = staticmethod(conv_transpose3d_layer)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype, output_padding)


class MaxPool3d(Module):
    """Max pooling over (N, C, D, H, W) or (C, D, H, W) input, as ``torch.nn.MaxPool3d`` (see
    :func:`zgrad.nn.functional.max_pool3d`); with ``return_indices`` the call returns (output,
    int64 flat argmax per window)."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Any) -> Any:  # noqa: A002
        return max_pool3d_layer(self, input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                                self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool3d(Module):
    """Average pooling over (N, C, D, H, W) or (C, D, H, W) input, as ``torch.nn.AvgPool3d`` (see
    :func:`zgrad.nn.functional.avg_pool3d`)."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Any) -> Any:  # noqa: A002
        return avg_pool3d_layer(self, input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(Module):
    """Average pooling to a fixed output size, as ``torch.nn.AdaptiveAvgPool3d``.

    Args:
        output_size: an int (a cube) or an (od, oh, ow) triple; None in it keeps the input's size.
    """

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Any) -> Any:  # noqa: A002
        return adaptive_avg_pool3d_layer(self, input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

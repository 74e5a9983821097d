"""The 1-D convolution and pooling layers: ``Conv1d``, ``ConvTranspose1d``, ``MaxPool1d``,
``AvgPool1d`` and ``AdaptiveAvgPool1d``, as PyTorch's (parameters, defaults, reprs), over the
functions of :mod:`zgrad.ops.one_dimensional`."""

from __future__ import annotations

from typing import Any

from zgrad.nn.conv import ConvNd, ConvTransposeNd
from zgrad.nn.module import Module
from zgrad.ops.one_dimensional import (
    adaptive_avg_pool1d, avg_pool1d, conv1d_layer, conv_transpose1d_layer, max_pool1d, single,
)

__all__ = ["Conv1d", "ConvTranspose1d", "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d"]


class Conv1d(ConvNd):
    """1-D convolution over (N, C, L) or (C, L) input, as ``torch.nn.Conv1d``: weight
    (out_channels, in_channels / groups, kernel_size), initialized as PyTorch's.

    Raises:
        ValueError: channels not divisible by ``groups``, a bad padding string or padding mode,
            ``'same'`` padding with a stride.
    """

    window = staticmethod(single)
    layer = staticmethod(conv1d_layer)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)


class ConvTranspose1d(ConvTransposeNd):
    """1-D transposed convolution over (N, C, L) or (C, L) input, as ``torch.nn.ConvTranspose1d``:
    weight (in_channels, out_channels / groups, kernel_size). ``forward(input, output_size=None)``:
    an ``output_size`` (its last entry is used) picks the output padding that reaches it.

    Raises:
        ValueError: channels not divisible by ``groups``, a padding mode other than 'zeros', an
            ``output_size`` out of reach.
    """

    window = staticmethod(single)
    layer = staticmethod(conv_transpose1d_layer)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype, output_padding)


class MaxPool1d(Module):
    """Max pooling over (N, C, L) or (C, L) input, as ``torch.nn.MaxPool1d``."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation, self.return_indices, self.ceil_mode = padding, dilation, return_indices, ceil_mode

    def forward(self, input: Any) -> Any:  # noqa: A002
        return max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                          self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1d(Module):
    """Average pooling over (N, C, L) or (C, L) input, as ``torch.nn.AvgPool1d``."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = single(kernel_size, "kernel_size")
        self.stride = single(stride if stride is not None else kernel_size, "stride")
        self.padding, self.ceil_mode, self.count_include_pad = single(padding, "padding"), ceil_mode, count_include_pad

    def forward(self, input: Any) -> Any:  # noqa: A002
        return avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(Module):
    """Average pooling to ``output_size`` positions, as ``torch.nn.AdaptiveAvgPool1d``."""

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Any) -> Any:  # noqa: A002
        return adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

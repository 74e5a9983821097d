"""The 1-D convolution and pooling layers: ``Conv1d``, ``ConvTranspose1d``, ``MaxPool1d``,
``AvgPool1d`` and ``AdaptiveAvgPool1d``, as PyTorch's (parameters, defaults, reprs), over the
functions of :mod:`zgrad.ops.one_dimensional`."""

from __future__ import annotations

from typing import Any

from zgrad.creation import empty
from zgrad.nn import init
from zgrad.nn.conv import check_groups, conv_extra_repr, output_padding_for
from zgrad.nn.module import Module, Parameter
from zgrad.ops.conv import PADDING_MODES
from zgrad.ops.one_dimensional import (
    adaptive_avg_pool1d, avg_pool1d, conv1d_layer, conv_transpose1d_layer, max_pool1d, single,
)

__all__ = ["Conv1d", "ConvTranspose1d", "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d"]


class Conv1d(Module):
    """1-D convolution over (N, C, L) or (C, L) input, as ``torch.nn.Conv1d``: weight
    (out_channels, in_channels / groups, kernel_size), initialized as PyTorch's.

    Raises:
        ValueError: channels not divisible by ``groups``, a bad padding string or padding mode,
            ``'same'`` padding with a stride.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_groups(in_channels, out_channels, groups)
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(PADDING_MODES)}, but got padding_mode={padding_mode!r}")
        self.kernel_size, self.stride = single(kernel_size, "kernel_size"), single(stride, "stride")
        self.dilation = single(dilation, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}")
            if padding == "same" and self.stride != (1,):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = single(padding, "padding")
        self.in_channels, self.out_channels, self.groups, self.padding_mode = (in_channels, out_channels, groups,
                                                                               padding_mode)
        self.weight = Parameter(empty(out_channels, in_channels // groups, *self.kernel_size, dtype=dtype,
                                      device=device))
        self.bias = Parameter(empty(out_channels, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as PyTorch initializes them."""
        init.default_layer_init_(self.weight, self.bias)

    def forward(self, input: Any) -> Any:  # noqa: A002
        return conv1d_layer(self, input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups,
                            self.padding_mode)

    def extra_repr(self) -> str:
        return conv_extra_repr(self)


class ConvTranspose1d(Module):
    """1-D transposed convolution over (N, C, L) or (C, L) input, as ``torch.nn.ConvTranspose1d``:
    weight (in_channels, out_channels / groups, kernel_size). ``forward(input, output_size=None)``:
    an ``output_size`` (its last entry is used) picks the output padding that reaches it.

    Raises:
        ValueError: channels not divisible by ``groups``, a padding mode other than 'zeros', an
            ``output_size`` out of reach.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_groups(in_channels, out_channels, groups)
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        self.kernel_size, self.stride = single(kernel_size, "kernel_size"), single(stride, "stride")
        self.padding, self.dilation = single(padding, "padding"), single(dilation, "dilation")
        self.output_padding = single(output_padding, "output_padding")
        self.in_channels, self.out_channels, self.groups, self.padding_mode = (in_channels, out_channels, groups,
                                                                               padding_mode)
        self.weight = Parameter(empty(in_channels, out_channels // groups, *self.kernel_size, dtype=dtype,
                                      device=device))
        self.bias = Parameter(empty(out_channels, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as PyTorch initializes them."""
        init.default_layer_init_(self.weight, self.bias)

    def forward(self, input: Any, output_size: Any = None) -> Any:  # noqa: A002
        return conv_transpose1d_layer(self, input, self.weight, self.bias, self.stride, self.padding,
                                      output_padding_for(self, input, output_size), self.groups, self.dilation)

    def extra_repr(self) -> str:
        return conv_extra_repr(self)


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

"""Convolution layers: ``Conv2d`` and ``ConvTranspose2d``, and their bases ``ConvNd`` and
``ConvTransposeNd``, which the 1-D and 3-D layers (:mod:`zgrad.nn.one_dimensional`,
:mod:`zgrad.nn.three_dimensional`) share."""

from __future__ import annotations

from typing import Any, Callable

from zgrad.creation import empty
from zgrad.nn import init
from zgrad.nn.module import Module, Parameter
from zgrad.ops.conv import PADDING_MODES, conv2d_layer, pair
from zgrad.ops.conv_transpose import conv_transpose2d_layer, transposed_output_size

__all__ = ["ConvNd", "ConvTransposeNd", "Conv2d", "ConvTranspose2d"]


class ConvNd(Module):
    """What every convolution layer has, as PyTorch's ``_ConvNd``: the checked window arguments
    (``window`` makes each a tuple, one entry per spatial dimension), the weight and bias, their
    initialization, the repr and ``forward``, which calls ``layer`` (the op's ``*_layer`` form: the
    layer passes itself as the name its errors start with; its repr is built only then).
    Subclasses set ``window`` and ``layer``, and spell out PyTorch's constructor signature.

    Raises:
        ValueError: channels not divisible by ``groups``, a bad padding string or padding mode
            (a transposed convolution pads with zeros only), ``'same'`` padding with a stride.
    """

    window: Callable[[Any, str], tuple] = staticmethod(pair)
    layer: Callable[..., Any] = staticmethod(conv2d_layer)
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any, padding: Any,
                 dilation: Any, groups: int, bias: bool, padding_mode: str, device: Any, dtype: Any,
                 output_padding: Any = 0) -> None:
        super().__init__()
        if not isinstance(groups, int) or groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(PADDING_MODES)}, but got padding_mode={padding_mode!r}")
        window = self.window
        self.kernel_size, self.stride = window(kernel_size, "kernel_size"), window(stride, "stride")
        self.dilation = window(dilation, "dilation")
        if isinstance(padding, str) and not self.transposed:
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = window(padding, "padding")
        if self.transposed:
            self.output_padding = window(output_padding, "output_padding")
        self.in_channels, self.out_channels, self.groups, self.padding_mode = (in_channels, out_channels, groups,
                                                                               padding_mode)
        channels = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(empty(*channels, *self.kernel_size, dtype=dtype, device=device))
        self.bias = Parameter(empty(out_channels, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as PyTorch initializes them."""
        init.default_layer_init_(self.weight, self.bias)

    def forward(self, input: Any) -> Any:  # noqa: A002
        return self.layer(self, input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups,
                          self.padding_mode)

    def extra_repr(self) -> str:
        """PyTorch's: the window arguments that are not their defaults."""
        zeros, ones = (0,) * len(self.kernel_size), (1,) * len(self.kernel_size)
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        for name, default in (("padding", zeros), ("dilation", ones), ("output_padding", zeros)):
            value = getattr(self, name, default)
            if value != default:
                text += f", {name}={value}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class ConvTransposeNd(ConvNd):
    """What every transposed convolution layer has, as PyTorch's ``_ConvTransposeNd``: ``forward(input,
    output_size=None)``, where an ``output_size`` (its last entries, one per spatial dimension) picks
    the output padding that reaches it.

    Raises:
        ValueError: an ``output_size`` out of reach.
    """

    layer = staticmethod(conv_transpose2d_layer)
    transposed = True

    def forward(self, input: Any, output_size: Any = None) -> Any:  # noqa: A002
        return self.layer(self, input, self.weight, self.bias, self.stride, self.padding,
                          self._output_padding_for(input, output_size), self.groups, self.dilation)

    def _output_padding_for(self, input: Any, output_size: Any) -> tuple[int, ...]:  # noqa: A002
        """The output padding of a transposed convolution that reaches ``output_size`` (one entry
        per spatial dimension, or also the batch and channel ones), or the layer's own without one.

        Raises:
            ValueError: a size of another length, or out of reach (PyTorch's messages).
        """
        if output_size is None:
            return self.output_padding
        dims = len(self.kernel_size)
        leading = 2 if input.ndim == dims + 2 else 1
        wanted = [int(s) for s in output_size]
        if len(wanted) == leading + dims:
            wanted = wanted[leading:]
        if len(wanted) != dims:
            raise ValueError(f"ConvTranspose{dims}D: for {input.ndim}D input, output_size must have {dims} or "
                             f"{leading + dims} elements (got {len(wanted)})")
        spatial = input.shape[-dims:]
        smallest = transposed_output_size(spatial, self.kernel_size, self.stride, self.padding, self.dilation,
                                          (0,) * dims)
        for want, low, s in zip(wanted, smallest, self.stride):
            if not low <= want < low + s:
                raise ValueError(f"requested an output size of {wanted}, but valid sizes range from {list(smallest)} "
                                 f"to {[n + t - 1 for n, t in zip(smallest, self.stride)]} (for an input of "
                                 f"{spatial})")
        return tuple(want - low for want, low in zip(wanted, smallest))


class Conv2d(ConvNd):
    """2-D convolution over (N, C, H, W) or (C, H, W) input, as ``torch.nn.Conv2d``.

    Args:
        in_channels, out_channels: channel counts, both divisible by ``groups``.
        kernel_size, stride, dilation: an int or an (h, w) pair.
        padding: an int, an (h, w) pair, ``'valid'`` or ``'same'`` (stride 1 only).
        groups: connections from input to output channels are split into this many groups.
        bias: add a learnable bias per output channel.
        padding_mode: ``'zeros'``, ``'reflect'``, ``'replicate'`` or ``'circular'``.
        device, dtype: of the parameters (float32 by default).

    The weight (out_channels, in_channels / groups, kH, kW) starts as PyTorch's:
    ``kaiming_uniform_(a=sqrt(5))``, and the bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

    Raises:
        ValueError: channels not divisible by ``groups``, a bad padding string or padding mode,
            ``'same'`` padding with a stride.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)


class ConvTranspose2d(ConvTransposeNd):
    """2-D transposed convolution over (N, C, H, W) or (C, H, W) input, as ``torch.nn.ConvTranspose2d``.

    Args:
        in_channels, out_channels: channel counts, both divisible by ``groups``.
        kernel_size, stride, padding, output_padding, dilation: an int or an (h, w) pair.
        groups: connections from input to output channels are split into this many groups.
        bias: add a learnable bias per output channel.
        padding_mode: ``'zeros'`` only, as PyTorch.
        device, dtype: of the parameters (float32 by default).

    The weight (in_channels, out_channels / groups, kH, kW) starts as PyTorch's:
    ``kaiming_uniform_(a=sqrt(5))`` with fan_in from its second dimension, the bias
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)). ``forward(input, output_size=None)``: an ``output_size``
    (its last two entries are used) picks the output padding that reaches it.

    Raises:
        ValueError: channels not divisible by ``groups``, a padding mode other than 'zeros', an
            ``output_size`` out of reach.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype, output_padding)


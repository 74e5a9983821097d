"""The lazy convolutions: ``LazyConv1d``, ``LazyConv2d``, ``LazyConv3d``, ``LazyConvTranspose1d``,
``LazyConvTranspose2d``, ``LazyConvTranspose3d``, as PyTorch's. ``in_channels`` (0 until then) comes
from the first input (its dimension 1, or 0 when unbatched); the weight and bias are
uninitialized until then, and drawn as the ordinary layer draws them. See :mod:`zgrad.nn.lazy`."""

from __future__ import annotations

from typing import Any

from zgrad.nn.conv import Conv2d, ConvTranspose2d
from zgrad.nn.lazy import LazyModuleMixin
from zgrad.nn.one_dimensional import Conv1d, ConvTranspose1d
from zgrad.nn.parameter import UninitializedParameter
from zgrad.nn.three_dimensional import Conv3d, ConvTranspose3d

__all__ = ["LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d"]


class _LazyConv(LazyModuleMixin):
    """What the lazy convolutions share (PyTorch's ``_LazyConvXdMixin``).

    Raises (at the first forward):
        RuntimeError: an input of another rank (PyTorch's message).
        ValueError: input channels not divisible by ``groups``.
    """

    def _make_lazy(self, bias: bool, device: Any, dtype: Any) -> None:
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """The layer's initialization, once the parameters exist."""
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _in_channels_of(self, input: Any) -> int:  # noqa: A002
        spatial = len(self.kernel_size)
        if input.ndim not in (spatial + 1, spatial + 2):
            raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input to "
                               f"{type(self).__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.ndim == spatial + 2 else input.shape[0]

    def initialize_parameters(self, input: Any, *args: Any, **kwargs: Any) -> None:  # noqa: A002
        """``in_channels`` from ``input``; the weight and bias drawn as the layer's."""
        if self.has_uninitialized_params():
            self.in_channels = self._in_channels_of(input)
            if self.in_channels % self.groups:
                raise ValueError("in_channels must be divisible by groups")
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize((*shape, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()
        elif self.in_channels == 0:  # loaded with load_state_dict
            self.in_channels = self._in_channels_of(input)


class LazyConv1d(_LazyConv, Conv1d):
    """A :class:`~zgrad.nn.Conv1d` whose ``in_channels`` comes from its first input, as
    ``torch.nn.LazyConv1d``; after the first forward it is a ``Conv1d``."""

    cls_to_become = Conv1d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, out_channels, kernel_size, stride, padding, dilation, groups, False, padding_mode,
                         device, dtype)
        self._make_lazy(bias, device, dtype)


class LazyConv2d(_LazyConv, Conv2d):
    """A :class:`~zgrad.nn.Conv2d` whose ``in_channels`` comes from its first input, as
    ``torch.nn.LazyConv2d``; after the first forward it is a ``Conv2d``."""

    cls_to_become = Conv2d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, out_channels, kernel_size, stride, padding, dilation, groups, False, padding_mode,
                         device, dtype)
        self._make_lazy(bias, device, dtype)


class LazyConv3d(_LazyConv, Conv3d):
    """A :class:`~zgrad.nn.Conv3d` whose ``in_channels`` comes from its first input, as
    ``torch.nn.LazyConv3d``; after the first forward it is a ``Conv3d``."""

    cls_to_become = Conv3d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, out_channels, kernel_size, stride, padding, dilation, groups, False, padding_mode,
                         device, dtype)
        self._make_lazy(bias, device, dtype)


class LazyConvTranspose1d(_LazyConv, ConvTranspose1d):
    """A :class:`~zgrad.nn.ConvTranspose1d` whose ``in_channels`` comes from its first input, as
    ``torch.nn.LazyConvTranspose1d``; after the first forward it is a ``ConvTranspose1d``."""

    cls_to_become = ConvTranspose1d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(0, out_channels, kernel_size, stride, padding, output_padding, groups, False, dilation,
                         padding_mode, device, dtype)
        self._make_lazy(bias, device, dtype)


class LazyConvTranspose2d(_LazyConv, ConvTranspose2d):
    """A :class:`~zgrad.nn.ConvTranspose2d` whose ``in_channels`` comes from its first input, as
    ``torch.nn.LazyConvTranspose2d``; after the first forward it is a ``ConvTranspose2d``."""

    cls_to_become = ConvTranspose2d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(0, out_channels, kernel_size, stride, padding, output_padding, groups, False, dilation,
                         padding_mode, device, dtype)
        self._make_lazy(bias, device, dtype)


class LazyConvTranspose3d(_LazyConv, ConvTranspose3d):
    """A :class:`~zgrad.nn.ConvTranspose3d` whose ``in_channels`` comes from its first input, as
    ``torch.nn.LazyConvTranspose3d``; after the first forward it is a ``ConvTranspose3d``."""

    cls_to_become = ConvTranspose3d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(0, out_channels, kernel_size, stride, padding, output_padding, groups, False, dilation,
                         padding_mode, device, dtype)
        self._make_lazy(bias, device, dtype)

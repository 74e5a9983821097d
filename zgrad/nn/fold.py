"""``Unfold`` and ``Fold``: sliding blocks of an image as columns and back, as PyTorch's
(arguments, reprs), over :func:`zgrad.nn.functional.unfold` and :func:`zgrad.nn.functional.fold`."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.fold import fold, unfold

__all__ = ["Fold", "Unfold"]


class Unfold(Module):
    """(N, C, H, W) or (C, H, W) input to (N, C * kh * kw, L) columns of its sliding blocks, as
    ``torch.nn.Unfold``; see :func:`zgrad.nn.functional.unfold`."""

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """(N, C * kh * kw, L) columns summed into a (N, C, *output_size) image, as
    ``torch.nn.Fold``; see :func:`zgrad.nn.functional.fold`."""

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Any) -> Any:  # noqa: A002
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")

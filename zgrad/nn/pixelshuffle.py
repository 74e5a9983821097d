"""``PixelShuffle``, ``PixelUnshuffle`` and ``ChannelShuffle``, as PyTorch's."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.resample import channel_shuffle, pixel_shuffle, pixel_unshuffle

__all__ = ["ChannelShuffle", "PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r), r = ``upscale_factor``."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Any) -> Any:  # noqa: A002
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W), r = ``downscale_factor``."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Any) -> Any:  # noqa: A002
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """(N, g * k, *) -> (N, k * g, *): the channels in ``groups`` of k, interleaved (ShuffleNet's)."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Any) -> Any:  # noqa: A002
        return channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"

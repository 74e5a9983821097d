"""``Upsample``, ``UpsamplingNearest2d`` and ``UpsamplingBilinear2d``: :func:`interpolate` as
modules, as PyTorch's."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.resample import interpolate

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]


def _float_factor(scale_factor: Any) -> Any:
    if scale_factor is None:
        return None
    if isinstance(scale_factor, (tuple, list)):
        return tuple(float(s) for s in scale_factor)
    return float(scale_factor)


class Upsample(Module):
    """Resizes (N, C, d1, ...) input to ``size`` or by ``scale_factor`` with ``mode`` ('nearest',
    'nearest-exact', 'linear', 'bilinear', 'trilinear'); see :func:`zgrad.nn.functional.interpolate`."""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size, self.scale_factor = size, _float_factor(scale_factor)
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor

    def forward(self, input: Any) -> Any:  # noqa: A002
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of (N, C, H, W) input."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of (N, C, H, W) input with ``align_corners=True``."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)

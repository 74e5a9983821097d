"""Adaptive max pooling layers: ``AdaptiveMaxPool1d``, ``AdaptiveMaxPool2d``, ``AdaptiveMaxPool3d``, as
PyTorch's, over :func:`zgrad.ops.adaptive_max_pool.adaptive_max_pool_layer`. Each passes itself as the
name its errors start with."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.adaptive_max_pool import adaptive_max_pool_layer

__all__ = ["AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"]


class _AdaptiveMaxPoolNd(Module):
    """Max pooling to ``output_size`` over the last ``dims`` dimensions; with ``return_indices``
    the call returns (output, int64 flat argmax per window)."""

    dims = 2

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Any) -> Any:  # noqa: A002
        return adaptive_max_pool_layer(self, f"adaptive_max_pool{self.dims}d", input, self.output_size,
                                       self.return_indices, self.dims)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max pooling of (N, C, L) or (C, L) input to ``output_size`` positions, as
    ``torch.nn.AdaptiveMaxPool1d``."""

    dims = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max pooling of (N, C, H, W) or (C, H, W) input to ``output_size`` (an int or an (oh, ow)
    pair; None keeps the input's size), as ``torch.nn.AdaptiveMaxPool2d``."""

    dims = 2


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) input to ``output_size`` (an int or an
    (od, oh, ow) triple; None keeps the input's size), as ``torch.nn.AdaptiveMaxPool3d``."""

    dims = 3

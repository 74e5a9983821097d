"""``LPPool1d``/``2d``/``3d`` and ``MaxUnpool1d``/``2d``/``3d``, as PyTorch's (arguments, reprs),
over the functions of :mod:`zgrad.ops.pool_lp_unpool`."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.pool_lp_unpool import lp_pool1d, lp_pool2d, lp_pool3d, max_unpool1d, max_unpool2d, max_unpool3d

__all__ = ["LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]


class _LPPoolNd(Module):
    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """(sum over each window of x ** norm_type) ** (1 / norm_type) over (N, C, L) or (C, L) input."""

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """(sum over each window of x ** norm_type) ** (1 / norm_type) over (N, C, H, W) or (C, H, W) input."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool3d(_LPPoolNd):
    """(sum over each window of x ** norm_type) ** (1 / norm_type) over (N, C, D, H, W) or (C, D, H, W) input."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


def _tuple(value: Any, n: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _MaxUnpoolNd(Module):
    rank = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = _tuple(kernel_size, self.rank)
        self.stride = _tuple(stride if stride is not None else kernel_size, self.rank)
        self.padding = _tuple(padding, self.rank)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool1d``: ``forward(input, indices, output_size=None)``."""

    rank = 1

    def forward(self, input: Any, indices: Any, output_size: Any = None) -> Any:  # noqa: A002
        return max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool2d``: ``forward(input, indices, output_size=None)``."""

    def forward(self, input: Any, indices: Any, output_size: Any = None) -> Any:  # noqa: A002
        return max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool3d``: ``forward(input, indices, output_size=None)``."""

    rank = 3

    def forward(self, input: Any, indices: Any, output_size: Any = None) -> Any:  # noqa: A002
        return max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)

"""The other names ``torch.nn.functional`` gives ops zgrad already has: the in-place activations
(``relu_``: the op with ``inplace=True``), the pooling functions that always return indices
(``max_pool2d_with_indices``: ``return_indices=True``) and the deprecated ``upsample`` family
(``interpolate``, with PyTorch's deprecation warning).
"""

from __future__ import annotations

import warnings
from typing import Any

from zgrad.ops.activation import elu, leaky_relu, relu
from zgrad.ops.activation_composed import celu, selu
from zgrad.ops.activation_piecewise import hardtanh
from zgrad.ops.activation_piecewise import threshold as _threshold
from zgrad.ops.adaptive_max_pool import adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d
from zgrad.ops.noise_layers import rrelu
from zgrad.ops.one_dimensional import max_pool1d
from zgrad.ops.pool import max_pool2d
from zgrad.ops.resample import interpolate
from zgrad.ops.three_dimensional import max_pool3d

__all__ = ["adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
           "celu_", "elu_", "hardtanh_", "leaky_relu_", "max_pool1d_with_indices", "max_pool2d_with_indices",
           "max_pool3d_with_indices", "relu_", "rrelu_", "selu_", "threshold_", "upsample", "upsample_bilinear",
           "upsample_nearest"]


def relu_(input: Any) -> Any:  # noqa: A002
    """:func:`relu` in place: ``input`` itself, changed."""
    return relu(input, inplace=True)


def elu_(input: Any, alpha: float = 1.0) -> Any:  # noqa: A002
    """:func:`elu` in place."""
    return elu(input, alpha, inplace=True)


def celu_(input: Any, alpha: float = 1.0) -> Any:  # noqa: A002
    """:func:`celu` in place."""
    return celu(input, alpha, inplace=True)


def selu_(input: Any) -> Any:  # noqa: A002
    """:func:`selu` in place."""
    return selu(input, inplace=True)


def leaky_relu_(input: Any, negative_slope: float = 0.01) -> Any:  # noqa: A002
    """:func:`leaky_relu` in place."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Any, min_val: float = -1.0, max_val: float = 1.0) -> Any:  # noqa: A002
    """:func:`hardtanh` in place."""
    return hardtanh(input, min_val, max_val, inplace=True)


def rrelu_(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Any:  # noqa: A002
    """:func:`rrelu` in place."""
    return rrelu(input, lower, upper, training, inplace=True)


def threshold_(input: Any, threshold: float, value: float) -> Any:  # noqa: A002
    """:func:`threshold` in place."""
    return _threshold(input, threshold, value, inplace=True)


def max_pool1d_with_indices(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """:func:`max_pool1d` returning ``(output, indices)`` whatever ``return_indices`` says."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool2d_with_indices(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """:func:`max_pool2d` returning ``(output, indices)`` whatever ``return_indices`` says."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool3d_with_indices(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """:func:`max_pool3d` returning ``(output, indices)`` whatever ``return_indices`` says."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def adaptive_max_pool1d_with_indices(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """:func:`adaptive_max_pool1d` returning ``(output, indices)``."""
    return adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """:func:`adaptive_max_pool2d` returning ``(output, indices)``."""
    return adaptive_max_pool2d(input, output_size, return_indices=True)


def adaptive_max_pool3d_with_indices(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """:func:`adaptive_max_pool3d` returning ``(output, indices)``."""
    return adaptive_max_pool3d(input, output_size, return_indices=True)


def _deprecated(name: str) -> None:
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.", UserWarning,
                  stacklevel=3)


def upsample(input: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest",  # noqa: A002
             align_corners: bool | None = None) -> Any:
    """Deprecated :func:`interpolate` (warns, as PyTorch)."""
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Any, size: Any = None, scale_factor: Any = None) -> Any:  # noqa: A002
    """Deprecated :func:`interpolate` in mode "nearest" (warns, as PyTorch)."""
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Any, size: Any = None, scale_factor: Any = None) -> Any:  # noqa: A002
    """Deprecated :func:`interpolate` in mode "bilinear" with ``align_corners=True`` (warns, as PyTorch)."""
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)

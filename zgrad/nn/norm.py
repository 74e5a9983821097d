"""Normalization layers: ``BatchNorm1d``, ``BatchNorm2d``, ``BatchNorm3d``, ``InstanceNorm1d``,
``InstanceNorm2d``, ``InstanceNorm3d``, ``LayerNorm``, ``GroupNorm``, ``RMSNorm``."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from zgrad import ops
from zgrad.creation import empty, ones, tensor, zeros
from zgrad.nn import init
from zgrad.nn.module import Module, Parameter
from zgrad.ops._args import tensor_arg
from zgrad.ops.norm import batch_norm_layer, group_norm_layer, instance_norm, layer_norm_layer
from zgrad.ops.rms_norm import rms_norm_layer
from zgrad.warning_location import user_stacklevel

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "LayerNorm", "RMSNorm"]


def _reset_affine(weight: Any, bias: Any) -> None:
    if weight is not None:
        init.ones_(weight)
    if bias is not None:
        init.zeros_(bias)


class _BatchNorm(Module):
    """Batch norm over dimension 1, with running statistics kept as buffers.

    Training normalizes with the batch's statistics and (with ``track_running_stats``) updates
    ``running_mean`` / ``running_var`` with ``momentum`` (None: a cumulative average over
    ``num_batches_tracked`` batches), the variance unbiased. Evaluation normalizes with the
    running statistics (or, without them, with the batch's). ``affine`` adds a per-channel weight
    (ones) and, unless ``bias=False``, a bias (zeros).
    """

    expected_dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = Parameter(empty(num_features, dtype=dtype, device=device)) if affine else None
        self.bias = Parameter(empty(num_features, dtype=dtype, device=device)) if affine and bias else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=np.int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches tracked."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Reset the running statistics; weight 1 and bias 0."""
        self.reset_running_stats()
        _reset_affine(self.weight, self.bias)

    def _check_input(self, input: Any) -> None:
        shape = getattr(input, "shape", None)
        if shape is None:
            return  # batch_norm_layer names the wrong type
        if len(shape) not in self.expected_dims:
            dims = " or ".join(f"{d}D" for d in self.expected_dims)
            raise ValueError(f"{self!r}: expected {dims} input (got {len(shape)}D input of size {list(shape)})")
        self._check_channels(shape)

    def _check_channels(self, shape: Sequence[int]) -> None:
        if shape[1] != self.num_features:
            raise RuntimeError(f"{self!r}: expected input with {self.num_features} channels in dimension 1, "
                               f"but got input of size {list(shape)} ({shape[1]} channels)")

    def forward(self, input: Any) -> Any:
        self._check_input(input)
        tracking = self.training and self.track_running_stats and self.num_batches_tracked is not None
        factor = 0.0 if self.momentum is None else self.momentum
        if tracking and self.momentum is None:
            factor = 1.0 / (int(self.num_batches_tracked.item()) + 1)
        use_running = not self.training or self.track_running_stats
        out = batch_norm_layer(self, input, self.running_mean if use_running else None,
                               self.running_var if use_running else None, self.weight, self.bias,
                               self.training or self.running_mean is None, factor, self.eps)
        if tracking:  # only once the batch was accepted
            self.num_batches_tracked.add_(1)
        return out

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm of (N, C) or (N, C, L) input, as ``torch.nn.BatchNorm1d``."""

    expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm of (N, C, H, W) input, as ``torch.nn.BatchNorm2d``."""

    expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm of (N, C, D, H, W) input, as ``torch.nn.BatchNorm3d``."""

    expected_dims = (5,)


class LayerNorm(Module):
    """Layer normalization over the trailing ``normalized_shape`` dimensions, as ``torch.nn.LayerNorm``.

    ``weight`` (ones) and ``bias`` (zeros) have shape ``normalized_shape``; ``bias=False`` keeps
    only the weight, ``elementwise_affine=False`` neither.
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        self.weight = Parameter(empty(*shape, dtype=dtype, device=device)) if elementwise_affine else None
        self.bias = Parameter(empty(*shape, dtype=dtype, device=device)) if elementwise_affine and bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight 1, bias 0."""
        _reset_affine(self.weight, self.bias)

    def forward(self, input: Any) -> Any:
        return layer_norm_layer(self, input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """Root-mean-square normalization over the trailing ``normalized_shape`` dimensions, as
    ``torch.nn.RMSNorm``: a ``weight`` (ones) of that shape when ``elementwise_affine``; ``eps``
    None takes the machine epsilon of the input's dtype."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        self.weight = Parameter(empty(*shape, dtype=dtype, device=device)) if elementwise_affine else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight 1."""
        _reset_affine(self.weight, None)

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return rms_norm_layer(self, input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Group normalization of (N, C, *) input, as ``torch.nn.GroupNorm``: per-channel ``weight``
    (ones) and ``bias`` (zeros, unless ``bias=False``) when ``affine``.

    Raises:
        ValueError: ``num_channels`` is not divisible by ``num_groups``.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self.weight = Parameter(empty(num_channels, dtype=dtype, device=device)) if affine else None
        self.bias = Parameter(empty(num_channels, dtype=dtype, device=device)) if affine and bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight 1, bias 0."""
        _reset_affine(self.weight, self.bias)

    def forward(self, input: Any) -> Any:
        return group_norm_layer(self, input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _InstanceNorm(_BatchNorm):
    """Instance norm over the spatial dimensions of each (sample, channel), as PyTorch's: no affine
    parameters and no running statistics by default. With ``track_running_stats``, training
    updates them (``num_batches_tracked`` stays 0, as PyTorch) and evaluation normalizes with them."""

    unbatched_dims = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def _check_input(self, input: Any) -> None:
        if input.ndim not in (self.unbatched_dims, self.unbatched_dims + 1):
            raise ValueError(f"expected {self.unbatched_dims}D or {self.unbatched_dims + 1}D input (got "
                             f"{input.ndim}D input)")
        channels = input.shape[-self.unbatched_dims]
        if channels == self.num_features:
            return
        if self.affine:
            raise ValueError(f"expected input's size at dim={input.ndim - self.unbatched_dims} to match num_features "
                             f"({self.num_features}), but got: {channels}.")
        warnings.warn(f"input's size at dim={input.ndim - self.unbatched_dims} does not match num_features. You can "
                      f"silence this warning by not passing in num_features, which is not used because affine=False",
                      stacklevel=user_stacklevel())

    def forward(self, input: Any) -> Any:  # noqa: A002
        tensor_arg(input, self, "input")
        self._check_input(input)
        unbatched = input.ndim == self.unbatched_dims
        x = ops.unsqueeze(input, 0) if unbatched else input
        out = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            0.0 if self.momentum is None else self.momentum, self.eps)
        return ops.squeeze(out, 0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of (N, C, L) or unbatched (C, L) input, as ``torch.nn.InstanceNorm1d``."""

    unbatched_dims = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of (N, C, H, W) or unbatched (C, H, W) input, as ``torch.nn.InstanceNorm2d``."""

    unbatched_dims = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance norm of (N, C, D, H, W) or unbatched (C, D, H, W) input, as ``torch.nn.InstanceNorm3d``."""

    unbatched_dims = 4

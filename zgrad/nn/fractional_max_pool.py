"""Fractional max pooling layers: ``FractionalMaxPool2d`` and ``FractionalMaxPool3d``, as PyTorch's,
over :func:`zgrad.ops.fractional_max_pool.fractional_max_pool_layer`."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.fractional_max_pool import fractional_max_pool_layer

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d"]


def _expand(value: Any, dims: int) -> tuple:
    """PyTorch's ``_pair`` / ``_triple``: a sequence as a tuple, anything else repeated."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims


class _FractionalMaxPoolNd(Module):
    """Fractional max pooling over the last ``dims`` dimensions; ``_random_samples`` is a buffer
    (None: drawn from zgrad's generator at every call), as PyTorch's. The repr shows no arguments,
    as PyTorch's.

    Raises:
        ValueError: neither ``output_size`` nor ``output_ratio``, both, or a ratio outside (0, 1)
            (PyTorch's messages).
    """

    dims = 2

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Any = None) -> None:
        super().__init__()
        dims = self.dims
        self.kernel_size = _expand(kernel_size, dims)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _expand(output_size, dims) if output_size is not None else None
        self.output_ratio = _expand(output_ratio, dims) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{type(self).__name__} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None:
            ratios = self.output_ratio
            if len(ratios) < dims:
                raise IndexError("tuple index out of range")
            if not all(0 < r < 1 for r in ratios[:dims]):
                raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Any) -> Any:  # noqa: A002
        return fractional_max_pool_layer(f"fractional_max_pool{self.dims}d", input, self.kernel_size,
                                         self.output_size, self.output_ratio, self.return_indices,
                                         self._random_samples, self.dims)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, H, W) or (C, H, W) input, as ``torch.nn.FractionalMaxPool2d``:
    windows of ``kernel_size`` at pseudo-random starts, to ``output_size`` (an int or (oh, ow)) or
    ``output_ratio`` (a number or a pair in (0, 1)) of the input's size; with ``return_indices``
    the call returns (output, int64 flat argmax). See
    :func:`zgrad.nn.functional.fractional_max_pool2d`."""

    dims = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, T, H, W) or (C, T, H, W) input, as
    ``torch.nn.FractionalMaxPool3d``: windows of ``kernel_size`` at pseudo-random starts, to
    ``output_size`` (an int or a triple) or ``output_ratio`` (a number or a triple in (0, 1)) of
    the input's size. See :func:`zgrad.nn.functional.fractional_max_pool3d`."""

    dims = 3

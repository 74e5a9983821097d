"""``zgrad.nn.modules.batchnorm``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.norm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from zgrad.nn.lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]

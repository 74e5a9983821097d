"""``zgrad.nn.modules.instancenorm``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.norm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from zgrad.nn.lazy import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]

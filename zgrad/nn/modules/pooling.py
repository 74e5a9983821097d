"""``zgrad.nn.modules.pooling``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d

__all__ = ["AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d"]

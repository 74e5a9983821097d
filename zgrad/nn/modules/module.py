"""``zgrad.nn.modules.module``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.module import Module

__all__ = ["Module"]

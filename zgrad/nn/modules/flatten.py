"""``zgrad.nn.modules.flatten``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.layers import Flatten, Unflatten

__all__ = ["Flatten", "Unflatten"]

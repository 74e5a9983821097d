"""``zgrad.nn.modules.normalization``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.norm import GroupNorm, LayerNorm, RMSNorm

__all__ = ["GroupNorm", "LayerNorm", "RMSNorm"]

"""``zgrad.nn.modules.normalization``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.norm import GroupNorm, LayerNorm, RMSNorm

__all__ = ["GroupNorm", "LayerNorm", "RMSNorm"]
from zgrad.nn.local_response_norm import LocalResponseNorm  # noqa: E402

__all__ += ["LocalResponseNorm"]

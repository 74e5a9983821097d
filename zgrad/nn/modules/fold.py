"""``zgrad.nn.modules.fold``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.fold import Fold, Unfold

__all__ = ["Fold", "Unfold"]

"""``zgrad.nn.modules.dropout``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.dropout import Dropout, Dropout2d

__all__ = ["Dropout", "Dropout2d"]

"""``zgrad.nn.modules.lazy``: PyTorch's module path for :class:`LazyModuleMixin` (re-exported from
:mod:`zgrad.nn.lazy`: the same object)."""

from zgrad.nn.lazy import LazyModuleMixin

__all__ = ["LazyModuleMixin"]

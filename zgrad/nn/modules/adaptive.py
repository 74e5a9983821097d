"""``zgrad.nn.modules.adaptive``: PyTorch's module path for this class of :mod:`zgrad.nn`
(re-exported: the same object). ``_ASMoutput``, its forward's named tuple, is importable from here too."""

from zgrad.nn.adaptive import AdaptiveLogSoftmaxWithLoss, _ASMoutput  # noqa: F401 - importable here

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

"""``zgrad.nn.modules.conv``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.conv import Conv2d, ConvTranspose2d

__all__ = ["Conv2d", "ConvTranspose2d"]

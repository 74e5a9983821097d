"""``zgrad.nn.modules.conv``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.conv import Conv2d, ConvTranspose2d
from zgrad.nn.one_dimensional import Conv1d, ConvTranspose1d
from zgrad.nn.three_dimensional import Conv3d, ConvTranspose3d
from zgrad.nn.lazy_conv import (
    LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
)

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
__all__ += ["LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
            "LazyConvTranspose3d"]

"""``zgrad.nn.modules.pooling``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.one_dimensional import AdaptiveAvgPool1d, AvgPool1d, MaxPool1d
from zgrad.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from zgrad.nn.three_dimensional import AdaptiveAvgPool3d, AvgPool3d, MaxPool3d
from zgrad.nn.adaptive_max_pool import AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d
from zgrad.nn.fractional_max_pool import FractionalMaxPool2d, FractionalMaxPool3d

__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "MaxPool1d", "MaxPool2d"]
__all__ += ["AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AvgPool3d",
            "MaxPool3d"]
__all__ += ["FractionalMaxPool2d", "FractionalMaxPool3d"]
from zgrad.nn.pool_lp_unpool import LPPool1d, LPPool2d, LPPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d  # noqa: E402

__all__ += ["LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]

"""``zgrad.nn.modules.dropout``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]
from zgrad.nn.noise_layers import AlphaDropout, FeatureAlphaDropout  # noqa: E402

__all__ += ["AlphaDropout", "FeatureAlphaDropout"]

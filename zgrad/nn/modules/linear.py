"""``zgrad.nn.modules.linear``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects). ``NonDynamicallyQuantizableLinear`` (``MultiheadAttention``'s
``out_proj``) is importable from here and left out of ``__all__``, as PyTorch does."""

from zgrad.nn.layers import Identity, Linear, NonDynamicallyQuantizableLinear  # noqa: F401 - importable here
from zgrad.nn.lazy import LazyLinear

__all__ = ["Identity", "LazyLinear", "Linear"]
from zgrad.nn.bilinear import Bilinear  # noqa: E402

__all__ += ["Bilinear"]

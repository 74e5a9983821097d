"""``zgrad.finfo`` and ``zgrad.iinfo``: the numerical limits of a dtype, as PyTorch's.

bfloat16's limits come from ml_dtypes (numpy's own ``finfo`` does not know it); the attributes,
their Python types and the repr are PyTorch's.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from zgrad.kernels.promotion import get_default_dtype, is_floating

__all__ = ["finfo", "iinfo"]


def _dtype_name(dtype: Any) -> str:
    try:
        return f"zgrad.{np.dtype(dtype).name}"
    except TypeError:
        return repr(dtype)


class finfo:  # noqa: N801 - PyTorch's name
    """The limits of a floating dtype: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (the same as
    ``smallest_normal``), ``resolution`` (10 to the minus the decimal digits ``eps`` allows) and
    ``dtype`` (its name, a str), all Python numbers as PyTorch gives them.

    Args:
        type: a floating dtype (float16, bfloat16, float32, float64); the default dtype if omitted.

    Raises:
        TypeError: ``type`` is not a floating dtype (PyTorch's message).
    """

    def __init__(self, type: Any = None) -> None:  # noqa: A002 - PyTorch's argument name
        dtype = get_default_dtype() if type is None else type
        try:
            floating = is_floating(dtype)
        except TypeError:
            floating = False
        if not floating:
            raise TypeError(f"{_dtype_name(dtype)} is not a floating point type: zgrad.finfo() requires a floating "
                            "point input type. Use zgrad.iinfo to handle integer types")
        dtype = np.dtype(dtype)
        info = ml_dtypes.finfo(dtype)
        self.bits = 8 * dtype.itemsize
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = float(info.smallest_normal)
        self.smallest_normal = self.tiny
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))
        self.dtype = dtype.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("finfo", self.dtype))

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801 - PyTorch's name
    """The limits of an integer dtype: ``bits``, ``max``, ``min`` (Python ints) and ``dtype`` (its
    name, a str), as PyTorch gives them.

    Args:
        type: an integer dtype (uint8, int8, int16, int32, int64).

    Raises:
        TypeError: ``type`` is not an integer dtype (bool and floating dtypes included, as PyTorch).
    """

    def __init__(self, type: Any) -> None:  # noqa: A002 - PyTorch's argument name
        try:
            dtype = np.dtype(type)
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind not in "iu":
            raise TypeError(f"{_dtype_name(type)} is not supported by zgrad.iinfo")
        info = np.iinfo(dtype)
        self.bits = info.bits
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = dtype.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("iinfo", self.dtype))

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"

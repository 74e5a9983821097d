"""Sort keys that make a stable sort of 32-bit values one plain sort of 64-bit integers.

A row element's key is ``(rank bits << 32) | column``: the high half orders the values (NaN above
everything, -0.0 equal to 0.0, descending by inverting the bits), the low half breaks ties by
position. Keys of a row are distinct, so any sort or selection of them (numpy's vectorised
quicksort and partition) gives the stable order, and the low half of each sorted key is the
position it came from.

``pack`` takes int32 rows: a float32 input's bits (``is_float``), or integers of up to 32 bits
converted to int32 by the caller.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel

__all__ = ["pack"]


@kernel
def _key(b, is_float, descending, column):
    """The key of the int32 ``b`` (bits of a float32 where ``is_float``) in ``column``."""
    sign = np.int32(-2147483648)
    magnitude = np.int32(2147483647)
    if is_float:
        if (b & magnitude) > np.int32(2139095040):  # a NaN: above +inf
            b = magnitude
        elif b == sign:  # -0.0 sorts with 0.0
            b = np.int32(0)
        else:  # negative floats: larger magnitude, smaller value
            b = b ^ ((b >> 31) & magnitude)
    high = np.uint64(np.uint32(b ^ sign))
    if descending:
        high = np.uint64(4294967295) - high
    return (high << np.uint64(32)) | np.uint64(column)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def pack(bits, is_float, descending, out):
    """out[r, c] = the key of bits[r, c] in column c; ``bits`` (R, C) int32, ``out`` (R, C) uint64."""
    rows, columns = bits.shape
    for r in prange(rows):
        for c in range(columns):
            out[r, c] = _key(bits[r, c], is_float, descending, c)

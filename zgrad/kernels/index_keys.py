"""What kind of index a subscript is, for every backend."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["is_basic_index"]


def is_basic_index(index: Any) -> bool:
    """Whether ``index`` selects a view (ints, slices, None, Ellipsis) rather than a gather."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (slice, int, np.integer)) and not isinstance(p, bool)
               for p in parts)

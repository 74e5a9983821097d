"""``pin_memory=True``: a batch's CPU tensors copied into page-locked memory, from which
``.to("cuda")`` copies faster, as PyTorch's DataLoader does on a machine with an accelerator.
"""

from __future__ import annotations

import collections.abc
from typing import Any

from zgrad.tensor import Tensor

__all__ = ["pin_memory"]


def pin_memory(data: Any) -> Any:
    """``data`` with every CPU tensor replaced by a pinned copy, through mappings, namedtuples and
    sequences; an object with a ``pin_memory()`` method is asked to pin itself; anything else is
    returned as it is."""
    if isinstance(data, Tensor):
        return data if data.is_cuda else data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        pinned = {key: pin_memory(value) for key, value in data.items()}
        try:
            return type(data)(pinned)  # type: ignore[call-arg]
        except TypeError:
            return pinned
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(pin_memory(item) for item in data))
    if isinstance(data, tuple):
        return [pin_memory(item) for item in data]  # PyTorch's choice
    if isinstance(data, collections.abc.Sequence):
        items = [pin_memory(item) for item in data]
        try:
            return type(data)(items)  # type: ignore[call-arg]
        except TypeError:
            return items
    if callable(getattr(data, "pin_memory", None)):
        return data.pin_memory()
    return data

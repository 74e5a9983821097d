"""The tensors inside a nested value (tuples, named tuples, lists, dicts and dataclasses, as
PyTorch's pytrees see them), and the same value with those tensors replaced."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

from zgrad.tensor import Tensor

__all__ = ["tensors_in", "replace_tensors"]


def _children(value: Any) -> list[Any] | None:
    if isinstance(value, (tuple, list)):
        return list(value)
    if isinstance(value, dict):
        return list(value.values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name) for f in dataclasses.fields(value)]
    return None


def tensors_in(value: Any) -> list[Tensor]:
    """The tensors in ``value``, depth first, in order."""
    if isinstance(value, Tensor):
        return [value]
    children = _children(value)
    return [] if children is None else [t for child in children for t in tensors_in(child)]


def replace_tensors(value: Any, replacements: Iterator[Any]) -> Any:
    """``value`` with its tensors replaced, in :func:`tensors_in`'s order, by ``replacements``."""
    if isinstance(value, Tensor):
        return next(replacements)
    children = _children(value)
    if children is None:
        return value
    rebuilt = [replace_tensors(child, replacements) for child in children]
    if isinstance(value, dict):
        return type(value)(zip(value.keys(), rebuilt))
    if isinstance(value, (tuple, list)):
        return type(value)(*rebuilt) if hasattr(value, "_fields") else type(value)(rebuilt)
    return dataclasses.replace(value, **{f.name: v for f, v in zip(dataclasses.fields(value), rebuilt) if f.init})

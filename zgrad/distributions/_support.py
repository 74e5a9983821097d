"""Argument handling shared by the distributions: tensors from numbers, PyTorch's error texts."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from zgrad.creation import tensor
from zgrad.tensor import Tensor

__all__ = ["as_tensor", "constraint_error", "extended_shape"]


def as_tensor(value: Any, like: Any = None) -> Tensor:
    """``value`` as a Tensor: tensors as they are, numbers in ``like``'s dtype (default float32)."""
    if isinstance(value, Tensor):
        return value
    return tensor(value, dtype=like.dtype if isinstance(like, Tensor) else np.float32)


def constraint_error(owner: str, name: str, value: Tensor, constraint: str) -> ValueError:
    """PyTorch's message for a parameter or value outside its constraint."""
    return ValueError(f"Expected parameter {name} ({type(value).__name__} of shape {tuple(value.shape)}) of "
                      f"distribution {owner} to satisfy the constraint {constraint}, but found invalid values:\n"
                      f"{value}")


def extended_shape(sample_shape: Sequence[int], batch_shape: tuple[int, ...]) -> tuple[int, ...]:
    """sample_shape + batch_shape, validating ``sample_shape``."""
    if isinstance(sample_shape, int):
        raise TypeError(f"sample_shape must be a tuple of ints (e.g. ({sample_shape},)), got {sample_shape}")
    return tuple(int(n) for n in sample_shape) + tuple(batch_shape)

"""``zgrad.backends.mps``: PyTorch's Apple-GPU queries, so that device-choosing code runs.

zgrad has no Metal backend: :func:`is_available` and :func:`is_built` are False everywhere.
"""

from __future__ import annotations

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """False: zgrad has no MPS (Apple GPU) backend."""
    return False


def is_built() -> bool:
    """False: zgrad is never built with MPS support."""
    return False

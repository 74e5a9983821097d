"""``zgrad.backends.cudnn``: PyTorch's cuDNN switches, kept so programs that set them run.

zgrad's CUDA backend runs its own Numba kernels and never calls cuDNN, so :func:`is_available` is
False and the switches are read by nothing: as in PyTorch on a machine without cuDNN, setting
``benchmark`` or ``deterministic`` changes no result.
"""

from __future__ import annotations

__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available", "version"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: zgrad has no cuDNN (its CUDA backend runs its own kernels)."""
    return False


def version() -> None:
    """None, as PyTorch answers without cuDNN."""
    return None

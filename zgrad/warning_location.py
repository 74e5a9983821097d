"""Where a warning of zgrad points: at the user's line that called into zgrad, however many of
zgrad's own frames (decorators, layers, helpers) lie between, as PyTorch's warnings point at the
caller's line."""

from __future__ import annotations

import sys

__all__ = ["user_stacklevel"]


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by the function that calls this: one past
    every frame of zgrad below the user's code."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "zgrad":
        frame, level = frame.f_back, level + 1
    return level

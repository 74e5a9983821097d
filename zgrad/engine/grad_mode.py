"""Whether operations record the backward graph, per thread (``no_grad`` / ``enable_grad``)."""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

__all__ = ["is_grad_enabled", "set_grad_enabled", "no_grad", "enable_grad"]

F = TypeVar("F", bound=Callable[..., Any])


class _GradState(threading.local):
    enabled = True


_state = _GradState()


def is_grad_enabled() -> bool:
    """Whether the calling thread records the graph of the ops it runs."""
    return _state.enabled


class set_grad_enabled:
    """Context manager (and decorator) setting gradient recording for the calling thread."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self.prev = True

    def __enter__(self) -> None:
        self.prev = _state.enabled
        _state.enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        _state.enabled = self.prev

    def __call__(self, fn: F) -> F:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(set_grad_enabled):
    """Disable graph recording inside the block (or decorated function), on this thread only.

    Example::

        with zgrad.no_grad():
            y = model(x)      # y.requires_grad is False
    """

    def __init__(self) -> None:
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """Re-enable graph recording inside the block (or decorated function)."""

    def __init__(self) -> None:
        super().__init__(True)

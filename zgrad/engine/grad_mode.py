"""Whether operations record the backward graph, per thread (``no_grad`` / ``enable_grad`` /
``set_grad_enabled`` / ``inference_mode``)."""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

__all__ = ["is_grad_enabled", "set_grad_enabled", "no_grad", "enable_grad", "inference_mode",
           "is_inference_mode_enabled"]

F = TypeVar("F", bound=Callable[..., Any])


class _GradState(threading.local):
    enabled = True
    inference = False


_state = _GradState()


def is_grad_enabled() -> bool:
    """Whether the calling thread records the graph of the ops it runs."""
    return _state.enabled


def is_inference_mode_enabled() -> bool:
    """Whether the calling thread is inside an ``inference_mode()`` block."""
    return _state.inference


class set_grad_enabled:
    """Set gradient recording for the calling thread: at once when called, and back to the
    previous setting at the end of a ``with`` block (it also works as a decorator)."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self.prev = _state.enabled
        if type(self) is set_grad_enabled:
            _state.enabled = self.mode

    def __enter__(self) -> None:
        if type(self) is not set_grad_enabled:  # set_grad_enabled applied itself in __init__
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


class _FixedMode(set_grad_enabled):
    """A mode switch that also works as a bare decorator (``@no_grad`` as well as ``@no_grad()``)."""

    mode_value = True

    def __new__(cls, fn: Any = None) -> Any:
        instance = super().__new__(cls)
        if fn is not None and callable(fn):
            instance.__init__()
            return instance(fn)
        return instance

    def __init__(self, fn: Any = None) -> None:
        super().__init__(self.mode_value)


class no_grad(_FixedMode):
    """Disable graph recording inside the block (or decorated function), on this thread only.

    Example::

        with zgrad.no_grad():
            y = model(x)      # y.requires_grad is False

        @zgrad.no_grad        # or @zgrad.no_grad()
        def evaluate(x): ...
    """

    mode_value = False


class enable_grad(_FixedMode):
    """Re-enable graph recording inside the block (or decorated function)."""

    mode_value = True


class inference_mode:
    """Inference mode: no graph recording inside the block (or decorated function), on this
    thread only, as ``no_grad``; ``inference_mode(False)`` changes nothing. Works as a context
    manager and as a decorator, bare (``@inference_mode``) or called (``@inference_mode()``).

    zgrad has no inference tensors: tensors made inside the block are ordinary tensors that do not
    require grad (PyTorch's inference tensors additionally refuse to enter a graph later).

    Example::

        with zgrad.inference_mode():
            y = model(x)      # y.requires_grad is False
    """

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode):  # bare decorator: @inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)
        self.prev = (_state.enabled, _state.inference)

    def __enter__(self) -> None:
        self.prev = (_state.enabled, _state.inference)
        if self.mode:
            _state.enabled, _state.inference = False, True

    def __exit__(self, *exc: object) -> None:
        _state.enabled, _state.inference = self.prev

    def __call__(self, fn: F) -> F:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

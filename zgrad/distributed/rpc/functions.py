"""``rpc.functions.async_execution``: RPC targets that answer when a Future completes.

A decorated function returns a :class:`~zgrad.futures.Future` at once; the callee replies to
the call when that future completes, with its value or error, and no callee thread waits
meanwhile. This is how a batching server collects calls from many workers and answers them all
together (PyTorch's ``batch`` example).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from zgrad.futures import Future

__all__ = ["async_execution", "is_async_execution", "DeferredResult", "deferred_future"]

F = TypeVar("F", bound=Callable[..., Any])


def async_execution(fn: F) -> F:
    """Mark ``fn`` as an RPC target that returns a :class:`~zgrad.futures.Future`.

    Called over RPC (``rpc_sync``, ``rpc_async``, ``remote`` or an RRef proxy), the reply is sent
    when the returned future completes. Called locally it simply returns the future. Put it
    below ``@staticmethod`` or ``@classmethod`` for methods, as in PyTorch.

    Example::

        @staticmethod
        @rpc.functions.async_execution
        def update_and_fetch(ps_rref, grads):
            self = ps_rref.local_value()
            ...
            return self.future_model  # completed once enough trainers reported
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    wrapper._wrapped_async_rpc_function = fn  # type: ignore[attr-defined]  # PyTorch's marker
    return wrapper  # type: ignore[return-value]


def is_async_execution(func: Any) -> bool:
    """Whether ``func`` (a function, or a method bound to an object or class) is marked."""
    return getattr(func, "_wrapped_async_rpc_function", None) is not None


class DeferredResult:
    """A target's way to say "my answer is this future's": what an RRef proxy returns when the
    method it invoked is an ``async_execution`` one."""

    __slots__ = ("future",)

    def __init__(self, future: Future) -> None:
        self.future = future


def deferred_future(func: Any, result: Any, name: str) -> Future | None:
    """The future a call's reply waits for, or None when ``result`` is the answer itself.

    Raises:
        TypeError: ``func`` is marked ``async_execution`` but returned something else than a Future.
    """
    if isinstance(result, DeferredResult):
        return result.future
    if not is_async_execution(func):
        return None
    if not isinstance(result, Future):
        raise TypeError(
            f"{name} is decorated with @rpc.functions.async_execution but returned a {type(result).__name__}, "
            "not a Future: return a zgrad.futures.Future and complete it with set_result() when the value is ready")
    return result

"""Exceptions as data: what a callee sends back, and the error the caller raises from it.

The caller gets a :class:`~zgrad.errors.RemoteError` (a RuntimeError) naming the original type,
message and worker, with the remote traceback in ``remote_traceback``. When the original type is
a built-in exception (``ValueError``, ``KeyError``...), the error raised also derives from that
type, so ``except ValueError`` keeps working across workers.
"""

from __future__ import annotations

import builtins
import functools
import traceback
from typing import Any

from zgrad.errors import RemoteError

__all__ = ["error_meta", "remote_error_from_meta", "remote_error_class"]

MAX_TEXT = 64 * 1024


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def error_meta(exc: BaseException, worker: str) -> dict[str, str]:
    """The ERROR message metadata for ``exc`` raised on ``worker``."""
    if isinstance(exc, RemoteError):  # an error that came from further away keeps its origin
        return {"type": exc.remote_type, "message": exc.remote_message[:MAX_TEXT], "worker": exc.worker,
                "traceback": exc.remote_traceback[-MAX_TEXT:]}
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"type": _type_name(exc), "message": str(exc)[:MAX_TEXT], "worker": worker, "traceback": text[-MAX_TEXT:]}


@functools.cache
def remote_error_class(type_name: str) -> type[RemoteError]:
    """RemoteError, or a subclass that also derives from the built-in exception ``type_name``."""
    builtin = getattr(builtins, type_name, None)
    if not (isinstance(builtin, type) and issubclass(builtin, Exception)) or issubclass(RemoteError, builtin):
        return RemoteError
    try:
        return type(f"Remote{type_name}", (RemoteError, builtin), {"__module__": "zgrad.errors"})
    except TypeError:  # e.g. OSError's layout cannot be combined; plain RemoteError then
        return RemoteError


def remote_error_from_meta(meta: dict[str, Any]) -> RemoteError:
    """The exception a caller raises for an ERROR message."""
    cls = remote_error_class(meta["type"])
    return cls(meta["type"], meta["message"], meta["worker"], meta["traceback"])

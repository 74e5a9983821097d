"""An exception in a DataLoader worker, carried to the main process as text and raised there as
PyTorch raises it: the same type where it can be built from a message, with the worker's
traceback in the message ("Caught ValueError in DataLoader worker process 0. Original Traceback
...").
"""

from __future__ import annotations

import traceback
from typing import NoReturn

from zgrad.errors import ZgradError
from zgrad.utils.data._utils.codec import imported_class

__all__ = ["capture", "reraise", "KeyErrorMessage"]


class KeyErrorMessage(str):
    """A message whose repr is itself, so that a ``KeyError`` carrying it prints its lines (a
    ``KeyError``'s str is the repr of its argument)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return self


def capture(exc: BaseException, where: str) -> list[str]:
    """``[type, where, traceback]`` of ``exc`` for the message to the main process: the type as
    ``"module:qualname"``, ``where`` as "in DataLoader worker process N"."""
    kind = type(exc)
    return [f"{kind.__module__}:{kind.__qualname__}", where, "".join(traceback.format_exception(exc))]


def reraise(ref: str, where: str, text: str) -> NoReturn:
    """Raise the worker's exception here.

    Raises:
        the worker's exception type, built from the message "Caught {name} {where}.\\nOriginal
        {traceback}"; ZgradError with that message where the type is not imported here or
        cannot be built from one string.
    """
    name = ref.rpartition(":")[2].rpartition(".")[2]
    message = f"Caught {name} {where}.\nOriginal {text}"
    kind = imported_class(ref)
    kind = kind if kind is not None and issubclass(kind, BaseException) else None
    if kind is KeyError:
        message = KeyErrorMessage(message)
    try:
        exception = kind(message) if kind is not None else None
    except Exception:  # noqa: BLE001 - a type whose constructor wants other arguments
        exception = None
    if exception is None:
        raise ZgradError(message) from None
    try:
        raise exception
    finally:
        # The exception's traceback holds this frame: a local naming the exception would make a
        # cycle that keeps the frames above alive (the iterator, its workers, the batches'
        # shared memory) until the cyclic collector runs.
        del exception

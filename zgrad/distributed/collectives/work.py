"""``Work``: the handle of a collective started with ``async_op=True`` (``torch.distributed.Work``)."""

from __future__ import annotations

import datetime
from typing import Any

from zgrad.futures import Future

__all__ = ["Work", "timeout_seconds"]


def timeout_seconds(timeout: Any) -> float | None:
    """``timeout`` (seconds, a ``datetime.timedelta``, or None) in seconds.

    Raises:
        ValueError: a negative timeout.
    """
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    if seconds < 0:
        raise ValueError(f"timeout must not be negative, got {timeout!r}")
    return seconds


class Work:
    """A collective in flight. Thread-safe.

    Its future (:meth:`get_future`) completes with the list of tensors the collective wrote
    (``[tensor]`` for ``all_reduce``), as PyTorch's does, or with the collective's error.

    Example::

        work = dist.all_reduce(t, async_op=True)
        ...                       # overlap other work
        work.wait()               # t now holds the sum
    """

    def __init__(self, description: str, result: list[Any]) -> None:
        self._future = Future(description)
        self._result = result

    def wait(self, timeout: Any = None) -> bool:
        """Block until the collective finished on this rank; return True.

        Args:
            timeout: seconds or a ``timedelta``; None waits until the collective ends (it is
                bounded by the process group's timeout).

        Raises:
            ZgradTimeoutError: ``timeout`` passed first (the collective goes on).
            Exception: the collective's error (mismatch, timeout, lost peer).
        """
        self._future.wait(timeout_seconds(timeout))
        return True

    def is_completed(self) -> bool:
        """Whether the collective has finished (successfully or not). Never blocks."""
        return self._future.done()

    def is_success(self) -> bool:
        """Whether the collective finished without error. Never blocks.

        Raises:
            RuntimeError: it has not finished yet.
        """
        if not self._future.done():
            raise RuntimeError(f"{self._future.description} has not completed yet")
        return self._future.exception() is None

    def exception(self) -> BaseException | None:
        """The collective's error, or None (also while it runs)."""
        return self._future.exception()

    def result(self) -> list[Any]:
        """The tensors the collective wrote. Blocks like :meth:`wait`."""
        self.wait()
        return self._result

    def get_future(self) -> Future:
        """A :class:`~zgrad.futures.Future` completed with the written tensors (a list) or the error."""
        return self._future

    def _finish(self, error: BaseException | None) -> None:
        if error is None:
            self._future.set_result(self._result)
        else:
            self._future.set_exception(error)

    def __repr__(self) -> str:
        return f"<Work {self._future.description} {'done' if self.is_completed() else 'pending'}>"

"""``Future``: the result of an asynchronous RPC, completed once by the agent."""

from __future__ import annotations

import threading
from typing import Any, Callable

from zgrad.errors import ZgradTimeoutError

__all__ = ["Future", "BlockingHooks"]


class BlockingHooks(threading.local):
    """Per-thread callbacks around a blocking wait; the callee pool installs them in its threads
    so that a thread blocked in a nested RPC is compensated by a new one (no pool deadlock)."""

    enter: Callable[[], None] | None = None
    exit: Callable[[], None] | None = None


blocking_hooks = BlockingHooks()

_UNSET = object()


class Future:
    """The eventual value (or error) of an RPC.

    Thread-safe. ``then`` callbacks run on the thread that completes the future (or at once if it
    is already complete); keep them short or hand work off.
    """

    __slots__ = ("_lock", "_gate", "_done", "_value", "_error", "_callbacks", "description")

    def __init__(self, description: str = "RPC") -> None:
        self._lock = threading.Lock()
        # Held from creation until completion: a waiter acquires it (blocking in C) and passes it
        # on. One lock instead of an Event (a Condition plus a fresh lock per wait).
        self._gate = threading.Lock()
        self._gate.acquire()
        self._done = False
        self._value: Any = _UNSET
        self._error: BaseException | None = None
        self._callbacks: list[Callable[["Future"], None]] = []
        self.description = description

    def done(self) -> bool:
        """Whether the future holds a value or an error."""
        return self._done

    def set_result(self, value: Any) -> bool:
        """Complete with ``value``; returns False (and changes nothing) if already complete."""
        return self._complete(value, None)

    def set_exception(self, error: BaseException) -> bool:
        """Complete with ``error``; returns False (and changes nothing) if already complete."""
        return self._complete(_UNSET, error)

    def _complete(self, value: Any, error: BaseException | None) -> bool:
        with self._lock:
            if self._done:
                return False
            self._value, self._error = value, error
            self._done = True
            self._gate.release()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _run_callback(callback, self)
        return True

    def wait(self, timeout: float | None = None) -> Any:
        """Block until complete and return the value, or raise the error.

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as the RPC's own timeout.

        Raises:
            ZgradTimeoutError: ``timeout`` passed first (the RPC itself goes on).
            Exception: the error the RPC completed with.
        """
        if not self._done:
            hooks = blocking_hooks
            if hooks.enter is not None:
                hooks.enter()
            try:
                finished = self._gate.acquire(timeout=-1 if timeout is None else max(0.0, timeout))
                if finished:
                    self._gate.release()  # let the next waiter through
            finally:
                if hooks.exit is not None:
                    hooks.exit()
            if not finished:
                raise ZgradTimeoutError(f"waiting for {self.description} ran past {timeout} seconds")
        return self.value()

    def value(self) -> Any:
        """The value of a completed future (raises its error).

        Raises:
            RuntimeError: the future is not complete yet.
        """
        if not self._done:
            raise RuntimeError(f"{self.description} has not completed yet; use wait()")
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self) -> BaseException | None:
        """The error of a completed future, or None."""
        return self._error if self._done else None

    def then(self, callback: Callable[["Future"], Any]) -> "Future":
        """Return a future completed with ``callback(self)`` once this one completes.

        An exception raised by ``callback`` completes the returned future with that exception.
        """
        chained = Future(f"then({self.description})")

        def run(done: "Future") -> None:
            try:
                chained.set_result(callback(done))
            except BaseException as exc:  # noqa: BLE001 - handed to the chained future
                chained.set_exception(exc)

        self.add_done_callback(run)
        return chained

    def add_done_callback(self, callback: Callable[["Future"], None]) -> None:
        """Call ``callback(self)`` on completion (at once if already complete)."""
        with self._lock:
            if not self._done:
                self._callbacks.append(callback)
                return
        _run_callback(callback, self)

    def __repr__(self) -> str:
        state = "pending" if not self.done() else ("failed" if self._error is not None else "done")
        return f"<Future {self.description} {state}>"


def _run_callback(callback: Callable[[Future], None], future: Future) -> None:
    try:
        callback(future)
    except Exception:  # noqa: BLE001 - a broken callback must not break the completer
        import logging

        logging.getLogger("zgrad.rpc").exception("a Future callback of %s raised", future.description)

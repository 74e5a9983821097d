"""``zgrad.futures``: ``Future``, ``collect_all``, ``wait_all`` (mirroring ``torch.futures``).

A :class:`Future` is the eventual value or error of some work: an RPC (``rpc_async`` returns
one), a collective, or anything user code completes itself with :meth:`Future.set_result`, as
the functions decorated with ``rpc.functions.async_execution`` do.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable, Sequence

from zgrad.errors import ZgradTimeoutError

__all__ = ["Future", "collect_all", "wait_all", "BlockingHooks", "blocking_hooks"]

log = logging.getLogger("zgrad.futures")


class BlockingHooks(threading.local):
    """Per-thread callbacks around a blocking wait (no deadlock on nested waits): the RPC callee
    pool installs them in its threads so that a blocked thread is compensated by a new one, and
    the RPC agent in the threads of the mesh's I/O role so that a thread holding the inbound
    socket hands it on before it blocks."""

    enter: Callable[[], None] | None = None
    exit: Callable[[], None] | None = None


blocking_hooks = BlockingHooks()

_UNSET = object()


class Future:
    """The eventual value (or error) of asynchronous work; completed exactly once.

    Thread-safe. Callbacks (``then``, ``add_done_callback``) run on the thread that completes
    the future, or at once on the caller's thread if it is already complete: keep them short.

    Args:
        description: what the future stands for, used in error messages ("RPC to 'worker1' ...").
        devices: accepted for PyTorch compatibility: "cpu" and "cuda:0" (results are complete when set).

    Example::

        fut = zgrad.futures.Future()
        doubled = fut.then(lambda f: f.value() * 2)
        fut.set_result(21)
        assert doubled.wait() == 42
    """

    __slots__ = ("_lock", "_gate", "_done", "_value", "_error", "_callbacks", "description")

    def __init__(self, description: str = "Future", *, devices: Sequence[Any] | None = None) -> None:
        for device in devices or ():
            kind, _, index = str(device).partition(":")
            if kind not in ("cpu", "cuda") or index not in ("", "0"):
                raise ValueError(f"Future devices: expected 'cpu' or 'cuda:0' (one CUDA device per process), got {device!r}")
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

    def set_result(self, result: Any) -> None:
        """Complete the future with ``result`` and run its callbacks.

        Raises:
            RuntimeError: the future is already complete ("Future can only be marked completed once").
        """
        if not self._complete(result, None):
            raise RuntimeError(f"Future can only be marked completed once ({self.description})")

    def set_exception(self, result: BaseException) -> None:
        """Complete the future with the error ``result``; ``wait`` and ``value`` raise it.

        Raises:
            TypeError: ``result`` is not an exception.
            RuntimeError: the future is already complete.
        """
        if not isinstance(result, BaseException):
            raise TypeError(f"{result!r} is of type {type(result).__name__}, not an Exception")
        if not self._complete(_UNSET, result):
            raise RuntimeError(f"Future can only be marked completed once ({self.description})")

    def _complete(self, value: Any, error: BaseException | None) -> bool:
        """Complete with ``value`` or ``error`` unless already complete; returns whether it did.
        For completers that may race (a reply against its timeout)."""
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
            timeout: seconds to wait at most; ``None`` waits until completion (an RPC's future
                completes by its own timeout at the latest).

        Raises:
            ZgradTimeoutError: ``timeout`` passed first (the work itself goes on).
            Exception: the error the future completed with.
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
                result = callback(done)
            except BaseException as exc:  # noqa: BLE001 - handed to the chained future
                chained._complete(_UNSET, exc)
            else:
                chained._complete(result, None)

        self.add_done_callback(run)
        return chained

    def add_done_callback(self, callback: Callable[["Future"], None]) -> None:
        """Call ``callback(self)`` on completion (at once if already complete). An exception it
        raises is logged, not propagated."""
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
        log.exception("a callback of %s raised", future.description)


def collect_all(futures: Iterable[Future]) -> Future:
    """A future completed, once every one of ``futures`` is, with the list of those futures
    (in order; failed ones included, so each can be inspected). Never blocks.

    Raises:
        TypeError: an entry is not a Future.
    """
    futures = list(futures)
    for i, fut in enumerate(futures):
        if not isinstance(fut, Future):
            raise TypeError(f"collect_all expects Futures; entry {i} is a {type(fut).__name__}")
    collected = Future(f"collect_all of {len(futures)} futures")
    if not futures:
        collected._complete([], None)
        return collected
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_: Future) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            collected._complete(futures, None)

    for fut in futures:
        fut.add_done_callback(one_done)
    return collected


def wait_all(futures: Iterable[Future], timeout: float | None = None) -> list[Any]:
    """Wait for every future and return their values in order. Blocks.

    Raises:
        Exception: the error of the first failed future (in list order), after all completed.
        ZgradTimeoutError: ``timeout`` seconds passed before all completed.
    """
    collected = collect_all(futures).wait(timeout)
    return [fut.value() for fut in collected]

"""Remote references: ``RRef`` and the owner's reference counting.

Every ``RRef`` object is one *fork*: a reference with its own 64-bit fork id, known to the
owner. The owner keeps a value while at least one fork is alive, anywhere:

- ``RRef(value)`` on the owner and ``remote()`` create the first fork (``remote`` names it in
  its CALL, so the owner registers it on receipt);
- sending an RRef to another worker creates a new fork: the owner registers it directly; a
  user calling the owner itself (``rpc_sync``, ``rpc_async``, ``remote``, a proxy's method)
  marks the fork for the owner to register when it decodes the call, and keeps its own RRef
  alive until the call is answered (after a timeout, until the late reply or the owner's loss),
  so the value outlives the decoding with no message of its own; any other user first sends
  RREF_FORK to the owner, *before* the message carrying the RRef. Because messages between a
  pair arrive in order on its link, the owner sees that FORK before the sender's own
  RREF_DELETE, so the count never drops to zero early;
- when an RRef object is garbage collected its fork is released (RREF_DELETE, or locally on the
  owner). A DELETE that overtakes its FORK (they travel on different pairs) is remembered and
  cancels the FORK when it comes.

Owner entries are created on first sight (a CALL, a FETCH or a FORK may arrive first), and their
value is a :class:`Future` completed when the creating call finishes. If that call failed and
nobody ever read the value (``to_here``, ``local_value``, a proxy call), the error is logged with
the worker and the class when the entry is freed or the owner shuts down, instead of vanishing.
"""

from __future__ import annotations

import itertools
import logging
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zgrad.distributed.rpc.functions import DeferredResult, deferred_future, is_async_execution
from zgrad.futures import Future
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import ZgradError

if TYPE_CHECKING:
    from zgrad.distributed.rpc.agent import RpcAgent

__all__ = ["RRef", "OwnerTable", "invoke_method"]

log = logging.getLogger("zgrad.rpc")

_ID_BITS = 48


@dataclass
class _OwnerEntry:
    value: Future
    forks: set[int] = field(default_factory=set)
    early_deletes: set[int] = field(default_factory=set)
    created_by: str = ""  # the target of the remote() call that makes the value
    observed: bool = False  # someone read the value (or its error)


class OwnerTable:
    """The values this worker owns, with their live forks. Thread-safe."""

    def __init__(self, rank: int, worker: str = "") -> None:
        self._rank = rank
        self._worker = worker
        self._lock = threading.Lock()
        self._entries: dict[int, _OwnerEntry] = {}
        self._counter = itertools.count(1)

    def new_id(self) -> int:
        """A globally unique 64-bit id: this worker's rank above, a counter below."""
        return (self._rank << _ID_BITS) | next(self._counter)

    def entry(self, rref_id: int) -> Future:
        """The value future of ``rref_id``, creating a pending entry on first sight."""
        with self._lock:
            return self._get_or_create(rref_id).value

    def read(self, rref_id: int) -> Future:
        """Like :meth:`entry`, for a reader of the value: its error, if any, has been seen."""
        with self._lock:
            entry = self._get_or_create(rref_id)
            entry.observed = True
            return entry.value

    def settle(self, rref_id: int, created_by: str, value: Any = None, error: BaseException | None = None) -> bool:
        """Complete the value of ``rref_id`` made by a ``remote()`` call of ``created_by``; False
        if it was complete already (a repeated CALL: the first one stands)."""
        with self._lock:
            entry = self._get_or_create(rref_id)
            entry.created_by = created_by
        return entry.value._complete(value, error)

    def _get_or_create(self, rref_id: int) -> _OwnerEntry:
        entry = self._entries.get(rref_id)
        if entry is None:
            entry = self._entries[rref_id] = _OwnerEntry(Future(f"RRef {rref_id:#x}"))
        return entry

    def add_fork(self, rref_id: int, fork_id: int) -> None:
        with self._lock:
            entry = self._get_or_create(rref_id)
            if fork_id in entry.early_deletes:
                entry.early_deletes.discard(fork_id)
                self._maybe_free(rref_id, entry)
            else:
                entry.forks.add(fork_id)

    def delete_fork(self, rref_id: int, fork_id: int) -> None:
        with self._lock:
            entry = self._entries.get(rref_id)
            if entry is None:
                return
            if fork_id in entry.forks:
                entry.forks.discard(fork_id)
                self._maybe_free(rref_id, entry)
            else:
                entry.early_deletes.add(fork_id)

    def _maybe_free(self, rref_id: int, entry: _OwnerEntry) -> None:
        if not entry.forks and not entry.early_deletes:
            del self._entries[rref_id]
            self._report_unobserved(entry)

    def _report_unobserved(self, entry: _OwnerEntry) -> None:
        error = entry.value.exception()
        if error is not None and not entry.observed:
            log.warning("%s: rpc.remote() of %s failed on this worker and nobody fetched its result: %s",
                        self._worker, entry.created_by or "a value", error)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        """Forget every value (the owner shuts down), logging failures nobody observed."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            self._report_unobserved(entry)


class RRef:
    """A reference to a value owned by one worker.

    ``RRef(value)`` makes the calling worker the owner; ``rpc.remote(...)`` returns RRefs owned by
    the callee. RRefs may be passed as RPC arguments and results to any worker; the owner frees
    the value once no RRef to it remains anywhere. Methods that fetch block; all are thread-safe.
    """

    _is_zgrad_rref = True

    def __init__(self, value: Any = None, *, _agent: "RpcAgent | None" = None, _rref_id: int | None = None,
                 _owner: int | None = None, _fork_id: int | None = None, _created: Future | None = None) -> None:
        if _agent is None:
            from zgrad.distributed.rpc.state import current_agent

            _agent = current_agent()
            _rref_id = _agent.rrefs.new_id()
            _owner = _agent.rank
            _fork_id = _agent.rrefs.new_id()
            _agent.rrefs.add_fork(_rref_id, _fork_id)
            _agent.rrefs.entry(_rref_id).set_result(value)
        self._agent = _agent
        self.rref_id = _rref_id
        self._owner = _owner
        self._fork_id = _fork_id
        self._created = _created
        self._finalizer = weakref.finalize(self, _agent.release_fork, _rref_id, _owner, _fork_id)

    def owner(self) -> WorkerInfo:
        """The owner's WorkerInfo."""
        return self._agent.worker_info(self._owner)

    def owner_name(self) -> str:
        return self.owner().name

    def is_owner(self) -> bool:
        return self._owner == self._agent.rank

    def confirmed_by_owner(self) -> bool:
        """Whether the call that creates the value has finished (always True on the owner's RRef(value))."""
        return self._created is None or self._created.done()

    def local_value(self) -> Any:
        """The value itself, on the owner (waits for the creating call if it still runs).

        Raises:
            ZgradError: called on a worker that is not the owner.
        """
        if not self.is_owner():
            raise ZgradError(
                f"RRef.local_value() can only be called on the owner ({self.owner_name()!r}); this is "
                f"{self._agent.name!r}. Use to_here() to fetch a copy."
            )
        return self._agent.rrefs.read(self.rref_id).wait()

    def to_here(self, timeout: float = -1) -> Any:
        """A copy of the value on this worker (the value itself on the owner). Blocks.

        Raises:
            RemoteError: the call that creates the value failed.
            ZgradTimeoutError: no answer within ``timeout`` seconds (-1 = the configured default).
        """
        if self.is_owner():
            return self._agent.rrefs.read(self.rref_id).wait()
        return self._agent.fetch_rref(self, timeout)

    def _get_future(self) -> Future:
        """The future of the creating call (for ``remote``)."""
        if self._created is None:
            done = Future("RRef creation")
            done.set_result(None)
            return done
        return self._created

    def rpc_sync(self, timeout: float = -1) -> "_Proxy":
        """``rref.rpc_sync().method(*args)`` runs ``method`` on the owner's value and returns its result."""
        return _Proxy(self, "rpc_sync", timeout)

    def rpc_async(self, timeout: float = -1) -> "_Proxy":
        """``rref.rpc_async().method(*args)`` returns a Future of ``method`` run on the owner's value."""
        return _Proxy(self, "rpc_async", timeout)

    def remote(self, timeout: float = -1) -> "_Proxy":
        """``rref.remote().method(*args)`` returns an RRef, owned by this RRef's owner, to the result."""
        return _Proxy(self, "remote", timeout)

    def __repr__(self) -> str:
        return f"RRef(owner={self._agent.worker_info(self._owner).name}, id={self.rref_id:#x}, fork={self._fork_id:#x})"


class _Proxy:
    def __init__(self, rref: RRef, how: str, timeout: float) -> None:
        self._rref, self._how, self._timeout = rref, how, timeout

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(f"only public methods can be called through an RRef proxy, not {method!r}")
        rref, how, timeout = self._rref, self._how, self._timeout

        def call(*args: Any, **kwargs: Any) -> Any:
            agent = rref._agent
            params = (rref, method, list(args), dict(kwargs))
            if how == "remote":
                return agent.remote(rref._owner, invoke_method, params, None, timeout)
            if how == "rpc_sync":
                return agent.call_sync(rref._owner, invoke_method, params, None, timeout)
            return agent.call(rref._owner, invoke_method, params, None, timeout)

        return call


def invoke_method(rref: RRef, method: str, args: list, kwargs: dict) -> Any:
    """Run ``method`` of the value ``rref`` refers to; the target of RRef proxies (on the owner).
    An ``async_execution`` method's future becomes the answer (the reply waits for it)."""
    if not isinstance(method, str) or method.startswith("_"):
        raise AttributeError(f"only public methods can be called through an RRef proxy, not {method!r}")
    bound = getattr(rref.local_value(), method)
    result = bound(*args, **kwargs)
    if is_async_execution(bound):
        future = deferred_future(bound, result, f"method {method!r} of {type(bound.__self__).__qualname__}")
        return DeferredResult(future)
    return result

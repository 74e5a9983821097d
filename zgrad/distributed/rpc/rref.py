"""Remote references: ``RRef``, the object a user holds, and its proxies.

An ``RRef`` is one fork of a value owned by one worker; it holds its worker's
:class:`~zgrad.distributed.rpc.rref_context.RRefContext`, which counts forks, gives RRefs their
wire form and keeps them alive for the calls that carry them (the protocol is described there).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from zgrad.distributed.rpc.functions import DeferredResult, deferred_future, is_async_execution
from zgrad.futures import Future
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import ZgradError

if TYPE_CHECKING:
    from zgrad.distributed.rpc.rref_context import RRefContext

__all__ = ["RRef", "invoke_method"]


class RRef:
    """A reference to a value owned by one worker.

    ``RRef(value)`` makes the calling worker the owner; ``rpc.remote(...)`` returns RRefs owned by
    the callee. RRefs may be passed as RPC arguments and results to any worker; the owner frees
    the value once no RRef to it remains anywhere. Methods that fetch block; all are thread-safe.
    """

    _is_zgrad_rref = True

    def __init__(self, value: Any = None, *, _context: "RRefContext | None" = None, _rref_id: int | None = None,
                 _owner: int | None = None, _fork_id: int | None = None, _created: Future | None = None) -> None:
        if _context is None:
            from zgrad.distributed.rpc.state import current_agent

            _context = current_agent().rref_context
            _rref_id, _fork_id = _context.own(value)
            _owner = _context.rank
        self._context = _context
        self.rref_id = _rref_id
        self._owner = _owner
        self._fork_id = _fork_id
        self._created = _created
        self._finalizer = weakref.finalize(self, _context.release_fork, _rref_id, _owner, _fork_id)

    def owner(self) -> WorkerInfo:
        """The owner's WorkerInfo."""
        return self._context.caller.worker_info(self._owner)

    def owner_name(self) -> str:
        return self.owner().name

    def is_owner(self) -> bool:
        return self._owner == self._context.rank

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
                f"{self._context.name!r}. Use to_here() to fetch a copy."
            )
        return self._context.owned.read(self.rref_id).wait()

    def to_here(self, timeout: float = -1) -> Any:
        """A copy of the value on this worker (the value itself on the owner). Blocks.

        Raises:
            RemoteError: the call that creates the value failed.
            ZgradTimeoutError: no answer within ``timeout`` seconds (-1 = the configured default).
        """
        if self.is_owner():
            return self._context.owned.read(self.rref_id).wait()
        return self._context.caller.fetch(self, timeout)

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
        return f"RRef(owner={self.owner_name()}, id={self.rref_id:#x}, fork={self._fork_id:#x})"


class _Proxy:
    def __init__(self, rref: RRef, how: str, timeout: float) -> None:
        self._rref, self._how, self._timeout = rref, how, timeout

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(f"only public methods can be called through an RRef proxy, not {method!r}")
        rref, how, timeout = self._rref, self._how, self._timeout

        def call(*args: Any, **kwargs: Any) -> Any:
            caller = rref._context.caller
            params = (rref, method, list(args), dict(kwargs))
            if how == "remote":
                return caller.remote(rref._owner, invoke_method, params, None, timeout)
            if how == "rpc_sync":
                return caller.call_sync(rref._owner, invoke_method, params, None, timeout)
            return caller.call(rref._owner, invoke_method, params, None, timeout)

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

"""The graceful-shutdown barrier.

Each worker first waits until none of its own calls is in flight (nor the background work of the
layer built on RPC: the release of a distributed autograd context, say; ``CallHooks.drain``),
then tells rank 0
(SHUTDOWN_READY). Rank 0 waits for every live worker, then tells them all to go (SHUTDOWN_GO).
Since every piece of callee work serves some worker's in-flight call, once all are ready no work
is left anywhere. A worker that dies before the barrier is counted as done and named in the
error each survivor raises after closing.

By default there is no time bound (as PyTorch's default of 0): a worker that calls ``shutdown()``
right after ``init_rpc`` waits as long as the others keep working, however long the job runs.
The wait still ends: every worker it waits for is watched by heartbeats, and a dead one ends it.
With a timeout, nothing waits longer than that.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol

from zgrad.distributed.rpc.hooks import CallHooks
from zgrad.distributed.rpc.messages import Kind
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import ProtocolError, WorkerUnavailableError, ZgradTimeoutError
from zgrad.transport import Envelope

__all__ = ["ShutdownBarrier"]


class BarrierCaller(Protocol):
    """What the barrier needs from its agent's caller side (``Caller``)."""

    def send(self, dst: int, kind: int, meta: Any, buffers: Any = (), request_id: int = 0) -> None: ...

    def wait_no_pending(self, timeout_s: float | None) -> bool: ...

    def pending_count(self) -> int: ...

    def dead_workers(self) -> dict[int, str]: ...


class BarrierAgent(Protocol):
    """What the barrier needs from its agent (the ``RpcAgent`` that builds it)."""

    name: str
    rank: int
    world_size: int
    call_hooks: CallHooks
    caller: BarrierCaller

    def register_handler(self, kind: int, handler: Callable[[Envelope], None]) -> None: ...

    def add_peer_lost_listener(self, listener: Callable[[int, str], None]) -> None: ...

    def worker_info(self, to: Any = None) -> WorkerInfo: ...


class ShutdownBarrier:
    """Barrier state of one agent, built by the agent (its handlers are registered before the mesh starts)."""

    def __init__(self, agent: BarrierAgent) -> None:
        self.agent = agent
        self._cond = threading.Condition()
        self._ready: set[int] = set()
        self._go_dead: list[str] | None = None
        self._sent_ready = False
        agent.register_handler(Kind.SHUTDOWN_READY, self._on_ready)
        agent.register_handler(Kind.SHUTDOWN_GO, self._on_go)
        agent.add_peer_lost_listener(lambda rank, reason: self._wake())

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _on_ready(self, envelope) -> None:
        with self._cond:
            self._ready.add(envelope.src)
            self._cond.notify_all()

    def _on_go(self, envelope) -> None:
        if envelope.src != 0:
            raise ProtocolError(f"SHUTDOWN_GO from rank {envelope.src}; only rank 0 may send it")
        with self._cond:
            if not self._sent_ready:
                raise ProtocolError("SHUTDOWN_GO before this worker reached the shutdown barrier")
            self._go_dead = [d for d in envelope.meta["dead"] if isinstance(d, str)]
            self._cond.notify_all()

    def run(self, timeout_s: float | None) -> list[str]:
        """Run the barrier; return the names of workers found dead.

        Args:
            timeout_s: the bound of the whole barrier, or None to wait as long as the workers
                waited for are alive.

        Raises:
            ZgradTimeoutError: the barrier did not complete within ``timeout_s``.
            WorkerUnavailableError: rank 0 died before releasing the barrier.
        """
        agent = self.agent
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        if not agent.caller.wait_no_pending(left()):
            raise ZgradTimeoutError(
                    f"shutdown of {agent.name!r}: {agent.caller.pending_count()} call(s) still in flight after {timeout_s:g} s")
        if not agent.call_hooks.drain(left()):
            raise ZgradTimeoutError(
                f"shutdown of {agent.name!r}: releasing autograd contexts on the workers they reached took more than {timeout_s:g} s")
        if agent.rank != 0:
            with self._cond:
                self._sent_ready = True
            try:
                agent.caller.send(0, Kind.SHUTDOWN_READY, {})
            except WorkerUnavailableError as exc:
                raise WorkerUnavailableError(f"shutdown of {agent.name!r}: rank 0 is gone: {exc}") from exc
            with self._cond:
                done = self._cond.wait_for(lambda: self._go_dead is not None or 0 in agent.caller.dead_workers(), left())
                if self._go_dead is not None:
                    return self._go_dead
            if not done:
                raise ZgradTimeoutError(f"shutdown of {agent.name!r}: rank 0 did not release the barrier within {timeout_s:g} s")
            raise WorkerUnavailableError(f"shutdown of {agent.name!r}: rank 0 died before releasing the barrier")
        others = set(range(1, agent.world_size))
        with self._cond:
            complete = self._cond.wait_for(lambda: others <= self._ready | set(agent.caller.dead_workers()), left())
        dead = agent.caller.dead_workers()
        if not complete:
            missing = sorted(others - self._ready - set(dead))
            names = ", ".join(agent.worker_info(r).name for r in missing)
            raise ZgradTimeoutError(f"shutdown of {agent.name!r}: worker(s) {names} did not reach the barrier within {timeout_s:g} s")
        dead_names = [agent.worker_info(r).name for r in sorted(dead)]
        for rank in sorted(others - set(dead)):
            try:
                agent.caller.send(rank, Kind.SHUTDOWN_GO, {"dead": dead_names})
            except WorkerUnavailableError:
                dead_names.append(agent.worker_info(rank).name)
        return dead_names

"""An in-memory world of distributed autograd engines: no sockets, no threads.

Messages are queued per (sender, receiver) pair and delivered by the test, in FIFO order per pair
(as the mesh guarantees) but in any interleaving across pairs. ``rpc`` records a forward RPC
exactly as the agent does (send node on the caller, recv node on the callee, and back).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Callable, Sequence

import numpy as np

import zgrad
from zgrad.distributed.autograd.recording import record_recv, record_send
from zgrad.engine.dist.context import ContextContainer
from zgrad.engine.dist.engine import DistEngine
from zgrad.kernels import dispatch
from zgrad.tensor import gradient_edge


class FakeMessenger:
    def __init__(self, world: "World", rank: int) -> None:
        self.world = world
        self.rank = rank

    def send(self, dst: int, kind: str, body: dict, arrays: Sequence[Any] = ()) -> None:
        if dst in self.world.dead:
            raise ConnectionError(f"rank {dst} is dead")
        copied = [np.array(a, copy=True) for a in arrays]  # the wire never shares memory
        self.world.queues.setdefault((self.rank, dst), deque()).append((kind, dict(body), copied))
        self.world.log.append((self.rank, dst, kind, dict(body)))

    def worker_name(self, rank: int) -> str:
        return f"worker{rank}"

    def submit(self, work) -> None:
        work()  # one thread: the test's delivery order is the only interleaving


class World:
    def __init__(self, size: int, seed: int = 0) -> None:
        self.contexts = [ContextContainer(r) for r in range(size)]
        self.engines = [DistEngine(self.contexts[r], FakeMessenger(self, r)) for r in range(size)]
        self.queues: dict[tuple[int, int], deque] = {}
        self.log: list[tuple[int, int, str, dict]] = []  # (src, dst, kind, body) of every message sent
        self.dead: set[int] = set()
        self.rng = random.Random(seed)

    # --- forward --------------------------------------------------------------------------------

    def context(self, rank: int = 0) -> int:
        ctx = self.contexts[rank].create()
        self.contexts[rank].set_current(None)
        return ctx.context_id

    def rpc(self, context_id: int, src: int, dst: int, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` "on" ``dst`` for a caller on ``src``, recorded in ``context_id`` on both."""
        src_ctx = self.contexts[src].get_or_create(context_id)
        tensors = [a for a in args if isinstance(a, zgrad.Tensor)]
        message = record_send(self.contexts[src], src_ctx, dst, tensors)
        received = [zgrad.Tensor(np.array(a._data, copy=True), requires_grad=a.requires_grad)
                    if isinstance(a, zgrad.Tensor) else a for a in args]
        dst_ctx = self.contexts[dst].get_or_create(context_id)
        record_recv(dst_ctx, src, message, [a for a in received if isinstance(a, zgrad.Tensor)])
        previous = self.contexts[dst].set_current(dst_ctx)
        try:
            result = fn(*received)
        finally:
            self.contexts[dst].set_current(previous)
        back_message = record_send(self.contexts[dst], dst_ctx, src, [result])
        back = zgrad.Tensor(np.array(result._data, copy=True), requires_grad=result.requires_grad)
        record_recv(src_ctx, dst, back_message, [back])
        return back

    def nested_rpc(self, context_id: int, start: int = 0) -> Callable[..., Any]:
        """An ``rpc(dst, fn, *args)`` whose calls start from the worker running the current function,
        so functions may call further (nested calls, calls back home)."""
        stack = [start]

        def rpc(dst: int, fn: Callable[..., Any], *args: Any) -> Any:
            src = stack[-1]
            stack.append(dst)
            try:
                return self.rpc(context_id, src, dst, fn, *args)
            finally:
                stack.pop()

        return rpc

    # --- backward -------------------------------------------------------------------------------

    def backward(self, rank: int, context_id: int, roots: Sequence[zgrad.Tensor], mode: str = "fast",
                 retain_graph: bool = False):
        edges = [gradient_edge(r) for r in roots]
        grads = [dispatch.full(r.shape, 1, r.dtype) for r in roots]
        return self.engines[rank].backward(context_id, edges, grads, retain_graph=retain_graph, mode=mode)

    def deliver_one(self) -> bool:
        pairs = [p for p, q in self.queues.items() if q]
        if not pairs:
            return False
        src, dst = self.rng.choice(pairs)
        kind, body, arrays = self.queues[(src, dst)].popleft()
        if dst not in self.dead:
            self.engines[dst].receive(src, kind, body, arrays)
        return True

    def deliver_all(self, limit: int = 100_000) -> int:
        count = 0
        while self.deliver_one():
            count += 1
            assert count < limit, "message storm: the protocol does not terminate"
        return count

    def kill(self, rank: int) -> None:
        self.dead.add(rank)
        for (src, dst), queue in self.queues.items():
            if rank in (src, dst):
                queue.clear()
        for r, engine in enumerate(self.engines):
            if r != rank:
                engine.peer_lost(rank, "killed by the test")

    def gradients(self, rank: int, context_id: int) -> dict:
        return self.contexts[rank].get(context_id).gradients()

    def passes_running(self) -> list[int]:
        return [e.debug_info()["num_current_backward_passes"] for e in self.engines]

    def kinds(self) -> list[str]:
        return [kind for _, _, kind, _ in self.log]

    def bodies(self, kind: str) -> list[dict]:
        return [body for _, _, k, body in self.log if k == kind]

    def discover_requests(self) -> int:
        """DISCOVER messages plus the DISCOVERs for the root that rode in a DISCOVER_ACK."""
        return len(self.bodies("DISCOVER")) + sum(len(b.get("discover", ())) for b in self.bodies("DISCOVER_ACK"))

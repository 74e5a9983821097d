"""Distributed autograd on one worker: its contexts, its engine, and the glue to the RPC agent.

:class:`RpcMessenger` carries the engine's messages as RPC message kinds: the body in the
metadata, gradients as raw buffers described by ``arrays`` (``[dtype, shape]`` each, checked like
the safe codec's arrays; gradients are always plain arrays, so they need none of its value tree).
An array that appears twice in one message (``add``'s two gradients) travels once: its second
entry is the index of its buffer. :class:`DistAutogradWorker` is attached to every agent by
``init_rpc``; the agent calls its ``*_call``/``*_result`` hooks to record send and recv nodes for
every RPC made inside a context.

Threads: every engine message is received on the agent's I/O thread (checked and decoded there,
which is cheap); :meth:`DistEngine.receive` handles acknowledgements, reports and PASS_END right
there (they never block) and hands the rest, which runs graph work or frees contexts, to the
callee pool, or, for a pass rooted on this worker, to the thread waiting in ``backward``. That
saves a hand-off to the pool on every hop of a pass.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from zgrad.distributed.autograd.recording import record_recv, record_send
from zgrad.distributed.rpc.codec import array_from_buffer, array_spec
from zgrad.distributed.rpc.messages import Kind, check_meta
from zgrad.engine.context import ContextContainer, DistAutogradContext
from zgrad.engine.dist_engine import DistEngine
from zgrad.engine.dist_protocol import BODY_SCHEMAS, KINDS
from zgrad.errors import ProtocolError
from zgrad.tensor import Tensor

if TYPE_CHECKING:
    from zgrad.distributed.rpc.agent import RpcAgent
    from zgrad.transport import Envelope

__all__ = ["DistAutogradWorker", "RpcMessenger", "ENGINE_KINDS", "attach"]

ENGINE_KINDS = {name: getattr(Kind, name) for name in KINDS}
_NAMES = {kind: name for name, kind in ENGINE_KINDS.items()}
_ENVELOPE_SCHEMA = {"body": ((dict,), True), "arrays": ((list,), False)}


class RpcMessenger:
    """The engine's :class:`~zgrad.engine.dist_outbox.Messenger` over the RPC agent."""

    def __init__(self, agent: "RpcAgent") -> None:
        self.agent = agent
        self.rank = agent.rank

    def send(self, dst: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> None:
        meta: dict[str, Any] = {"body": body}
        buffers: list[np.ndarray] = []
        if arrays:
            specs: list[Any] = []
            sent: dict[int, int] = {}  # id of an array already in ``buffers`` -> its index there
            for a in arrays:
                index = sent.get(id(a))
                if index is not None:  # the same array again (``add``'s two gradients): its memory goes once
                    specs.append(index)
                    continue
                sent[id(a)] = len(buffers)
                buffer = np.ascontiguousarray(a)
                specs.append(array_spec(buffer))
                buffers.append(buffer)
            meta["arrays"] = specs
        self.agent.send(dst, ENGINE_KINDS[kind], meta, buffers)

    def submit(self, work: Any) -> None:
        self.agent.pool.submit(work)

    def worker_name(self, rank: int) -> str:
        try:
            return self.agent.worker_info(rank).name
        except (ValueError, IndexError):
            return f"rank {rank}"


class DistAutogradWorker:
    """Contexts and engine of one worker, wired to its agent."""

    def __init__(self, agent: "RpcAgent") -> None:
        self.agent = agent
        self.contexts = ContextContainer(agent.rank)
        self.engine = DistEngine(self.contexts, RpcMessenger(agent))
        self._releases = threading.Condition()
        self._releasing = 0
        for kind in ENGINE_KINDS.values():
            agent.register_handler(kind, self._on_message, inline=True)
        agent.add_peer_lost_listener(self.engine.peer_lost)

    def release(self, context_id: int) -> None:
        """Release a context here at once, and in the background on every worker it reached
        (recursively, with the engine's retries; a lost worker counts as answered). Never waits
        for an answer; ``rpc.shutdown`` waits for the releases still under way."""

        def done() -> None:
            with self._releases:
                self._releasing -= 1
                self._releases.notify_all()

        with self._releases:
            self._releasing += 1
        self.engine.release_context(context_id, done)

    def wait_released(self, timeout_s: float) -> bool:
        """Block until every release started here was answered everywhere (at most ``timeout_s``)."""
        with self._releases:
            return self._releases.wait_for(lambda: self._releasing == 0, timeout_s)

    def _on_message(self, envelope: "Envelope") -> None:
        name = _NAMES[envelope.kind]
        check_meta(envelope.kind, envelope.meta, _ENVELOPE_SCHEMA)
        body = check_meta(envelope.kind, envelope.meta["body"], BODY_SCHEMAS[name])
        self.engine.receive(envelope.src, name, body, _arrays(name, envelope.meta.get("arrays", []), envelope.buffers))

    # --- hooks called by the RPC agent ----------------------------------------------------------

    def outgoing_call(self, dst: int, tensors: Sequence[Tensor]) -> dict[str, Any]:
        """Metadata to add to a CALL or RREF_FETCH made by this thread (records the send node)."""
        ctx = self.contexts.current()
        if ctx is None:
            return {}
        extra: dict[str, Any] = {"context": ctx.context_id}
        message_id = record_send(self.contexts, ctx, dst, tensors)
        if message_id is not None:
            extra["grad_msg"] = message_id
        return extra

    def incoming_call(self, src: int, meta: dict[str, Any], tensors: Sequence[Tensor]) -> DistAutogradContext | None:
        """The context a received CALL runs in (created lazily), with its recv node recorded.

        Raises:
            AutogradError: the context was already released here.
        """
        context_id = meta.get("context")
        if context_id is None:
            return None
        ctx = self.contexts.get_or_create(context_id)
        record_recv(ctx, src, meta.get("grad_msg"), tensors)
        return ctx

    def result_meta(self, ctx: DistAutogradContext | None, dst: int, tensors: Sequence[Tensor]) -> dict[str, Any]:
        """Metadata for the RESULT of a call that ran in ``ctx`` (records the send node)."""
        if ctx is None:
            return {}
        message_id = record_send(self.contexts, ctx, dst, tensors)
        return {} if message_id is None else {"grad_msg": message_id}

    def incoming_result(self, context_id: int | None, src: int, meta: dict[str, Any], tensors: Sequence[Tensor]) -> None:
        """Record the recv node for a RESULT of a call made in ``context_id``."""
        if context_id is None:
            return
        ctx = self.contexts.get(context_id)
        record_recv(ctx, src, meta.get("grad_msg"), tensors)


def _arrays(name: str, specs: list[Any], buffers: Sequence[memoryview]) -> list[Any]:
    """The gradients a message carries: per entry of ``specs``, ``[dtype, shape]`` describes the
    next buffer, and an int ``j`` repeats the array of buffer ``j`` (the same object: a gradient
    sent twice travels once, and the receiver's graph task copies it where one copy is kept).

    Raises:
        ProtocolError: a malformed entry, a repeat of a buffer not described yet, or a number of
            described buffers other than the number carried.
    """
    described = sum(1 for spec in specs if type(spec) is not int)
    if described != len(buffers):
        raise ProtocolError(f"{name} describes {described} arrays but carries {len(buffers)} buffers")
    received: list[Any] = []
    arrays: list[Any] = []
    for i, spec in enumerate(specs):
        if type(spec) is int:
            if not 0 <= spec < len(received):
                raise ProtocolError(f"{name} array {i} repeats buffer {spec}, which is not among the {len(received)} before it")
            arrays.append(received[spec])
            continue
        if not isinstance(spec, list) or len(spec) != 2:
            raise ProtocolError(f"{name} array {i} must be described as [dtype, shape] or by a buffer index")
        try:
            received.append(array_from_buffer(buffers[len(received)], spec[0], spec[1]))
        except ProtocolError as exc:
            raise ProtocolError(f"{name} array {i}: {exc}") from None
        arrays.append(received[-1])
    return arrays


def attach(agent: "RpcAgent") -> DistAutogradWorker:
    """Give ``agent`` its distributed autograd (before the agent starts receiving)."""
    worker = DistAutogradWorker(agent)
    agent.autograd = worker
    return worker

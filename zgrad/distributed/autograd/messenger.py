"""The distributed engine's messages over the RPC agent: the engine's Messenger, both ways.

An engine message travels as the RPC message kind of the same name (``messages.Kind``): its body
in the metadata (``{"body": ..., "arrays": ...}``), its gradients as raw buffers described by
``arrays`` (``[dtype, shape]`` each, checked like the safe codec's arrays; gradients are always
plain arrays, so they need none of its value tree). An array that appears twice in one message
(``add``'s two gradients) travels once: its second entry is the index of its buffer. Inbound
messages are checked (envelope, then the body's schema from ``zgrad.engine.dist.protocol``, then the arrays)
on the agent's I/O thread before the engine sees them.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import numpy as np

from zgrad.distributed.rpc.codec import array_from_buffer, array_spec
from zgrad.distributed.rpc.messages import Kind, check_meta
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.engine.dist.protocol import BODY_SCHEMAS, KINDS
from zgrad.errors import ProtocolError
from zgrad.kernels import dispatch
from zgrad.transport import Envelope

__all__ = ["RpcMessenger", "MessengerAgent", "ENGINE_KINDS"]

ENGINE_KINDS = {name: getattr(Kind, name) for name in KINDS}
_NAMES = {kind: name for name, kind in ENGINE_KINDS.items()}
_ENVELOPE_SCHEMA = {"body": ((dict,), True), "arrays": ((list,), False)}

Receive = Callable[..., None]  # (src, kind, body, arrays[, reply])


class _Pool(Protocol):
    def submit(self, work: Callable[[], None]) -> None: ...


class _Role(Protocol):
    def leads(self) -> bool: ...


class _Mesh(Protocol):
    role: _Role


class _Caller(Protocol):
    def send(self, dst: int, kind: int, meta: Any, buffers: Any = (), request_id: int = 0) -> None: ...

    def post(self, dst: int, kind: int, meta: Any, buffers: Any = ()) -> int: ...

    def collect_posted(self, expected: dict[int, set[int]], wake_fd: int | None, timeout_s: float) -> list[Envelope]: ...


class _Callee(Protocol):
    def reply(self, envelope: Envelope, kind: int, meta: Any, buffers: Any = ()) -> None: ...


class MessengerAgent(Protocol):
    """What the messenger needs from the RPC agent."""

    rank: int
    pool: _Pool
    mesh: _Mesh
    caller: _Caller
    callee: _Callee

    def allow_takeover(self) -> None: ...

    def reject(self, src: int, reason: str) -> None: ...

    def worker_info(self, to: Any = None) -> WorkerInfo: ...

    def register_handler(self, kind: int, handler: Callable[[Envelope], None]) -> None: ...


class RpcMessenger:
    """The engine's :class:`~zgrad.engine.dist.messaging.Messenger` over the RPC agent."""

    def __init__(self, agent: MessengerAgent, receive: Receive) -> None:
        """Route every engine kind the agent receives, checked, to ``receive(src, kind, body, arrays)``."""
        self.agent = agent
        self.rank = agent.rank
        self._receive = receive
        for kind in ENGINE_KINDS.values():
            agent.register_handler(kind, self._on_message)

    def send(self, dst: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = (), reply: Any = None) -> None:
        """Send one engine message; ``reply`` (from :meth:`_on_message`'s ``receive``) answers the
        message that ``dst``'s thread posted (``Mesh.reply``: where that thread waits)."""
        meta, buffers = _encode(body, arrays)
        if reply is not None:
            self.agent.callee.reply(reply, ENGINE_KINDS[kind], meta, buffers)
        else:
            self.agent.caller.send(dst, ENGINE_KINDS[kind], meta, buffers)

    def post(self, dst: int, kind: str, body: dict[str, Any], arrays: Sequence[Any] = ()) -> int:
        """Send one engine message to ``dst`` whose answer comes back to the calling thread, for
        :meth:`collect` (``Caller.post``; the mesh picks the route). Returns the request id to wait for."""
        meta, buffers = _encode(body, arrays)
        return self.agent.caller.post(dst, ENGINE_KINDS[kind], meta, buffers)

    def collect(self, expected: dict[int, set[int]], wake_fd: int, timeout_s: float) -> None:
        """Wait for answers to :meth:`post` messages (``expected``: rank -> request ids,
        updated) and receive them on this thread, until some arrived, ``wake_fd`` is readable or
        ``timeout_s`` (at most one wait slice) passed."""
        for envelope in self.agent.caller.collect_posted(expected, wake_fd, timeout_s):
            try:
                self._on_message(envelope)
            except ProtocolError as exc:
                self.agent.reject(envelope.src, str(exc))

    def submit(self, work: Any) -> None:
        """Run engine work where the message that caused it arrived (the thread holding the
        inbound socket: engine work never waits, and one that computes long is taken over there,
        see ``transport/loop/role.py``); from any other thread, on the callee pool."""
        if self.agent.mesh.role.leads():
            self.agent.allow_takeover()
            work()
        else:
            self.agent.pool.submit(work)

    def worker_name(self, rank: int) -> str:
        try:
            return self.agent.worker_info(rank).name
        except (ValueError, IndexError):
            return f"rank {rank}"

    def _on_message(self, envelope: Envelope) -> None:
        name = _NAMES[envelope.kind]
        check_meta(envelope.kind, envelope.meta, _ENVELOPE_SCHEMA)
        body = check_meta(envelope.kind, envelope.meta["body"], BODY_SCHEMAS[name])
        arrays = _arrays(name, envelope.meta.get("arrays", []), envelope.buffers)
        if envelope.request_id:  # posted by a thread that collects its answer (Mesh.post): answer it
            self._receive(envelope.src, name, body, arrays, envelope)
        else:
            self._receive(envelope.src, name, body, arrays)


def _encode(body: dict[str, Any], arrays: Sequence[Any]) -> tuple[dict[str, Any], list[np.ndarray]]:
    """The metadata and buffers of an engine message: an array that appears twice (``add``'s two
    gradients) travels once, its second entry being the index of its buffer."""
    meta: dict[str, Any] = {"body": body}
    buffers: list[np.ndarray] = []
    if arrays:
        specs: list[Any] = []
        sent: dict[int, int] = {}  # id of an array already in ``buffers`` -> its index there
        for a in arrays:
            index = sent.get(id(a))
            if index is not None:
                specs.append(index)
                continue
            sent[id(a)] = len(buffers)
            buffer = dispatch.host_buffer(a)  # a CUDA gradient is staged through pinned memory
            specs.append(array_spec(buffer))
            buffers.append(buffer)
        meta["arrays"] = specs
    return meta, buffers


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

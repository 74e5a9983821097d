"""Distributed autograd contexts: per worker, what one forward/backward round recorded.

A context holds its send and recv nodes by ``autograd_message_id``, the workers it talked to,
the gradients accumulated by its backward passes (never in ``.grad``), and the table of its
passes on this worker (``dist/passes.py``). Ids are 64-bit:
the creating worker's rank in the high 16 bits, a counter below, so they are unique without
coordination. A released id is remembered (a bounded tombstone set), so a late message cannot
bring the context back.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Any, Iterator

from zgrad.engine.dist.modes import SendSelection
from zgrad.engine.dist.passes import PassTable, TablePass
from zgrad.engine.graph import Node
from zgrad.engine.send_recv import RecvNode, SendNode
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch

__all__ = ["DistAutogradContext", "ContextContainer", "make_id_generator", "unknown_context"]

ID_SHIFT = 48
MAX_TOMBSTONES = 100_000


def make_id_generator(rank: int) -> Iterator[int]:
    """Globally unique 64-bit ids: ``rank`` in the high 16 bits, a counter below."""
    return (((rank & 0xFFFF) << ID_SHIFT) | n for n in itertools.count(1))


def unknown_context(context_id: int) -> AutogradError:
    return AutogradError(f"Could not find autograd context with id: {context_id}")


class DistAutogradContext:
    """What one distributed autograd context recorded on this worker. Thread-safe.

    ``root_nodes`` (where this worker's last pass as root started) and ``last_selection`` (which
    sends took part in the last pass here: what SMART discovery found) are kept for
    ``dist_autograd.graph``.
    """

    def __init__(self, context_id: int) -> None:
        self.context_id = context_id
        self.lock = threading.Lock()
        self.send_functions: dict[int, SendNode] = {}
        self.recv_functions: dict[int, RecvNode] = {}
        self.known_workers: set[int] = set()
        self._gradients: dict[Any, Any] = {}
        self.pass_table: PassTable[TablePass] = PassTable(context_id)
        self.root_nodes: list[Node] = []
        self.last_selection: SendSelection | None = None

    @property
    def passes(self) -> dict[int, TablePass]:
        """The passes running here, by id (a snapshot)."""
        return self.pass_table.running()

    @property
    def ended_passes(self) -> set[int]:
        """The ids of the passes that ended here (a snapshot)."""
        return self.pass_table.ended()

    def add_send(self, node: SendNode) -> None:
        with self.lock:
            self.send_functions[node.autograd_message_id] = node
            self.known_workers.add(node.peer)

    def add_recv(self, node: RecvNode) -> None:
        with self.lock:
            self.recv_functions[node.autograd_message_id] = node
            self.known_workers.add(node.peer)

    def add_known_worker(self, rank: int) -> None:
        with self.lock:
            self.known_workers.add(rank)

    def sends(self) -> list[SendNode]:
        with self.lock:
            return list(self.send_functions.values())

    def accumulate_grad(self, variable: Any, grad: Any) -> None:
        """Add ``grad`` to this context's gradient of leaf ``variable`` (the graph task's leaf
        sink). The first gradient is kept as is: the graph task hands over arrays nothing else
        holds (``GraphTask(sink_keeps=True)``)."""
        with self.lock:
            held = self._gradients.get(variable)
            if held is None:
                self._gradients[variable] = grad if grad.dtype == variable.dtype else dispatch.cast(grad, variable.dtype)
            else:
                dispatch.add_inplace(held, grad)

    def leaf_gradient(self, variable: Any) -> Any:
        """The gradient array accumulated for leaf ``variable``, or None."""
        with self.lock:
            return self._gradients.get(variable)

    def set_leaf_gradient(self, variable: Any, grad: Any) -> None:
        """Replace the gradient of leaf ``variable`` by array ``grad`` (DDP puts averages back here)."""
        with self.lock:
            self._gradients[variable] = grad

    def gradients(self) -> dict[Any, Any]:
        """Leaf tensor -> accumulated gradient array (a snapshot of the mapping)."""
        with self.lock:
            return dict(self._gradients)

    def __repr__(self) -> str:
        return (f"DistAutogradContext(id={self.context_id:#x}, sends={len(self.send_functions)}, "
                f"recvs={len(self.recv_functions)}, workers={sorted(self.known_workers)})")


class ContextContainer:
    """The contexts of one worker, the current context of each thread, and released ids."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self._lock = threading.Lock()
        self._contexts: dict[int, DistAutogradContext] = {}
        self._released: OrderedDict[int, None] = OrderedDict()
        self._context_ids = make_id_generator(rank)
        self._message_ids = make_id_generator(rank)
        self._current = threading.local()

    def new_message_id(self) -> int:
        return next(self._message_ids)

    def create(self) -> DistAutogradContext:
        """A new context with a fresh id, made current for this thread.

        Raises:
            AutogradError: this thread already has a current context.
        """
        if self.current() is not None:
            raise AutogradError("Already have an autograd context id for this thread.")
        with self._lock:
            ctx = DistAutogradContext(next(self._context_ids))
            self._contexts[ctx.context_id] = ctx
        self.set_current(ctx)
        return ctx

    def get(self, context_id: int) -> DistAutogradContext:
        """The context with ``context_id``.

        Raises:
            AutogradError: "Could not find autograd context with id: N".
        """
        ctx = self.find(context_id)
        if ctx is None:
            raise unknown_context(context_id)
        return ctx

    def find(self, context_id: int) -> DistAutogradContext | None:
        """The context with ``context_id``, or None."""
        with self._lock:
            return self._contexts.get(context_id)

    def get_or_create(self, context_id: int) -> DistAutogradContext:
        """The context, created lazily when a message of a new id arrives from another worker.

        Raises:
            AutogradError: the id was released here already (a late message must not revive it).
        """
        with self._lock:
            ctx = self._contexts.get(context_id)
            if ctx is None:
                if context_id in self._released:
                    raise AutogradError(f"autograd context {context_id} was already released on this worker")
                ctx = self._contexts[context_id] = DistAutogradContext(context_id)
            return ctx

    def release(self, context_id: int) -> DistAutogradContext | None:
        """Forget the context (remembering its id as released); returns it, or None if unknown."""
        with self._lock:
            ctx = self._contexts.pop(context_id, None)
            self._released[context_id] = None
            while len(self._released) > MAX_TOMBSTONES:
                self._released.popitem(last=False)
        if self.current() is ctx and ctx is not None:
            self.set_current(None)
        return ctx

    def current(self) -> DistAutogradContext | None:
        return getattr(self._current, "context", None)

    def set_current(self, ctx: DistAutogradContext | None) -> DistAutogradContext | None:
        """Make ``ctx`` this thread's current context; returns the previous one."""
        previous = getattr(self._current, "context", None)
        self._current.context = ctx
        return previous

    def __len__(self) -> int:
        with self._lock:
            return len(self._contexts)

    def all(self) -> list[DistAutogradContext]:
        with self._lock:
            return list(self._contexts.values())

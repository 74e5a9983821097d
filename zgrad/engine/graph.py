"""Backward-graph building blocks: nodes, edges, input metadata, leaf accumulation.

A node is the backward of one forward op. It receives one gradient per forward output
(described by ``input_metadata``) and produces one gradient per forward input, routed along
``next_edges``. The engine works on raw arrays only; tensors appear here solely as the opaque
``variable`` of :class:`AccumulateGrad`, which must offer ``_accumulate_grad(array)``.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from zgrad.engine.anomaly_mode import ANOMALY, record_forward
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch

__all__ = ["InputMetadata", "Edge", "Node", "AccumulateGrad", "GraphRoot", "FREED_GRAPH_MESSAGE"]

FREED_GRAPH_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward(). Specify retain_graph=True if you need to backward through the graph a second "
    "time or if you need to access saved tensors after calling backward."
)


class InputMetadata(NamedTuple):
    """Shape, dtype and device type of a gradient a node expects to receive."""

    shape: tuple[int, ...]
    dtype: np.dtype
    device_type: str

    @classmethod
    def of(cls, array: Any) -> "InputMetadata":
        return cls(array.shape, array.dtype, dispatch.device_type_of(array))

    def zeros(self):
        """A zero gradient matching this metadata."""
        return dispatch.full(self.shape, 0, self.dtype, self.device_type)


class Edge(NamedTuple):
    """Where a gradient goes: input ``input_nr`` of ``node``."""

    node: "Node"
    input_nr: int


GradHook = Callable[[Any], Any]
_SEQUENCE = itertools.count()  # Node.sequence_nr: the order nodes were made in


class NodeName(str):
    """A node's name: a string that is also callable, as PyTorch's ``grad_fn.name()`` is a method."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


class Node:
    """Base of every backward node.

    Subclasses implement :meth:`apply` (gradients in, gradients out, as arrays) and, when they
    keep forward values, :meth:`release_variables`.

    Attributes:
        sequence_nr: the order nodes were made in (larger: later), PyTorch's ``_sequence_nr()``.
        next_edges: one entry per forward input; ``None`` where that input needs no gradient.
        input_metadata: one entry per gradient this node receives (per forward output).
        always_run: run even when no gradient reached it (missing inputs become zeros); used by
            nodes whose running is itself an obligation, like distributed recv nodes.
        materialize_grads: hand ``apply`` zeros where no gradient arrived (False: None there, for
            a Function whose ctx said ``set_materialize_grads(False)``).
        node_prehooks: ``hook(grads) -> grads | None`` run on the node's incoming gradients before
            it runs (after the per-input ``pre_hooks``); None when there are none.
        node_posthooks: ``hook(outgoing, incoming) -> outgoing | None`` run on the gradients it
            produced; None when there are none.
        forward_trace: made under anomaly detection: the formatted traceback of the forward call
            that made it (None otherwise; see :mod:`zgrad.engine.anomaly_mode`).
        forward_parent: made under anomaly detection by the backward of another node: that node.
    """

    always_run = False
    materialize_grads = True  # missing incoming gradients become zeros (False: None reaches apply)
    node_prehooks: dict[int, Callable[[list], Any]] | None = None  # PyTorch's register_prehook, by handle id
    node_posthooks: dict[int, Callable[[Sequence, list], Any]] | None = None  # PyTorch's register_hook
    forward_trace: list[str] | None = None
    forward_parent: "Node | None" = None

    def __init__(self) -> None:
        self.sequence_nr = next(_SEQUENCE)
        self.next_edges: list[Edge | None] = []
        self.input_metadata: list[InputMetadata] = []
        self.pre_hooks: dict[int, list[GradHook]] = {}
        if ANOMALY.enabled:
            record_forward(self)

    @property
    def name(self) -> NodeName:
        """The node's type name (PyTorch's: ``AddBackward0``), also callable as ``name()``."""
        return NodeName(type(self).__name__)

    @property
    def next_functions(self) -> tuple[tuple["Node | None", int], ...]:
        """PyTorch-style ``((node, input_nr), ...)`` with ``(None, 0)`` for inputs without gradient."""
        return tuple((e.node, e.input_nr) if e is not None else (None, 0) for e in self.next_edges)

    def _sequence_nr(self) -> int:
        """PyTorch's name for :attr:`sequence_nr`: nodes made later have larger numbers."""
        return self.sequence_nr

    def register_pre_hook(self, input_nr: int, hook: GradHook) -> None:
        """Run ``hook(grad) -> grad | None`` on input ``input_nr`` before the node runs."""
        self.pre_hooks.setdefault(input_nr, []).append(hook)

    def apply(self, grads: Sequence[Any]) -> Sequence[Any]:
        raise NotImplementedError(f"{self.name}.apply")

    def release_variables(self) -> None:
        """Drop the forward values kept for backward (called after a pass without retain_graph)."""

    def __repr__(self) -> str:
        return f"<{self.name} object at {id(self):#x}>"


class AccumulateGrad(Node):
    """The sink of a leaf tensor: adds the incoming gradient into ``variable.grad``.

    Attributes:
        post_hooks: ``hook(variable)`` callables run once the gradient has been accumulated (into
            ``.grad``, or into a distributed context's store): DDP marks parameters ready here.
        destination: ``make() -> array`` (of the variable's shape and dtype), or None: where the
            next gradient goes when ``.grad`` is None, instead of a new array; used once. DDP
            points it at the parameter's slot in its bucket, which saves a copy per step.
    """

    def __init__(self, variable: Any) -> None:
        super().__init__()
        self.variable = variable
        self.input_metadata = [InputMetadata.of(variable._data)]
        self.post_hooks: list[Callable[[Any], None]] = []
        self.destination: Callable[[], Any] | None = None

    def apply(self, grads: Sequence[Any]) -> Sequence[Any]:
        self.accumulate(grads[0], owned=False)
        return ()

    def accumulate(self, grad: Any, owned: bool) -> None:
        """Add ``grad`` into the variable's gradient. ``owned``: nothing else holds or views
        ``grad``, so a first gradient is kept as ``.grad`` without a copy (PyTorch steals it too)."""
        make, self.destination = self.destination, None
        variable = self.variable
        if variable.grad is not None:
            variable._accumulate_grad(grad)
        elif make is not None:
            variable._set_grad_array(dispatch.copy_into(make(), grad))
        elif owned and grad.dtype == variable.dtype:
            variable._set_grad_array(grad)
        else:
            variable._accumulate_grad(grad)


class GraphRoot(Node):
    """The start of a pass: hands the root gradients to the roots' nodes."""

    def __init__(self, edges: Sequence[Edge], grads: Sequence[Any]) -> None:
        super().__init__()
        self.next_edges = list(edges)
        self._grads = list(grads)

    def apply(self, grads: Sequence[Any]) -> Sequence[Any]:
        return self._grads


def raise_freed(node: Node) -> None:
    raise AutogradError(f"{node.name}: {FREED_GRAPH_MESSAGE}")

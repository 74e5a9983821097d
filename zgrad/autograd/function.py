"""Differentiable functions: one class per op, forward with its backward right under it.

:class:`Function` is the public base for user-defined ops (its ``forward``/``backward`` take and
return tensors, like ``torch.autograd.Function``). Built-in ops derive from :class:`Op`, the
same machinery on raw arrays, which skips wrapping and runs faster.

A backward pass with ``create_graph=True`` records the backward computation itself, so that the
gradients have graphs of their own (double backward). The engine then hands each node tensors
instead of arrays (:meth:`FunctionCtx.apply_with_graph`): a user-defined :class:`Function`
runs its ``backward`` with recording on; an :class:`Op` whose ``backward`` is written with the
``formula_*`` arithmetic of :mod:`zgrad.ops.elementwise` (which records an op when a tensor takes
part) says so with ``differentiable_backward = True``, and its saved arrays come back as tensors
on the forward graph: a saved input as that input, a saved output as that output.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from zgrad.engine.grad_mode import enable_grad, is_grad_enabled, no_grad
from zgrad.engine.graph import AccumulateGrad, InputMetadata, Node, raise_freed
from zgrad.engine.versions import snapshot, verify
from zgrad.errors import AutogradError
from zgrad.tensor import Tensor, gradient_edge, link_views, refresh_view
from zgrad.engine.hooks import RemovableHandle
from zgrad.kernels.promotion import is_floating

__all__ = ["Function", "Op", "FunctionCtx", "on_graph"]


def on_graph(*values: Any) -> bool:
    """Whether a tensor is among ``values``: a backward formula is being recorded (create_graph)."""
    for value in values:
        if isinstance(value, Tensor):
            return True
    return False


class FunctionCtx(Node):
    """The context handed to ``forward``/``backward``, which is also the op's backward node.

    Attributes:
        needs_input_grad: per forward argument, whether it requires a gradient.
    """

    def __init__(self, fn: type["Function"], needs_input_grad: tuple[bool, ...]) -> None:
        super().__init__()
        self.fn = fn
        self.needs_input_grad = needs_input_grad
        self._saved: tuple[Any, ...] | None = ()
        self._versions: tuple = ()  # the saved arrays' versions, taken when the node is recorded
        self._identities: tuple[int, ...] = ()  # id() of each forward input, then of each output (see _saved_on_graph)
        self._freed = False
        self._on_graph = False  # backward is running with create_graph=True
        self._listed: tuple[bool, ...] | None = None  # a user Function's: which arguments were tensors
        self._non_differentiable: tuple[Any, ...] = ()  # the outputs forward marked so (compared by identity)

    @property
    def next_functions(self) -> tuple[tuple["Node | None", int], ...]:
        """PyTorch-style ``((node, input_nr), ...)``: one entry per argument of ``forward`` that
        PyTorch's schema has as a tensor (a tensor, or a built-in op's number operand such as the 2
        of ``x + 2``), ``(None, 0)`` for those without gradient."""
        listed = self._listed_inputs()
        return tuple((e.node, e.input_nr) if e is not None else (None, 0)
                     for e, keep in zip(self.next_edges, listed) if keep)

    def register_prehook(self, fn: Any) -> RemovableHandle:
        """Call ``fn(grad_outputs)`` with the gradients this node receives (a tuple of tensors,
        None where none arrived) before it runs, as PyTorch's ``Node.register_prehook``; a
        non-None result (a tuple of as many) replaces them."""
        return _add_node_prehook(self, fn)

    def register_hook(self, fn: Any) -> RemovableHandle:
        """Call ``fn(grad_inputs, grad_outputs)`` once this node has run, as PyTorch's
        ``Node.register_hook``: ``grad_inputs`` are the gradients it computed for its forward's
        inputs, ``grad_outputs`` those it received; a non-None result replaces ``grad_inputs``."""
        return _add_node_posthook(self, fn, self._listed_inputs())

    def _listed_inputs(self) -> tuple[bool, ...]:
        """Which forward arguments PyTorch's schema has as tensors (see :attr:`next_functions`)."""
        return self._listed or tuple(need is not None or i < self.fn.tensor_operands
                                     for i, need in enumerate(self.needs_input_grad))

    def set_materialize_grads(self, value: bool) -> None:
        """Whether ``backward`` gets zeros (True, the default) or None for the outputs no gradient
        reached, as PyTorch's ``ctx.set_materialize_grads``."""
        self.materialize_grads = bool(value)

    def mark_non_differentiable(self, *tensors: Any) -> None:
        """Make these outputs of ``forward`` not require grad (indices, say), as PyTorch's: backward
        still gets a gradient for each, zeros (None without materialized gradients)."""
        self._non_differentiable += tensors

    def save_for_backward(self, *values: Any) -> None:
        """Keep ``values`` for ``backward``; freed after a pass without ``retain_graph``."""
        self._saved = values

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """What ``save_for_backward`` stored.

        Raises:
            AutogradError: the graph was freed by an earlier backward without ``retain_graph=True``.
        """
        if self._freed:
            raise_freed(self)
        if self._versions:
            verify(self._versions, self.name)
        if self._on_graph and self._identities:
            return tuple(self._saved_on_graph(value, self._source(value)) for value in self._saved)
        return self._saved  # type: ignore[return-value]

    def _source(self, value: Any) -> int | None:
        """Which forward input (i) or output (-1 - j) a saved value is, else None. Identities are
        compared by id(): a saved value has been alive since the forward, when the inputs and
        outputs were alive too, so its id is one of theirs only if it is that object."""
        if value is None or isinstance(value, (int, float, bool)):
            return None
        try:
            position = self._identities.index(id(value))
        except ValueError:
            return None
        inputs = len(self.next_edges)
        return position if position < inputs else inputs - 1 - position

    def as_input(self, index: int, value: Any) -> Any:
        """``value``, equal to forward input ``index`` (a reshaped copy of it, say), as a tensor at
        that input of the graph: for a differentiable backward whose saved array is not the input
        itself, in a pass with create_graph=True."""
        return self._saved_on_graph(value, index)

    def as_output(self, index: int, value: Any) -> Any:
        """``value``, equal to forward output ``index``, as that output on the graph (see
        :meth:`as_input`)."""
        return self._saved_on_graph(value, -1 - index)

    def _saved_on_graph(self, value: Any, source: int | None) -> Any:
        """A saved array as a tensor on the forward graph: gradients reaching it flow to the forward
        input (or output) it was, so the backward formula is differentiable in it."""
        if source is None:
            return value
        if source < 0:
            return Tensor(value, is_floating(value.dtype), _grad_fn=self, _output_nr=-1 - source)
        edge = self.next_edges[source]
        if edge is None:
            return Tensor(value)
        return Tensor(value, True, _grad_fn=edge.node, _output_nr=edge.input_nr)

    def release_variables(self) -> None:
        if self._saved:
            self._saved = None
            self._freed = True

    def apply(self, grads: list[Any]) -> tuple[Any, ...]:
        if self.fn._tensor_api:
            with no_grad():
                result = self.fn.backward(self, *(None if g is None else Tensor(g) for g in grads))
            result = result if isinstance(result, tuple) else (result,)
            return tuple(_unwrap_gradient(self, i, r) for i, r in enumerate(result))
        result = self.fn.backward(self, *grads)
        return result if isinstance(result, tuple) else (result,)

    def apply_with_graph(self, grads: list[Any]) -> tuple[Any, ...]:
        """:meth:`apply` for a pass with ``create_graph=True``: ``grads`` are tensors, and so are
        the gradients returned, recorded on the graph.

        Raises:
            AutogradError: the op's backward is not differentiable (not written on tensors yet).
        """
        fn = self.fn
        if not fn._tensor_api and not fn.differentiable_backward:
            raise AutogradError(
                f"{self.name}: double backward (create_graph=True) is not implemented for this op: its backward "
                f"runs on arrays only. Differentiate through other ops, or compute this gradient without "
                f"create_graph=True")
        self._on_graph = True
        try:
            with enable_grad():
                result = fn.backward(self, *grads)
        finally:
            self._on_graph = False
        result = result if isinstance(result, tuple) else (result,)
        return tuple(_as_gradient_tensor(self, i, r) for i, r in enumerate(result))


def _as_gradient_tensor(node: Node, index: int, value: Any) -> Any:
    if value is None or isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
        return Tensor(value)
    raise AutogradError(
        f"Function {node.name} returned an invalid gradient at index {index} - expected a Tensor or None, "
        f"got {type(value).__name__}"
    )


def _unwrap_gradient(node: Node, index: int, value: Any) -> Any:
    if value is None or isinstance(value, np.ndarray):
        return value
    if isinstance(value, Tensor):
        return value._data
    raise AutogradError(
        f"Function {node.name} returned an invalid gradient at index {index} - expected a Tensor or None, "
        f"got {type(value).__name__}"
    )


class Function:
    """Base class of user-defined differentiable operations.

    Subclass it with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)`` and call
    ``MyFunction.apply(*args)``. ``forward`` runs without graph recording and receives the
    arguments as given; ``backward`` receives one gradient tensor per output and returns one
    gradient (or None) per ``forward`` argument.

    Example::

        class Cube(zgrad.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 3 * x * x * grad
    """

    _tensor_api = True
    differentiable_backward = True  # a Function's backward runs on tensors, recorded under create_graph
    tensor_operands = 0  # leading arguments PyTorch's schema has as tensors even when given a number
    _node_type: type = FunctionCtx

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Give the class its node type, named as PyTorch names it: ``<Name>Backward0`` for
        zgrad's own ops (the overload's number), ``<Name>Backward`` for a user's Function."""
        super().__init_subclass__(**kwargs)
        suffix = "0" if cls.__module__.startswith("zgrad.") else ""
        cls._node_type = type(f"{cls.__name__}Backward{suffix}", (FunctionCtx,), {"__module__": cls.__module__})

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        raise NotImplementedError("a Function subclass must implement forward(ctx, *args)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise NotImplementedError("a Function subclass must implement backward(ctx, *grads)")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Run ``forward`` and, if any argument requires grad, record the backward node."""
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        record = is_grad_enabled() and any(needs)
        ctx = cls._node_type(cls, needs)
        if cls._tensor_api:
            with no_grad():
                raw = cls.forward(ctx, *args)
            outputs = _output_arrays(cls, raw)
            marked = ctx._non_differentiable
            fixed = tuple(any(item is m for m in marked) for item in (raw if isinstance(raw, tuple) else (raw,))) \
                if marked else ()
            ctx._non_differentiable = ()
        else:
            fixed = ()
            raw = cls.forward(ctx, *(a._data if isinstance(a, Tensor) else a for a in args))
            outputs = raw if isinstance(raw, tuple) else (raw,)
        if not record:
            wrapped = tuple(Tensor(o) for o in outputs)
        else:
            ctx.next_edges = [gradient_edge(a) if need else None for a, need in zip(args, needs)]
            ctx._listed = tuple(isinstance(a, Tensor) for a in args)
            ctx.input_metadata = [InputMetadata.of(o) for o in outputs]
            if ctx._saved:
                ctx._versions = snapshot(ctx._saved)
            wrapped = tuple(Tensor(o) if fixed and fixed[i] else
                            Tensor(o, requires_grad=is_floating(o.dtype), _grad_fn=ctx, _output_nr=i)
                            for i, o in enumerate(outputs))
        return wrapped if isinstance(raw, tuple) else wrapped[0]


def _add_node_prehook(node: Node, fn: Any) -> RemovableHandle:
    if node.node_prehooks is None:
        node.node_prehooks = {}
    handle = RemovableHandle(node.node_prehooks)
    node.node_prehooks[handle.id] = functools.partial(_tensor_hook, fn, "grad_outputs")
    return handle


def _add_node_posthook(node: Node, fn: Any, listed: tuple[bool, ...]) -> RemovableHandle:
    if node.node_posthooks is None:
        node.node_posthooks = {}
    handle = RemovableHandle(node.node_posthooks)
    node.node_posthooks[handle.id] = functools.partial(_listed_hook, fn, listed)
    return handle


def _accumulator_prehook(self: AccumulateGrad, fn: Any) -> RemovableHandle:
    """Call ``fn((grad,))`` before this leaf's gradient is accumulated, as PyTorch's
    ``AccumulateGrad.register_prehook``; a non-None result (a 1-tuple) replaces it."""
    return _add_node_prehook(self, fn)


def _accumulator_posthook(self: AccumulateGrad, fn: Any) -> RemovableHandle:
    """Call ``fn((), (grad,))`` once this leaf's gradient has been accumulated, as PyTorch's
    ``AccumulateGrad.register_hook``."""
    return _add_node_posthook(self, fn, ())


# The engine's leaf sink takes PyTorch's node-hook methods here, where gradients become tensors.
AccumulateGrad.register_prehook = _accumulator_prehook
AccumulateGrad.register_hook = _accumulator_posthook


def _listed_hook(fn: Any, listed: tuple[bool, ...], gradients: Any, incoming: Any) -> list[Any] | None:
    """A node post-hook on the gradients of the forward's tensor arguments only (a built-in op's
    number operands and a Function's non-tensor arguments have no entry, as in PyTorch)."""
    kept = [g for g, keep in zip(gradients, listed) if keep]
    result = _tensor_hook(fn, "grad_inputs", kept, incoming)
    if result is None:
        return None
    replaced = iter(result)
    return [next(replaced) if keep else g for g, keep in zip(gradients, listed)]


def _tensor_hook(fn: Any, what: str, gradients: Any, *more: Any) -> list[Any] | None:
    """Run a node hook ``fn`` on tensors: the engine's gradients (arrays, or tensors when it
    records the pass) go in as tensors, and what it returns goes back as the engine's kind.

    Raises:
        AutogradError: a result of another length than ``gradients``, or one that gives a gradient
            where there was None (PyTorch's messages).
    """
    def as_tensors(values: Any) -> tuple:
        return tuple(v if v is None or isinstance(v, Tensor) else Tensor(v) for v in values)

    result = fn(as_tensors(gradients), *map(as_tensors, more))
    if result is None:
        return None
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(gradients):
        raise AutogradError(f"hook '{getattr(fn, '__name__', fn)}' has returned an incorrect number of values (got "
                            f"{len(result)}, but expected {len(gradients)})")
    name = getattr(fn, "__name__", fn)
    for given, replacement in zip(gradients, result):
        _check_replacement(name, given, replacement)
    recorded = any(isinstance(g, Tensor) for g in gradients)
    return [r if r is None or recorded or not isinstance(r, Tensor) else r._data for r in result]


def _check_replacement(name: Any, given: Any, replacement: Any) -> None:
    """A hook's replacement of a gradient must be None or a tensor like it, as PyTorch checks.

    Raises:
        AutogradError: a gradient where there was None, or one of another type (dtype or
            device) or size than the gradient it replaces (PyTorch's messages).
    """
    if replacement is None:
        return
    if given is None:
        raise AutogradError("can't replace a None gradient with a non-None value")
    old, new = (g if isinstance(g, Tensor) else Tensor(g) for g in (given, replacement))
    if old.dtype != new.dtype or old.device != new.device:
        raise AutogradError(f"hook '{name}' has changed the type of value (was {old.type()} got {new.type()})")
    if old.shape != new.shape:
        raise AutogradError(f"hook '{name}' has changed the size of value")


def _output_arrays(cls: type, raw: Any) -> tuple[Any, ...]:
    items = raw if isinstance(raw, tuple) else (raw,)
    arrays = []
    for i, item in enumerate(items):
        if isinstance(item, Tensor):
            arrays.append(item._data)
        elif isinstance(item, np.ndarray):
            arrays.append(item)
        else:
            raise AutogradError(f"{cls.__name__}.forward must return tensors, got {type(item).__name__} at output {i}")
    return tuple(arrays)


class _ForwardOnlyCtx:
    """The ctx of a built-in op's forward that records no node (no input requires grad, or grad
    mode is off): what the forward saves is dropped, and no backward node is built."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad

    def save_for_backward(self, *values: Any) -> None:
        pass


class Op(Function):
    """Base of built-in ops: ``forward``/``backward`` take and return raw arrays.

    ``differentiable_backward``: ``backward`` is written so that it also runs on tensors (the
    ``formula_*`` arithmetic), which makes the op twice differentiable (``create_graph=True``).
    ``returns_view``: the outputs may be views of the first argument's memory (reshape, slicing,
    transpose...); those that are become views of its base (:func:`~zgrad.tensor.link_views`),
    so that an in-place change of one reaches the others' gradients.
    """

    _tensor_api = False
    differentiable_backward = False
    returns_view = False

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """:meth:`Function.apply` for array ops, written out flat: it runs for every op of a model."""
        arrays = []
        needs = []
        record = False
        for a in args:
            if isinstance(a, Tensor):
                base = a._view_base
                if base is not None and base.grad_fn is not a._view_base_fn:
                    refresh_view(a)
                arrays.append(a._data)
                needs.append(a._requires_grad)
                record = record or a._requires_grad
            else:
                arrays.append(a)
                needs.append(None)  # not a tensor: no entry in next_functions, as in PyTorch
        record = record and is_grad_enabled()
        ctx = cls._node_type(cls, tuple(needs)) if record else _ForwardOnlyCtx(tuple(needs))
        raw = cls.forward(ctx, *arrays)
        single = not isinstance(raw, tuple)
        outputs = (raw,) if single else raw
        if not record:
            wrapped = [Tensor(o) for o in outputs]
        else:
            ctx.next_edges = [gradient_edge(a) if need else None for a, need in zip(args, needs)]
            ctx.input_metadata = [InputMetadata.of(o) for o in outputs]
            if ctx._saved:
                ctx._versions = snapshot(ctx._saved)
                if cls.differentiable_backward:
                    ctx._identities = (*map(id, arrays), *map(id, outputs))
            wrapped = [Tensor(o, is_floating(o.dtype), _grad_fn=ctx, _output_nr=i) for i, o in enumerate(outputs)]
        if cls.returns_view and isinstance(args[0], Tensor):
            link_views(args[0], wrapped)
        return wrapped[0] if single else tuple(wrapped)

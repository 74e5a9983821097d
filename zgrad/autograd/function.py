"""Differentiable functions: one class per op, forward with its backward right under it.

:class:`Function` is the public base for user-defined ops (its ``forward``/``backward`` take and
return tensors, like ``torch.autograd.Function``). Built-in ops derive from :class:`Op`, the
same machinery on raw arrays, which skips wrapping and runs faster.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.engine.grad_mode import is_grad_enabled, no_grad
from zgrad.engine.graph import InputMetadata, Node, raise_freed
from zgrad.engine.versions import snapshot, verify
from zgrad.errors import AutogradError
from zgrad.tensor import Tensor, gradient_edge
from zgrad.kernels.promotion import is_floating

__all__ = ["Function", "Op", "FunctionCtx"]


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
        self._freed = False

    @property
    def name(self) -> str:
        return f"{self.fn.__name__}Backward"

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
        return self._saved  # type: ignore[return-value]

    def release_variables(self) -> None:
        if self._saved:
            self._saved = None
            self._freed = True

    def apply(self, grads: list[Any]) -> tuple[Any, ...]:
        if self.fn._tensor_api:
            with no_grad():
                result = self.fn.backward(self, *(Tensor(g) for g in grads))
            result = result if isinstance(result, tuple) else (result,)
            return tuple(_unwrap_gradient(self, i, r) for i, r in enumerate(result))
        result = self.fn.backward(self, *grads)
        return result if isinstance(result, tuple) else (result,)


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
        ctx = FunctionCtx(cls, needs)
        if cls._tensor_api:
            with no_grad():
                raw = cls.forward(ctx, *args)
            outputs = _output_arrays(cls, raw)
        else:
            raw = cls.forward(ctx, *(a._data if isinstance(a, Tensor) else a for a in args))
            outputs = raw if isinstance(raw, tuple) else (raw,)
        if not record:
            wrapped = tuple(Tensor(o) for o in outputs)
        else:
            ctx.next_edges = [gradient_edge(a) if need else None for a, need in zip(args, needs)]
            ctx.input_metadata = [InputMetadata.of(o) for o in outputs]
            if ctx._saved:
                ctx._versions = snapshot(ctx._saved)
            wrapped = tuple(Tensor(o, requires_grad=is_floating(o.dtype), _grad_fn=ctx, _output_nr=i)
                            for i, o in enumerate(outputs))
        return wrapped if isinstance(raw, tuple) else wrapped[0]


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


class Op(Function):
    """Base of built-in ops: ``forward``/``backward`` take and return raw arrays."""

    _tensor_api = False

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """:meth:`Function.apply` for array ops, written out flat: it runs for every op of a model."""
        arrays = []
        needs = []
        record = False
        for a in args:
            if isinstance(a, Tensor):
                arrays.append(a._data)
                needs.append(a._requires_grad)
                record = record or a._requires_grad
            else:
                arrays.append(a)
                needs.append(False)
        ctx = FunctionCtx(cls, tuple(needs))
        raw = cls.forward(ctx, *arrays)
        single = not isinstance(raw, tuple)
        outputs = (raw,) if single else raw
        if not (record and is_grad_enabled()):
            wrapped = [Tensor(o) for o in outputs]
        else:
            ctx.next_edges = [gradient_edge(a) if need else None for a, need in zip(args, needs)]
            ctx.input_metadata = [InputMetadata.of(o) for o in outputs]
            if ctx._saved:
                ctx._versions = snapshot(ctx._saved)
            wrapped = [Tensor(o, is_floating(o.dtype), _grad_fn=ctx, _output_nr=i) for i, o in enumerate(outputs)]
        return wrapped[0] if single else tuple(wrapped)


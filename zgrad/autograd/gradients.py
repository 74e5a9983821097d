"""``zgrad.autograd.grad``: the gradients of outputs with respect to chosen inputs, returned rather
than accumulated into ``.grad``, as ``torch.autograd.grad``; and ``zgrad.autograd.backward``,
which accumulates them (into every leaf, or into chosen ``inputs``); and ``Tensor.backward``.

One local backward pass runs from the outputs, through only the nodes that lead to the inputs
(PyTorch's exec_info: :meth:`GraphTask.restrict_to`). ``grad`` takes each input's gradient on its
way into the input's node (a leaf's accumulator, or its ``grad_fn``), after the tensor's own hooks,
and runs that node only if it leads on to another input: no ``.grad`` changes, no post-accumulate
hook runs, and what lies below the inputs keeps its saved values. ``backward(inputs=...)`` runs the
inputs' nodes as a plain pass does: leaves accumulate, non-leaf inputs retain their gradient.

With ``create_graph=True`` the pass records itself (see :mod:`zgrad.autograd.graph_gradients`):
the gradients it returns or accumulates are tensors with graphs of their own.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Sequence

from zgrad.autograd.function import Function
from zgrad.autograd.graph_gradients import TENSOR_GRADIENTS
from zgrad.engine.grad_mode import enable_grad
from zgrad.engine.graph_task import run_backward
from zgrad.errors import AutogradError, ShapeError
from zgrad.kernels import dispatch
from zgrad.tensor import Tensor, gradient_edge, tensor_methods

__all__ = ["backward", "grad"]

_CREATE_GRAPH_CYCLE_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter and its gradient "
    "which can cause a memory leak. We recommend using autograd.grad when creating the graph to avoid this. If you "
    "have to use this function, make sure to reset the .grad fields of your parameters to None after use to break "
    "the cycle and avoid the leak.")
_UNUSED_MESSAGE = ("The differentiated Tensor at index {} appears to not have been used in the graph. "
                   "Set allow_unused=True if this is the desired behavior.")


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    return (value,) if isinstance(value, Tensor) else tuple(value)


def _root_gradients(outputs: Sequence[Tensor], grad_outputs: Sequence[Any], create_graph: bool) -> list[Any]:
    """One gradient array per output: the given one, or 1 for a one-element output; tensors with
    ``create_graph`` (a given tensor itself, so that the gradients depend on it on the graph).

    Raises:
        ShapeError: a count or shape that does not match the outputs.
        AutogradError: a missing gradient for an output of more than one element.
    """
    if grad_outputs and len(grad_outputs) != len(outputs):
        raise ShapeError(f"grad requires one grad_output per output: got {len(grad_outputs)} grad_outputs and "
                         f"{len(outputs)} outputs")
    grads = []
    for i, (output, given) in enumerate(zip(outputs, grad_outputs or [None] * len(outputs))):
        device = dispatch.device_type_of(output._data)
        if given is None:
            if output.numel() != 1:
                raise AutogradError(f"grad can be implicitly created only for scalar outputs, got shape "
                                    f"{list(output.shape)} for output {i}")
            ones = dispatch.full(output.shape, 1, output.dtype, device)
            grads.append(Tensor(ones) if create_graph else ones)
            continue
        array = given._data if isinstance(given, Tensor) else dispatch.asarray(given, output.dtype, device)
        if array.shape != output.shape:
            raise ShapeError(f"Mismatch in shape: grad_output[{i}] has a shape of {list(array.shape)} and output[{i}] "
                             f"has a shape of {list(output.shape)}.")
        if create_graph:
            grads.append(given if isinstance(given, Tensor) else Tensor(array))
        else:
            grads.append(array)
    return grads


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple[Tensor | None, ...]:
    """The sum of the gradients of ``outputs`` with respect to each of ``inputs``, as a tuple.

    Args:
        outputs: a tensor or a sequence of tensors that require grad.
        inputs: a tensor or a sequence of tensors (leaves or not) that require grad.
        grad_outputs: the gradient with respect to each output (None, or None for an entry: 1
            for a one-element output).
        retain_graph: keep the graph's saved values for another pass (default: ``create_graph``).
        create_graph: record the pass, so that the returned gradients have graphs of their own and
            can be differentiated again (double backward). Every op on the way must have a
            differentiable backward; one that has not raises.
        only_inputs: ignored, as in PyTorch (deprecated there).
        allow_unused: return None for an input the outputs do not depend on, instead of raising
            (default: ``materialize_grads``).
        is_grads_batched: the first dimension of every grad_output is a batch: the result has it
            too, one vector-Jacobian product per row (computed one row after the other).
        materialize_grads: return zeros instead of None for such inputs.

    Blocks until the pass is done. Raises:
        AutogradError: an output or input that does not require grad, an input the outputs do not
            use (without ``allow_unused``), a missing gradient for an output of several elements (or
            any missing one, batched), or, with ``create_graph``, an op whose backward is not
            differentiable.
        ShapeError: ``grad_outputs`` that do not match the outputs.
        ValueError: ``materialize_grads`` with ``allow_unused=False``.
    """
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    outputs, inputs = _as_tuple(outputs), _as_tuple(inputs)
    _check_outputs(outputs)
    for tensor in inputs:
        if not tensor.requires_grad:
            raise AutogradError("One of the differentiated Tensors does not require grad")
    if is_grads_batched:
        return _batched(outputs, inputs, _as_tuple(grad_outputs) or (None,) * len(outputs), retain_graph,
                        create_graph, allow_unused, materialize_grads)
    root_grads = _root_gradients(outputs, _as_tuple(grad_outputs), create_graph)

    found: dict[int, Any] = {}  # input position -> gradient (an array; a tensor with create_graph)
    _run_to_inputs(outputs, root_grads, inputs, found.__setitem__,
                   create_graph if retain_graph is None else retain_graph, create_graph)
    results: list[Tensor | None] = []
    made: dict[int, Tensor] = {}  # one result per gradient: an input given twice gets the same tensor, as PyTorch's
    for i, tensor in enumerate(inputs):
        gradient = found.get(i)
        if gradient is None:
            if not allow_unused:
                raise AutogradError(_UNUSED_MESSAGE.format(i))
            results.append(_zeros_like(tensor) if materialize_grads else None)
        elif id(gradient) in made:
            results.append(made[id(gradient)])
        elif create_graph:
            made[id(gradient)] = gradient if gradient.dtype == tensor.dtype else gradient.to(tensor.dtype)
            results.append(made[id(gradient)])
        else:
            made[id(gradient)] = Tensor(gradient if gradient.dtype == tensor.dtype
                                        else dispatch.cast(gradient, tensor.dtype))
            results.append(made[id(gradient)])
    return tuple(results)


def _batched(outputs: tuple, inputs: tuple, grad_outputs: tuple, retain_graph: bool | None, create_graph: bool,
             allow_unused: bool, materialize_grads: bool) -> tuple[Tensor | None, ...]:
    """:func:`grad` with ``is_grads_batched``: one pass per row of the grad_outputs, stacked."""
    if len(grad_outputs) != len(outputs):
        raise ShapeError(f"grad requires one grad_output per output: got {len(grad_outputs)} grad_outputs and "
                         f"{len(outputs)} outputs")
    for i, (output, rows) in enumerate(zip(outputs, grad_outputs)):
        if rows is None and output.numel() != 1:
            raise AutogradError("grad can be implicitly created only for scalar outputs")
        if rows is None:  # PyTorch batches the implicit 1 over its first dimension, which it has not
            raise ValueError(f"is_grads_batched=True: grad_output[{i}] is None, and the implicit gradient of a "
                             "one-element output has no batch dimension; pass a batch of gradients (its first "
                             "dimension the batch) for every output")
    for i, (output, rows) in enumerate(zip(outputs, grad_outputs)):
        if rows.ndim == 0 or tuple(rows.shape[1:]) != tuple(output.shape):
            raise AutogradError(
                "If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the batch "
                "dimension. The sizes of the remaining dimensions are expected to match the shape of corresponding "
                f"output, but a mismatch was detected: grad_output[{i}] has a shape of {rows.shape[1:]} and "
                f"output[{i}] has a shape of {output.shape}. If you only want some tensors in `grad_output` to be "
                "considered batched, consider using vmap.")
    batch = grad_outputs[0].shape[0]
    if any(rows.shape[0] != batch for rows in grad_outputs):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{[rows.shape[0] for rows in grad_outputs]} for the mapped dimension")
    if batch == 0:
        raise IndexError("is_grads_batched=True: the grad_outputs' batch (their first dimension) is empty")
    keep = create_graph if retain_graph is None else retain_graph
    per_row = [grad(outputs, inputs, [rows[b] for rows in grad_outputs], retain_graph=b < batch - 1 or keep,
                    create_graph=create_graph, allow_unused=allow_unused) for b in range(batch)]
    results: list[Tensor | None] = []
    for i, tensor in enumerate(inputs):
        column = [row[i] for row in per_row]
        if not column or column[0] is None:  # (a pass reaches an input in every row or in none)
            results.append(_zeros_like(tensor) if materialize_grads else None)
        else:
            results.append(_StackRows.apply(*column))
    return tuple(results)


class _StackRows(Function):
    """The gradients of the rows of a batched :func:`grad`, stacked (recorded, for create_graph)."""

    @staticmethod
    def forward(ctx: Any, *rows: Tensor) -> Tensor:
        return Tensor(dispatch.stack([r._data for r in rows], 0))

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple:
        return tuple(grad_output[b] for b in range(grad_output.shape[0]))


def _check_outputs(outputs: Sequence[Tensor]) -> None:
    for i, output in enumerate(outputs):
        if not output.requires_grad:
            raise AutogradError(f"element {i} of tensors does not require grad and does not have a grad_fn")


def _run_to_inputs(outputs: Sequence[Tensor], root_grads: list[Any], inputs: Sequence[Tensor],
                   take: Callable[[int, Any], None], retain_graph: bool, create_graph: bool) -> None:
    """Run one backward pass from ``outputs``, through only the nodes that lead to ``inputs``, and
    call ``take(i, gradient)`` with the gradient reaching ``inputs[i]`` (after its tensor hooks; not
    called for an input the pass does not reach). An input's node runs only when it leads on to
    another input, so nothing accumulates into any ``.grad``. ``create_graph``: record the pass
    (gradients are tensors)."""
    edges = [gradient_edge(t) for t in inputs]  # (also brings a view's grad_fn up to date)
    caught = []  # (hook list, hook) of every input, removed after the pass
    for i, edge in enumerate(edges):
        hook = functools.partial(take, i)
        edge.node.register_pre_hook(edge.input_nr, hook)
        caught.append((edge.node.pre_hooks[edge.input_nr], hook))
    try:
        _run(outputs, root_grads, retain_graph, create_graph, [e.node for e in edges])
    finally:
        for hooks, hook in caught:
            hooks.remove(hook)


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
             inputs: Any = None) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the graph's leaves (only of
    ``inputs``, leaves or not, when given), as ``torch.autograd.backward``.

    Args:
        tensors: a tensor or a sequence of tensors that require grad.
        grad_tensors: the gradient with respect to each tensor (None: 1 for one-element tensors).
        retain_graph: keep the graph's saved values for another pass (default: ``create_graph``).
        create_graph: record the pass, so that the accumulated gradients have graphs of their own
            (double backward); warns, as PyTorch, of the reference cycle ``.grad`` then makes.
        inputs: the tensors whose ``.grad`` receives a gradient (default: every leaf).

    Blocks until the pass is done. Raises:
        AutogradError: a tensor that does not require grad, a missing gradient for a tensor of
            several elements, or, with ``create_graph``, an op whose backward is not differentiable.
        ShapeError: ``grad_tensors`` that do not match the tensors.
        ValueError: an empty ``inputs``.
    """
    if create_graph and inputs is None:
        warnings.warn(_CREATE_GRAPH_CYCLE_WARNING, UserWarning, stacklevel=2)
    _accumulate(tensors, grad_tensors, retain_graph, create_graph, inputs)


def _accumulate(tensors: Any, grad_tensors: Any, retain_graph: bool | None, create_graph: bool, inputs: Any) -> None:
    """:func:`backward` after its warning."""
    tensors = _as_tuple(tensors)
    _check_outputs(tensors)
    root_grads = _root_gradients(tensors, _as_tuple(grad_tensors), create_graph)
    retain_graph = create_graph if retain_graph is None else retain_graph
    if inputs is None:
        _run(tensors, root_grads, retain_graph, create_graph)
        return
    inputs = _as_tuple(inputs)
    if not inputs:
        raise ValueError("'inputs' argument to backward() cannot be empty.")
    inputs = tuple({id(t): t for t in inputs}.values())  # one accumulation per tensor, however often given
    for tensor in inputs:  # as PyTorch: a non-leaf input keeps its .grad from now on, this pass's included
        if tensor.grad_fn is not None:
            tensor.retain_grad()
    # The inputs' nodes run as in a plain pass (leaves accumulate, with their hooks); nothing else does.
    _run(tensors, root_grads, retain_graph, create_graph, [gradient_edge(t).node for t in inputs], run_targets=True)


def _run(outputs: Sequence[Tensor], root_grads: list[Any], retain_graph: bool, create_graph: bool,
         targets: Sequence[Any] | None = None, run_targets: bool = False) -> None:
    """One local backward pass from ``outputs`` (through only what leads to the ``targets`` nodes,
    when given: :meth:`GraphTask.restrict_to`); recorded (with grad mode on) for ``create_graph``."""
    edges = [gradient_edge(o) for o in outputs]
    if not create_graph:
        run_backward(edges, root_grads, retain_graph=retain_graph, targets=targets, run_targets=run_targets)
        return
    with enable_grad():
        run_backward(edges, root_grads, retain_graph=retain_graph, graph_gradients=TENSOR_GRADIENTS, targets=targets,
                     run_targets=run_targets)


@tensor_methods
class _TensorBackward:
    def backward(self: Tensor, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
                 inputs: Any = None) -> None:
        """Compute the gradient of this tensor with respect to the graph leaves into their ``.grad``
        (only into ``inputs``' when given), as ``zgrad.autograd.backward(self, ...)``.

        Args:
            gradient: the gradient of the final objective with respect to this tensor; may be
                omitted for a one-element tensor (then 1).
            retain_graph: keep the graph's saved values so backward can run through it again
                (default: ``create_graph``).
            create_graph: record the pass, so that the gradients can be differentiated again.
            inputs: the tensors whose ``.grad`` receives a gradient (default: every leaf).

        Blocks until done. Raises:
            AutogradError: the tensor does not require grad, a gradient is needed but missing or of
                the wrong shape, or the graph was already freed.
        """
        if not self.requires_grad:
            raise AutogradError("element 0 of tensors does not require grad and does not have a grad_fn")
        device = dispatch.device_type_of(self._data)
        if gradient is None:
            if self._data.size != 1:
                raise AutogradError(f"grad can be implicitly created only for scalar outputs, got shape {list(self.shape)}")
            grad = dispatch.full(self.shape, 1, self.dtype, device)
        else:
            grad = gradient._data if isinstance(gradient, Tensor) else dispatch.asarray(gradient, None, device)
            if grad.shape != self.shape:
                raise AutogradError(f"Mismatch in shape: grad_output[0] has a shape of {list(grad.shape)} and output[0] "
                                    f"has a shape of {list(self.shape)}.")
        if not create_graph and inputs is None:  # the training loop's call, kept lean
            run_backward([gradient_edge(self)], [grad], retain_graph=bool(retain_graph))
            return
        if create_graph and inputs is None:
            warnings.warn(_CREATE_GRAPH_CYCLE_WARNING, UserWarning, stacklevel=2)
        _accumulate(self, [gradient if isinstance(gradient, Tensor) else Tensor(grad)], retain_graph, create_graph,
                    inputs)


def _zeros_like(tensor: Tensor) -> Tensor:
    return Tensor(dispatch.full(tensor.shape, 0, tensor.dtype, dispatch.device_type_of(tensor._data)))

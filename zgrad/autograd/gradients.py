"""``zgrad.autograd.grad``: the gradients of outputs with respect to chosen inputs, returned rather
than accumulated into ``.grad``, as ``torch.autograd.grad``; and ``zgrad.autograd.backward``,
which accumulates them (into every leaf, or into chosen ``inputs``).

One local backward pass runs from the outputs. A leaf input's gradient is taken where the pass
would accumulate it (no leaf's ``.grad`` changes); a non-leaf input's is taken on its way into the
input's ``grad_fn``, after the tensor's own hooks. The pass still runs the graph below the inputs
(its gradients are dropped), and leaves' post-accumulate hooks still run.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from zgrad.engine.graph_task import run_backward
from zgrad.errors import AutogradError, ShapeError
from zgrad.kernels import dispatch
from zgrad.tensor import Tensor, gradient_edge

__all__ = ["backward", "grad"]

_NO_DOUBLE_BACKWARD = ("is not supported: zgrad's engine computes gradients on raw arrays and does not record a "
                       "graph of the backward pass (no double backward)")
_UNUSED_MESSAGE = ("One of the differentiated Tensors appears to not have been used in the graph. "
                   "Set allow_unused=True if this is the desired behavior.")


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    return (value,) if isinstance(value, Tensor) else tuple(value)


def _root_gradients(outputs: Sequence[Tensor], grad_outputs: Sequence[Any]) -> list[Any]:
    """One gradient array per output: the given one, or 1 for a one-element output.

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
            grads.append(dispatch.full(output.shape, 1, output.dtype, device))
            continue
        array = given._data if isinstance(given, Tensor) else dispatch.asarray(given, output.dtype, device)
        if array.shape != output.shape:
            raise ShapeError(f"Mismatch in shape: grad_output[{i}] has a shape of {list(array.shape)} and output[{i}] "
                             f"has a shape of {list(output.shape)}.")
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
        create_graph: build a graph of the gradient itself (double backward): not supported.
        only_inputs: ignored, as in PyTorch (deprecated there).
        allow_unused: return None for an input the outputs do not depend on, instead of raising
            (default: ``materialize_grads``).
        is_grads_batched: not supported.
        materialize_grads: return zeros instead of None for such inputs.

    Blocks until the pass is done. Raises:
        AutogradError: an output or input that does not require grad, an input the outputs do not
            use (without ``allow_unused``), a missing gradient for an output of several elements,
            or ``create_graph`` / ``is_grads_batched``.
        ShapeError: ``grad_outputs`` that do not match the outputs.
        ValueError: ``materialize_grads`` with ``allow_unused=False``.
    """
    if create_graph or is_grads_batched:
        what = "create_graph=True" if create_graph else "is_grads_batched=True"
        raise AutogradError(f"zgrad.autograd.grad: {what} {_NO_DOUBLE_BACKWARD}")
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    outputs, inputs = _as_tuple(outputs), _as_tuple(inputs)
    _check_outputs(outputs)
    for tensor in inputs:
        if not tensor.requires_grad:
            raise AutogradError("One of the differentiated Tensors does not require grad")
    root_grads = _root_gradients(outputs, _as_tuple(grad_outputs))

    found: dict[int, Any] = {}  # input position -> gradient array
    _run_to_inputs(outputs, root_grads, inputs, found.__setitem__,
                   create_graph if retain_graph is None else retain_graph)
    results: list[Tensor | None] = []
    for i, tensor in enumerate(inputs):
        gradient = found.get(i)
        if gradient is None:
            if not allow_unused:
                raise AutogradError(_UNUSED_MESSAGE)
            results.append(_zeros_like(tensor) if materialize_grads else None)
        else:
            results.append(Tensor(gradient if gradient.dtype == tensor.dtype else dispatch.cast(gradient, tensor.dtype)))
    return tuple(results)


def _check_outputs(outputs: Sequence[Tensor]) -> None:
    for i, output in enumerate(outputs):
        if not output.requires_grad:
            raise AutogradError(f"element {i} of tensors does not require grad and does not have a grad_fn")


def _run_to_inputs(outputs: Sequence[Tensor], root_grads: list[Any], inputs: Sequence[Tensor],
                   take: Callable[[int, Any], None], retain_graph: bool) -> None:
    """Run one backward pass from ``outputs`` and call ``take(i, gradient)`` with the gradient
    reaching ``inputs[i]`` (not called for an input the pass does not reach); leaves other than
    the inputs get nothing."""
    leaves = {id(t): i for i, t in enumerate(inputs) if t.grad_fn is None}

    def leaf_sink(variable: Any, gradient: Any) -> None:
        position = leaves.get(id(variable))
        if position is not None:
            take(position, gradient)

    caught = []  # (hook list, hook) of every non-leaf input, removed after the pass
    for i, tensor in enumerate(inputs):
        if tensor.grad_fn is not None:
            hook = functools.partial(take, i)
            tensor.grad_fn.register_pre_hook(tensor._output_nr, hook)
            caught.append((tensor.grad_fn.pre_hooks[tensor._output_nr], hook))
    try:
        run_backward([gradient_edge(o) for o in outputs], root_grads, retain_graph=retain_graph, leaf_sink=leaf_sink)
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
        create_graph: not supported (no double backward).
        inputs: the tensors whose ``.grad`` receives a gradient (default: every leaf).

    Blocks until the pass is done. Raises:
        AutogradError: a tensor that does not require grad, a missing gradient for a tensor of
            several elements, or ``create_graph``.
        ShapeError: ``grad_tensors`` that do not match the tensors.
        ValueError: an empty ``inputs``.
    """
    if create_graph:
        raise AutogradError(f"zgrad.autograd.backward: {_NO_DOUBLE_BACKWARD}")
    tensors = _as_tuple(tensors)
    _check_outputs(tensors)
    root_grads = _root_gradients(tensors, _as_tuple(grad_tensors))
    retain_graph = create_graph if retain_graph is None else retain_graph
    if inputs is None:
        run_backward([gradient_edge(t) for t in tensors], root_grads, retain_graph=retain_graph)
        return
    inputs = _as_tuple(inputs)
    if not inputs:
        raise ValueError("'inputs' argument to backward() cannot be empty.")

    def accumulate(position: int, gradient: Any) -> None:
        tensor = inputs[position]
        if tensor.grad_fn is None:
            tensor._grad_accumulator().accumulate(gradient, owned=False)
        else:
            tensor._accumulate_grad(gradient)

    _run_to_inputs(tensors, root_grads, inputs, accumulate, retain_graph)


def _zeros_like(tensor: Tensor) -> Tensor:
    return Tensor(dispatch.full(tensor.shape, 0, tensor.dtype, dispatch.device_type_of(tensor._data)))

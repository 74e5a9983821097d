"""The plumbing behind :mod:`zgrad.autograd.functional`: tuple handling, the checks on what the
user passes and what ``func`` returns (with PyTorch's error texts), and a ``grad`` that skips
outputs which do not require grad.

Every public function there takes a tensor or a tuple of tensors and answers in the same form, so
each works on tuples inside and unpacks at the end (:func:`as_tuple`, :func:`untuple`).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, NamedTuple

from zgrad.autograd.gradients import grad
from zgrad.creation import zeros_like
from zgrad.engine.grad_mode import enable_grad
from zgrad.errors import AutogradError
from zgrad.tensor import Tensor

__all__ = ["Evaluation", "as_tuple", "check_connected", "check_requires_grad", "check_single_element", "evaluate",
           "fill_in_zeros", "finish", "grad_allowing_unused", "grad_preprocess", "grad_postprocess", "untuple",
           "vector_for"]

# stage of the backward pass that found no gradient -> strict mode's error, formatted with the index
_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict "
            "mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when using "
                  "the double backward trick to compute forward mode gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
                   "strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the grad_jacobian. "
                         "This is not allowed in strict mode as it prevents from using the double backward trick to "
                         "replace forward mode AD.",
}
# what, found not to require grad, strict mode refuses -> its error, formatted with the index
_NOT_DIFFERENTIABLE = {
    "outputs": "Output {i} of the user-provided function does not require gradients. The outputs must be computed "
               "in a differentiable manner from the input when running in strict mode.",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of the user-provided "
                   "function. This is not allowed in strict mode.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided function with respect to "
                "input {i} is independent of the input. This is not allowed in strict mode. You should ensure that "
                "your function is twice differentiable and that the jacobian depends on the inputs (this would be "
                "violated by a linear function for example).",
}


def as_tuple(value: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple[Tensor, ...]]:
    """``(was it a tuple, the tensors as a tuple)``; only a tuple counts as one, as in PyTorch.

    Raises:
        TypeError: an element that is not a tensor.
    """
    is_tuple = isinstance(value, tuple)
    values = value if is_tuple else (value,)
    for i, element in enumerate(values):
        if not isinstance(element, Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                            f"{where} has type {type(element)}.")
    return is_tuple, values


def untuple(result: tuple, was_tuple: bool | tuple[bool, bool]) -> Any:
    """Undo :func:`as_tuple` on ``result``: with a pair of flags, on a tuple of tuples (outer, inner)."""
    if isinstance(was_tuple, tuple):
        outer, inner = was_tuple
        if not inner:
            result = tuple(row[0] for row in result)
        return result if outer else result[0]
    return result if was_tuple else result[0]


def grad_preprocess(tensors: tuple[Tensor, ...], create_graph: bool, need_graph: bool) -> tuple[Tensor, ...]:
    """New tensor objects for ``tensors``: on the graph to them (a view) with ``create_graph`` for
    those that require grad, else detached leaves that require grad when ``need_graph``.

    Always new objects, so that the gradients are those of the arguments ``func`` receives, not of
    the same tensors captured from outside.
    """
    return tuple(t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_(need_graph)
                 for t in tensors)


def grad_postprocess(tensors: tuple, create_graph: bool) -> tuple:
    """``tensors`` (a tuple, or a tuple of tuples) detached unless ``create_graph``."""
    if create_graph:
        return tensors
    return tuple(t.detach() if isinstance(t, Tensor) else grad_postprocess(t, create_graph) for t in tensors)


def vector_for(v: Any, like: tuple[Tensor, ...], is_like_tuple: bool, fn_name: str, create_graph: bool,
               like_inputs: bool) -> tuple[Tensor, ...] | None:
    """``v`` as a tuple matching ``like`` (the inputs, or with ``like_inputs=False`` the outputs),
    prepared as :func:`grad_preprocess` does; None stays None where ``like`` is one element.

    Raises:
        TypeError: an element of ``v`` that is not a tensor.
        AutogradError: ``v`` is None for more than one element, or its count or a shape does not
            match ``like``.
    """
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            subject = ("the input to the user-provided function is" if like_inputs
                       else "the user-provided function returns")
            raise AutogradError(f"The vector v can only be None if {subject} a single Tensor with a single element.")
        return None
    _, v = as_tuple(v, "v", fn_name)
    v = grad_preprocess(v, create_graph, need_graph=False)
    if len(v) != len(like):
        if is_like_tuple:
            raise AutogradError(f"v is a tuple of invalid length: should be {len(like)} but got {len(v)}.")
        raise AutogradError("The given v should contain a single Tensor.")
    for i, (given, reference) in enumerate(zip(v, like)):
        if given.size() != reference.size():
            entry = f"Entry {i} in " if is_like_tuple else ""
            raise AutogradError(f"{entry}v has invalid size: should be {reference.size()} but got {given.size()}.")
    return v


def check_requires_grad(tensors: tuple, kind: str, strict: bool) -> None:
    """In strict mode, refuse a None or a tensor that does not require grad among ``tensors``
    (``kind``: "outputs", "grad_inputs" or "jacobian", which words the error).

    Raises:
        AutogradError: ``strict`` and such a tensor.
    """
    if not strict:
        return
    for i, tensor in enumerate(tensors):
        if tensor is None:
            raise AutogradError(_INDEPENDENT["back"].format(i=i))
        if not tensor.requires_grad:
            raise AutogradError(_NOT_DIFFERENTIABLE[kind].format(i=i))


def grad_allowing_unused(outputs: tuple, inputs: tuple[Tensor, ...], grad_outputs: tuple | None = None,
                         create_graph: bool = False, retain_graph: bool | None = None) -> tuple[Tensor | None, ...]:
    """:func:`zgrad.autograd.grad` with ``allow_unused``, skipping outputs that are None or do not
    require grad (all None when none is left); runs with grad mode on under ``create_graph``."""
    grad_outputs = (None,) * len(outputs) if grad_outputs is None else grad_outputs
    kept = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not kept:
        return (None,) * len(inputs)
    with enable_grad() if create_graph else nullcontext():
        return grad([o for o, _ in kept], inputs, [g for _, g in kept], allow_unused=True,
                    create_graph=create_graph, retain_graph=retain_graph)


def fill_in_zeros(grads: tuple, refs: tuple[Tensor, ...], strict: bool, create_graph: bool,
                  stage: str) -> tuple[Tensor, ...]:
    """``grads`` with zeros shaped as ``refs[i]`` for each None, the mathematical value.

    ``stage`` ("back", "back_trick", "double_back", "double_back_trick") is the pass that produced
    them, which words strict mode's errors.

    Raises:
        AutogradError: ``strict`` and a None; or ``strict`` with ``create_graph`` and a gradient
            that does not require grad (not connected to the inputs).
    """
    filled = []
    for i, gradient in enumerate(grads):
        if gradient is None:
            if strict:
                raise AutogradError(_INDEPENDENT[stage].format(i=i))
            gradient = zeros_like(refs[i])
        else:
            check_connected(gradient, i, "hessian" if stage.startswith("double") else "jacobian", strict, create_graph)
        filled.append(gradient)
    return tuple(filled)


def check_connected(gradient: Tensor, index: int, what: str, strict: bool, create_graph: bool) -> None:
    """In strict mode with ``create_graph``, refuse a ``gradient`` (of the ``what``, "jacobian" or
    "hessian", named by ``index`` in the error) that does not require grad.

    Raises:
        AutogradError: such a gradient.
    """
    if strict and create_graph and not gradient.requires_grad:
        raise AutogradError(f"The {what} of the user-provided function is independent of input {index}. This is not "
                            "allowed in strict mode when create_graph=True.")


class Evaluation(NamedTuple):
    """``func`` run by :func:`evaluate`: the fresh inputs it received, its outputs (both as tuples,
    with whether each was given as one) and the prepared ``v``."""

    inputs: tuple[Tensor, ...]
    is_inputs_tuple: bool
    outputs: tuple[Tensor, ...]
    is_outputs_tuple: bool
    v: tuple[Tensor, ...] | None


def evaluate(fn_name: str, func: Callable[..., Any], inputs: Any, create_graph: bool, strict: bool,
             v: Any = None, v_like: str | None = None) -> Evaluation:
    """Run ``func`` (with grad mode on) on new tensor objects for ``inputs``, as the first step of
    the public function ``fn_name``; check ``v`` against the inputs (``v_like="inputs"``, before
    the call) or the outputs (``"outputs"``, after it), or not at all (None), in PyTorch's order.

    Raises:
        TypeError: an input, output or element of ``v`` that is not a tensor.
        AutogradError: ``v`` does not match; ``strict`` and an output that does not require grad.
    """
    with enable_grad():
        is_inputs_tuple, inputs = as_tuple(inputs, "inputs", fn_name)
        inputs = grad_preprocess(inputs, create_graph, need_graph=True)
        if v_like == "inputs":
            v = vector_for(v, inputs, is_inputs_tuple, fn_name, create_graph, like_inputs=True)
        is_outputs_tuple, outputs = as_tuple(func(*inputs), "outputs of the user-provided function", fn_name)
        check_requires_grad(outputs, "outputs", strict)
        if v_like == "outputs":
            v = vector_for(v, outputs, is_outputs_tuple, fn_name, create_graph, like_inputs=False)
    return Evaluation(inputs, is_inputs_tuple, outputs, is_outputs_tuple, v)


def check_single_element(is_outputs_tuple: bool, outputs: tuple[Tensor, ...], fn_name: str) -> None:
    """Refuse anything but one tensor of one element from the function given to ``fn_name``.

    Raises:
        AutogradError: a tuple, or a tensor of another number of elements.
    """
    if is_outputs_tuple:
        raise AutogradError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise AutogradError(f"The Tensor returned by the function given to {fn_name} should contain a single element")


def finish(evaluation: Evaluation, result: tuple[Tensor, ...], is_result_tuple: bool,
           create_graph: bool) -> tuple[Any, Any]:
    """``(func's output, result)`` in the forms the user gave, detached unless ``create_graph``."""
    outputs = grad_postprocess(evaluation.outputs, create_graph)
    return (untuple(outputs, evaluation.is_outputs_tuple),
            untuple(grad_postprocess(result, create_graph), is_result_tuple))

"""``zgrad.autograd.functional``: Jacobians, Hessians and their products with vectors, of a
function of tensors, as ``torch.autograd.functional``.

Every function here takes ``func`` and its ``inputs`` (a tensor or a tuple of tensors) and calls
``func`` once on new tensor objects for them, so that only the arguments it receives are
differentiated (not the same tensors captured from outside). Results take the forms given: a
tuple where the inputs (or outputs) were a tuple, a tensor where they were one.

All of it is reverse mode over :func:`zgrad.autograd.grad`: forward-mode products (``jvp``,
``hvp``) use the double backward trick, and the Hessian is the Jacobian of the gradient, so
``func`` must be made of ops whose backward is differentiable (the others raise, naming
themselves). Unused inputs give zeros, or raise with ``strict=True``. Each call blocks until done.

Example::

    >>> from zgrad.autograd.functional import jacobian, vjp
    >>> x = zgrad.tensor([1.0, 2.0])
    >>> jacobian(lambda x: x ** 2, x)
    tensor([[2., 0.],
            [0., 4.]])
    >>> vjp(lambda x: (x ** 2).sum(), x)        # (func's output, v^T J), v omitted: 1
    (tensor(5.), tensor([2., 4.]))
"""

from __future__ import annotations

from typing import Any, Callable

from zgrad.autograd.functional_support import (
    as_tuple, check_connected, check_requires_grad, check_single_element, evaluate, fill_in_zeros, finish,
    grad_allowing_unused, grad_postprocess, untuple)
from zgrad.creation import zeros, zeros_like
from zgrad.engine.grad_mode import enable_grad
from zgrad.errors import AutogradError
from zgrad.ops.functions import stack
from zgrad.tensor import Tensor

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]

_STRATEGIES = ("forward-mode", "reverse-mode")

def vjp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """The vector-Jacobian product ``v^T J`` of ``func`` at ``inputs``.

    Args:
        func: a function of tensors (as many as ``inputs`` holds) that returns
            a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors, ``func``'s arguments.
        v: a tensor or a tuple of tensors shaped as the outputs of ``func``; may be omitted
            when those are a single element (then 1).
        create_graph: compute the output and the result on the graph, so that they can be
            differentiated again with respect to ``inputs``.
        strict: raise when an input does not reach the result (or, with ``create_graph``, the
            result would not depend on the inputs) instead of giving zeros for it.

    Returns:
        ``(func's output, vjp)``: the vjp shaped as the inputs (a tuple where they were one).

    Raises:
        TypeError: an input, an output of ``func`` or an element of ``v`` that is not a tensor.
        AutogradError (a RuntimeError): ``v`` omitted for an output of several elements or not
            matching the outputs' count or shapes; ``strict`` and an output that does not require
            grad or an input the outputs do not use.

    Example::

        >>> vjp(lambda x, y: 2 * x + 3 * y, (zgrad.ones(2), zgrad.ones(2)), zgrad.ones(2))[1]
        (tensor([2., 2.]), tensor([3., 3.]))
    """
    run = evaluate("vjp", func, inputs, create_graph, strict, v, v_like="outputs")
    grads = grad_allowing_unused(run.outputs, run.inputs, run.v, create_graph=create_graph)
    return finish(run, fill_in_zeros(grads, run.inputs, strict, create_graph, "back"), run.is_inputs_tuple,
                  create_graph)


def jvp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """The Jacobian-vector product ``J v`` of ``func`` at ``inputs``, by the double backward trick:
    the vjp is linear in its vector ``u``, so differentiating ``u -> u^T J`` along ``v`` gives ``J v``.
    That costs two backward passes (PyTorch's ``autograd.functional.jvp`` works the same way).

    Args:
        func: a function of tensors (as many as ``inputs`` holds) that returns
            a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors, ``func``'s arguments.
        v: a tensor or a tuple of tensors shaped as the inputs; may be omitted when those are
            a single element (then 1).
        create_graph: compute the output and the result on the graph, so that they can be
            differentiated again with respect to ``inputs``.
        strict: raise when an input does not reach the result (or, with ``create_graph``, the
            result would not depend on the inputs) instead of giving zeros for it.

    Returns:
        ``(func's output, jvp)``: the jvp shaped as the outputs (a tuple where they were one).

    Raises:
        TypeError: an input, an output of ``func`` or an element of ``v`` that is not a tensor.
        AutogradError (a RuntimeError): ``v`` omitted for inputs of several elements or not
            matching the inputs' count or shapes; ``strict`` and an output that does not require
            grad, or an output or input not connected through ``func``.

    Example::

        >>> jvp(lambda x: x.exp().sum(dim=1), zgrad.zeros(2, 2), zgrad.ones(2, 2))[1]
        tensor([2., 2.])
    """
    run = evaluate("jvp", func, inputs, create_graph, strict, v, v_like="inputs")
    with enable_grad():
        # u's value never reaches the result (the vjp is linear in u); zeros keep inf and nan out
        u = tuple(zeros_like(output, requires_grad=True) for output in run.outputs)
        vjps = grad_allowing_unused(run.outputs, run.inputs, u, create_graph=True)
        check_requires_grad(vjps, "grad_inputs", strict)
    grads = grad_allowing_unused(vjps, u, run.v, create_graph=create_graph)
    return finish(run, fill_in_zeros(grads, run.outputs, strict, create_graph, "back_trick"), run.is_outputs_tuple,
                  create_graph)


def jacobian(func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """The Jacobian of ``func`` at ``inputs``, one backward pass per output element.

    Args:
        func: a function of tensors (as many as ``inputs`` holds) that returns a tensor or a
            tuple of tensors.
        inputs: a tensor or a tuple of tensors, ``func``'s arguments.
        create_graph: compute the Jacobian on the graph, so that it can be differentiated again
            with respect to ``inputs``.
        strict: raise when an output does not depend on an input instead of giving zeros.
        vectorize: accepted for PyTorch's API, where it batches the backward passes with vmap
            (a speed-up only); zgrad computes the same result with the same loop either way.
            Not allowed with ``strict``, as in PyTorch.
        strategy: ``"reverse-mode"``, or ``"forward-mode"``, which PyTorch allows only with
            ``vectorize=True`` and without ``create_graph`` or ``strict``; zgrad then gives the
            same values by reverse mode, in the outputs' dtypes as forward mode would.

    Returns:
        A tensor for one input and one output; a tuple over the inputs or outputs where one of
        them was a tuple; a tuple of tuples where both were, ``J[i][j]`` being the Jacobian of
        output ``i`` with respect to input ``j``, of shape ``out_i.shape + in_j.shape``.

    Raises:
        AssertionError: an unknown ``strategy`` (PyTorch's type).
        NotImplementedError: ``"forward-mode"`` with ``create_graph`` or without ``vectorize``.
        TypeError: an input or an output of ``func`` that is not a tensor.
        AutogradError (a RuntimeError): ``strict`` with ``vectorize`` or forward mode; ``strict``
            and an output that does not require grad or does not depend on an input.

    Example::

        >>> jacobian(lambda x, y: (x * y, x.sum()), (zgrad.ones(2), zgrad.ones(2)))[1][0]
        tensor([1., 1.])
    """
    if strategy not in _STRATEGIES:
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                             'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                             'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        _check_forward_mode(inputs, create_graph, strict, vectorize)
    run = evaluate("jacobian", func, inputs, create_graph, strict)
    if vectorize and strict:
        raise AutogradError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                            "supported together. Please either set `strict=False` or `vectorize=False`.")
    with enable_grad():
        rows = tuple(_jacobian_of_output(i, output, run.inputs, create_graph, strict)
                     for i, output in enumerate(run.outputs))
    if strategy == "forward-mode":
        rows = tuple(tuple(block.to(output.dtype) for block in row) for row, output in zip(rows, run.outputs))
    return untuple(grad_postprocess(rows, create_graph), (run.is_outputs_tuple, run.is_inputs_tuple))


def _check_forward_mode(inputs: Any, create_graph: bool, strict: bool, vectorize: bool) -> None:
    """PyTorch's refusals of forward mode, in its order."""
    if create_graph:
        raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True` and "
                                  '`strategy="forward-mode"` are not supported together (yet). Please either set '
                                  '`create_graph=False` or `strategy="reverse-mode"`.')
    if strict:
        raise AutogradError('torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are not '
                            'supported together (yet). Please either set `strict=False` or `strategy="reverse-mode"`.')
    as_tuple(inputs, "inputs", "jacobian")
    if not vectorize:
        # PyTorch's text, its missing space included
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                                  "only implemented for `vectorize=True`.")


def _jacobian_of_output(index: int, output: Tensor, inputs: tuple[Tensor, ...], create_graph: bool,
                        strict: bool) -> tuple[Tensor, ...]:
    """The Jacobian of output ``index`` with respect to each input, one backward pass per element.

    Raises:
        AutogradError: ``strict`` and an input the output does not depend on (or, with
            ``create_graph``, a gradient off the graph).
    """
    flat = output.reshape(-1)
    columns: list[list[Tensor]] = [[] for _ in inputs]
    for k in range(output.numel()):
        grads = grad_allowing_unused((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
        for j, (gradient, column) in enumerate(zip(grads, columns)):
            if gradient is None:
                if strict:
                    raise AutogradError(f"Output {index} of the user-provided function is independent of input {j}. "
                                        "This is not allowed in strict mode.")
                gradient = zeros_like(inputs[j])
            else:
                check_connected(gradient, index, "jacobian", strict, create_graph)  # PyTorch names the output here
            column.append(gradient)
    return tuple(stack(column).reshape(output.shape + x.shape) if column
                 else zeros(output.shape + x.shape, dtype=x.dtype, device=x.device)
                 for column, x in zip(columns, inputs))


def hessian(func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of the scalar function ``func`` at ``inputs``: the Jacobian of its gradient.

    Args:
        func: a function of tensors (as many as ``inputs`` holds) that returns a tensor of one
            element.
        inputs: a tensor or a tuple of tensors, ``func``'s arguments.
        create_graph: compute the Hessian on the graph, so that it can be differentiated again.
        strict: raise when an input does not reach the output, or the gradient does not depend
            on the inputs, instead of giving zeros.
        vectorize: a speed-up only in PyTorch (vmap); zgrad gives the same result by the same
            loop (see :func:`jacobian`).
        outer_jacobian_strategy: the ``strategy`` of the outer Jacobian (the inner one is
            reverse mode), with :func:`jacobian`'s rules.

    Returns:
        A tensor of shape ``in.shape + in.shape`` for one input; for a tuple of inputs, a tuple
        of tuples, ``H[i][j]`` of shape ``in_i.shape + in_j.shape``.

    Raises:
        AssertionError: an unknown ``outer_jacobian_strategy`` (PyTorch's type).
        NotImplementedError, TypeError: as :func:`jacobian`.
        AutogradError (a RuntimeError): ``func`` returns a tuple or more than one element; the
            strict-mode refusals above.

    Example::

        >>> hessian(lambda x: (x ** 3).sum(), zgrad.tensor([1.0, 2.0]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    is_inputs_tuple, inputs = as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in _STRATEGIES:
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_output(*args: Tensor) -> Tensor:
        output = func(*args)
        is_output_tuple, outputs = as_tuple(output, "outputs of the user-provided function", "hessian")
        check_requires_grad(outputs, "outputs", strict)
        check_single_element(is_output_tuple, outputs, "hessian")
        return output.squeeze()

    def gradient(*args: Tensor) -> tuple[Tensor, ...]:
        first = jacobian(scalar_output, args, create_graph=True)
        check_requires_grad(first, "jacobian", strict)
        return first

    second = jacobian(gradient, inputs, create_graph, strict, vectorize, outer_jacobian_strategy)
    return untuple(second, (is_inputs_tuple, is_inputs_tuple))


def vhp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """The vector-Hessian product ``v^T H`` of the scalar function ``func`` at ``inputs``.

    Args:
        func: a function of tensors (as many as ``inputs`` holds) that returns
            a tensor of one element.
        inputs: a tensor or a tuple of tensors, ``func``'s arguments.
        v: a tensor or a tuple of tensors shaped as the inputs; may be omitted when those are
            a single element (then 1).
        create_graph: compute the output and the result on the graph, so that they can be
            differentiated again with respect to ``inputs``.
        strict: raise when an input does not reach the result (or, with ``create_graph``, the
            result would not depend on the inputs) instead of giving zeros for it.

    Returns:
        ``(func's output, vhp)``: the vhp shaped as the inputs (a tuple where they were one).

    Raises:
        TypeError: an input, an output of ``func`` or an element of ``v`` that is not a tensor.
        AutogradError (a RuntimeError): ``v`` omitted for inputs of several elements or not
            matching them; ``func`` returns a tuple or more than one element; ``strict`` and an
            input the output or the gradient does not depend on.

    Example::

        >>> vhp(lambda x: (x ** 3).sum(), zgrad.tensor([1.0, 2.0]), zgrad.ones(2))[1]
        tensor([ 6., 12.])
    """
    run, first = _scalar_gradient("vhp", func, inputs, v, create_graph, strict)
    grads = grad_allowing_unused(first, run.inputs, run.v, create_graph=create_graph)
    return finish(run, fill_in_zeros(grads, run.inputs, strict, create_graph, "double_back"), run.is_inputs_tuple,
                  create_graph)


def hvp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """The Hessian-vector product ``H v`` of the scalar function ``func`` at ``inputs``, by the
    double backward trick on the gradient (one more backward pass than :func:`vhp`, which gives
    the same values for a twice continuously differentiable ``func``, as ``H`` is symmetric).

    Args:
        func, inputs, v, create_graph, strict: as :func:`vhp`.

    Returns:
        ``(func's output, hvp)``: the hvp shaped as the inputs (a tuple where they were one).

    Raises:
        TypeError, AutogradError: as :func:`vhp`.

    Example::

        >>> hvp(lambda x: (x ** 3).sum(), zgrad.tensor([1.0, 2.0]), zgrad.ones(2))[1]
        tensor([ 6., 12.])
    """
    run, first = _scalar_gradient("hvp", func, inputs, v, create_graph, strict)
    with enable_grad():
        u = tuple(zeros_like(x, requires_grad=True) for x in run.inputs)
        second = grad_allowing_unused(first, run.inputs, u, create_graph=True)
    grads = grad_allowing_unused(second, u, run.v, create_graph=create_graph)
    return finish(run, fill_in_zeros(grads, run.inputs, strict, create_graph, "double_back_trick"),
                  run.is_inputs_tuple, create_graph)


def _scalar_gradient(fn_name: str, func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool,
                     strict: bool) -> tuple[Any, tuple[Tensor | None, ...]]:
    """The first steps of ``vhp`` and ``hvp``: ``func`` run and checked to be a scalar, and its
    gradient with respect to the inputs, on the graph."""
    run = evaluate(fn_name, func, inputs, create_graph, strict, v, v_like="inputs")
    check_single_element(run.is_outputs_tuple, run.outputs, fn_name)
    first = grad_allowing_unused(run.outputs, run.inputs, create_graph=True)
    check_requires_grad(first, "jacobian", strict)
    return run, first

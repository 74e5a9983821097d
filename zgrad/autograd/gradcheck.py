"""``zgrad.autograd.gradcheck``: gradients checked against finite differences, as
``torch.autograd.gradcheck``.

:func:`gradcheck` compares, for every output of a function and every input tensor that requires
grad, the Jacobian its backward gives (one vector-Jacobian product per output element) with the
one central differences give, and checks that backward is deterministic, scales with
``grad_output`` and copes with gradients that never arrive. :func:`gradgradcheck` does the same
for the gradient itself, so it checks double backward (``create_graph=True``). Both take their
tolerances, messages and options from PyTorch; the options that need what zgrad has not
(forward-mode AD, sparse inputs, complex outputs) raise naming the option.

As in PyTorch, ``zgrad.autograd.gradcheck`` is the function; this module is
``sys.modules['zgrad.autograd.gradcheck']``, and ``from zgrad.autograd.gradcheck import
GradcheckError`` works.

Example::

    >>> from zgrad.autograd import gradcheck
    >>> x = zgrad.randn(3, dtype=zgrad.float64, requires_grad=True)
    >>> gradcheck(lambda x: (x * x).sin(), (x,))
    True
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from zgrad.autograd.gradcheck_checks import (
    Tolerances, check_batched_backward, check_missing_output_grads, check_scaled_by_grad_output, compare_jacobians,
    compare_projections)
from zgrad.autograd.gradcheck_support import as_tuple, differentiable_inputs, differentiable_outputs, on_device_of
from zgrad.autograd.gradients import grad
from zgrad.errors import GradcheckError
from zgrad.random import numpy_generator
from zgrad.tensor import Tensor
from zgrad.warning_location import user_stacklevel

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]

def gradcheck(func: Callable[..., Any], inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              check_grad_dtypes: bool = False, check_batched_grad: bool = False,
              check_batched_forward_grad: bool = False, check_forward_ad: bool = False,
              check_backward_ad: bool = True, fast_mode: bool = False, masked: bool | None = None) -> bool:
    """Check the gradients of ``func`` at ``inputs`` against finite differences, as
    ``torch.autograd.gradcheck``.

    For every input tensor that requires grad and every output that does, the Jacobian from
    backward must be ``allclose`` (``atol``, ``rtol``) to the one from central differences of
    step ``eps``. Inputs that do not require grad, and non-tensor inputs, are passed as they are
    and not checked. The defaults suit float64 inputs (others warn). Blocks until done; ``func``
    runs twice per input element (once in all in ``fast_mode``), plus a few times more.

    Args:
        func: a function of the ``inputs`` that returns a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of arguments for ``func``.
        eps: the finite-difference step.
        atol: absolute tolerance.
        rtol: relative tolerance.
        raise_exception: raise :class:`GradcheckError` on a failed check (False: return False).
        nondet_tol: how far two backward passes with the same inputs and ``grad_output`` may differ.
        check_undefined_grad: check that backward copes with output gradients that never arrive
            (None or zeros: a Function with ``ctx.set_materialize_grads(False)`` gets None).
        check_grad_dtypes: check that every gradient has its input's dtype.
        check_batched_grad: check that backward under :func:`zgrad.func.vmap` over a batch of
            ``grad_output`` gives the per-row results.
        check_batched_forward_grad: not supported (needs forward-mode AD).
        check_forward_ad: not supported: zgrad has no forward-mode AD.
        check_backward_ad: check reverse mode (what this function does; must stay True).
        fast_mode: compare ``v^T J u`` for random unit vectors ``u``, ``v`` instead of whole
            Jacobians: one backward pass per output and two calls per input. A failure is
            reported with the whole Jacobians of the failing pair.
        masked: for sparse inputs in PyTorch; accepted, and with True a gradient for a zero
            ``grad_output`` need only be close to zero.

    Returns:
        True if every check passed (False on a failed one with ``raise_exception=False``).

    Raises:
        GradcheckError: a check failed (the message says which, with both Jacobians for a
            mismatch), with ``raise_exception``.
        ValueError: no input requires grad; a sparse output.
        RuntimeError: an input with a stride-0 dimension (expanded memory).
        NotImplementedError: ``check_forward_ad`` or ``check_batched_forward_grad``; a sparse input
            that requires grad; a complex output (zgrad's complex tensors do not require grad).
        AssertionError: options that contradict each other (as PyTorch's).
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    for option, value in (("check_batched_forward_grad", check_batched_forward_grad),
                          ("check_forward_ad", check_forward_ad)):
        if value:
            raise NotImplementedError(f"gradcheck({option}=True): zgrad has no forward-mode AD (dual tensors), so "
                                      f"forward-mode gradients cannot be checked; leave {option}=False")
    check = Tolerances(eps, atol, rtol, nondet_tol, check_grad_dtypes, bool(masked))
    try:
        _gradcheck(func, as_tuple(inputs), check, fast_mode=fast_mode, check_batched_grad=check_batched_grad,
                   check_undefined_grad=check_undefined_grad)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(func: Callable[..., Any], inputs: Any, grad_outputs: Any = None, *, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
                  check_grad_dtypes: bool = False, check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False, masked: bool = False) -> bool:
    """Check the second derivatives of ``func`` at ``inputs`` against finite differences of its
    gradient, as ``torch.autograd.gradgradcheck``: :func:`gradcheck` of the function that maps
    ``(*inputs, *grad_outputs)`` to the gradients of ``func``'s outputs with respect to its inputs
    (computed with ``create_graph=True``), so with respect to the inputs and the ``grad_outputs``.

    Args:
        func: a function of the ``inputs`` that returns a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of arguments for ``func``.
        grad_outputs: the gradients for ``func``'s outputs that require grad (a tensor or a
            tuple); those that require grad are checked too. None: random ones in [-1, 1), drawn
            from zgrad's default generator, requiring grad.
        gen_non_contig_grad_outputs: make the random ``grad_outputs`` non-contiguous (host memory).
        check_fwd_over_rev: not supported: zgrad has no forward-mode AD.
        check_rev_over_rev: check reverse over reverse (what this function does; must stay True).
        eps, atol, rtol, raise_exception, nondet_tol, check_undefined_grad, check_grad_dtypes,
        check_batched_grad, fast_mode, masked: as for :func:`gradcheck`.

    Returns:
        True if every check passed (False on a failed one with ``raise_exception=False``).

    Raises:
        GradcheckError: a check failed, with ``raise_exception``.
        AutogradError: an op of ``func`` whose backward is not differentiable.
        NotImplementedError: ``check_fwd_over_rev``; inputs gradcheck does not support.
        AssertionError: options that contradict each other (as PyTorch's).
    """
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be True")
    if check_fwd_over_rev:
        raise NotImplementedError("gradgradcheck(check_fwd_over_rev=True): zgrad has no forward-mode AD (dual "
                                  "tensors), so forward-over-reverse cannot be checked; leave check_fwd_over_rev=False")
    tupled_inputs = as_tuple(inputs)
    if grad_outputs is None:
        tupled_grad_outputs = tuple(_random_grad_output(o, gen_non_contig_grad_outputs)
                                    for o in differentiable_outputs(as_tuple(func(*tupled_inputs))))
    else:
        tupled_grad_outputs = as_tuple(grad_outputs)
    count = len(tupled_inputs)
    input_positions = [i for i, _ in differentiable_inputs(tupled_inputs)]

    def gradients(*args: Any) -> tuple[Tensor, ...]:
        outputs = differentiable_outputs(as_tuple(func(*args[:count])))
        grads = grad(outputs, [args[i] for i in input_positions], list(args[count:]), create_graph=True,
                     allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(gradients, tupled_inputs + tupled_grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad, check_grad_dtypes=check_grad_dtypes,
                     check_batched_grad=check_batched_grad, fast_mode=fast_mode, masked=masked)


def _random_grad_output(output: Tensor, non_contiguous: bool) -> Tensor:
    """Uniform in [-1, 1), shaped as ``output``, of its dtype and device, requiring grad; with
    ``non_contiguous``, every other element of a wider array."""
    dtype = output.dtype
    shape = tuple(output.shape)
    rng = numpy_generator(device=output.device)
    if non_contiguous and len(shape) > 0 and output.numel() > 1 and output.device.type == "cpu":
        wide = rng.uniform(-1.0, 1.0, (*shape[:-1], 2 * shape[-1])).astype(dtype)
        return Tensor(wide[..., ::2]).requires_grad_()
    return on_device_of(rng.uniform(-1.0, 1.0, shape).astype(dtype), output).requires_grad_()


def _gradcheck(func: Callable[..., Any], inputs: tuple, check: Tolerances, *, fast_mode: bool,
               check_batched_grad: bool, check_undefined_grad: bool) -> None:
    """One gradcheck, every check in PyTorch's order (see :mod:`zgrad.autograd.gradcheck_checks`)."""
    _check_inputs(inputs)
    func_out = as_tuple(func(*inputs))
    _check_outputs(func_out)
    outputs = differentiable_outputs(func_out)
    if fast_mode:
        compare_projections(func, inputs, func_out, outputs, check)
    else:
        compare_jacobians(func, inputs, func_out, outputs, check)
    if check_batched_grad:
        for index, output in enumerate(outputs):
            check_batched_backward(inputs, output, index)
    check_scaled_by_grad_output(outputs, inputs, check.masked)
    if check_undefined_grad:
        check_missing_output_grads(func, inputs, len(outputs))


def _check_inputs(inputs: tuple) -> None:
    """Warn for inputs that are not float64; refuse what the check cannot perturb one element at a time.

    Raises:
        ValueError: no input requires grad.
        NotImplementedError: a sparse input that requires grad.
        RuntimeError: an input with a stride-0 dimension.
    """
    checked = differentiable_inputs(inputs)
    if not checked:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")
    for position, x in checked:
        if getattr(x, "is_sparse", False):
            raise NotImplementedError(f"gradcheck: input {position} is a sparse tensor, which zgrad's gradcheck does "
                                      f"not support; pass x.to_dense() and make func sparse again if it needs to")
        if x.dtype != np.float64:
            warnings.warn(f"Input #{position} requires gradient and is not a double precision floating point or "
                          f"complex. This check will likely fail if all the inputs are not of double precision "
                          f"floating point or complex. ", UserWarning, stacklevel=user_stacklevel())
        if any(stride == 0 and size > 1 for stride, size in zip(x.stride(), x.shape)):
            raise RuntimeError(f"The {position}th input has a dimension with stride 0. gradcheck only supports inputs "
                               f"that are non-overlapping to be able to compute the numerical gradients correctly. "
                               f"You should call .contiguous on the input before passing it to gradcheck.")


def _check_outputs(outputs: tuple) -> None:
    """Refuse outputs the check cannot differentiate.

    Raises:
        ValueError: a sparse output (PyTorch's message).
        NotImplementedError: a complex output.
    """
    for index, output in enumerate(outputs):
        if not isinstance(output, Tensor):
            continue
        if getattr(output, "is_sparse", False):
            raise ValueError("Sparse output is not supported at gradcheck yet. Please call to_dense() on the output "
                             "of fn for gradcheck.")
        if output.is_complex():
            raise NotImplementedError(f"gradcheck: output {index} is complex ({output.dtype}); zgrad's gradcheck "
                                      f"checks real outputs only")

"""The checks :func:`zgrad.autograd.gradcheck` runs, each raising :class:`GradcheckError` when it
fails: Jacobians compared in full (slow mode) or through random projections (fast mode), backward
under ``zgrad.func.vmap``, backward scaled by ``grad_output``, and output gradients that never
arrive. Every function blocks until its passes are done."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from zgrad.autograd.function import Function
from zgrad.autograd.gradcheck_support import (
    analytical_vjps, as_tuple, differentiable_inputs, differentiable_outputs, directional_derivatives, host,
    numerical_jacobians, on_device_of, vjp)
from zgrad.autograd.gradients import grad
from zgrad.errors import GradcheckError
from zgrad.random import numpy_generator
from zgrad.tensor import Tensor

__all__ = ["Tolerances", "check_batched_backward", "check_scaled_by_grad_output", "check_missing_output_grads",
           "compare_jacobians", "compare_projections"]

_FAST_MODE_SEED = 0  # fast mode's random projections are the same on every call, and leave the user's RNG alone


class Tolerances(NamedTuple):
    """gradcheck's tolerances and the options its comparisons take."""

    eps: float
    atol: float
    rtol: float
    nondet_tol: float
    check_grad_dtypes: bool
    masked: bool


def _differentiable_positions(func_out: tuple) -> list[int]:
    """Where, among all of ``func``'s outputs, the differentiable ones are."""
    return [k for k, o in enumerate(func_out) if isinstance(o, Tensor) and o.requires_grad]


def _mismatch(output_index: int, input_index: int, numerical: Any, analytical: Any) -> str:
    return (f"Jacobian mismatch for output {output_index:d} with respect to input {input_index:d},\n"
            f"numerical:{Tensor(np.asarray(numerical))}\nanalytical:{Tensor(np.asarray(analytical))}\n")


def _allclose(analytical: np.ndarray, numerical: np.ndarray, rtol: float, atol: float) -> bool:
    common = np.promote_types(analytical.dtype, numerical.dtype)
    return bool(np.allclose(analytical.astype(common), numerical.astype(common), rtol=rtol, atol=atol))


def _numerical_for_outputs(func: Callable[..., Any], inputs: tuple, func_out: tuple, eps: float
                           ) -> list[list[np.ndarray]]:
    """Per differentiable input, the numerical Jacobians of the differentiable outputs.

    Raises:
        GradcheckError: no output requires grad, and the function still changes with an input.
    """
    wanted = _differentiable_positions(func_out)
    jacobians = [numerical_jacobians(func, inputs, position, eps) for position, _ in differentiable_inputs(inputs)]
    if not wanted:
        for per_output in jacobians:
            if any(j is not None and np.any(j != 0) for j in per_output):
                raise GradcheckError("Numerical gradient for function expected to be zero")
    return [[per_output[k] for k in wanted] for per_output in jacobians]


def _analytical_jacobians(inputs: tuple, output: Tensor, check: Tolerances, grad_outputs: Sequence[np.ndarray]
                          ) -> list[np.ndarray]:
    """Per differentiable input, the rows ``g^T J`` for each of ``grad_outputs`` (shaped as
    ``output``), stacked: (len(grad_outputs), input elements) in the input's dtype, zeros where
    it is not used. Computed twice, to catch nondeterminism.

    Raises:
        GradcheckError: a gradient of another dtype than its input (with ``check_grad_dtypes``) or
            another size; two passes that differ by more than ``nondet_tol``.
    """
    checked = [x for _, x in differentiable_inputs(inputs)]
    first = analytical_vjps(output, checked, grad_outputs)
    second = analytical_vjps(output, checked, grad_outputs)
    stacked = []
    for x, rows, again in zip(checked, first, second):
        for g in rows:
            if g is not None and check.check_grad_dtypes and g.dtype != x.dtype:
                raise GradcheckError("Gradient has dtype mismatch")
            if g is not None and g.shape != tuple(x.shape):
                raise GradcheckError("Analytical gradient has incorrect size")
        jacobian, repeated = _stacked_rows(rows, x), _stacked_rows(again, x)
        if jacobian.size and np.max(np.abs(jacobian - repeated)) > check.nondet_tol:
            raise GradcheckError(
                "Backward is not reentrant, i.e., running backward with same input and grad_output multiple times "
                "gives different values, although analytical gradient matches numerical gradient. The tolerance for "
                f"nondeterminism was {check.nondet_tol}. If the backward is nondeterministic on purpose, pass a "
                "larger nondet_tol.")
        stacked.append(jacobian)
    return stacked


def _stacked_rows(rows: list[np.ndarray | None], x: Tensor) -> np.ndarray:
    """Gradients of ``x`` as the rows of a matrix of its dtype, zeros for None."""
    flat = [np.zeros(x.numel(), x.dtype) if g is None else g.astype(x.dtype).reshape(-1) for g in rows]
    return np.stack(flat) if flat else np.zeros((0, x.numel()), x.dtype)


def _one_hot_rows(output: Tensor) -> list[np.ndarray]:
    count = output.numel()
    return [np.eye(1, count, k, dtype=output.dtype).reshape(tuple(output.shape)) for k in range(count)]


def compare_jacobians(func: Callable[..., Any], inputs: tuple, func_out: tuple, outputs: tuple,
                      check: Tolerances) -> None:
    """Slow mode: the Jacobian of each differentiable output (``outputs``, among ``func_out``, what
    ``func(*inputs)`` returned) with respect to each differentiable input, in full, by backward
    against central differences.

    Raises:
        GradcheckError: a pair that is not ``allclose`` (PyTorch's message, with both Jacobians), or
            a failed check of :func:`_analytical_jacobians`; with no differentiable output, a
            numerical Jacobian that is not zero.
    """
    numerical = _numerical_for_outputs(func, inputs, func_out, check.eps)
    for i, output in enumerate(outputs):
        analytical = _analytical_jacobians(inputs, output, check, _one_hot_rows(output))
        for j, rows in enumerate(analytical):
            a, n = rows.T, numerical[j][i]  # both (input elements, output elements), PyTorch's layout
            if not _allclose(a, n, check.rtol, check.atol):
                raise GradcheckError(_mismatch(i, j, n, a))


def _unit_vector(rng: np.random.Generator, count: int, dtype: np.dtype) -> np.ndarray:
    vector = rng.random(count)
    norm = np.linalg.norm(vector)
    return (vector / norm if norm > 0 else vector).astype(dtype)


def compare_projections(func: Callable[..., Any], inputs: tuple, func_out: tuple, outputs: tuple,
                        check: Tolerances) -> None:
    """Fast mode: ``v^T J u`` by backward (``(v^T J) . u``) against central differences along
    ``u`` (``v . (J u)``), for fixed random unit vectors, with ``atol`` scaled by
    ``sum(u) * sum(v)``, the same projection of an all-``atol`` matrix.

    Raises:
        GradcheckError: a pair that is not ``allclose`` (PyTorch's message, then both Jacobians of
            that pair in full), or a failed check of :func:`_analytical_jacobians`; with no
            differentiable output, a directional derivative above ``nondet_tol``.
    """
    rng = np.random.default_rng(_FAST_MODE_SEED)
    checked = differentiable_inputs(inputs)
    all_u = [_unit_vector(rng, x.numel(), x.dtype) for _, x in checked]
    all_v = [_unit_vector(rng, o.numel(), o.dtype) for o in outputs]
    wanted = _differentiable_positions(func_out)
    numerical = []  # per input, per differentiable output: v . (J u)
    for (position, _), u in zip(checked, all_u):
        ju = directional_derivatives(func, inputs, position, u, check.eps)
        if not outputs:
            if any(d is not None and d.size and np.max(np.abs(d)) > check.nondet_tol for d in ju):
                raise GradcheckError("Numerical gradient for function expected to be zero")
            continue
        numerical.append([np.dot(v.astype(ju[k].dtype), ju[k]) for k, v in zip(wanted, all_v)])
    for i, (output, v) in enumerate(zip(outputs, all_v)):
        vj = _analytical_jacobians(inputs, output, check, [v.reshape(tuple(output.shape))])
        for j, (row, u) in enumerate(zip(vj, all_u)):
            a, n = np.asarray(np.dot(row[0], u)), np.asarray(numerical[j][i])
            tolerance = check.atol * float(u.sum()) * float(v.sum())
            if not _allclose(a, n, check.rtol, tolerance):
                raise GradcheckError(_mismatch(i, j, n, a) + _slow_mode_report(func, inputs, func_out, i, j, check))


def _slow_mode_report(func: Callable[..., Any], inputs: tuple, func_out: tuple, output_index: int, input_index: int,
                      check: Tolerances) -> str:
    """The whole Jacobians of one failing (output, input) pair of fast mode, for its message."""
    position, _ = differentiable_inputs(inputs)[input_index]
    wanted = _differentiable_positions(func_out)
    numerical = numerical_jacobians(func, inputs, position, check.eps)[wanted[output_index]]
    output = differentiable_outputs(func_out)[output_index]
    lenient = check._replace(nondet_tol=float("inf"), check_grad_dtypes=False)
    analytical = _analytical_jacobians(inputs, output, lenient, _one_hot_rows(output))[input_index].T
    largest = float(np.max(np.abs(numerical - analytical))) if numerical.size else 0.0
    report = ("\nThe numbers above are projections v^T J u of the two Jacobians on random unit vectors (fast mode). "
              "The whole Jacobians, computed one element at a time:\n\n"
              f"Numerical:\n {Tensor(numerical)}\nAnalytical:\n{Tensor(analytical)}\n\n"
              f"The max per-element difference (slow mode) is: {largest}.\n")
    if _allclose(analytical, numerical, check.rtol, check.atol):
        report += ("Element by element they agree within atol and rtol: gradcheck with fast_mode=False would pass; "
                   "the projection's tolerance was too tight for this function.")
    return report


def check_batched_backward(inputs: tuple, output: Tensor, output_index: int) -> None:
    """Backward under ``zgrad.func.vmap`` over two stacked ``grad_output`` gives each one's gradients.

    Raises:
        GradcheckError: vmap failed, or a result differs from the unbatched one.
    """
    from zgrad.func import vmap  # zgrad.func is built on the ops, which are loaded after zgrad.autograd

    checked = [x for _, x in differentiable_inputs(inputs)]

    def gradients(grad_output: Tensor) -> tuple[Tensor, ...]:
        grads = vjp(output, checked, grad_output)
        return tuple(on_device_of(np.zeros(tuple(x.shape), x.dtype), x) if g is None else g
                     for g, x in zip(grads, checked))

    rng = numpy_generator(device=output.device)
    rows = [rng.standard_normal(tuple(output.shape)).astype(output.dtype) for _ in range(2)]
    expected = [np.stack(per_input) for per_input in zip(*([host(g) for g in gradients(on_device_of(r, output))]
                                                            for r in rows))]
    try:
        batched = vmap(gradients)(on_device_of(np.stack(rows), output))
    except RuntimeError as exc:
        raise GradcheckError(f"While computing batched gradients, got: {exc}\n\nThe backward of some op does not run "
                             f"under zgrad.func.vmap; pass check_batched_grad=False to skip this check.") from exc
    for input_index, (got, want) in enumerate(zip(batched, expected)):
        got_values = host(got)
        if not np.allclose(got_values, want, rtol=1e-5, atol=1e-8):
            raise GradcheckError(f"For output {output_index} and input {input_index}:\n\nbackward under "
                                 f"zgrad.func.vmap over a batch of grad_outputs does not give the gradients of each "
                                 f"row (pass check_batched_grad=False to skip this check).\n\n"
                                 f"Got:\n{Tensor(got_values)}\n\nExpected:\n{Tensor(want)}")


def check_scaled_by_grad_output(outputs: tuple, inputs: tuple, masked: bool) -> None:
    """Zero ``grad_outputs`` give zero gradients of the inputs' dtypes, devices and sizes. Frees the graph.

    Raises:
        GradcheckError: a nonzero gradient, or one of another dtype, device or size (PyTorch's messages).
    """
    checked = [x for _, x in differentiable_inputs(inputs)]
    zeros = [on_device_of(np.zeros(tuple(o.shape), o.dtype), o) for o in outputs]
    for g, x in zip(grad(list(outputs), checked, zeros, allow_unused=True), checked):
        if g is None:
            continue
        values = host(g)
        if (not np.allclose(values, 0) if masked else np.any(values != 0)):
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype != x.dtype:
            raise GradcheckError("grad is incorrect type")
        if g.device != x.device:
            raise GradcheckError("grad is incorrect device")
        if tuple(g.shape) != tuple(x.shape):
            raise GradcheckError("grad is incorrect size")


class _NoGradient(Function):
    """Identity whose backward sends no gradient: the output gradient of what it wraps is undefined."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> None:
        return None


def check_missing_output_grads(func: Callable[..., Any], inputs: tuple, count: int) -> None:
    """Backward copes with outputs whose gradient never arrives: all ``count`` differentiable
    outputs at once, then (with several) one at a time; the inputs' gradients must then be None
    or zeros.

    Raises:
        GradcheckError: backward raised, or gave a nonzero gradient.
    """
    checked = [x for _, x in differentiable_inputs(inputs)]

    def run(undefined: Callable[[int], bool]) -> None:
        outputs = [_NoGradient.apply(o) if undefined(k) else o
                   for k, o in enumerate(differentiable_outputs(as_tuple(func(*inputs))))]
        zeros = [on_device_of(np.zeros(tuple(o.shape), o.dtype), o) for o in outputs]
        try:
            grads = grad(outputs, checked, zeros, allow_unused=True)
        except RuntimeError as exc:
            raise GradcheckError("Expected backward function to handle undefined output grads: a backward that "
                                 "receives None (a Function with ctx.set_materialize_grads(False)) must treat it as "
                                 "zeros. Pass check_undefined_grad=False to skip this check.") from exc
        if any(g is not None and np.any(host(g) != 0) for g in grads):
            raise GradcheckError("Expected all input grads to be undefined or zero when all output grads are "
                                 "undefined or zero.")

    run(lambda k: True)
    if count > 1:
        for index in range(count):
            run(lambda k: k == index)

"""The arithmetic of :mod:`zgrad.autograd.gradcheck`: Jacobians by central differences and by
backward passes, on host (numpy) copies of the values.

A numerical Jacobian perturbs an input in place, through its array, so that the function sees the
same tensor objects it was given (gradgradcheck differentiates with respect to them) and no
version counter moves (the graph of the first call stays usable). An analytical Jacobian is built
one vector-Jacobian product at a time: row ``k`` is the gradient for the one-hot ``grad_output``
``e_k``. Every function blocks until its passes are done.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from zgrad.autograd.gradients import grad
from zgrad.kernels import dispatch
from zgrad.kernels.promotion import is_floating
from zgrad.tensor import Tensor

__all__ = ["analytical_vjps", "as_tuple", "differentiable_inputs", "differentiable_outputs", "directional_derivatives",
           "host", "numerical_jacobians", "on_device_of", "vjp"]

Values = tuple  # host copies of one call's outputs: an array per tensor output, None for anything else


def as_tuple(value: Any) -> tuple:
    """``value`` as a tuple: a tuple as it is, a list's items, anything else alone."""
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


def differentiable_inputs(inputs: Sequence[Any]) -> list[tuple[int, Tensor]]:
    """``(position, tensor)`` for every input tensor that requires grad, in order."""
    return [(i, x) for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]


def differentiable_outputs(outputs: Sequence[Any]) -> tuple[Tensor, ...]:
    """The outputs that are tensors requiring grad, in order."""
    return tuple(o for o in outputs if isinstance(o, Tensor) and o.requires_grad)


def host(tensor: Tensor) -> np.ndarray:
    """A host copy of ``tensor``'s values, of its shape and dtype."""
    return np.array(dispatch.to_device(tensor.detach()._data, "cpu"), copy=True)


def on_device_of(values: np.ndarray, like: Tensor) -> Tensor:
    """Host ``values`` as a tensor on ``like``'s device."""
    return Tensor(dispatch.to_device(np.asarray(values, order="C"), dispatch.device_type_of(like._data)))


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    # float16 and bfloat16 differences are taken in float32: numpy has no bfloat16 arithmetic
    return dtype if dtype.kind == "f" and dtype.itemsize >= 4 else np.dtype(np.float32)


class _Perturbation:
    """Writes values into an input's memory in place, past its version counter, and puts the
    original values back."""

    def __init__(self, tensor: Tensor) -> None:
        self.array = tensor._data
        self.original = host(tensor)

    def shift_element(self, index: tuple[int, ...], delta: float) -> None:
        if isinstance(self.array, np.ndarray):
            self.array[index] = self.original[index] + delta
        else:
            values = self.original.copy()
            values[index] += delta
            self._write(values)

    def shift_all(self, delta: np.ndarray) -> None:
        self._write((self.original + delta).astype(self.original.dtype))

    def restore(self) -> None:
        self._write(self.original)

    def _write(self, values: np.ndarray) -> None:
        if isinstance(self.array, np.ndarray):
            self.array[...] = values
        else:
            dispatch.copy_into(self.array, dispatch.to_device(values, dispatch.device_type_of(self.array)))


def _evaluate(func: Callable[..., Any], inputs: Sequence[Any]) -> Values:
    return tuple(host(o) if isinstance(o, Tensor) else None for o in as_tuple(func(*inputs)))


def _central_difference(minus: Values, plus: Values, eps: float, where: str) -> list[np.ndarray | None]:
    """Per output, ``(plus - minus) / (2 eps)`` flattened, for floating outputs (None for others).

    Raises:
        AssertionError: the two calls returned outputs of different shapes or dtypes.
    """
    differences: list[np.ndarray | None] = []
    for a, b in zip(minus, plus):
        if a is None or b is None:
            differences.append(None)
            continue
        if a.shape != b.shape:
            raise AssertionError(f"Expected `func` to return outputs with the same shape when inputs are perturbed "
                                 f"{where}by {eps}, but got: shapes {a.shape} and {b.shape}.")
        if a.dtype != b.dtype:
            raise AssertionError(f"Expected `func` to return outputs with the same dtype when inputs are perturbed "
                                 f"{where}by {eps}, but got: dtypes {a.dtype} and {b.dtype}.")
        if not is_floating(a.dtype):
            differences.append(None)
            continue
        dtype = _compute_dtype(a.dtype)
        differences.append(((b.astype(dtype) - a.astype(dtype)) / dtype.type(2 * eps)).reshape(-1))
    return differences


def numerical_jacobians(func: Callable[..., Any], inputs: Sequence[Any], position: int, eps: float
                        ) -> list[np.ndarray | None]:
    """The Jacobians of every output of ``func(*inputs)`` with respect to ``inputs[position]``, by
    central differences of step ``eps`` on one element at a time: per output, an array of shape
    (input elements, output elements), None for an output that is not a floating tensor."""
    perturbation = _Perturbation(inputs[position])
    shape = perturbation.original.shape
    columns: list[list[np.ndarray | None]] = []
    try:
        for flat in range(perturbation.original.size):
            index = tuple(int(i) for i in np.unravel_index(flat, shape))
            perturbation.shift_element(index, -eps)
            minus = _evaluate(func, inputs)
            perturbation.shift_element(index, eps)
            plus = _evaluate(func, inputs)
            perturbation.restore()
            columns.append(_central_difference(minus, plus, eps, f"on index {index} "))
    finally:
        perturbation.restore()
    if not columns:  # an input without elements
        outputs = _evaluate(func, inputs)
        return [None if a is None else np.zeros((0, a.size), _compute_dtype(a.dtype)) for a in outputs]
    return [None if column is None else np.stack([c[k] for c in columns])
            for k, column in enumerate(columns[0])]


def directional_derivatives(func: Callable[..., Any], inputs: Sequence[Any], position: int, direction: np.ndarray,
                            eps: float) -> list[np.ndarray | None]:
    """``J u`` for every output of ``func(*inputs)``, ``J`` its Jacobian with respect to
    ``inputs[position]`` and ``u`` the flat ``direction``, by central differences along it (step
    ``eps``); None for an output that is not a floating tensor."""
    perturbation = _Perturbation(inputs[position])
    step = (eps * direction).reshape(perturbation.original.shape)
    try:
        perturbation.shift_all(-step)
        minus = _evaluate(func, inputs)
        perturbation.shift_all(step)
        plus = _evaluate(func, inputs)
    finally:
        perturbation.restore()
    return _central_difference(minus, plus, eps, "")


def vjp(output: Tensor, inputs: Sequence[Tensor], grad_output: Tensor, *, keep_graph: bool = True
        ) -> tuple[Tensor | None, ...]:
    """The gradients of ``output`` with respect to ``inputs`` for ``grad_output`` (None where one
    is not used), keeping the graph for more passes."""
    return grad(output, list(inputs), grad_output, retain_graph=keep_graph, allow_unused=True)


def analytical_vjps(output: Tensor, inputs: Sequence[Tensor], grad_outputs: Sequence[np.ndarray]
                    ) -> list[list[np.ndarray | None]]:
    """Per input, the host gradient of ``output`` for each of the host ``grad_outputs`` (shaped as
    ``output``), None where the input is not used; the graph is kept."""
    results: list[list[np.ndarray | None]] = [[] for _ in inputs]
    for values in grad_outputs:
        grads = vjp(output, inputs, on_device_of(values.astype(output.dtype), output))
        for per_input, g in zip(results, grads):
            per_input.append(None if g is None else host(g))
    return results


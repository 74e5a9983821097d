"""Reference checks shared by the tests: one helper runs an op on zgrad and on a reference.

An op under test is a lambda ``fn(lib, *inputs)`` written once against the API both libraries
share (``lib`` is ``zgrad`` or ``torch``; ``lib.nn.functional`` exists in both). The helpers build
random inputs of the given shapes, run the lambda, backpropagate one random upstream gradient and
compare the output and every input's gradient with

- PyTorch (:func:`check_torch`), when it is installed -- the test is skipped otherwise;
- float64 central finite differences of zgrad's own forward (:func:`check_finite_differences`),
  always.

:func:`check` does both, for the one-off cases written inline in a test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pytest

import zgrad

try:  # torch is the reference where installed; CI does not install it
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

__all__ = [
    "Case", "case", "central_differences", "check", "check_finite_differences", "check_torch", "numerical_gradients",
    "random_inputs", "require_torch", "torch", "TOLERANCE",
]

# Forward and gradient tolerances against PyTorch, by dtype. Kernels differ from PyTorch's in
# summation order and in their exp/log/tanh implementations by a few ulp.
TOLERANCE = {
    np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6),
    np.dtype(np.float64): dict(rtol=1e-10, atol=1e-12),
}
# Central differences with step 1e-6 in float64 are good to roughly 1e-8 relative.
FD_STEP = 1e-6
FD_TOLERANCE = dict(rtol=1e-6, atol=1e-7)

Domain = tuple[float, float]


@dataclass(frozen=True)
class Case:
    """An op to check: ``fn(lib, *inputs)`` on inputs of ``shapes`` drawn uniformly from ``domain``."""

    name: str
    fn: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...]
    domain: Domain = (-2.0, 2.0)

    def __str__(self) -> str:
        return self.name


def case(name: str, fn: Callable[..., Any], *shapes: Sequence[int], domain: Domain = (-2.0, 2.0)) -> Any:
    """A ``pytest.param`` holding a :class:`Case`, identified by ``name`` in test ids."""
    return pytest.param(Case(name, fn, tuple(tuple(s) for s in shapes), domain), id=name)


def error_of(fn: Callable[[Any], Any], lib: Any) -> tuple[str, str] | None:
    """(type name, message) of what ``fn(lib)`` raises, or None; torch's ``torch.Size([a, b])`` is
    written as zgrad's ``zgrad.Size([a, b])``, so that one library's error compares with the other's."""
    try:
        fn(lib)
    except Exception as error:  # noqa: BLE001 - the error itself is what is compared
        return type(error).__name__, str(error).replace("torch.Size(", "zgrad.Size(")
    return None


def require_torch() -> Any:
    """The torch module, or skip the calling test when it is not installed."""
    return pytest.importorskip("torch")


def random_inputs(shapes: Sequence[Sequence[int]], dtype: Any, domain: Domain, seed: int) -> list[np.ndarray]:
    """One array per shape, uniform in ``domain``, reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    low, high = domain
    return [rng.uniform(low, high, size=tuple(s)).astype(dtype) for s in shapes]


def _upstream(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    """The gradient fed into backward: random, so every output element matters."""
    return np.random.default_rng(seed + 1000).standard_normal(shape).astype(dtype)


def _run_zgrad(fn: Callable[..., Any], arrays: Sequence[np.ndarray], seed: int):
    inputs = [zgrad.tensor(a, requires_grad=True) for a in arrays]
    out = fn(zgrad, *inputs)
    assert isinstance(out, zgrad.Tensor), f"expected a Tensor, got {type(out).__name__}"
    upstream = _upstream(out.shape, out.dtype, seed)
    out.backward(zgrad.tensor(upstream))
    grads = [None if t.grad is None else t.grad.numpy() for t in inputs]
    return np.asarray(out.numpy()), grads, upstream


def _run_torch(fn: Callable[..., Any], arrays: Sequence[np.ndarray], upstream: np.ndarray):
    inputs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(torch, *inputs)
    out.backward(torch.tensor(upstream))
    grads = [None if t.grad is None else t.grad.numpy() for t in inputs]
    return out.detach().numpy(), grads


def check_torch(fn: Callable[..., Any], shapes: Sequence[Sequence[int]], *, dtype: Any = np.float32,
                domain: Domain = (-2.0, 2.0), seed: int = 0, rtol: float | None = None,
                atol: float | None = None) -> None:
    """Assert that zgrad and PyTorch agree on ``fn``'s output (value, shape, dtype) and gradients.

    Skips the calling test when torch is not installed.
    """
    require_torch()
    dtype = np.dtype(dtype)
    tol = dict(TOLERANCE[dtype])
    tol.update({k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None})
    arrays = random_inputs(shapes, dtype, domain, seed)
    out, grads, upstream = _run_zgrad(fn, arrays, seed)
    ref_out, ref_grads = _run_torch(fn, arrays, upstream)
    assert out.shape == ref_out.shape, f"output shape {out.shape}, torch gives {ref_out.shape}"
    assert out.dtype == ref_out.dtype, f"output dtype {out.dtype}, torch gives {ref_out.dtype}"
    np.testing.assert_allclose(out, ref_out, err_msg="forward differs from torch", **tol)
    for i, (grad, ref) in enumerate(zip(grads, ref_grads)):
        assert (grad is None) == (ref is None), f"input {i}: zgrad grad {grad is not None}, torch {ref is not None}"
        if grad is not None:
            assert grad.dtype == arrays[i].dtype, f"input {i}: grad dtype {grad.dtype} != input dtype {arrays[i].dtype}"
            assert grad.shape == arrays[i].shape
            np.testing.assert_allclose(grad, ref, err_msg=f"gradient of input {i} differs from torch", **tol)


def central_differences(objective: Callable[[], float], arrays: Sequence[np.ndarray],
                        step: float = FD_STEP) -> list[np.ndarray]:
    """d objective / d array for each of ``arrays`` by central differences: ``objective()`` reads
    the arrays, which are changed in place one element at a time (and restored)."""
    grads = []
    for a in arrays:
        grad = np.zeros_like(a)
        flat, gflat = a.reshape(-1), grad.reshape(-1)
        for j in range(flat.size):
            saved = flat[j]
            flat[j] = saved + step
            plus = objective()
            flat[j] = saved - step
            minus = objective()
            flat[j] = saved
            gflat[j] = (plus - minus) / (2 * step)
        grads.append(grad)
    return grads


def numerical_gradients(fn: Callable[..., Any], arrays: Sequence[np.ndarray], upstream: np.ndarray,
                        step: float = FD_STEP) -> list[np.ndarray]:
    """Central differences of ``sum(fn(zgrad, *arrays) * upstream)`` with respect to each array."""
    values = [a.astype(np.float64).copy() for a in arrays]

    def objective() -> float:
        with zgrad.no_grad():
            out = fn(zgrad, *(zgrad.tensor(v) for v in values))
        return float(np.sum(np.asarray(out.numpy(), dtype=np.float64) * upstream))

    return central_differences(objective, values, step)


def check_finite_differences(fn: Callable[..., Any], shapes: Sequence[Sequence[int]], *,
                             domain: Domain = (-2.0, 2.0), seed: int = 0, rtol: float = FD_TOLERANCE["rtol"],
                             atol: float = FD_TOLERANCE["atol"]) -> None:
    """Assert that zgrad's float64 gradients of ``fn`` match central finite differences."""
    arrays = random_inputs(shapes, np.float64, domain, seed)
    out, grads, upstream = _run_zgrad(fn, arrays, seed)
    assert out.dtype == np.float64, f"float64 inputs gave a {out.dtype} output"
    expected = numerical_gradients(fn, arrays, upstream)
    for i, (grad, ref) in enumerate(zip(grads, expected)):
        if grad is None:
            assert not np.any(ref), f"input {i} got no gradient but finite differences give {ref}"
            continue
        assert grad.shape == ref.shape and grad.dtype == np.float64
        np.testing.assert_allclose(grad, ref, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i} differs from finite differences")


def check(fn: Callable[..., Any], shapes: Sequence[Sequence[int]], *, domain: Domain = (-2.0, 2.0),
          seed: int = 0) -> None:
    """Check ``fn`` against finite differences (always) and PyTorch in float32 and float64 (if installed)."""
    check_finite_differences(fn, shapes, domain=domain, seed=seed)
    if torch is not None:
        for dtype in (np.float32, np.float64):
            check_torch(fn, shapes, dtype=dtype, domain=domain, seed=seed)

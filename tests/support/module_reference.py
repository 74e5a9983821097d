"""Comparing a zgrad module with PyTorch's on the same weights.

:func:`check_module` builds the module in both libraries (``make(lib)``), moves torch's state dict
into zgrad's module (and zgrad's back into a fresh torch module, so a state dict travels both
ways), runs ``call(lib, module, *inputs)`` on the same float64 inputs, backpropagates one random
upstream gradient through every output, and compares the outputs, the inputs' gradients and every
parameter's gradient, by name.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import zgrad
from helpers import TOLERANCE, require_torch

__all__ = ["check_module", "copy_state", "state_from_torch", "state_to_torch"]

TOL64 = TOLERANCE[np.dtype(np.float64)]


def state_from_torch(module: Any) -> dict[str, Any]:
    """torch ``module``'s state dict as zgrad tensors."""
    return {name: zgrad.tensor(value.detach().numpy()) for name, value in module.state_dict().items()}


def state_to_torch(module: Any) -> dict[str, Any]:
    """zgrad ``module``'s state dict as torch tensors."""
    torch = require_torch()
    return {name: torch.tensor(np.asarray(value.numpy())) for name, value in module.state_dict().items()}


def copy_state(torch_module: Any, zgrad_module: Any) -> None:
    """Load torch's weights into ``zgrad_module``; strict, so every key must match."""
    zgrad_module.load_state_dict(state_from_torch(torch_module))


def _outputs(result: Any) -> list[Any]:
    return [r for r in (result if isinstance(result, tuple) else (result,)) if r is not None]


def _run(lib: Any, module: Any, call: Callable[..., Any], arrays: Sequence[np.ndarray], seed: int):
    inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
    outputs = _outputs(call(lib, module, *inputs))
    rng = np.random.default_rng(seed + 1000)
    loss = None
    for out in outputs:
        term = (out * lib.tensor(rng.standard_normal(tuple(out.shape)))).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    values = [np.asarray(out.detach().numpy()) for out in outputs]
    input_grads = [None if t.grad is None else np.asarray(t.grad.numpy()) for t in inputs]
    param_grads = {name: None if p.grad is None else np.asarray(p.grad.numpy())
                   for name, p in module.named_parameters()}
    return values, input_grads, param_grads


def check_module(make: Callable[[Any], Any], call: Callable[..., Any], arrays: Sequence[np.ndarray], *,
                 seed: int = 0, train: bool = True, rtol: float = TOL64["rtol"], atol: float = TOL64["atol"]) -> Any:
    """Assert zgrad's ``make(zgrad)`` computes what torch's ``make(torch)`` does on torch's weights.

    Args:
        make: builds the module in float64 from ``lib`` (``zgrad`` or ``torch``).
        call: ``call(lib, module, *inputs)`` returns a tensor or a tuple of tensors (None skipped).
        arrays: the float64 inputs; each gets a gradient.
        train: the modules' mode.

    Returns:
        The zgrad module (after the backward pass).
    """
    torch = require_torch()
    torch_module, zgrad_module = make(torch), make(zgrad)
    assert list(zgrad_module.state_dict()) == list(torch_module.state_dict()), "state_dict keys differ from torch's"
    copy_state(torch_module, zgrad_module)
    returned = make(torch)
    returned.load_state_dict(state_to_torch(zgrad_module))
    for name, value in returned.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), torch_module.state_dict()[name].numpy(), err_msg=name)
    torch_module.train(train)
    zgrad_module.train(train)
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    expected, expected_inputs, expected_params = _run(torch, torch_module, call, arrays, seed)
    got, got_inputs, got_params = _run(zgrad, zgrad_module, call, arrays, seed)
    assert len(got) == len(expected), f"{len(got)} outputs, torch gives {len(expected)}"
    for i, (value, reference) in enumerate(zip(got, expected)):
        assert value.shape == reference.shape, f"output {i}: shape {value.shape}, torch gives {reference.shape}"
        np.testing.assert_allclose(value, reference, rtol=rtol, atol=atol, err_msg=f"output {i} differs from torch")
    for i, (grad, reference) in enumerate(zip(got_inputs, expected_inputs)):
        assert (grad is None) == (reference is None), f"input {i}: grad {grad is not None}, torch {reference is not None}"
        if grad is not None:
            np.testing.assert_allclose(grad, reference, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")
    assert got_params.keys() == expected_params.keys()
    for name, grad in got_params.items():
        reference = expected_params[name]
        assert (grad is None) == (reference is None), f"{name}: grad {grad is not None}, torch {reference is not None}"
        if grad is not None:
            np.testing.assert_allclose(grad, reference, rtol=rtol, atol=atol, err_msg=f"gradient of {name}")
    return zgrad_module

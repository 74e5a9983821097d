"""One check for the indexing, sorting and counting tests: run ``fn(lib, *inputs)`` on zgrad and
on PyTorch with the same inputs and compare every output (a tensor, or a tuple of tensors such as
``sort``'s) in value, dtype and shape; for floating inputs, also the gradients of a weighted sum
of the floating outputs. Inputs are numpy arrays; floating ones require grad.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

import numpy as np

import zgrad
from helpers import TOLERANCE, require_torch

__all__ = ["same_as_torch"]


def _outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple) else [out]


def _numpy(t: Any) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy() if hasattr(t, "detach") else t.numpy())


def same_as_torch(fn: Callable[..., Any], *arrays: np.ndarray, grad: bool = True) -> None:
    """Assert that zgrad and PyTorch agree on ``fn``'s outputs and (``grad``) input gradients."""
    torch = require_torch()
    z_inputs = [zgrad.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    t_inputs = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    z_out, t_out = _outputs(fn(zgrad, *z_inputs)), _outputs(fn(torch, *t_inputs))
    assert len(z_out) == len(t_out), f"{len(z_out)} outputs, torch gives {len(t_out)}"
    rng = np.random.default_rng(3)
    z_loss, t_loss = [], []
    for i, (z, t) in enumerate(zip(z_out, t_out)):
        z_array, t_array = _numpy(z), _numpy(t)
        assert z_array.shape == t_array.shape, f"output {i}: shape {z_array.shape}, torch gives {t_array.shape}"
        assert z_array.dtype == t_array.dtype, f"output {i}: dtype {z_array.dtype}, torch gives {t_array.dtype}"
        tol = TOLERANCE.get(z_array.dtype, dict(rtol=0, atol=0))
        np.testing.assert_allclose(z_array, t_array, err_msg=f"output {i} differs from torch", **tol)
        if grad and t.requires_grad:
            weights = rng.standard_normal(t_array.shape).astype(t_array.dtype)
            z_loss.append((z * zgrad.tensor(weights)).sum())
            t_loss.append((t * torch.tensor(weights)).sum())
    if not t_loss:
        return
    sum(z_loss).backward()
    sum(t_loss).backward()
    for i, (z, t) in enumerate(zip(z_inputs, t_inputs)):
        assert (z.grad is None) == (t.grad is None), f"input {i}: zgrad grad {z.grad is not None}, torch {t.grad is not None}"
        if t.grad is not None:
            np.testing.assert_allclose(z.grad.numpy(), t.grad.numpy(), err_msg=f"gradient of input {i} differs",
                                       **TOLERANCE[np.dtype(arrays[i].dtype)])

"""Normalization layers take a float16 or bfloat16 input with float32 parameters, as PyTorch's CPU
kernels do (what a half model's norms meet under autocast and after ``.half()`` of the
activations only): the result keeps the input's dtype, each gradient its tensor's; other mixes
are refused."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import torch

CASES = {
    "layer_norm": lambda F, x, w, b, wc, bc: F.layer_norm(x, (8,), w, b),
    "rms_norm": lambda F, x, w, b, wc, bc: F.rms_norm(x, (8,), w),
    "group_norm": lambda F, x, w, b, wc, bc: F.group_norm(x, 2, wc, bc),
    "batch_norm": lambda F, x, w, b, wc, bc: F.batch_norm(x, None, None, wc, bc, training=True),
}


def _run(lib, name: str, dtype: str, arrays: list[np.ndarray]):
    x = lib.tensor(arrays[0]).to(getattr(lib, dtype)).requires_grad_()
    params = [lib.tensor(a, requires_grad=True) for a in arrays[1:]]
    y = CASES[name](lib.nn.functional, x, *params)
    cotangent = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32)
    (y.float() * lib.tensor(cotangent)).sum().backward()  # not sum(y^2): a constant per group under normalization
    return y, x, [p for p in params if p.grad is not None]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(CASES))
def test_half_input_with_float32_parameters_as_torch(name: str, dtype: str) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((4, 6, 8), (8,), (8,), (6,), (6,))]
    y_t, x_t, params_t = _run(torch, name, dtype, arrays)
    y_z, x_z, params_z = _run(zgrad, name, dtype, arrays)
    assert y_z.dtype == getattr(zgrad, dtype) and x_z.grad.dtype == x_z.dtype
    assert [p.grad.dtype for p in params_z] == [zgrad.float32] * len(params_t)
    ulp = float(zgrad.finfo(y_z.dtype).eps)
    scale = max(1.0, float(y_t.float().abs().max()))
    np.testing.assert_allclose(y_z.float().numpy(), y_t.float().detach().numpy(), atol=4 * ulp * scale, rtol=0)
    grad_scale = float(x_t.grad.float().abs().max())
    np.testing.assert_allclose(x_z.grad.float().numpy(), x_t.grad.float().numpy(), atol=8 * ulp * grad_scale, rtol=0)
    for p_z, p_t in zip(params_z, params_t):
        np.testing.assert_allclose(p_z.grad.numpy(), p_t.grad.numpy(), atol=8 * ulp * float(p_t.grad.abs().max()),
                                   rtol=0)


@pytest.mark.parametrize("x_dtype, w_dtype", [("float32", "float64"), ("float32", "float16"), ("float16", "bfloat16"),
                                              ("float16", "float64")])
def test_other_mixes_are_refused(x_dtype: str, w_dtype: str) -> None:
    x = zgrad.ones(2, 8, dtype=getattr(zgrad, x_dtype))
    w = zgrad.ones(8, dtype=getattr(zgrad, w_dtype))
    with pytest.raises(RuntimeError, match=rf"Input type \({x_dtype}\) and weight type \({w_dtype}\) should be the same"):
        zgrad.nn.functional.layer_norm(x, (8,), w)

"""``zgrad.amp.custom_fwd`` / ``custom_bwd``: the dtypes a custom autograd Function's forward and
backward see under CPU autocast (bfloat16), with and without ``cast_inputs``, the same as
PyTorch's; the state recorded on ctx; and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import require_torch


def _mm_function(lib, cast_inputs, seen):
    """A custom ``mm`` Function of ``lib`` (zgrad or torch) that records the dtypes it sees."""

    class MM(lib.autograd.Function):
        @staticmethod
        @lib.amp.custom_fwd(device_type="cpu", cast_inputs=cast_inputs)
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            out = a.mm(b)
            seen["forward"] = (str(a.dtype), str(b.dtype), str(out.dtype), lib.is_autocast_enabled("cpu"))
            return out

        @staticmethod
        @lib.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            grad_a, grad_b = grad.mm(b.t()), a.t().mm(grad)
            seen["backward"] = (str(grad.dtype), str(grad_a.dtype), lib.is_autocast_enabled("cpu"))
            return grad_a, grad_b

    return MM


def _run(lib, cast_inputs, autocast_on):
    seen = {}
    rng = np.random.default_rng(0)
    a = lib.tensor(rng.normal(size=(3, 4)).astype(np.float32), requires_grad=True)
    b = lib.tensor(rng.normal(size=(4, 2)).astype(np.float32), requires_grad=True)
    with lib.autocast("cpu", dtype=lib.bfloat16, enabled=autocast_on):
        out = _mm_function(lib, cast_inputs, seen).apply(a, b)
    out.float().sum().backward()
    seen["out"] = str(out.dtype)
    seen["grads"] = (str(a.grad.dtype), str(b.grad.dtype))
    return {k: tuple(s.removeprefix("torch.") if isinstance(s, str) else s for s in v) if isinstance(v, tuple)
            else v.removeprefix("torch.") for k, v in seen.items()}


CASES = [(None, True), ("float32", True), (None, False), ("float32", False), ("bfloat16", True)]


@pytest.mark.parametrize("cast_inputs, autocast_on", CASES)
def test_custom_fwd_bwd_dtypes(cast_inputs, autocast_on):
    seen = _run(zgrad, None if cast_inputs is None else getattr(zgrad, cast_inputs), autocast_on)
    if autocast_on and cast_inputs is None:  # forward's ops autocast; backward runs under the same state
        assert seen["forward"] == ("float32", "float32", "bfloat16", True)
        assert seen["backward"] == ("bfloat16", "bfloat16", True)
    elif autocast_on:  # inputs cast, forward and backward with autocast off
        assert seen["forward"] == (cast_inputs, cast_inputs, cast_inputs, False)
        assert seen["backward"][2] is False
    else:
        assert seen["forward"] == ("float32", "float32", "float32", False)
        assert seen["backward"] == ("float32", "float32", False)


@pytest.mark.torch
@pytest.mark.parametrize("cast_inputs, autocast_on", CASES)
def test_custom_fwd_bwd_match_torch(cast_inputs, autocast_on):
    torch = require_torch()
    ours = _run(zgrad, None if cast_inputs is None else getattr(zgrad, cast_inputs), autocast_on)
    theirs = _run(torch, None if cast_inputs is None else getattr(torch, cast_inputs), autocast_on)
    assert ours == theirs


def test_custom_fwd_records_state_on_ctx_and_casts_nested_inputs():
    class Ctx:
        pass

    ctx = Ctx()
    seen = {}

    @zgrad.amp.custom_fwd(device_type="cpu", cast_inputs=zgrad.float16)
    def forward(ctx, xs, options, index, double):
        seen.update(xs=[x.dtype for x in xs], option=options["w"].dtype, index=index.dtype, double=double.dtype)

    x = zgrad.ones(2)
    with zgrad.autocast("cpu"):
        forward(ctx, [x, x], {"w": x}, zgrad.arange(2), zgrad.ones(2, dtype=zgrad.float64))
    assert ctx._fwd_used_autocast is False and ctx._dtype == zgrad.bfloat16
    assert seen == {"xs": [zgrad.float16] * 2, "option": zgrad.float16, "index": zgrad.int64, "double": zgrad.float64}


def test_custom_fwd_bwd_errors():
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        zgrad.amp.custom_fwd(device_type=None)
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        zgrad.amp.custom_bwd(lambda ctx: None, device_type=0)
    with pytest.raises(TypeError):
        zgrad.amp.custom_fwd(lambda ctx: None)  # device_type is required, as in PyTorch

"""``zgrad.autocast``: nesting, the decorator, ``enabled=False``, per-thread state, the weight-cast
cache, gradients through casts, the errors and warnings (PyTorch's), the CUDA lists in the
simulator, and that every op the lists name is one zgrad marks."""

from __future__ import annotations

import importlib
import threading
import warnings

import numpy as np
import pytest

import zgrad
import zgrad.nn.functional as F
from helpers import require_torch
from zgrad import nn
from zgrad.kernels import dispatch
from zgrad.ops import autocast_lists

HALF = zgrad.float16
FLOAT = zgrad.float32


def _linear_inputs() -> tuple[zgrad.Tensor, zgrad.Tensor]:
    zgrad.manual_seed(0)
    return zgrad.randn(4, 8), zgrad.randn(3, 8, requires_grad=True)


def test_the_region_casts_and_restores_on_exit():
    x, w = _linear_inputs()
    assert not zgrad.is_autocast_enabled("cpu")
    with zgrad.autocast("cpu", dtype=HALF) as region:
        assert isinstance(region, zgrad.amp.autocast)
        assert zgrad.is_autocast_enabled("cpu") and not zgrad.is_autocast_enabled("cuda")
        assert zgrad.get_autocast_dtype("cpu") == HALF
        assert F.linear(x, w).dtype == HALF
        assert F.mse_loss(x, x).dtype == FLOAT
    assert not zgrad.is_autocast_enabled("cpu")
    assert F.linear(x, w).dtype == FLOAT


def test_nesting_restores_each_outer_state():
    x, w = _linear_inputs()
    with zgrad.autocast("cpu", dtype=HALF):
        with zgrad.autocast("cpu", enabled=False):
            assert not zgrad.is_autocast_enabled("cpu")
            assert F.linear(x, w).dtype == FLOAT
            with zgrad.autocast("cpu", dtype=HALF, cache_enabled=False):
                assert not zgrad.is_autocast_cache_enabled()
                assert F.linear(x, w).dtype == HALF
            assert zgrad.is_autocast_cache_enabled()
        assert zgrad.is_autocast_enabled("cpu") and F.linear(x, w).dtype == HALF
    assert not zgrad.is_autocast_enabled("cpu")


def test_a_region_restores_its_state_when_the_block_raises():
    with pytest.raises(KeyError):
        with zgrad.autocast("cpu", dtype=HALF):
            raise KeyError("out")
    assert not zgrad.is_autocast_enabled("cpu")


def test_decorator_runs_the_function_in_a_region_each_call():
    x, w = _linear_inputs()

    @zgrad.autocast("cpu", dtype=HALF)
    def forward(a, b):
        """Doc kept."""
        assert zgrad.is_autocast_enabled("cpu")
        return F.linear(a, b)

    assert forward(x, w).dtype == HALF and forward(x, w).dtype == HALF
    assert forward.__doc__ == "Doc kept." and forward.__name__ == "forward"
    assert not zgrad.is_autocast_enabled("cpu")


def test_the_decorator_refuses_what_is_not_callable():
    with pytest.raises(TypeError, match=r"autocast\(\)\(func\) requires a callable, but got int"):
        zgrad.autocast("cpu")(3)


def test_the_state_is_per_thread():
    seen = {}

    def other_thread():
        x, w = _linear_inputs()
        seen["enabled"] = zgrad.is_autocast_enabled("cpu")
        seen["dtype"] = F.linear(x, w).dtype
        with zgrad.autocast("cpu", dtype=HALF):
            seen["inner"] = F.linear(x, w).dtype

    with zgrad.autocast("cpu", dtype=HALF):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(timeout=60)
        assert zgrad.is_autocast_enabled("cpu")
    assert seen == {"enabled": False, "dtype": FLOAT, "inner": HALF}


def test_float64_and_integer_inputs_are_never_cast():
    with zgrad.autocast("cpu", dtype=HALF):
        assert zgrad.mm(zgrad.ones(2, 2, dtype=zgrad.float64), zgrad.ones(2, 2, dtype=zgrad.float64)).dtype == zgrad.float64
        assert F.cross_entropy(zgrad.randn(3, 4), zgrad.tensor([0, 1, 2])).dtype == FLOAT


def test_explicit_dtype_is_kept_by_float32_ops_on_cuda_lists():
    assert autocast_lists.policy_of("cuda", "sum") == autocast_lists.FLOAT32
    assert autocast_lists.policy_of("cpu", "sum") is None


def test_the_weight_cast_is_made_once_per_region():
    x, w = _linear_inputs()
    with zgrad.autocast("cpu", dtype=HALF):
        first, second = F.linear(x, w), F.linear(x, w)
        assert first.grad_fn.next_edges[1][0] is second.grad_fn.next_edges[1][0]
        not_a_leaf = w * 1.0
        assert F.linear(x, not_a_leaf).grad_fn.next_edges[1][0] is not F.linear(x, not_a_leaf).grad_fn.next_edges[1][0]
    with zgrad.autocast("cpu", dtype=HALF):  # a new region casts anew
        assert F.linear(x, w).grad_fn.next_edges[1][0] is not first.grad_fn.next_edges[1][0]
    with zgrad.autocast("cpu", dtype=HALF, cache_enabled=False):
        assert F.linear(x, w).grad_fn.next_edges[1][0] is not F.linear(x, w).grad_fn.next_edges[1][0]


def test_a_cast_under_no_grad_is_not_cached_for_later_use_with_grad():
    x, w = _linear_inputs()
    with zgrad.autocast("cpu", dtype=HALF):
        with zgrad.no_grad():
            F.linear(x, w)
        y = F.linear(x, w)
    assert y.requires_grad
    y.float().sum().backward()
    assert w.grad is not None and w.grad.dtype == FLOAT


@pytest.mark.torch
def test_gradients_flow_back_to_each_inputs_dtype_as_torch():
    torch = require_torch()
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((4, 8), (3, 8), (3,))]
    zx, zw, zb = (zgrad.tensor(a, requires_grad=True) for a in arrays)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in arrays)
    with zgrad.autocast("cpu", dtype=HALF):
        z_out = F.mse_loss(F.linear(zx, zw, zb), zgrad.zeros(4, 3))
    with torch.autocast("cpu", dtype=torch.float16):
        t_out = torch.nn.functional.mse_loss(torch.nn.functional.linear(tx, tw, tb), torch.zeros(4, 3))
    z_out.backward()
    t_out.backward()
    assert z_out.dtype == FLOAT and str(t_out.dtype) == "torch.float32"
    np.testing.assert_allclose(z_out.item(), t_out.item(), rtol=1e-3)
    for z, t in ((zx, tx), (zw, tw), (zb, tb)):
        assert z.grad.dtype == FLOAT
        np.testing.assert_allclose(z.grad.numpy(), t.grad.numpy(), rtol=2e-3, atol=2e-3)


def test_a_model_trains_in_the_region_and_its_parameters_stay_float32():
    zgrad.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4))  # no activation: float16 kernels of those come later
    opt = zgrad.optim.SGD(model.parameters(), lr=0.1)
    x, target = zgrad.randn(32, 8), zgrad.randn(32, 4)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        with zgrad.autocast("cpu", dtype=HALF):
            out = model(x)
            loss = F.mse_loss(out, target)
        assert out.dtype == HALF and loss.dtype == FLOAT
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(p.dtype == FLOAT and p.grad.dtype == FLOAT for p in model.parameters())
    assert losses[-1] < losses[0]


def test_unsupported_device_types_and_dtypes():
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        zgrad.autocast(zgrad.device("cpu"))
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'mps'"):
        zgrad.autocast("mps")
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'xla'"):
        zgrad.is_autocast_enabled("xla")
    assert zgrad.amp.is_autocast_available("cpu") and not zgrad.amp.is_autocast_available("mps")
    with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported. Disabling"):
        region = zgrad.autocast("cpu", dtype=zgrad.float64)
    with region:
        assert not zgrad.is_autocast_enabled("cpu")


def test_cat_of_two_16_bit_types_is_refused_as_in_torch():
    with zgrad.autocast("cpu", dtype=HALF):
        assert zgrad.cat([zgrad.ones(2, dtype=HALF), zgrad.ones(2)]).dtype == FLOAT
        assert zgrad.stack([zgrad.ones(2, dtype=HALF), zgrad.ones(2, dtype=HALF)]).dtype == HALF
    with zgrad.autocast("cpu", dtype=HALF), pytest.raises(RuntimeError, match="at::autocast::prioritize"):
        zgrad.cat([zgrad.ones(2, dtype=HALF), zgrad.ones(2, dtype=zgrad.bfloat16)])


def test_every_listed_op_is_a_marked_zgrad_function():
    marked = set()
    for module_name in ("zgrad.ops.functions", "zgrad.ops.products", "zgrad.ops.contraction", "zgrad.ops.conv",
                        "zgrad.ops.conv_transpose", "zgrad.ops.activation", "zgrad.ops.norm", "zgrad.ops.attention",
                        "zgrad.ops.unary_math", "zgrad.ops.vector", "zgrad.ops.loss_functions",
                        "zgrad.ops.loss_pointwise", "zgrad.ops.reduce", "zgrad.ops.reduce_scan",
                        "zgrad.ops.vector_norm", "zgrad.linalg.norms", "zgrad.ops.resample", "zgrad.ops.binary_math",
                        "zgrad.ops.indexing", "zgrad.ops.scattering", "zgrad.ops.reduce_order",
                        "zgrad.ops.triangular", "zgrad.linalg.products", "zgrad.linalg.matrix_functions",
                        "zgrad.linalg.solvers", "zgrad.linalg.decompositions", "zgrad.ops.three_dimensional",
                        "zgrad.ops.loss_ctc", "zgrad.ops.grid_sample"):
        module = importlib.import_module(module_name)
        marked |= {fn.autocast_op_name for fn in vars(module).values() if hasattr(fn, "autocast_op_name")}
    listed = set(autocast_lists.POLICIES["cpu"]) | set(autocast_lists.POLICIES["cuda"])
    assert listed <= marked, f"listed but not marked: {sorted(listed - marked)}"


def test_cpu_default_dtype_is_bfloat16():
    x, w = _linear_inputs()
    assert zgrad.get_autocast_dtype("cpu") == zgrad.bfloat16
    with zgrad.autocast("cpu"):
        assert F.linear(x, w).dtype == zgrad.bfloat16


def test_cuda_default_dtype_is_float16():
    assert zgrad.get_autocast_dtype("cuda") == HALF


@pytest.mark.skipif(not dispatch.backend_available("cuda"), reason="no CUDA backend (nor the simulator)")
def test_cuda_lists_in_the_simulator():
    x, w = zgrad.randn(4, 8, device="cuda"), zgrad.randn(3, 8, device="cuda", requires_grad=True)
    with zgrad.autocast("cuda"):
        y = F.linear(x, w)
        assert y.dtype == HALF and y.device.type == "cuda"
        assert zgrad.sum(x).dtype == FLOAT and zgrad.exp(y).dtype == FLOAT
        assert zgrad.sum(y, dtype=HALF).dtype == HALF
        assert F.linear(x.cpu(), w.detach().cpu()).dtype == FLOAT  # CPU tensors: the CPU is not autocast
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(zgrad.sigmoid(y), zgrad.ones(4, 3, device="cuda"))
    y.float().sum().backward()
    assert w.grad.dtype == FLOAT and w.grad.device.type == "cuda"


def test_cuda_without_cuda_warns_and_disables(monkeypatch):
    monkeypatch.setattr(dispatch, "backend_available", lambda device_type: False)
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling autocast"):
        region = zgrad.autocast("cuda")
    with region:
        assert not zgrad.is_autocast_enabled("cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zgrad.autocast("cuda", enabled=False)

"""``zgrad.amp.GradScaler`` against ``torch.amp.GradScaler`` on the same model (the scale after
every update, skipped steps, parameters), the AMP recipe with ``clip_grad_norm_`` after
``unscale_``, ``state_dict`` round trips, every error, the fused unscale kernel on the CPU and in
the CUDA simulator, and two DDP ranks that skip together when only one overflowed."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
import zgrad.nn.functional as F
from helpers import require_torch
from pg_harness import run_ranks
from zgrad import nn
from zgrad.amp import GradScaler
from zgrad.kernels import dispatch
from zgrad.nn.parallel import DistributedDataParallel as DDP

rng = np.random.default_rng(7)
W1, B1, W2, B2 = (rng.standard_normal(s) for s in ((6, 5), (6,), (3, 6), (3,)))
XS, YS = rng.standard_normal((12, 8, 5)), rng.standard_normal((12, 8, 3))
STEPS = 12
INF_STEPS = {2: np.inf, 5: np.nan, 6: -np.inf}  # step -> the value put into one gradient


def _zgrad_model(dtype=np.float64) -> nn.Module:
    model = nn.Sequential(nn.Linear(5, 6, dtype=dtype), nn.Tanh(), nn.Linear(6, 3, dtype=dtype))
    with zgrad.no_grad():
        for p, value in zip(model.parameters(), (W1, B1, W2, B2)):
            p.copy_(zgrad.tensor(value.astype(dtype)))
    return model


def _torch_model(torch):
    model = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3)).double()
    with torch.no_grad():
        for p, value in zip(model.parameters(), (W1, B1, W2, B2)):
            p.copy_(torch.tensor(value))
    return model


def _train(lib, model, scaler, clip: float | None = None, steps: int = STEPS) -> tuple[list, list, list]:
    """SGD steps through ``scaler``: the scale after each update, whether each step ran, the
    parameters at the end."""
    opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    dtype = next(iter(model.parameters())).dtype
    scales, stepped = [], []
    for step in range(steps):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(lib.tensor(XS[step], dtype=dtype)), lib.tensor(YS[step], dtype=dtype))
        scaler.scale(loss).backward()
        if step in INF_STEPS:
            with lib.no_grad():
                list(model.parameters())[step % 4].grad.view(-1)[0] = INF_STEPS[step]
        before = [p.detach().clone() for p in model.parameters()]
        if clip is not None:
            scaler.unscale_(opt)
            lib.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        stepped.append(any(not np.array_equal(p.detach().numpy(), b.numpy()) for p, b in zip(model.parameters(), before)))
    return scales, stepped, [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.torch
@pytest.mark.parametrize("clip", [None, 0.5], ids=["step", "unscale_clip_step"])
def test_scale_skipped_steps_and_parameters_as_torch(clip):
    torch = require_torch()
    options = {"init_scale": 1024.0, "growth_factor": 3.0, "backoff_factor": 0.25, "growth_interval": 3}
    z_scales, z_stepped, z_params = _train(zgrad, _zgrad_model(), GradScaler("cpu", **options), clip)
    t_scales, t_stepped, t_params = _train(torch, _torch_model(torch), torch.amp.GradScaler("cpu", **options), clip)
    assert z_scales == t_scales
    assert z_stepped == t_stepped == [step not in INF_STEPS for step in range(STEPS)]
    for z, t in zip(z_params, t_params):
        np.testing.assert_allclose(z, t, rtol=1e-12, atol=1e-13)


def test_an_inf_skips_exactly_that_step_and_halves_the_scale():
    scales, stepped, _ = _train(zgrad, _zgrad_model(np.float32), GradScaler("cpu", growth_interval=4), steps=4)
    assert stepped == [True, True, False, True]
    assert scales == [65536.0, 65536.0, 32768.0, 32768.0]


def test_growth_stops_at_the_largest_finite_float32():
    scaler = GradScaler("cpu", init_scale=3e38, growth_interval=1)
    model = _zgrad_model(np.float32)
    opt = zgrad.optim.SGD(model.parameters(), lr=0.0)
    scaler.scale(model(zgrad.tensor(XS[0], dtype=zgrad.float32)).sum() * 0.0).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == float(np.float32(3e38)) and scaler._get_growth_tracker() == 0


def _scaled_backward(scaler: GradScaler, model: nn.Module, step: int = 0) -> None:
    scaler.scale(F.mse_loss(model(zgrad.tensor(XS[step])), zgrad.tensor(YS[step]))).backward()


@pytest.mark.torch
def test_state_dict_round_trip_as_torch():
    torch = require_torch()
    scaler = GradScaler("cpu", init_scale=512.0, growth_interval=5)
    _train(zgrad, _zgrad_model(), scaler, steps=4)
    state = scaler.state_dict()
    t_scaler = torch.amp.GradScaler("cpu", init_scale=512.0, growth_interval=5)
    _train(torch, _torch_model(torch), t_scaler, steps=4)
    assert state == t_scaler.state_dict()
    assert set(state) == {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}

    fresh = GradScaler("cpu")
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state and fresh.get_growth_interval() == 5
    resumed = GradScaler("cpu", init_scale=7.0)
    _scaled_backward(resumed, _zgrad_model())  # a scaler already in use takes the state too
    resumed.load_state_dict(state)
    assert resumed.get_scale() == state["scale"] and resumed._get_growth_tracker() == state["_growth_tracker"]


def test_setters_and_getters():
    scaler = GradScaler("cpu")
    assert scaler.is_enabled() and scaler.get_scale() == 65536.0
    scaler.set_growth_factor(4.0)
    scaler.set_backoff_factor(0.125)
    scaler.set_growth_interval(7)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval()) == (4.0, 0.125, 7)


def test_update_with_a_new_scale():
    scaler = GradScaler("cpu")
    _scaled_backward(scaler, _zgrad_model())
    scaler.update(new_scale=0.1)
    assert scaler.get_scale() == float(np.float32(0.1))
    scaler.update(new_scale=zgrad.tensor([8.0]))
    assert scaler.get_scale() == 8.0
    for bad in (zgrad.tensor([1.0, 2.0]), zgrad.tensor([2.0], requires_grad=True)):
        with pytest.raises(AssertionError, match="new_scale should be a float or a 1-element"):
            scaler.update(new_scale=bad)


def test_scale_takes_tensors_lists_and_tuples():
    scaler = GradScaler("cpu", init_scale=4.0)
    a, b = zgrad.tensor([1.0, 2.0]), zgrad.tensor([3.0], dtype=zgrad.float64)
    scaled = scaler.scale([a, (b, a)])
    assert isinstance(scaled, list) and isinstance(scaled[1], tuple)
    np.testing.assert_array_equal(scaled[0].numpy(), [4.0, 8.0])
    assert scaled[1][0].dtype == zgrad.float64 and scaled[1][0].item() == 12.0
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale(3.0)


def test_the_order_of_calls_is_checked():
    model = _zgrad_model()
    opt = zgrad.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu")
    with pytest.raises(AssertionError, match="Attempted unscale_ but _scale is None"):
        scaler.unscale_(opt)
    with pytest.raises(AssertionError, match="Attempted update but _scale is None"):
        scaler.update()
    _scaled_backward(scaler, model)
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called on this optimizer since the last"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called since the last update\(\)"):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: None)
    with pytest.raises(AssertionError, match="No inf checks were recorded prior to update"):
        scaler.update()
    empty = zgrad.optim.SGD([nn.Parameter(zgrad.zeros(2))], lr=0.1)
    with pytest.raises(AssertionError, match="No inf checks were recorded for this optimizer"):
        scaler.step(empty)


def test_float16_gradients_are_refused():
    param = nn.Parameter(zgrad.zeros(3, dtype=zgrad.float16))
    param.grad = zgrad.ones(3, dtype=zgrad.float16)
    scaler = GradScaler("cpu")
    scaler.scale(zgrad.ones(1))
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.unscale_(zgrad.optim.SGD([param], lr=0.1))


def test_bad_factors_and_empty_state_dicts():
    with pytest.raises(AssertionError, match="The growth factor must be > 1.0"):
        GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(AssertionError, match="The backoff factor must be < 1.0"):
        GradScaler("cpu", backoff_factor=1.0)
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        GradScaler("cpu").load_state_dict({})


def test_two_optimizers_share_the_iterations_decision():
    model = _zgrad_model()
    first, second = list(model.parameters())[:2], list(model.parameters())[2:]
    opt_a, opt_b = zgrad.optim.SGD(first, lr=0.1), zgrad.optim.SGD(second, lr=0.1)
    scaler = GradScaler("cpu", init_scale=8.0)
    _scaled_backward(scaler, model)
    second[0].grad.view(-1)[0] = np.inf
    before = [p.detach().numpy().copy() for p in model.parameters()]
    scaler.step(opt_a)
    scaler.step(opt_b)
    scaler.update()
    after = [p.detach().numpy() for p in model.parameters()]
    assert not np.array_equal(after[0], before[0]) and np.array_equal(after[2], before[2])
    assert scaler.get_scale() == 4.0


def test_disabled_scaler_is_a_plain_optimizer_step(monkeypatch):
    model = _zgrad_model()
    opt = zgrad.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", enabled=False)
    loss = F.mse_loss(model(zgrad.tensor(XS[0])), zgrad.tensor(YS[0]))
    assert scaler.scale(loss) is loss
    loss.backward()
    before = list(model.parameters())[0].detach().numpy().copy()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert not np.array_equal(list(model.parameters())[0].detach().numpy(), before)
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {} and not scaler.is_enabled()
    scaler.load_state_dict({})
    monkeypatch.setattr(dispatch, "backend_available", lambda device_type: False)
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available.  Disabling."):
        assert not GradScaler().is_enabled()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_fused_unscale_kernel_on_the_cpu(dtype, layout):
    values = np.random.default_rng(1).standard_normal(40).astype(dtype) * 1000
    inv_scale = float(np.float32(1 / 3.0))
    for bad in (None, np.inf, np.nan):
        grad = values.copy()
        if bad is not None:
            grad[17] = bad
        target = grad if layout == "contiguous" else grad.reshape(8, 5).T
        expected = target * np.float32(inv_scale)
        found = np.zeros(1, np.int32)
        dispatch.backend("cpu").non_finite_check_and_unscale(target, found, inv_scale)
        np.testing.assert_array_equal(target, expected)
        assert found[0] == (0 if bad is None else 1)


@pytest.mark.skipif(not dispatch.backend_available("cuda"), reason="no CUDA backend (nor the simulator)")
def test_fused_unscale_kernel_on_cuda():
    backend = dispatch.backend("cuda")
    values = np.random.default_rng(2).standard_normal((6, 5)) * 100
    for bad, strided in ((None, False), (np.nan, False), (-np.inf, True)):
        host = values.copy()
        if bad is not None:
            host[2, 3] = bad
        grad = dispatch.to_device(host, "cuda")
        target = grad.T if strided else grad
        found = dispatch.full((1,), 0, np.int32, "cuda")
        backend.non_finite_check_and_unscale(target, found, 0.125)
        np.testing.assert_array_equal(dispatch.to_device(grad, "cpu"), host * 0.125)
        assert dispatch.to_device(found, "cpu")[0] == (0 if bad is None else 1)


@pytest.mark.skipif(not dispatch.backend_available("cuda"), reason="no CUDA backend (nor the simulator)")
def test_a_scaler_on_cuda_unscales_and_skips_the_step_with_an_inf():
    model = _zgrad_model(np.float32).to("cuda")
    opt = zgrad.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cuda", init_scale=16.0)
    x, y = zgrad.tensor(XS[0], dtype=zgrad.float32, device="cuda"), zgrad.tensor(YS[0], dtype=zgrad.float32, device="cuda")
    for step in range(2):
        opt.zero_grad()
        scaler.scale(F.mse_loss(model(x), y)).backward()
        if step == 0:
            grads = [p.grad.cpu().numpy() / 16.0 for p in model.parameters()]
            scaler.unscale_(opt)
            for p, g in zip(model.parameters(), grads):
                np.testing.assert_allclose(p.grad.cpu().numpy(), g, rtol=1e-6)
        else:
            list(model.parameters())[1].grad.fill_(np.inf)
        before = list(model.parameters())[0].detach().cpu().numpy()
        scaler.step(opt)
        scaler.update()
        assert np.array_equal(list(model.parameters())[0].detach().cpu().numpy(), before) == (step == 1)
    assert scaler.get_scale() == 8.0


def test_ddp_ranks_skip_together_when_one_rank_overflows():
    """Rank 1 alone puts an inf into a gradient after DDP's all-reduce: both ranks skip that step
    and back off, and their parameters stay equal."""

    def body(rank: int) -> tuple[list, list, list]:
        model = DDP(_zgrad_model())  # the same weights on both ranks (no random draw)
        opt = zgrad.optim.SGD(model.parameters(), lr=0.05)
        scaler = GradScaler("cpu", init_scale=256.0, growth_interval=2)
        scales, stepped = [], []
        for step in range(4):
            opt.zero_grad()
            scaler.scale(F.mse_loss(model(zgrad.tensor(XS[step][rank::2])), zgrad.tensor(YS[step][rank::2]))).backward()
            if step == 1 and rank == 1:
                list(model.parameters())[0].grad.view(-1)[3] = np.inf
            before = list(model.parameters())[2].detach().numpy().copy()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            stepped.append(not np.array_equal(list(model.parameters())[2].detach().numpy(), before))
        return scales, stepped, [p.detach().numpy() for p in model.parameters()]

    (scales0, stepped0, params0), (scales1, stepped1, params1) = run_ranks(2, body, "tcp")
    assert stepped0 == stepped1 == [True, False, True, True]
    assert scales0 == scales1 == [256.0, 128.0, 128.0, 256.0]
    for a, b in zip(params0, params1):
        np.testing.assert_array_equal(a, b)

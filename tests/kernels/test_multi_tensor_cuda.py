"""The CUDA backend's ops over lists of tensors (``zgrad.kernels.cuda.multi_tensor``, in Numba's
simulator here): the norms of many tensors and their in-place scaling in a launch per group,
against numpy, over more tensors than a group holds, every norm order, NaN, and the lists that go
tensor by tensor (strided, empty, mixed dtypes); and ``clip_grad_norm_`` taking that path."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cuda_helpers import TOLERANCE, requires_cuda

import zgrad
from zgrad.kernels import dispatch, dispatch_pointwise, dispatch_reduce

pytestmark = requires_cuda

_SIZES = [1, 3, 8, 9, 17, 40, 2, 64, 5, 33, 1, 70, 16, 4, 21, 9, 1, 50, 12]  # 19 tensors: three groups of up to 8


def _arrays(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    host = [(rng.standard_normal(n) * rng.uniform(0.1, 3)).astype(dtype) for n in _SIZES]
    host[5][7] = 0.0
    return host, [dispatch.backend("cuda").asarray(h) for h in host]


def _launches(monkeypatch):
    from zgrad.kernels.cuda import runtime as rt
    launched = []
    launch = rt.launch
    monkeypatch.setattr(rt, "launch", lambda kernel, *args: launched.append(kernel) or launch(kernel, *args))
    return launched


@pytest.mark.parametrize("order", [2.0, 1.0, 0.0, math.inf, -math.inf, 3.5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_norms_of_many_tensors_take_a_launch_per_group(monkeypatch, order, dtype):
    host, device = _arrays(dtype)
    launched = _launches(monkeypatch)
    norms = dispatch_reduce.vector_norms(device, order).to_host()
    expected = [np.linalg.norm(h.astype(np.float64), order) if order else np.count_nonzero(h) for h in host]
    np.testing.assert_allclose(norms, expected, rtol=2e-6 if dtype == np.float32 else 1e-12)
    assert norms.dtype == dtype
    assert len(launched) == 4, "three groups of partial norms, then one launch for all the norms"


def test_a_nan_wins_every_norm_of_its_tensor_only():
    host, device = _arrays()
    host[10][0] = np.nan
    device[10] = dispatch.backend("cuda").asarray(host[10])
    for order in (2.0, math.inf, -math.inf):
        norms = dispatch_reduce.vector_norms(device, order).to_host()
        assert np.isnan(norms[10]) and not np.isnan(np.delete(norms, 10)).any()


def test_scaling_many_tensors_in_place_takes_a_launch_per_group(monkeypatch):
    host, device = _arrays()
    factor = dispatch.backend("cuda").asarray(np.array(0.25, np.float32))
    launched = _launches(monkeypatch)
    dispatch_pointwise.mul_each_(device, factor)
    assert len(launched) == 3
    for h, d in zip(host, device):
        np.testing.assert_array_equal(d.to_host(), h * np.float32(0.25))


def test_lists_the_kernels_cannot_take_go_tensor_by_tensor():
    be = dispatch.backend("cuda")
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((6, 4)).astype(np.float32)
    strided = be.asarray(matrix)[:, 1]
    empty = be.asarray(np.zeros(0, np.float32))
    plain = be.asarray(matrix[0].copy())
    norms = dispatch_reduce.vector_norms([plain, strided, empty], 2.0).to_host()
    np.testing.assert_allclose(norms, [np.linalg.norm(matrix[0]), np.linalg.norm(matrix[:, 1]), 0.0], rtol=1e-6)
    dispatch_pointwise.mul_each_([plain, strided], be.asarray(np.array(2.0, np.float32)))
    np.testing.assert_array_equal(plain.to_host(), matrix[0] * 2)
    np.testing.assert_array_equal(be.asarray(matrix)[:, 1].to_host() * 2, strided.to_host())


def test_clip_grad_norm_of_many_parameters_matches_the_cpu(monkeypatch):
    rng = np.random.default_rng(2)
    shapes = [(3, 4), (4,), (5, 3), (3,), (2, 2, 2), (7,), (1,), (6, 2), (2,), (9,), (3, 3)]
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results = {}
    for device in ("cpu", "cuda"):
        params = [zgrad.zeros(s, device=device, requires_grad=True) for s in shapes]
        for p, g in zip(params, grads):
            p.grad = zgrad.tensor(g, device=device)
        total = zgrad.nn.utils.clip_grad_norm_(params, 0.5)
        results[device] = (total.cpu().numpy(), [p.grad.cpu().numpy() for p in params])
    np.testing.assert_allclose(results["cuda"][0], results["cpu"][0], rtol=1e-6)
    for cuda_grad, cpu_grad in zip(results["cuda"][1], results["cpu"][1]):
        np.testing.assert_allclose(cuda_grad, cpu_grad, rtol=1e-6, atol=1e-8)
    launched = _launches(monkeypatch)
    zgrad.nn.utils.clip_grad_norm_(params, 0.5)
    assert len(launched) <= 10, f"{len(launched)} launches for 11 gradients: grouped, not one per tensor"


@pytest.mark.parametrize("options", [{}, {"amsgrad": True, "weight_decay": 0.1}, {"maximize": True, "weight_decay": 0.05}],
                         ids=["plain", "amsgrad_l2", "maximize_l2"])
@pytest.mark.parametrize("optimizer", ["Adam", "AdamW"])
def test_adam_steps_many_parameters_a_group_per_launch_as_on_the_cpu(monkeypatch, optimizer, options):
    rng = np.random.default_rng(3)
    starts = [rng.standard_normal(n).astype(np.float32) for n in _SIZES]
    grads = [[rng.standard_normal(n).astype(np.float32) for n in _SIZES] for _ in range(3)]
    skipped = 4  # has no gradient in the second step: a step behind the others from then on
    results = {}
    for device in ("cpu", "cuda"):
        params = [zgrad.tensor(s, device=device, requires_grad=True) for s in starts]
        opt = getattr(zgrad.optim, optimizer)(params, lr=0.01, **options)
        for step, step_grads in enumerate(grads):
            for i, (p, g) in enumerate(zip(params, step_grads)):
                p.grad = None if (step == 1 and i == skipped) else zgrad.tensor(g, device=device)
            if device == "cuda" and step == 2:
                launched = _launches(monkeypatch)
            opt.step()
        results[device] = [p.detach().cpu().numpy() for p in params]
    for on_cuda, on_cpu in zip(results["cuda"], results["cpu"]):
        np.testing.assert_allclose(on_cuda, on_cpu, **TOLERANCE[np.dtype(np.float32)])
    assert len(launched) == 4, "18 parameters at step 3 in three groups, the one at step 2 alone"

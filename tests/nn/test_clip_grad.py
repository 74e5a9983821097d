"""``zgrad.nn.utils``: gradient clipping against ``torch.nn.utils`` (norm types 1, 2, inf and others,
float64 and float32, non-finite norms), the parameter/vector conversions, the norm kernel on CUDA
(Numba's simulator here), and clipping under DistributedDataParallel (the averaged gradients)."""

from __future__ import annotations

import math
import threading
import warnings

import numpy as np
import pytest

import zgrad
import zgrad.nn.functional as F
from helpers import require_torch, torch
from pg_harness import run_ranks
from zgrad import nn
from zgrad.kernels import dispatch
from zgrad.kernels.cuda import reduce as cuda_reduce
from zgrad.nn.parallel import DistributedDataParallel as DDP
from zgrad.nn.utils import (
    clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm, parameters_to_vector,
    vector_to_parameters,
)

SHAPES = [(4, 3), (3,), (2, 2, 2), (1,)]
NORM_TYPES = [1, 2, math.inf, 3.0, 0.5, 0, -math.inf, "inf"]


def gradients(dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * scale).astype(dtype) for s in SHAPES]


def zgrad_params(grads, without_grad=True):
    params = [nn.Parameter(zgrad.zeros(*g.shape, dtype=g.dtype)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = zgrad.tensor(g.copy())
    if without_grad:
        params.append(nn.Parameter(zgrad.zeros(2, dtype=grads[0].dtype)))  # no .grad: skipped
    return params


def torch_params(grads):
    params = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.from_numpy(g).dtype)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = torch.from_numpy(g.copy())
    params.append(torch.nn.Parameter(torch.zeros(2, dtype=params[0].dtype)))
    return params


TOLERANCES = {np.float64: dict(rtol=1e-12, atol=0), np.float32: dict(rtol=2e-6, atol=1e-7)}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("norm_type", NORM_TYPES)
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_equals_torch_s(norm_type, max_norm, dtype):
    require_torch()
    grads = gradients(dtype)
    ours, theirs = zgrad_params(grads), torch_params(grads)
    total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    want = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert total.shape == () and total.dtype == dtype
    np.testing.assert_allclose(total.item(), want.item(), **TOLERANCES[dtype])
    for p, q in zip(ours, theirs):
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), **TOLERANCES[dtype])


@pytest.mark.torch
@pytest.mark.filterwarnings("error")  # inf * 0 is NaN without a warning, as in torch
@pytest.mark.parametrize("bad", [math.inf, math.nan])
@pytest.mark.parametrize("norm_type", [1, 2, math.inf])
def test_non_finite_norms_as_torch(bad, norm_type):
    require_torch()
    grads = gradients(np.float64)
    grads[1][0] = bad
    with pytest.raises(RuntimeError, match=f"The total norm of order {float(norm_type)} for gradients from "
                                           r"`parameters` is non-finite, so it cannot be clipped.*"
                                           "error_if_nonfinite=False"):
        clip_grad_norm_(zgrad_params(grads), 1.0, norm_type, error_if_nonfinite=True)
    ours, theirs = zgrad_params(grads), torch_params(grads)
    total = clip_grad_norm_(ours, 1.0, norm_type)
    want = torch.nn.utils.clip_grad_norm_(theirs, 1.0, norm_type)
    np.testing.assert_array_equal(total.numpy(), want.numpy())
    for p, q in zip(ours[:-1], theirs[:-1]):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


@pytest.mark.torch
def test_get_total_norm_and_clip_grads_with_norm_and_clip_grad_value_equal_torch_s():
    require_torch()
    grads = gradients(np.float64, seed=1, scale=3.0)
    ours, theirs = zgrad_params(grads), torch_params(grads)
    total = get_total_norm([p.grad for p in ours[:-1]], 2.0)
    want = torch.nn.utils.get_total_norm([p.grad for p in theirs[:-1]], 2.0)
    np.testing.assert_allclose(total.item(), want.item(), rtol=1e-12)
    clip_grads_with_norm_(ours, 2.0, total)
    torch.nn.utils.clip_grads_with_norm_(theirs, 2.0, want)
    for p, q in zip(ours[:-1], theirs[:-1]):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)
    clip_grad_value_(ours, 0.1)
    torch.nn.utils.clip_grad_value_(theirs, 0.1)
    for p, q in zip(ours[:-1], theirs[:-1]):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)
    assert np.abs(ours[0].grad.numpy()).max() == 0.1


def test_a_single_tensor_no_gradients_and_an_empty_generator():
    p = nn.Parameter(zgrad.ones(4))
    p.grad = zgrad.full((4,), 2.0)
    assert clip_grad_norm_(p, 1.0).item() == 4.0
    np.testing.assert_allclose(p.grad.numpy(), 0.5 / (1 + 0.25e-6), rtol=1e-6)
    assert clip_grad_norm_([nn.Parameter(zgrad.ones(2))], 1.0).item() == 0.0
    with pytest.warns(UserWarning, match="`parameters` is an empty generator, no gradient clipping will occur."):
        clip_grad_norm_((p for p in []), 1.0)
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated in favor of"):
        clip_grad_norm([p], 1.0)


def test_a_gradient_exactly_at_the_limit_is_left_alone():
    p = nn.Parameter(zgrad.ones(1, dtype=zgrad.float64))
    p.grad = zgrad.tensor([1e-7], dtype=zgrad.float64)
    before = p.grad._data
    clip_grad_norm_([p], 1.0)
    assert p.grad._data is before and p.grad.item() == 1e-7


@pytest.mark.torch
def test_parameters_and_vectors_as_torch():
    require_torch()
    model = nn.Linear(3, 2, dtype=zgrad.float64)
    reference = torch.nn.Linear(3, 2, dtype=torch.float64)
    with torch.no_grad():
        reference.weight.copy_(torch.from_numpy(model.weight.numpy()))
        reference.bias.copy_(torch.from_numpy(model.bias.numpy()))
    vec = parameters_to_vector(model.parameters())
    np.testing.assert_array_equal(vec.detach().numpy(),
                                  torch.nn.utils.parameters_to_vector(reference.parameters()).detach().numpy())
    new = zgrad.arange(8, dtype=zgrad.float64)
    vector_to_parameters(new, model.parameters())
    assert model.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and model.bias.tolist() == [6.0, 7.0]
    new[7] = -1.0  # the parameters are views of the vector, as in PyTorch
    assert model.bias.tolist() == [6.0, -1.0]
    out = model(zgrad.ones(1, 3, dtype=zgrad.float64))
    out.sum().backward()
    assert model.weight.grad.shape == (2, 3)
    with pytest.raises(TypeError, match="expected zgrad.Tensor, but got: list"):
        vector_to_parameters([1.0], model.parameters())


# --- CUDA ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("split", [False, True], ids=["one_block", "two_passes"])
@pytest.mark.parametrize("norm_type", [1, 2, math.inf, -math.inf, 0, 3.0])
def test_clip_grad_norm_on_cuda_equals_the_cpu(norm_type, split, monkeypatch):
    if not zgrad.cuda.is_available():
        pytest.skip("no CUDA backend here (install zgrad[cuda]; tests use the simulator)")
    if split:  # the two-launch path of long arrays, on arrays the simulator runs quickly
        monkeypatch.setattr(cuda_reduce, "SPLIT_MIN_LENGTH", 8)
    grads = gradients(np.float64, seed=3)
    on_cpu = zgrad_params(grads)
    on_cuda = [nn.Parameter(zgrad.zeros(*g.shape, dtype=g.dtype, device="cuda")) for g in grads]
    for p, g in zip(on_cuda, grads):
        p.grad = zgrad.tensor(g.copy()).cuda()
    want = clip_grad_norm_(on_cpu, 0.7, norm_type)
    total = clip_grad_norm_(on_cuda, 0.7, norm_type)
    assert total.is_cuda and dispatch.device_type_of(on_cuda[0].grad._data) == "cuda"
    np.testing.assert_allclose(total.item(), want.item(), rtol=1e-12)
    for p, q in zip(on_cuda, on_cpu):
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.numpy(), rtol=1e-12, atol=1e-15)
    clip_grad_value_(on_cuda, 0.01)
    assert np.abs(on_cuda[0].grad.cpu().numpy()).max() <= 0.01


def test_parameters_on_two_devices_are_refused():
    if not zgrad.cuda.is_available():
        pytest.skip("no CUDA backend here (install zgrad[cuda]; tests use the simulator)")
    with pytest.raises(TypeError, match="Found two parameters on different devices, this is currently not supported."):
        parameters_to_vector([zgrad.ones(2), zgrad.ones(2).cuda()])


# --- DistributedDataParallel ---------------------------------------------------------------------

SEEDING = threading.Lock()  # rank threads share zgrad's default generator
BATCH = 8  # per rank


def make_model() -> nn.Module:
    with SEEDING:
        zgrad.manual_seed(0)
        return nn.Sequential(nn.Linear(5, 16, dtype=zgrad.float64), nn.Tanh(), nn.Linear(16, 3, dtype=zgrad.float64))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("norm_type", [2.0, math.inf])
def test_under_ddp_every_rank_clips_the_averaged_gradients(norm_type):
    world = 2
    rng = np.random.default_rng(5)
    xs, ys = rng.standard_normal((world * BATCH, 5)) * 4, rng.integers(0, 3, world * BATCH)
    reference = make_model()
    F.cross_entropy(reference(zgrad.tensor(xs)), zgrad.tensor(ys)).backward()
    want_total = clip_grad_norm_(reference.parameters(), 0.05, norm_type)
    want = [p.grad.numpy() for p in reference.parameters()]
    assert want_total.item() > 0.05, "the test must clip"

    def body(rank: int):
        model = DDP(make_model())
        shard = slice(rank * BATCH, (rank + 1) * BATCH)
        F.cross_entropy(model(zgrad.tensor(xs[shard])), zgrad.tensor(ys[shard])).backward()
        total = clip_grad_norm_(model.parameters(), 0.05, norm_type)
        return total.item(), [p.grad.numpy().copy() for p in model.parameters()]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = run_ranks(world, body, "tcp")
    for total, grads in results:
        np.testing.assert_allclose(total, want_total.item(), rtol=1e-10)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)

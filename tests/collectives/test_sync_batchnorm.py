"""SyncBatchNorm against batch norm on the concatenated global batch (float64, to 1e-10): the
output, the input, weight and bias gradients and the running statistics over 2 ranks whose local
batches differ in size (one empty); DDP training of a small conv net converted with
convert_sync_batchnorm, its bucket all-reduces interleaved with the layers' backward all-reduces;
convert_sync_batchnorm itself, evaluation, the one-rank and no-process-group fallbacks, the
errors, and CUDA tensors (Numba's simulator here)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import zgrad
import zgrad.nn.functional as F
from cuda_helpers import requires_cuda
from helpers import require_torch
from pg_harness import TRANSPORTS, leftover_threads, pg_config, run_ranks, run_ranks_expecting_errors
from zgrad import nn
from zgrad.errors import CollectiveError
from zgrad.nn.parallel import DistributedDataParallel as DDP

pytestmark = pytest.mark.timeout(120)

TOL = 1e-10
SEEDING = threading.Lock()  # rank threads share zgrad's default generator


@pytest.fixture(autouse=True)
def no_leftover_threads():
    yield
    assert not leftover_threads(), f"process group threads still running: {leftover_threads()}"


def batches(steps: int, total: int, tail: tuple[int, ...], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Global inputs and the weights of the loss sum(out * r), per step: (steps, total, *tail) each."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps, total, *tail)) * 2.0 + 0.5
    return x, rng.standard_normal((steps, total, *tail))


def local(array: np.ndarray, sizes: tuple[int, ...], rank: int) -> np.ndarray:
    """Rank ``rank``'s part of the global batch ``array`` (ranks hold ``sizes`` samples, in order)."""
    start = sum(sizes[:rank])
    return array[start:start + sizes[rank]]


def batch_norm_class(ndim: int) -> type:
    return {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}[ndim]


def set_affine(layer: nn.Module, channels: int) -> None:
    if layer.weight is not None:
        layer.weight.data = zgrad.tensor(np.linspace(0.5, 1.5, channels))
    if layer.bias is not None:
        layer.bias.data = zgrad.tensor(np.linspace(-0.3, 0.4, channels))


def train_layer(layer: nn.Module, xs: list[np.ndarray], rs: list[np.ndarray], input_grad: bool = True) -> dict:
    """Steps of forward and backward of sum(out * r): outputs, input gradients, the accumulated
    weight and bias gradients and the buffers."""
    outs, x_grads = [], []
    for x, r in zip(xs, rs):
        inp = zgrad.tensor(x, requires_grad=input_grad)
        out = layer(inp)
        (out * zgrad.tensor(r)).sum().backward()
        outs.append(out.detach().numpy())
        x_grads.append(inp.grad.numpy() if input_grad else None)
    grads = {name: p.grad.numpy() for name, p in layer.named_parameters()}
    return {"outs": outs, "x_grads": x_grads, "grads": grads,
            "buffers": {name: b.numpy().copy() for name, b in layer.named_buffers()}}


LAYER_CASES = [
    pytest.param((3, 5), (4, 5), {}, True, id="3d-sizes3+5"),
    pytest.param((4, 0), (3, 2, 3), {"momentum": None}, True, id="4d-rank1-empty-cumulative"),
    pytest.param((2, 3), (4,), {"affine": False, "track_running_stats": False}, True, id="2d-no-affine-no-stats"),
    pytest.param((3, 4), (2, 3, 2), {"bias": False}, False, id="4d-no-bias-input-without-grad"),
]


@pytest.mark.parametrize("sizes, tail, options, input_grad", LAYER_CASES)
def test_layer_equals_batch_norm_on_the_global_batch(sizes, tail, options, input_grad):
    steps, channels = 2, tail[0]
    xs, rs = batches(steps, sum(sizes), tail)
    reference_layer = batch_norm_class(1 + len(tail))(channels, dtype=np.float64, **options)
    set_affine(reference_layer, channels)
    want = train_layer(reference_layer, list(xs), list(rs), input_grad)

    def body(rank: int) -> dict:
        layer = nn.SyncBatchNorm(channels, dtype=np.float64, **options)
        set_affine(layer, channels)
        return train_layer(layer, [local(x, sizes, rank) for x in xs], [local(r, sizes, rank) for r in rs],
                           input_grad)

    results = run_ranks(2, body, "tcp")
    for step in range(steps):
        np.testing.assert_allclose(np.concatenate([got["outs"][step] for got in results]), want["outs"][step],
                                   rtol=TOL, atol=TOL)
        if input_grad:
            np.testing.assert_allclose(np.concatenate([got["x_grads"][step] for got in results]),
                                       want["x_grads"][step], rtol=TOL, atol=TOL)
    for name, grad in want["grads"].items():  # local sums: together, the global batch's
        np.testing.assert_allclose(sum(got["grads"][name] for got in results), grad, rtol=TOL, atol=TOL)
    for got in results:
        assert got["buffers"].keys() == want["buffers"].keys()
        for name, value in want["buffers"].items():
            np.testing.assert_allclose(got["buffers"][name], value, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_every_transport_two_ranks(kind):
    sizes, tail = (2, 3), (3, 4)
    xs, rs = batches(1, sum(sizes), tail, seed=5)
    want = train_layer(nn.BatchNorm1d(3, dtype=np.float64), list(xs), list(rs))
    results = run_ranks(2, lambda rank: train_layer(nn.SyncBatchNorm(3, dtype=np.float64), [local(xs[0], sizes, rank)],
                                                    [local(rs[0], sizes, rank)]), kind, pg_config(kind))
    np.testing.assert_allclose(np.concatenate([got["x_grads"][0] for got in results]), want["x_grads"][0],
                               rtol=TOL, atol=TOL)


# --- under DDP --------------------------------------------------------------------------------


def make_net() -> nn.Module:
    with SEEDING:
        zgrad.manual_seed(7)
        return nn.Sequential(
            nn.Conv2d(2, 4, 3, padding=1, dtype=np.float64), nn.BatchNorm2d(4, dtype=np.float64), nn.ReLU(),
            nn.Conv2d(4, 3, 3, dtype=np.float64), nn.BatchNorm2d(3, momentum=None, dtype=np.float64), nn.Tanh(),
            nn.Flatten(), nn.Linear(12, 3, dtype=np.float64))


def conv_data(steps: int, total: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    return rng.standard_normal((steps, total, 2, 4, 4)), rng.integers(0, 3, (steps, total))


def test_ddp_training_equals_single_process_training_on_the_global_batch():
    steps, sizes, lr = 3, (3, 5), 0.1
    total = sum(sizes)
    xs, ys = conv_data(steps, total)
    reference = make_net()
    opt = zgrad.optim.SGD(reference.parameters(), lr=lr)
    for step in range(steps):
        opt.zero_grad()
        F.cross_entropy(reference(zgrad.tensor(xs[step])), zgrad.tensor(ys[step]), reduction="sum").div(total) \
            .backward()
        opt.step()

    def body(rank: int) -> tuple[list, list]:
        # one bucket per parameter: DDP's bucket all-reduces run while backward reaches the
        # SyncBatchNorm layers and issues theirs
        model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_net()), bucket_cap_mb=0.0001)
        opt = zgrad.optim.SGD(model.parameters(), lr=lr)
        for step in range(steps):
            opt.zero_grad()
            out = model(zgrad.tensor(local(xs[step], sizes, rank)))
            # DDP averages over the 2 ranks: each rank's loss is its part of the global mean, times 2
            loss = F.cross_entropy(out, zgrad.tensor(local(ys[step], sizes, rank)), reduction="sum") * (2 / total)
            loss.backward()
            opt.step()
        return ([p.numpy().copy() for p in model.module.parameters()],
                [b.numpy().copy() for b in model.module.buffers()])

    results = run_ranks(2, body, "tcp", pg_config("tcp", chunk_kb=1, small_tensor_kb=1))
    for params, buffers in results:
        for got, want in zip(params, reference.parameters()):
            np.testing.assert_allclose(got, want.numpy(), rtol=TOL, atol=TOL)
        for got, want in zip(buffers, reference.buffers()):
            np.testing.assert_allclose(got, want.numpy(), rtol=TOL, atol=TOL)
    assert [type(m).__name__ for m in make_net()].count("BatchNorm2d") == 2


# --- convert_sync_batchnorm ---------------------------------------------------------------------


def test_convert_sync_batchnorm_replaces_batch_norms_and_keeps_the_rest():
    conv, instance_norm, layer_norm = nn.Conv2d(1, 3, 3), nn.InstanceNorm2d(3), nn.LayerNorm(3)
    bn2d = nn.BatchNorm2d(3, eps=1e-3, momentum=None, dtype=np.float64)
    bn2d.running_mean.add_(1.0)
    bn2d.num_batches_tracked.add_(5)
    bn2d.weight.requires_grad_(False)
    bn2d.eval()
    bn1d = nn.BatchNorm1d(3, affine=False, track_running_stats=False)
    bn3d = nn.BatchNorm3d(2, bias=False)
    inner = nn.Sequential(instance_norm, bn1d)
    model = nn.Sequential(conv, bn2d, inner, layer_norm, bn3d)
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group=None)
    assert converted is model and converted[2] is inner
    assert [type(m).__name__ for m in converted] == ["Conv2d", "SyncBatchNorm", "Sequential", "LayerNorm",
                                                    "SyncBatchNorm"]
    assert converted[0] is conv and converted[3] is layer_norm and inner[0] is instance_norm
    assert type(inner[1]).__name__ == "SyncBatchNorm"
    sync2d = converted[1]
    assert (sync2d.num_features, sync2d.eps, sync2d.momentum, sync2d.affine, sync2d.track_running_stats) == \
        (3, 1e-3, None, True, True)
    assert sync2d.weight is bn2d.weight and sync2d.bias is bn2d.bias and not sync2d.weight.requires_grad
    assert sync2d.running_mean is bn2d.running_mean and sync2d.running_var is bn2d.running_var
    assert sync2d.num_batches_tracked is bn2d.num_batches_tracked and int(sync2d.num_batches_tracked) == 5
    assert not sync2d.training and converted[4].training and sync2d.process_group is None
    assert inner[1].weight is None and inner[1].running_mean is None and not inner[1].track_running_stats
    assert converted[4].bias is None and converted[4].weight is bn3d.weight
    assert set(model.state_dict()) == set(nn.Sequential(conv, bn2d, inner, layer_norm, bn3d).state_dict())

    root = nn.BatchNorm1d(4)
    root.add_module("child", nn.Linear(2, 2))
    sync_root = nn.SyncBatchNorm.convert_sync_batchnorm(root, process_group="group")
    assert isinstance(sync_root, nn.SyncBatchNorm) and sync_root is not root
    assert sync_root.child is root.child and sync_root.process_group == "group"
    again = nn.SyncBatchNorm.convert_sync_batchnorm(nn.SyncBatchNorm(4))
    assert isinstance(again, nn.SyncBatchNorm)


@pytest.mark.torch
def test_convert_sync_batchnorm_converts_what_torch_converts():
    torch = require_torch()

    def build(lib):
        return lib.nn.Sequential(lib.nn.Conv2d(1, 3, 3), lib.nn.BatchNorm2d(3), lib.nn.Sequential(
            lib.nn.InstanceNorm2d(3), lib.nn.BatchNorm1d(3, affine=False)), lib.nn.GroupNorm(1, 3))

    def layout(module):
        return [(name, type(m).__name__, "" if list(m.children()) else repr(m))
                for name, m in module.named_modules()]

    assert layout(nn.SyncBatchNorm.convert_sync_batchnorm(build(zgrad))) == \
        layout(torch.nn.SyncBatchNorm.convert_sync_batchnorm(build(torch)))


# --- evaluation and the fallbacks ----------------------------------------------------------------


def test_evaluation_runs_no_collective_and_uses_the_running_statistics():
    xs, _ = batches(2, 6, (3,), seed=2)

    def body(rank: int) -> np.ndarray:
        layer = nn.SyncBatchNorm(3, dtype=np.float64)
        layer.running_mean.fill_(0.25)
        layer.running_var.fill_(2.0)
        layer.eval()
        outs = [layer(zgrad.tensor(local(x, (3, 3), rank))).numpy() for x in xs[:rank + 1]]  # rank 1: one more
        zgrad.distributed.barrier()  # a collective among the forwards above would not match this one
        return np.concatenate(outs), int(layer.num_batches_tracked)

    results = run_ranks(2, body, "inproc")
    for rank, (out, tracked) in enumerate(results):
        want = np.concatenate([(local(x, (3, 3), rank) - 0.25) / np.sqrt(2.0 + 1e-5) for x in xs[:rank + 1]])
        np.testing.assert_allclose(out, want, rtol=TOL, atol=TOL)
        assert tracked == 0


def _compare_with_batch_norm(options: dict, process_group: object = None) -> None:
    xs, rs = batches(2, 5, (3, 2))
    want_layer = nn.BatchNorm1d(3, dtype=np.float64, **options)
    got_layer = nn.SyncBatchNorm(3, dtype=np.float64, process_group=process_group, **options)
    set_affine(want_layer, 3)
    set_affine(got_layer, 3)
    want, got = train_layer(want_layer, list(xs), list(rs)), train_layer(got_layer, list(xs), list(rs))
    for key in ("outs", "x_grads"):
        for g, w in zip(got[key], want[key]):
            np.testing.assert_array_equal(g, w)
    for key in ("grads", "buffers"):
        assert got[key].keys() == want[key].keys()
        for name in want[key]:
            np.testing.assert_array_equal(got[key][name], want[key][name])


def test_without_a_process_group_it_is_batch_norm():
    _compare_with_batch_norm({"momentum": None})


def test_a_group_of_one_rank_is_batch_norm():
    run_ranks(1, lambda rank: _compare_with_batch_norm({}), "inproc")


def test_a_group_of_one_rank_and_a_rank_outside_the_group_are_batch_norm():
    def body(rank: int) -> None:
        group = zgrad.distributed.new_group([0])  # rank 1: NON_GROUP_MEMBER
        _compare_with_batch_norm({}, group)

    run_ranks(2, body, "inproc")


@pytest.mark.torch
def test_without_a_process_group_it_matches_torch():
    torch = require_torch()
    x = np.random.default_rng(3).standard_normal((4, 3, 5))
    mine, theirs = nn.SyncBatchNorm(3, dtype=np.float64), torch.nn.SyncBatchNorm(3, dtype=torch.float64)
    assert repr(mine) == repr(theirs)
    a, b = zgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    mine(a).pow(3).sum().backward()
    theirs(b).pow(3).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mine.running_var.numpy(), theirs.running_var.numpy(), rtol=TOL)
    assert int(mine.num_batches_tracked) == int(theirs.num_batches_tracked) == 1


# --- errors -----------------------------------------------------------------------------------------


def test_errors_of_the_input():
    layer = nn.SyncBatchNorm(3)
    with pytest.raises(ValueError, match=r"^expected at least 2D input \(got 1D input\)$"):
        layer(zgrad.zeros(3))
    with pytest.raises(ValueError, match="SyncBatchNorm number of input channels should be non-zero"):
        layer(zgrad.zeros(4, 0, 2))
    with pytest.raises(RuntimeError, match="expected input with 3 channels in dimension 1"):
        layer(zgrad.zeros(4, 5))
    with pytest.raises(TypeError, match="expects a Tensor"):
        layer(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        layer(zgrad.zeros(1, 3))  # no process group: batch norm's error


def test_one_value_per_channel_in_the_global_batch_fails_on_every_rank():
    def body(rank: int) -> None:
        layer = nn.SyncBatchNorm(2, dtype=np.float64)
        layer(zgrad.zeros(1 - rank, 2, dtype=np.float64))

    for outcome in run_ranks_expecting_errors(2, body, "inproc"):
        assert isinstance(outcome, ValueError) and "got 1 over the process group's global batch" in str(outcome)


def test_a_rank_that_skips_the_layer_fails_the_collective_instead_of_hanging():
    def body(rank: int) -> None:
        layer = nn.SyncBatchNorm(2, dtype=np.float64)
        if rank == 0:
            layer(zgrad.ones(3, 2, dtype=np.float64))
        else:
            zgrad.distributed.barrier()

    outcomes = run_ranks_expecting_errors(2, body, "inproc")
    for outcome in outcomes:
        assert isinstance(outcome, CollectiveError) and "sync_batch_norm_stats" in str(outcome), outcome


@requires_cuda
def test_cuda_tensors_two_ranks():
    sizes, tail = (2, 3), (2, 4)
    xs, rs = batches(1, sum(sizes), tail, seed=9)

    def on_cuda(layer: nn.Module, rank: int | None) -> dict:
        part = (lambda a: a) if rank is None else (lambda a: local(a, sizes, rank))
        x = zgrad.tensor(part(xs[0]), device="cuda", requires_grad=True)
        out = layer.to("cuda")(x)
        (out * zgrad.tensor(part(rs[0]), device="cuda")).sum().backward()
        assert out.is_cuda and x.grad.is_cuda and layer.running_var.is_cuda
        return {"out": out.cpu().numpy(), "x_grad": x.grad.cpu().numpy(),
                "weight_grad": layer.weight.grad.cpu().numpy(), "running_var": layer.running_var.cpu().numpy()}

    want = on_cuda(nn.BatchNorm1d(2, dtype=np.float64), None)
    results = run_ranks(2, lambda rank: on_cuda(nn.SyncBatchNorm(2, dtype=np.float64), rank), "inproc")
    for key in ("out", "x_grad"):
        np.testing.assert_allclose(np.concatenate([got[key] for got in results]), want[key], rtol=TOL, atol=TOL)
    np.testing.assert_allclose(sum(got["weight_grad"] for got in results), want["weight_grad"], rtol=TOL, atol=TOL)
    for got in results:
        np.testing.assert_allclose(got["running_var"], want["running_var"], rtol=TOL, atol=TOL)

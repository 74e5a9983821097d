"""``grid_sample`` and ``affine_grid``: forward and gradients (input, grid, theta) against PyTorch's
for every mode, padding mode and align_corners on 4-D and 5-D input, their warnings and errors,
the CUDA backend against the CPU's, and the spatial transformer tutorial's network training."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import check_finite_differences, check_torch, torch
from zgrad import nn

F = zgrad.nn.functional
CASES = [(rank, mode, padding_mode, align_corners)
         for rank in (4, 5) for mode in ("bilinear", "nearest", "bicubic") if (rank, mode) != (5, "bicubic")
         for padding_mode in ("zeros", "border", "reflection") for align_corners in (False, True)]
# (input, grid) shapes: grids reach past [-1, 1] (see the domain below), some of them more than once
SHAPES = {4: [(2, 3, 4, 5), (2, 3, 4, 2)], 5: [(2, 2, 3, 4, 5), (2, 2, 3, 2, 3)]}
ALIGN_CORNERS_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since "
                         "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
                         "documentation of grid_sample for details.")


def _identity(rank, batch=1):
    theta = np.concatenate([np.eye(rank), np.zeros((rank, 1))], axis=1)
    return np.repeat(theta[None], batch, axis=0)


def test_identity_grid_reproduces_the_input_and_hand_computed_points():
    x = zgrad.tensor(np.arange(24.0).reshape(1, 2, 3, 4))
    grid = F.affine_grid(zgrad.tensor(_identity(2)), (1, 2, 3, 4), align_corners=True)
    assert grid.shape == (1, 3, 4, 2)
    for mode in ("bilinear", "nearest", "bicubic"):
        out = F.grid_sample(x, grid, mode=mode, align_corners=True)
        np.testing.assert_allclose(out.numpy(), x.numpy(), rtol=0, atol=1e-12)
    # the middle of pixels (0, 0), (0, 1), (1, 0), (1, 1); half a pixel left of (2, 0); far right of row 1
    points = zgrad.tensor([[[[-2 / 3, -0.5], [-4 / 3, 1.0], [3.0, 0.0]]]], dtype=zgrad.float64)
    out = F.grid_sample(x[:, :1], points, align_corners=True)
    np.testing.assert_allclose(out.numpy(), [[[[2.5, 4.0, 0.0]]]], atol=1e-12)
    border = F.grid_sample(x[:, :1], points, padding_mode="border", align_corners=True)
    np.testing.assert_allclose(border.numpy(), [[[[2.5, 8.0, 7.0]]]], atol=1e-12)


def test_nearest_mode_gives_the_grid_a_zero_gradient_and_none_warns_as_pytorch():
    x = zgrad.randn(1, 1, 3, 3, requires_grad=True)
    grid = zgrad.full((1, 2, 2, 2), 0.3, requires_grad=True)
    with pytest.warns(UserWarning) as record:
        F.grid_sample(x, grid, mode="nearest").sum().backward()
    assert [str(w.message) for w in record] == [ALIGN_CORNERS_WARNING]
    assert grid.grad.tolist() == np.zeros((1, 2, 2, 2)).tolist()
    assert x.grad.numpy()[0, 0, 1, 1] == 4.0 and x.grad.sum().item() == 4.0


@pytest.mark.torch
@pytest.mark.parametrize("rank, mode, padding_mode, align_corners", CASES)
def test_grid_sample_forward_and_gradients_match_torch(rank, mode, padding_mode, align_corners):
    check_torch(lambda lib, x, grid: lib.nn.functional.grid_sample(x, grid, mode, padding_mode, align_corners),
                SHAPES[rank], dtype=np.float64, domain=(-2.6, 2.6), seed=rank)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_float32_and_unit_and_empty_sizes_match_torch(mode):
    for padding_mode in ("zeros", "border", "reflection"):
        for align_corners in (False, True):
            def fn(lib, x, grid):
                return lib.nn.functional.grid_sample(x, grid, mode, padding_mode, align_corners)
            check_torch(fn, [(2, 2, 3, 4), (2, 2, 3, 2)], dtype=np.float32, rtol=1e-4, atol=1e-5)
            for shapes in ([(1, 2, 1, 4), (1, 2, 3, 2)], [(1, 2, 3, 1), (1, 2, 3, 2)], [(1, 1, 1, 1), (1, 2, 2, 2)],
                           [(0, 2, 3, 4), (0, 2, 2, 2)], [(2, 0, 3, 4), (2, 2, 2, 2)], [(2, 2, 3, 4), (2, 0, 2, 2)]):
                check_torch(fn, shapes, dtype=np.float64, domain=(-2.6, 2.6))


@pytest.mark.torch
@pytest.mark.parametrize("rank, modes", [(4, ("bilinear", "nearest", "bicubic")), (5, ("bilinear", "nearest"))])
def test_points_on_pixels_and_borders_match_torch(rank, modes):
    """An identity grid with align_corners puts every point on a pixel, the outer ones on the border,
    where the border and reflection paddings' grid gradient is zero (PyTorch's rule)."""
    size = (1, 2, 3, 4) if rank == 4 else (1, 2, 2, 3, 4)
    grid = torch.nn.functional.affine_grid(torch.tensor(_identity(rank - 2)), size, align_corners=True).numpy()
    x = np.random.default_rng(0).standard_normal(size)
    for mode in modes:
        for padding_mode in ("zeros", "border", "reflection"):
            results = []
            for lib in (zgrad, torch):
                xt, gt = lib.tensor(x, requires_grad=True), lib.tensor(grid, requires_grad=True)
                out = lib.nn.functional.grid_sample(xt, gt, mode, padding_mode, align_corners=True)
                out.backward(lib.tensor(np.arange(out.numel(), dtype=np.float64).reshape(tuple(out.shape))))
                results.append([t.detach().numpy() for t in (out, xt.grad, gt.grad)])
            for ours, theirs in zip(*results):
                np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 3, 3, 4, 2), (1, 1, 1, 3)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_and_its_theta_gradient_match_torch(size, align_corners):
    rank = len(size) - 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unit-size warning: compared in the warnings test
        check_torch(lambda lib, theta: lib.nn.functional.affine_grid(theta, size, align_corners),
                    [(size[0], rank, rank + 1)], dtype=np.float64, seed=len(size))


def _warnings_of(fn, lib):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fn(lib)
    return [(w.category, str(w.message), w.filename) for w in record]


@pytest.mark.torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 1, 1, 2)),
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(1, 2, 3), (1, 1, 2, 2)),
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(1, 2, 3), [1, 1, 1, 2], align_corners=True),
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(1, 3, 4), (1, 1, 1, 1, 1)),
])
def test_warnings_match_torch_and_point_at_the_caller(call):
    expected = _warnings_of(call, torch)
    assert expected and expected[0][2] == __file__
    assert _warnings_of(call, zgrad) == expected


def _sample(x_shape, grid_shape, *, dtypes=("float32", "float32"), **options):
    def call(lib):
        x = lib.zeros(*x_shape, dtype=getattr(lib, dtypes[0]))
        return lib.nn.functional.grid_sample(x, lib.zeros(*grid_shape, dtype=getattr(lib, dtypes[1])), **options)
    return call


def _affine(theta_shape, size, *, dtype="float32", **options):
    return lambda lib: lib.nn.functional.affine_grid(lib.zeros(*theta_shape, dtype=getattr(lib, dtype)), size,
                                                     **options)


ERRORS = {
    "mode": _sample((1, 1, 2, 2), (1, 1, 1, 2), mode="linear", padding_mode="none"),
    "padding_mode": _sample((1, 1, 2, 2), (1, 1, 1, 2), padding_mode="none", align_corners=False),
    "align_corners not bool": _sample((1, 1, 2, 2), (1, 1, 1, 2), align_corners=1),
    "input not a tensor": lambda lib: lib.nn.functional.grid_sample([1.0], lib.zeros(1, 1, 1, 2), align_corners=False),
    "batch": _sample((2, 1, 2, 2), (1, 1, 1, 2), align_corners=False),
    "last grid dim": _sample((1, 1, 2, 2), (1, 1, 1, 3), align_corners=False),
    "3-D input": _sample((1, 1, 2), (1, 1, 1), align_corners=False),
    "0-d input": lambda lib: lib.nn.functional.grid_sample(lib.tensor(1.0), lib.zeros(1, 1, 1, 2),
                                                           align_corners=False),
    "empty spatial dim": _sample((1, 1, 0, 2, 2), (1, 1, 1, 1, 3), mode="bicubic", align_corners=False),
    "rank mismatch": _sample((1, 1, 2, 2), (1, 1, 1, 1, 2), align_corners=False),
    "6-D": _sample((1, 1, 2, 2, 2, 2), (1, 1, 1, 1, 1, 4), align_corners=False),
    "bicubic 5-D": _sample((1, 1, 2, 2, 2), (1, 1, 1, 1, 3), mode="bicubic", align_corners=False),
    "integer input": _sample((1, 1, 2, 2), (1, 1, 1, 2), dtypes=("int64", "float32"), align_corners=False),
    "integer 5-D input": _sample((1, 1, 2, 2, 2), (1, 1, 1, 1, 3), dtypes=("int64", "int64"), align_corners=False),
    "grid dtype": _sample((1, 1, 2, 2), (1, 1, 1, 2), dtypes=("float32", "float64"), align_corners=False),
    "theta dtype": _affine((1, 2, 3), (1, 1, 2, 2), dtype="int64", align_corners=False),
    "theta shape 2-D": _affine((1, 3, 4), (1, 1, 2, 2), align_corners=False),
    "theta shape 3-D": _affine((1, 2, 3), (1, 1, 2, 2, 2), align_corners=False),
    "size rank": _affine((1, 2, 3), [1, 1, 2], align_corners=False),
    "size not positive": _affine((1, 2, 3), (1, 0, 2, 2), align_corners=False),
    "size not ints": _affine((1, 2, 3), (1, 1, 2.0, 2), align_corners=False),
    "theta batch": _affine((2, 2, 3), (3, 1, 2, 2), align_corners=False),
    "affine align_corners not bool": _affine((1, 2, 3), (1, 1, 2, 2), align_corners=0),
}


def _error_of(call, lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as info:
            call(lib)
    return info.value, str(info.value).replace("torch.", "zgrad.")


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_torch(name):
    expected, message = _error_of(ERRORS[name], torch)
    error, ours = _error_of(ERRORS[name], zgrad)
    assert ours == message
    # PyTorch's "not implemented for 'Long'" is a NotImplementedError; zgrad's dtype errors are RuntimeErrors
    refused_dtype = type(expected) is NotImplementedError and "not implemented for" in message
    kind = RuntimeError if refused_dtype else type(expected)
    assert isinstance(error, kind), f"{type(error).__name__} is not a {kind.__name__}"


@pytest.mark.torch
def test_autocast_runs_grid_sample_in_float32_on_the_cpu_as_torch():
    results = []
    for lib in (zgrad, torch):
        x, grid = lib.zeros(1, 1, 2, 2, dtype=lib.bfloat16), lib.zeros(1, 1, 1, 2, dtype=lib.bfloat16)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            sampled = lib.nn.functional.grid_sample(x, grid, align_corners=False)
            affine = lib.nn.functional.affine_grid(lib.zeros(1, 2, 3), (1, 1, 2, 2), align_corners=False)
        results.append((str(sampled.dtype), str(affine.dtype)))
    assert results[0] == tuple(name.replace("torch.", "") for name in results[1])


@requires_cuda
def test_cuda_matches_the_cpu():
    def fn(lib, x, theta):
        grid = lib.nn.functional.affine_grid(theta, (1, 1, 2, 2), align_corners=False)
        return lib.nn.functional.grid_sample(x, grid, "bilinear", "reflection", align_corners=False)
    check_device(fn, [(1, 1, 3, 3), (1, 2, 3)], dtype=np.float64)


class SpatialTransformerNet(nn.Module):
    """PyTorch's spatial transformer tutorial's ``Net`` (intermediate_source/spatial_transformer_tutorial.py)
    at 16 x 16 inputs and 3 classes: a localization network regresses an affine map, initialized to
    the identity, with which the input is resampled before the classifier sees it."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=5)
        self.conv2 = nn.Conv2d(4, 8, kernel_size=3)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(32, 16)
        self.fc2 = nn.Linear(16, 3)
        self.localization = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
            nn.Conv2d(4, 6, kernel_size=3), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
        )
        self.fc_loc = nn.Sequential(nn.Linear(6 * 2 * 2, 16), nn.ReLU(True), nn.Linear(16, 3 * 2))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(zgrad.tensor([1, 0, 0, 0, 1, 0], dtype=zgrad.float))

    def stn(self, x):
        xs = self.localization(x).view(-1, 6 * 2 * 2)
        theta = self.fc_loc(xs).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size())
        return F.grid_sample(x, grid)

    def forward(self, x):
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.relu(self.fc1(x.view(-1, 32)))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def test_spatial_transformer_tutorial_trains():
    zgrad.manual_seed(0)
    model = SpatialTransformerNet()
    optimizer = zgrad.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data, target = zgrad.randn(8, 1, 16, 16), zgrad.tensor([0, 1, 2, 0, 1, 2, 0, 1])

    def evaluation_loss():
        model.eval()
        with zgrad.no_grad():
            return F.nll_loss(model(data), target).item()

    with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior has changed"):
        before = evaluation_loss()
        for _ in range(8):
            model.train()
            optimizer.zero_grad()
            F.nll_loss(model(data), target).backward()
            assert model.fc_loc[2].weight.grad.abs().sum().item() > 0  # the grid's gradient reaches theta
            optimizer.step()
        after = evaluation_loss()
    assert after < before


def test_taps_outside_the_input_read_nothing_not_zero_times_a_pixel():
    """An inf or NaN pixel does not reach the points whose outside taps have weight 0 (PyTorch skips them)."""
    x = zgrad.ones(1, 1, 2, 2)
    x[0, 0, 0, 0] = float("inf")
    far = F.grid_sample(x, zgrad.tensor([[[[5.0, 5.0], [0.5, 0.5]]]]), align_corners=False)
    assert far.flatten().tolist() == [0.0, 1.0]
    x = zgrad.ones(1, 1, 3, 3)
    x[0, 0, 0, 0] = float("nan")
    edge = F.grid_sample(x, zgrad.tensor([[[[0.0, 0.0], [1.0, 1.0]]]]), align_corners=True)
    assert edge.flatten().tolist() == [1.0, 1.0]


@pytest.mark.parametrize("mode, padding_mode", [("bilinear", "zeros"), ("bicubic", "border"),
                                                ("bilinear", "reflection")])
def test_gradients_match_finite_differences(mode, padding_mode):
    """Points kept off pixel edges (the kernels' kinks): input and grid gradients by central differences."""

    def sample(lib, x, grid):
        return lib.nn.functional.grid_sample(x, grid * 0.3 + 0.137, mode=mode, padding_mode=padding_mode,
                                             align_corners=False)

    check_finite_differences(sample, [(1, 2, 4, 5), (1, 3, 2, 2)], domain=(-1.0, 1.0))

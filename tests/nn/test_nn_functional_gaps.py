"""The functional forms added for PyTorch programs (padding, resampling, ELU/PReLU, vector
functions, binary cross-entropy and the other pointwise losses, transposed convolution, instance
norm): forward and every gradient against PyTorch in float32 and float64 and against float64
finite differences; dtypes and PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import case, check_finite_differences, check_torch, torch

pytestmark = pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss:UserWarning")


def F(lib):
    return lib.nn.functional


def _probabilities(lib, x):
    return lib.sigmoid(x)


PAD_CASES = [
    case(f"pad_{mode}_{name}", (lambda m, p: lambda lib, x: F(lib).pad(x, p, mode=m))(mode, pad), shape)
    for mode in ("constant", "reflect", "replicate", "circular")
    for name, pad, shape in (("1d", (1, 2), (2, 3, 5)), ("2d", (2, 1, 0, 3), (2, 3, 4, 5)),
                             ("3d", (1, 1, 2, 0, 1, 2), (1, 2, 3, 4, 5)), ("2d_unbatched", (1, 2, 2, 1), (3, 4, 5)))
] + [
    case("pad_constant_value_crop", lambda lib, x: F(lib).pad(x, (-1, 2, 1, -2), value=3.5), (2, 3, 4, 5)),
    case("pad_constant_one_dim_of_4", lambda lib, x: F(lib).pad(x, (0, 0, 0, 0, 1, 1)), (2, 3, 4, 5)),
]

RESAMPLE_CASES = [
    case("pixel_shuffle", lambda lib, x: F(lib).pixel_shuffle(x, 2), (2, 8, 3, 4)),
    case("pixel_shuffle_unbatched", lambda lib, x: F(lib).pixel_shuffle(x, 3), (9, 2, 2)),
    case("pixel_unshuffle", lambda lib, x: F(lib).pixel_unshuffle(x, 2), (2, 3, 4, 6)),
] + [
    case(f"interpolate_{mode}_{ac}_{i}", (lambda m, a, k: lambda lib, x: F(lib).interpolate(
        x, mode=m, align_corners=a, **k))(mode, ac, kwargs), (2, 3, 4, 5))
    for mode, ac in (("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True))
    for i, kwargs in enumerate((dict(scale_factor=2), dict(size=(5, 7)), dict(size=(2, 3)),
                                dict(scale_factor=(1.5, 0.7)), dict(scale_factor=1.7, recompute_scale_factor=True)))
] + [
    case("interpolate_linear", lambda lib, x: F(lib).interpolate(x, scale_factor=2, mode="linear"), (2, 3, 5)),
    case("interpolate_nearest_1d", lambda lib, x: F(lib).interpolate(x, size=7), (2, 3, 5)),
    case("interpolate_area", lambda lib, x: F(lib).interpolate(x, size=(3, 2), mode="area"), (2, 3, 7, 5)),
    case("interpolate_trilinear", lambda lib, x: F(lib).interpolate(x, size=(3, 2, 4), mode="trilinear",
                                                                    align_corners=True), (1, 2, 2, 3, 3)),
]

ACTIVATION_CASES = [
    case("elu", lambda lib, x: F(lib).elu(x), (3, 4)),
    case("elu_alpha_large_x", lambda lib, x: F(lib).elu(x * 50, alpha=0.5), (3, 4)),
    case("elu_inplace", lambda lib, x: F(lib).elu(x * 1, inplace=True), (3, 4)),
    case("prelu_channels", lambda lib, x, w: F(lib).prelu(x, w), (2, 3, 4), (3,)),
    case("prelu_shared", lambda lib, x, w: F(lib).prelu(x, w), (2, 3, 4, 2), (1,)),
    case("prelu_1d", lambda lib, x, w: F(lib).prelu(x, w), (5,), (1,)),
]

VECTOR_CASES = [
    case("normalize", lambda lib, x: F(lib).normalize(x), (3, 4)),
    case("normalize_dim0_p1", lambda lib, x: F(lib).normalize(x, p=1.0, dim=0), (3, 4)),
    case("normalize_p3_last", lambda lib, x: F(lib).normalize(x, p=3, dim=-1), (3, 4, 2)),
    case("normalize_zero_rows", lambda lib, x: F(lib).normalize(x * 0), (3, 4)),
    case("cosine_similarity", lambda lib, x, y: F(lib).cosine_similarity(x, y), (3, 4), (3, 4)),
    case("cosine_similarity_broadcast_dim0", lambda lib, x, y: F(lib).cosine_similarity(x, y, dim=0), (3, 4), (3, 1)),
    case("cosine_similarity_zero", lambda lib, x, y: F(lib).cosine_similarity(x * 0, y), (3, 4), (1, 4)),
    case("pairwise_distance", lambda lib, x, y: F(lib).pairwise_distance(x, y), (3, 4), (3, 4)),
    case("pairwise_distance_p1_keepdim", lambda lib, x, y: F(lib).pairwise_distance(x, y, p=1.0, keepdim=True),
         (3, 4), (3, 4)),
]

LOSS_CASES = [
    case(f"{name}_{reduction}", (lambda f, r: lambda lib, *xs: f(lib, *xs, r))(fn, reduction), *shapes)
    for reduction in ("mean", "sum", "none")
    for name, fn, shapes in (
        ("bce", lambda lib, x, t, r: F(lib).binary_cross_entropy(lib.sigmoid(x), lib.sigmoid(t), reduction=r),
         ((3, 4), (3, 4))),
        ("bce_weight", lambda lib, x, t, w, r: F(lib).binary_cross_entropy(
            lib.sigmoid(x), lib.sigmoid(t), weight=w.detach(), reduction=r), ((3, 4), (3, 4), (4,))),
        ("bce_logits", lambda lib, x, t, r: F(lib).binary_cross_entropy_with_logits(x * 20, lib.sigmoid(t),
                                                                                     reduction=r), ((3, 4), (3, 4))),
        ("bce_logits_weights", lambda lib, x, t, w, pw, r: F(lib).binary_cross_entropy_with_logits(
            x, lib.sigmoid(t), weight=w.detach(), pos_weight=pw.detach(), reduction=r),
         ((3, 4), (3, 4), (3, 1), (4,))),
        ("smooth_l1", lambda lib, x, t, r: F(lib).smooth_l1_loss(x, t, reduction=r), ((3, 4), (3, 4))),
        ("smooth_l1_beta_half", lambda lib, x, t, r: F(lib).smooth_l1_loss(x, t, reduction=r, beta=0.5),
         ((3, 4), (3, 4))),
        ("smooth_l1_beta0", lambda lib, x, t, r: F(lib).smooth_l1_loss(x, t, reduction=r, beta=0.0), ((3, 4), (3, 4))),
        ("huber_delta2", lambda lib, x, t, r: F(lib).huber_loss(x, t, reduction=r, delta=2.0), ((3, 4), (3, 4))),
        ("kl_div", lambda lib, x, t, r: F(lib).kl_div(lib.log_softmax(x, 1), lib.softmax(t, 1), reduction=r),
         ((3, 4), (3, 4))),
        ("kl_div_zero_targets", lambda lib, x, t, r: F(lib).kl_div(lib.log_softmax(x, 1), lib.relu(t), reduction=r),
         ((3, 4), (3, 4))),
        ("kl_div_log_target", lambda lib, x, t, r: F(lib).kl_div(lib.log_softmax(x, 1), lib.log_softmax(t, 1),
                                                                  reduction=r, log_target=True), ((3, 4), (3, 4))),
    )
] + [
    case("kl_div_batchmean", lambda lib, x, t: F(lib).kl_div(lib.log_softmax(x, 1), lib.softmax(t, 1),
                                                             reduction="batchmean"), (3, 4), (3, 4)),
    case("bce_logits_zero_logits", lambda lib, x, t: F(lib).binary_cross_entropy_with_logits(x * 0, lib.sigmoid(t)),
         (3, 4), (3, 4)),
]

CONV_TRANSPOSE_CASES = [
    case(f"conv_transpose2d_{name}", (lambda k: lambda lib, x, w, b: F(lib).conv_transpose2d(x, w, b, **k))(kwargs),
         (2, 4, 5, 6), weight, (weight[1] * kwargs.get("groups", 1),))
    for name, kwargs, weight in (
        ("plain", {}, (4, 3, 3, 3)),
        ("stride2", dict(stride=2), (4, 3, 3, 3)),
        ("stride2_padding_output_padding", dict(stride=2, padding=1, output_padding=1), (4, 3, 3, 3)),
        ("groups2", dict(stride=2, padding=1, groups=2), (4, 2, 3, 3)),
        ("dilation2", dict(dilation=2, padding=2), (4, 3, 3, 2)),
        ("pairs", dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2)), (4, 3, 2, 4)),
        ("output_padding_below_dilation", dict(dilation=3, output_padding=2), (4, 3, 3, 3)),
    )
] + [
    case("conv_transpose2d_unbatched_no_bias", lambda lib, x, w: F(lib).conv_transpose2d(x, w, stride=2),
         (4, 5, 6), (4, 3, 3, 3)),
]

NORM_CASES = [
    case("instance_norm", lambda lib, x: F(lib).instance_norm(x), (2, 3, 4, 5)),
    case("instance_norm_affine", lambda lib, x, w, b: F(lib).instance_norm(x, weight=w, bias=b),
         (2, 3, 4, 5), (3,), (3,)),
    case("instance_norm_1d", lambda lib, x, w, b: F(lib).instance_norm(x, weight=w, bias=b), (2, 3, 7), (3,), (3,)),
]

CASES = PAD_CASES + RESAMPLE_CASES + ACTIVATION_CASES + VECTOR_CASES + LOSS_CASES + CONV_TRANSPOSE_CASES + NORM_CASES
# float32 sums of many products (the bias gradient of a transposed convolution) round differently
FLOAT32_TOLERANCE = {"conv_transpose2d": dict(rtol=1e-4, atol=1e-4), "instance_norm": dict(rtol=1e-4, atol=1e-5)}


def _float32_tolerance(name: str) -> dict:
    return next((tol for prefix, tol in FLOAT32_TOLERANCE.items() if name.startswith(prefix)), {})


@pytest.mark.torch
@pytest.mark.parametrize("c", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_matches_torch(c, dtype):
    tol = _float32_tolerance(c.name) if dtype == np.float32 else {}
    check_torch(c.fn, c.shapes, dtype=dtype, domain=c.domain, **tol)


# Finite differences need a smooth function of every input: the random inputs keep away from the
# kinks (abs, where, clamp, nearest indices) except in the cases named here, and the weights torch
# refuses to differentiate are detached.
NO_FINITE_DIFFERENCES = ("normalize_zero_rows", "cosine_similarity_zero", "bce_logits_zero_logits", "bce_weight",
                         "bce_logits_weights")


@pytest.mark.parametrize("c", [c for c in CASES if not c.id.startswith(NO_FINITE_DIFFERENCES)])
def test_matches_finite_differences(c):
    check_finite_differences(c.fn, c.shapes, domain=c.domain)


def test_one_hot_values_and_dtype():
    t = zgrad.tensor([[0, 2], [1, 3]])
    out = F(zgrad).one_hot(t)
    assert out.dtype == zgrad.int64 and out.shape == (2, 2, 4)
    np.testing.assert_array_equal(out.numpy(), np.eye(4, dtype=np.int64)[[[0, 2], [1, 3]]])
    assert F(zgrad).one_hot(t, 6).shape == (2, 2, 6)
    assert F(zgrad).one_hot(zgrad.tensor([], dtype=zgrad.int64), 3).shape == (0, 3)


@pytest.mark.parametrize("tensor, num_classes, message", [
    (zgrad.tensor([1, 2], dtype=zgrad.int32), -1, "only applicable to index tensor of type LongTensor"),
    (zgrad.tensor([1, -2]), -1, "Class values must be non-negative."),
    (zgrad.tensor([1, 5]), 3, "Class values must be smaller than num_classes."),
    (zgrad.tensor([], dtype=zgrad.int64), -1, "Can not infer total number of classes from empty tensor."),
])
def test_one_hot_errors(tensor, num_classes, message):
    with pytest.raises(RuntimeError, match=message):
        F(zgrad).one_hot(tensor, num_classes)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F(zgrad).pad(x, (1,)), RuntimeError, "Padding length must be divisible by 2"),
    (lambda x: F(zgrad).pad(x, (1, 1) * 5), RuntimeError, "less than or equal to two times the input dimension"),
    (lambda x: F(zgrad).pad(x, (1, 2), mode="reflect"), NotImplementedError, "Padding size 2 is not supported for 4D"),
    (lambda x: F(zgrad).pad(x, (5, 0, 0, 0), mode="reflect"), RuntimeError, "Padding size should be less than"),
    (lambda x: F(zgrad).pad(x, (6, 0, 0, 0), mode="circular"), RuntimeError, "wrapping around more than once"),
    (lambda x: F(zgrad).pad(x, (1, 1, 1, 1), mode="reflect", value=1), RuntimeError, "doesn't take in value"),
    (lambda x: F(zgrad).pad(x, (1, 1), mode="foo"), NotImplementedError, "Unrecognised padding mode foo"),
    (lambda x: F(zgrad).pixel_shuffle(x, 2), RuntimeError, "divisible by the square of upscale_factor"),
    (lambda x: F(zgrad).pixel_unshuffle(x, 2), RuntimeError, "expects width to be divisible by downscale_factor"),
    (lambda x: F(zgrad).interpolate(x), ValueError, "either size or scale_factor should be defined"),
    (lambda x: F(zgrad).interpolate(x, size=2, scale_factor=2), ValueError, "only one of size or scale_factor"),
    (lambda x: F(zgrad).interpolate(x, size=2, align_corners=True), ValueError, "align_corners option can only"),
    (lambda x: F(zgrad).interpolate(x, size=2, mode="linear"), NotImplementedError, "Got 4D input, but linear"),
    (lambda x: F(zgrad).prelu(x, zgrad.ones(2)), RuntimeError, "Found parameter numbers = 2 and channel size = 3"),
    (lambda x: F(zgrad).elu(x.long()), RuntimeError, "not implemented for"),
    (lambda x: F(zgrad).binary_cross_entropy(x, x[:1]), ValueError, "different to the input size"),
    (lambda x: F(zgrad).binary_cross_entropy(x, x), RuntimeError, "all elements of input should be between 0 and 1"),
    (lambda x: F(zgrad).smooth_l1_loss(x, x, beta=-1.0), RuntimeError, "does not support negative values for beta"),
    (lambda x: F(zgrad).huber_loss(x, x, delta=0.0), RuntimeError, "does not support non-positive values for delta"),
    (lambda x: F(zgrad).kl_div(x, x, reduction="avg"), ValueError, "avg is not a valid value for reduction"),
    (lambda x: F(zgrad).normalize(x, dim=4), IndexError, "Dimension out of range"),
    (lambda x: F(zgrad).conv_transpose2d(x, zgrad.ones(3, 2, 3, 3), stride=2, output_padding=2), RuntimeError,
     "output padding must be smaller than either stride or dilation"),
    (lambda x: F(zgrad).conv_transpose2d(x, zgrad.ones(4, 2, 3, 3)), RuntimeError, "to have 4 channels"),
    (lambda x: F(zgrad).instance_norm(x[:, :, :1, :1]), ValueError, "Expected more than 1 spatial element"),
    (lambda x: F(zgrad).instance_norm(x, use_input_stats=False), RuntimeError, "running_mean and running_var"),
])
def test_errors(call, error, message):
    x = zgrad.tensor(np.random.default_rng(0).uniform(-1, 1, (2, 3, 4, 5)).astype(np.float32))
    with pytest.raises(error, match=message):
        call(x)


@pytest.mark.torch
def test_instance_norm_running_statistics_match_torch():
    x = np.random.default_rng(0).standard_normal((4, 3, 5, 5))
    means, variances = {}, {}
    for lib in (zgrad, torch):
        running_mean, running_var = lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64)
        F(lib).instance_norm(lib.tensor(x), running_mean, running_var, momentum=0.3)
        means[lib.__name__], variances[lib.__name__] = running_mean.numpy(), running_var.numpy()
    np.testing.assert_allclose(means["zgrad"], means["torch"], rtol=1e-12)
    np.testing.assert_allclose(variances["zgrad"], variances["torch"], rtol=1e-12)


def test_kl_div_mean_warns_as_torch():
    x = zgrad.tensor([[0.2, 0.8]]).log()
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F(zgrad).kl_div(x, zgrad.tensor([[0.5, 0.5]]))

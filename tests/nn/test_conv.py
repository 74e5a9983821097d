"""conv2d and nn.Conv2d: forward and every gradient against PyTorch (float32, float64) and against
float64 finite differences, over stride / padding / dilation / groups / padding-mode combinations;
PyTorch's initialization; error texts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import threadpoolctl

import zgrad
from helpers import case, check_finite_differences, check_torch, require_torch, torch
from zgrad import nn
from zgrad.kernels.cpu import layers as cpu_layers
from zgrad.kernels.cpu import winograd
from zgrad.kernels.cpu.parts import run_in_parts
from zgrad.ops.conv import conv2d_layer

# torch warns that 'same' padding with an even kernel copies its input; the result is what counts
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths:UserWarning")


def F(lib):
    return lib.nn.functional


def _padded_conv(lib, x, w, padding, mode, **kwargs):
    """conv2d with a padding mode: zgrad pads inside its kernels, torch pads explicitly first."""
    if lib is zgrad:
        return conv2d_layer("conv2d", x, w, None, padding=padding, padding_mode=mode, **kwargs)
    ph, pw = padding
    return F(lib).conv2d(F(lib).pad(x, (pw, pw, ph, ph), mode=mode), w, **kwargs)


CASES = [
    case("plain", lambda lib, x, w: F(lib).conv2d(x, w), (2, 3, 6, 5), (4, 3, 3, 3)),
    case("bias_padding", lambda lib, x, w, b: F(lib).conv2d(x, w, b, padding=1), (2, 3, 6, 6), (4, 3, 3, 3), (4,)),
    case("stride2_padding_pair", lambda lib, x, w, b: F(lib).conv2d(x, w, b, stride=2, padding=(1, 2)),
         (2, 3, 7, 6), (4, 3, 3, 3), (4,)),
    case("stride_pair_dilation2", lambda lib, x, w: F(lib).conv2d(x, w, stride=(1, 2), padding=2, dilation=2),
         (2, 2, 7, 8), (3, 2, 3, 3)),
    case("dilation_pair_stride1", lambda lib, x, w: F(lib).conv2d(x, w, padding=(1, 3), dilation=(1, 3)),
         (1, 2, 6, 7), (3, 2, 3, 3)),
    case("groups2", lambda lib, x, w, b: F(lib).conv2d(x, w, b, padding=1, groups=2), (2, 4, 5, 6), (6, 2, 3, 3), (6,)),
    case("groups_depthwise_strided", lambda lib, x, w: F(lib).conv2d(x, w, stride=2, padding=1, groups=4),
         (2, 4, 7, 7), (8, 1, 3, 3)),
    case("groups_stride_dilation", lambda lib, x, w: F(lib).conv2d(x, w, stride=(2, 1), padding=(2, 1),
                                                                   dilation=(1, 2), groups=2),
         (2, 4, 8, 7), (4, 2, 3, 2)),
    case("rectangular_kernel", lambda lib, x, w: F(lib).conv2d(x, w, padding=(0, 1)), (2, 3, 6, 5), (2, 3, 2, 4)),
    # stride 1 (the shifted path): KH != KW copies per channel, each group's rows of stacked weights
    case("groups_rectangular_dilated_stride1", lambda lib, x, w: F(lib).conv2d(x, w, padding=(2, 1), dilation=(2, 1),
                                                                               groups=2),
         (2, 4, 6, 7), (4, 2, 3, 2)),
    case("same_even_kernel", lambda lib, x, w: F(lib).conv2d(x, w, padding="same"), (2, 3, 5, 6), (4, 3, 2, 4)),
    case("same_dilated", lambda lib, x, w: F(lib).conv2d(x, w, padding="same", dilation=2), (1, 2, 6, 6), (3, 2, 3, 3)),
    case("valid", lambda lib, x, w: F(lib).conv2d(x, w, padding="valid"), (2, 3, 5, 5), (2, 3, 3, 3)),
    # padding wider than the kernel's reach: output rows and columns past the shared zero padding
    case("padding_beyond_reach", lambda lib, x, w: F(lib).conv2d(x, w, padding=(3, 4)), (2, 2, 4, 5), (3, 2, 3, 2)),
    case("pointwise_padded", lambda lib, x, w: F(lib).conv2d(x, w, padding=(2, 1)), (2, 3, 4, 5), (2, 3, 1, 1)),
    case("kernel_equals_input", lambda lib, x, w: F(lib).conv2d(x, w), (2, 3, 3, 3), (4, 3, 3, 3)),
    case("unbatched", lambda lib, x, w, b: F(lib).conv2d(x, w, b, padding=1), (3, 5, 6), (4, 3, 3, 3), (4,)),
    case("pointwise", lambda lib, x, w, b: F(lib).conv2d(x, w, b), (2, 4, 5, 6), (6, 4, 1, 1), (6,)),
    case("transposed_input", lambda lib, x, w: F(lib).conv2d(x.transpose(2, 3), w, padding=1), (2, 3, 5, 6),
         (4, 3, 3, 3)),
    case("pointwise_groups", lambda lib, x, w: F(lib).conv2d(x, w, groups=2), (2, 4, 5, 5), (6, 2, 1, 1)),
    case("pointwise_strided", lambda lib, x, w: F(lib).conv2d(x, w, stride=2), (2, 4, 5, 5), (3, 4, 1, 1)),
    case("reflect", lambda lib, x, w: _padded_conv(lib, x, w, (2, 1), "reflect"), (2, 2, 5, 6), (3, 2, 3, 3)),
    case("replicate_strided", lambda lib, x, w: _padded_conv(lib, x, w, (2, 2), "replicate", stride=2),
         (2, 2, 5, 6), (3, 2, 3, 3)),
    case("circular_dilated", lambda lib, x, w: _padded_conv(lib, x, w, (1, 2), "circular", dilation=(1, 2)),
         (1, 2, 5, 6), (3, 2, 3, 3)),
]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("c", CASES)
def test_conv2d_matches_torch(c, dtype):
    # float32: a sum of C*KH*KW products in another order than oneDNN's
    check_torch(c.fn, c.shapes, dtype=dtype, domain=c.domain, atol=1e-5 if dtype == np.float32 else None)


@pytest.mark.parametrize("c", CASES)
def test_conv2d_finite_differences(c):
    check_finite_differences(c.fn, c.shapes, domain=c.domain)


def _copy_module(module, reference):
    with torch.no_grad():
        for (name, p), q in zip(reference.named_parameters(), module.parameters()):
            p.copy_(torch.from_numpy(q.numpy().copy()))


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=3, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2, bias=False),
    dict(kernel_size=3, padding=2, padding_mode="reflect"),
    dict(kernel_size=3, stride=2, padding=1, padding_mode="circular"),
    dict(kernel_size=2, padding="same", padding_mode="replicate"),
], ids=["basic", "strided_grouped", "reflect", "circular", "same_replicate"])
def test_conv2d_module_matches_torch(kwargs):
    """Module forward, input gradient and parameter gradients, with the torch module's weights."""
    require_torch()
    zgrad.manual_seed(0)
    module = nn.Conv2d(4, 6, **kwargs)
    reference = torch.nn.Conv2d(4, 6, **kwargs)
    _copy_module(module, reference)
    x = np.random.default_rng(1).standard_normal((2, 4, 7, 6)).astype(np.float32)
    zx, tx = zgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = module(zx), reference(tx)
    upstream = np.random.default_rng(2).standard_normal(ref.shape).astype(np.float32)
    out.backward(zgrad.tensor(upstream))
    ref.backward(torch.tensor(upstream))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(zx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    for p, q in zip(module.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_conv2d_module_initialization():
    """kaiming_uniform_(a=sqrt(5)) on the weight, U(+-1/sqrt(fan_in)) on the bias, float32."""
    zgrad.manual_seed(0)
    module = nn.Conv2d(16, 32, (3, 5), groups=2)
    fan_in = 8 * 3 * 5
    bound = 1 / math.sqrt(fan_in)
    for p in (module.weight, module.bias):
        values = p.numpy()
        assert p.dtype == np.float32 and p.requires_grad
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.9 * bound  # drawn over the whole range
    np.testing.assert_allclose(module.weight.numpy().std(), bound / math.sqrt(3), rtol=0.05)
    assert module.weight.shape == (32, 8, 3, 5) and module.bias.shape == (32,)
    assert nn.Conv2d(2, 2, 1, bias=False).bias is None
    assert nn.Conv2d(2, 2, 1, dtype=np.float64).weight.dtype == np.float64


@pytest.mark.torch
def test_conv2d_module_repr_matches_torch():
    require_torch()
    for kwargs in (dict(kernel_size=3), dict(kernel_size=(3, 2), stride=2, padding=1, dilation=2, groups=2, bias=False,
                                           padding_mode="reflect")):
        assert repr(nn.Conv2d(4, 6, **kwargs)) == repr(torch.nn.Conv2d(4, 6, **kwargs))


def _raises(error, match, fn, *args, **kwargs):
    with pytest.raises(error, match=match):
        fn(*args, **kwargs)


def test_conv2d_errors():
    conv = nn.Conv2d(3, 8, 3)
    name = r"Conv2d\(3, 8, kernel_size=\(3, 3\), stride=\(1, 1\)\)"
    _raises(RuntimeError, name + r": Given groups=1, weight of size \[8, 3, 3, 3\], expected input\[2, 4, 5, 5\] to "
            r"have 3 channels, but got 4 channels instead", conv, zgrad.randn(2, 4, 5, 5))
    _raises(RuntimeError, name + r": Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got input of "
            r"size: \[2, 3\]", conv, zgrad.randn(2, 3))
    _raises(RuntimeError, r"Calculated padded input size per channel: \(2 x 4\). Kernel size: \(3 x 3\). Kernel size "
            r"can't be greater than actual input size", conv, zgrad.randn(1, 3, 2, 4))
    _raises(RuntimeError, r"Calculated padded input size per channel: \(4 x 4\). Kernel size: \(5 x 5\)",
            nn.Conv2d(3, 8, 3, dilation=2), zgrad.randn(1, 3, 4, 4))
    _raises(ValueError, "in_channels must be divisible by groups", nn.Conv2d, 3, 8, 3, groups=2)
    _raises(ValueError, "out_channels must be divisible by groups", nn.Conv2d, 4, 6, 3, groups=4)
    _raises(ValueError, "padding='same' is not supported for strided convolutions", nn.Conv2d, 3, 8, 3, stride=2,
            padding="same")
    _raises(ValueError, "Invalid padding string 'full'", nn.Conv2d, 3, 8, 3, padding="full")
    _raises(ValueError, "padding_mode must be one of", nn.Conv2d, 3, 8, 3, padding_mode="mirror")
    _raises(TypeError, r"kernel_size must be an int or a tuple of two ints, got \(3, 3, 3\)", nn.Conv2d, 3, 8,
            (3, 3, 3))
    _raises(RuntimeError, r"Padding size should be less than the corresponding input dimension, but got: padding "
            r"\(4, 4\) at dimension 3 of input \[1, 3, 3, 3\]", nn.Conv2d(3, 8, 3, padding=4, padding_mode="reflect"),
            zgrad.randn(1, 3, 3, 3))


def test_conv2d_functional_errors():
    x, w = zgrad.randn(2, 4, 5, 5), zgrad.randn(3, 2, 3, 3)
    _raises(RuntimeError, r"conv2d: Given groups=2, expected weight to be divisible by 2 at dimension 0, but got "
            r"weight of size \[3, 2, 3, 3\] instead", F(zgrad).conv2d, x, w, groups=2)
    _raises(RuntimeError, r"conv2d: Given weight of size \[4, 2, 3, 3\], expected bias to be 1-dimensional with 4 "
            r"elements, but got bias of size \[3\] instead", F(zgrad).conv2d, x, zgrad.randn(4, 2, 3, 3),
            zgrad.randn(3), groups=2)
    _raises(RuntimeError, r"conv2d: Input type \(float64\) and weight type \(float32\) should be the same",
            F(zgrad).conv2d, zgrad.randn(2, 4, 5, 5, dtype=np.float64), zgrad.randn(4, 4, 3, 3))
    _raises(RuntimeError, "conv2d: expected a floating point input, got int64", F(zgrad).conv2d,
            zgrad.zeros(2, 4, 5, 5, dtype=np.int64), zgrad.randn(4, 4, 3, 3))
    _raises(RuntimeError, "non-positive stride is not supported", F(zgrad).conv2d, x, zgrad.randn(4, 4, 3, 3), stride=0)
    _raises(RuntimeError, "negative padding is not supported", F(zgrad).conv2d, x, zgrad.randn(4, 4, 3, 3), padding=-1)
    _raises(RuntimeError, "dilation should be greater than zero", F(zgrad).conv2d, x, zgrad.randn(4, 4, 3, 3),
            dilation=0)
    _raises(RuntimeError, "weight should have 4 dimensions", F(zgrad).conv2d, x, zgrad.randn(4, 4, 3))
    _raises(TypeError, "argument 'input'", F(zgrad).conv2d, np.zeros((2, 4, 5, 5)), zgrad.randn(4, 4, 3, 3))


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [dict(padding=1), dict(padding=(2, 1), dilation=2, groups=2), dict(padding=(0, 3)),
                                    dict(stride=2, padding=1)],
                         ids=["shifted", "shifted_grouped_dilated", "shifted_beyond_reach", "columns"])
def test_conv2d_batch_in_several_chunks(monkeypatch, kwargs):
    """The backend works a few samples at a time: here 3 (shifted path) or 8 (columns) per chunk,
    the last chunk shorter."""
    require_torch()
    monkeypatch.setattr(cpu_layers, "_COLUMNS_CHUNK_BYTES", 50_000)
    rng = np.random.default_rng(3)
    _check_float64_conv(rng, (11, 4, 9, 8), (6, 4 // kwargs.get("groups", 1), 3, 3), **kwargs)


def _check_float64_conv(rng, x_shape, w_shape, **kwargs):
    """conv2d's output and every gradient against torch's, float64, with a bias."""
    x, w, b = rng.standard_normal(x_shape), rng.standard_normal(w_shape), rng.standard_normal(w_shape[0])
    zgrad_args = [zgrad.tensor(a, requires_grad=True) for a in (x, w, b)]
    torch_args = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    out, ref = F(zgrad).conv2d(*zgrad_args, **kwargs), F(torch).conv2d(*torch_args, **kwargs)
    upstream = rng.standard_normal(ref.shape)
    out.backward(zgrad.tensor(upstream))
    ref.backward(torch.tensor(upstream))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-10)
    for ours, theirs in zip(zgrad_args, torch_args):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10, atol=1e-10)


# 3x3 stride-1 convolutions with at least winograd.MIN_CHANNELS channels each way take the
# Winograd F(2x2, 3x3) path: odd and even output sizes (the last tile row or column half used),
# padding 0, 1, 2 and (1, 2), one-row outputs, several chunks.
WINOGRAD_CASES = [
    case("even_padding1_bias", lambda lib, x, w, b: F(lib).conv2d(x, w, b, padding=1), (2, 16, 8, 8), (16, 16, 3, 3),
         (16,)),
    case("odd_valid", lambda lib, x, w: F(lib).conv2d(x, w), (2, 16, 9, 9), (18, 16, 3, 3)),
    case("padding2_odd", lambda lib, x, w, b: F(lib).conv2d(x, w, b, padding=2), (1, 17, 9, 8), (16, 17, 3, 3),
         (16,)),
    case("padding_pair_same", lambda lib, x, w: F(lib).conv2d(x, w, padding=(1, 2)), (3, 16, 16, 5), (16, 16, 3, 3)),
    case("one_output_row", lambda lib, x, w: F(lib).conv2d(x, w), (2, 16, 3, 22), (16, 16, 3, 3)),
    case("unbatched_same", lambda lib, x, w: F(lib).conv2d(x, w, padding="same"), (16, 9, 9), (16, 16, 3, 3)),
]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("c", WINOGRAD_CASES)
def test_winograd_conv2d_matches_torch(c, dtype, monkeypatch):
    calls = []
    for name in ("forward", "backward"):
        monkeypatch.setattr(winograd, name, _counted(getattr(winograd, name), calls))
    # float32: a weight gradient sums a few thousand products; against float64, torch's float32
    # weight gradient of padding_pair_same is 1.9e-5 off, the Winograd one 3.9e-5 (at 32x64x32x32:
    # torch 3.5e-3, Winograd 6.4e-4)
    check_torch(c.fn, c.shapes, dtype=dtype, domain=c.domain, atol=1e-4 if dtype == np.float32 else None)
    assert "forward" in calls and "backward" in calls, f"the Winograd path was not taken: {calls}"


def _counted(fn, calls):
    def counted(*args, **kwargs):
        calls.append(fn.__name__)
        return fn(*args, **kwargs)
    return counted


def test_winograd_conv2d_finite_differences():
    check_finite_differences(lambda lib, x, w, b: F(lib).conv2d(x, w, b, padding=1), [(1, 16, 8, 8), (16, 16, 3, 3),
                                                                                       (16,)])


@pytest.mark.torch
@pytest.mark.parametrize("split", [False, True], ids=["one_part", "two_parts"])
def test_winograd_conv2d_in_several_chunks(monkeypatch, split):
    """Tiles of one sample per chunk: the last chunk and the weight gradient's running sum; split
    between two threads where numpy's BLAS runs one (kernels/cpu/parts.py)."""
    require_torch()
    monkeypatch.setattr(winograd, "_CHUNK_BYTES", 1)
    monkeypatch.setattr(winograd, "_MIN_PRODUCT_TILES", 1)
    indexes = set()

    def recorded(part, tasks, scratch):
        def recording(index, parts, scratch):
            indexes.add(index)
            part(index, parts, scratch)
        run_in_parts(recording, tasks, scratch)

    monkeypatch.setattr(winograd, "run_in_parts", recorded)
    threads = zgrad.get_num_threads()
    zgrad.set_num_threads(2)
    limits = threadpoolctl.threadpool_limits(1 if split else 2, user_api="blas")
    try:
        _winograd_in_chunks()
    finally:
        limits.restore_original_limits()
        zgrad.set_num_threads(threads)
    assert indexes == ({0, 1} if split else {0})


def _winograd_in_chunks():
    _check_float64_conv(np.random.default_rng(4), (5, 16, 9, 8), (20, 16, 3, 3), padding=1)


@pytest.mark.torch
def test_winograd_conv2d_of_an_empty_batch_matches_torch():
    """No samples: an empty output, an empty input gradient and zero weight and bias gradients."""
    require_torch()
    _check_float64_conv(np.random.default_rng(5), (0, 16, 8, 8), (16, 16, 3, 3), padding=1)


@pytest.mark.parametrize("change, expected", [
    (dict(), True), (dict(channels=15), False), (dict(stride=(2, 1)), False), (dict(dilation=(1, 2)), False),
    (dict(groups=2), False), (dict(padding=(3, 1)), False), (dict(padding_mode="reflect"), False),
    (dict(kernel=(3, 2)), False), (dict(image=(7, 9)), False), (dict(image=(4, 16)), True),
])
def test_winograd_applies_to_3x3_stride_1_convolutions_of_enough_channels(change, expected):
    conv = dict(channels=16, image=(8, 8), kernel=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1,
                padding_mode="zeros") | change
    weight_shape = (16, conv["channels"] // conv["groups"], *conv["kernel"])
    assert winograd.applies((2, conv["channels"], *conv["image"]), weight_shape, conv["stride"], conv["padding"],
                            conv["dilation"], conv["groups"], conv["padding_mode"]) is expected


def test_padding_modes_are_named_once():
    """One tuple of padding-mode names serves the layer, the op and the kernels (which number the
    modes by their position in it, and read padded positions through one function)."""
    from zgrad.kernels import dispatch_layers, vocabulary
    from zgrad.kernels.cpu.kernels import conv as cpu_conv
    from zgrad.ops import conv as conv_ops

    assert conv_ops.PADDING_MODES is dispatch_layers.PADDING_MODES
    assert cpu_conv._source.py_func is vocabulary.padding_source
    codes = (vocabulary.PAD_ZEROS, vocabulary.PAD_REFLECT, vocabulary.PAD_REPLICATE, vocabulary.PAD_CIRCULAR)
    assert [dispatch_layers.PADDING_MODES[code] for code in codes] == ["zeros", "reflect", "replicate", "circular"]
    with pytest.raises(ValueError, match=r"padding_mode must be one of .*, but got padding_mode='mirror'"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")


@pytest.mark.torch
@pytest.mark.parametrize("kernel, stride, dilation, padding, output_padding",
                         [(1, 1, 2, 0, 1), (1, 1, 3, 1, 2), (3, 1, 2, 1, 1), (2, 2, 3, 0, 2), (3, 3, 1, 2, 2)])
def test_conv_transpose2d_output_padding_below_the_dilation_matches_torch(kernel, stride, dilation, padding,
                                                                        output_padding):
    """An output padding at stride 1 (allowed below the dilation) reached past the rows the input has."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 2, 4, 5)), rng.standard_normal((2, 3, kernel, kernel))
    results = []
    for lib in (zgrad, torch):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv_transpose2d(xt, wt, stride=stride, padding=padding, output_padding=output_padding,
                                               dilation=dilation)
        (y * lib.tensor(np.linspace(0.5, 2.0, y.numel()).reshape(tuple(y.shape)))).sum().backward()
        results.append([y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()])
    for got, expected in zip(*results):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)

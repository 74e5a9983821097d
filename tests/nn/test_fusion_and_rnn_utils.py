"""``zgrad.nn.utils``: BatchNorm folding (``fusion``), ``skip_init``, the conv weight memory-format
converters, and ``rnn``'s ``unpad_sequence`` / ``unpack_sequence`` / ``invert_permutation``:
identities without torch, and the same results as PyTorch's where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import require_torch
from zgrad import nn
from zgrad.nn.utils import rnn

F64 = zgrad.float64
# (conv class, BatchNorm class, input shape (N, C, *spatial), transpose)
CONVS = [
    ("Conv1d", "BatchNorm1d", (2, 3, 9), False),
    ("Conv2d", "BatchNorm2d", (2, 3, 7, 6), False),
    ("Conv3d", "BatchNorm3d", (2, 3, 5, 4, 4), False),
    ("ConvTranspose2d", "BatchNorm2d", (2, 3, 5, 4), True),
]


def _eval_bn(bn_cls: str, features: int, affine: bool = True) -> nn.Module:
    """An eval-mode BatchNorm with running statistics and affine values far from their defaults."""
    rng = np.random.default_rng(0)
    bn = getattr(nn, bn_cls)(features, affine=affine, dtype=F64)
    bn.running_mean.copy_(zgrad.tensor(rng.normal(size=features), dtype=F64))
    bn.running_var.copy_(zgrad.tensor(rng.uniform(0.5, 2.0, size=features), dtype=F64))
    if affine:
        bn.weight.data.copy_(zgrad.tensor(rng.normal(size=features), dtype=F64))
        bn.bias.data.copy_(zgrad.tensor(rng.normal(size=features), dtype=F64))
    return bn.eval()


def _conv_pair(conv_cls: str, bn_cls: str, bias: bool, affine: bool = True) -> tuple[nn.Module, nn.Module]:
    zgrad.manual_seed(0)
    conv = getattr(nn, conv_cls)(3, 4, 3, bias=bias, dtype=F64).eval()
    return conv, _eval_bn(bn_cls, 4, affine)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("conv_cls, bn_cls, shape, transpose", CONVS)
def test_fuse_conv_bn_eval_equals_the_eval_chain(conv_cls, bn_cls, shape, transpose, bias):
    conv, bn = _conv_pair(conv_cls, bn_cls, bias)
    fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    x = zgrad.randn(*shape, dtype=F64)
    np.testing.assert_allclose(fused(x).numpy(), bn(conv(x)).numpy(), rtol=1e-12, atol=1e-12)
    assert fused is not conv and type(fused) is type(conv)
    assert (conv.bias is None) is (not bias)  # the original is left unchanged
    assert isinstance(fused.bias, nn.Parameter) and fused.bias.dtype == F64 and fused.bias.requires_grad is bias


def test_fuse_conv_bn_without_affine():
    conv, bn = _conv_pair("Conv2d", "BatchNorm2d", bias=False, affine=False)
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    x = zgrad.randn(2, 3, 6, 6, dtype=F64)
    np.testing.assert_allclose(fused(x).numpy(), bn(conv(x)).numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("features", [4, 1])
@pytest.mark.parametrize("bias", [True, False])
def test_fuse_linear_bn_eval_equals_the_eval_chain(bias, features):
    zgrad.manual_seed(0)
    linear = nn.Linear(5, 4, bias=bias, dtype=F64).eval()
    bn = _eval_bn("BatchNorm1d", features)
    fused = nn.utils.fuse_linear_bn_eval(linear, bn)
    x = zgrad.randn(6, 5, dtype=F64)
    expected = bn(linear(x)) if features == 4 else bn(linear(x).unsqueeze(1)).squeeze(1)
    np.testing.assert_allclose(fused(x).numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)
    assert fused.weight.shape == (4, 5) and fused.bias.shape == ((4,) if bias else (features,))  # as PyTorch


def test_fuse_weights_keep_dtypes_and_requires_grad():
    w = zgrad.randn(4, 3, 3, 3, requires_grad=True)
    rm, rv = zgrad.zeros(4, dtype=F64), zgrad.ones(4, dtype=F64)
    fw, fb = nn.utils.fuse_conv_bn_weights(w, None, rm, rv, 1e-5, None, None)
    assert fw.dtype == zgrad.float32 and fb.dtype == zgrad.float32
    assert fw.requires_grad and not fb.requires_grad
    lw, lb = nn.utils.fuse_linear_bn_weights(zgrad.randn(4, 2, dtype=F64), zgrad.randn(4, dtype=F64), rm, rv, 1e-5,
                                             zgrad.ones(4, dtype=F64), zgrad.zeros(4, dtype=F64))
    assert isinstance(lw, nn.Parameter) and lw.dtype == F64 and lb.shape == (4,)


def test_fusion_errors():
    conv, bn = _conv_pair("Conv2d", "BatchNorm2d", True)
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        nn.utils.fuse_conv_bn_eval(conv.train(), bn)
    no_stats = nn.BatchNorm2d(4, track_running_stats=False).eval()
    with pytest.raises(AssertionError, match="running_mean and bn.running_var must not be None"):
        nn.utils.fuse_conv_bn_eval(conv.eval(), no_stats)
    with pytest.raises(AssertionError, match="linear.out_features=4 and bn.num_features=3"):
        nn.utils.fuse_linear_bn_eval(nn.Linear(2, 4).eval(), nn.BatchNorm1d(3).eval())


@pytest.mark.torch
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("conv_cls, bn_cls, shape, transpose", CONVS)
def test_fuse_conv_bn_eval_matches_torch(conv_cls, bn_cls, shape, transpose, bias):
    torch = require_torch()
    conv, bn = _conv_pair(conv_cls, bn_cls, bias)
    t_conv = getattr(torch.nn, conv_cls)(3, 4, 3, bias=bias, dtype=torch.float64).eval()
    t_bn = getattr(torch.nn, bn_cls)(4, dtype=torch.float64).eval()
    t_conv.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in conv.state_dict().items()})
    t_bn.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in bn.state_dict().items()})
    fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    t_fused = torch.nn.utils.fuse_conv_bn_eval(t_conv, t_bn, transpose=transpose)
    np.testing.assert_allclose(fused.weight.detach().numpy(), t_fused.weight.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fused.bias.detach().numpy(), t_fused.bias.detach().numpy(), rtol=1e-12, atol=1e-12)
    x = np.random.default_rng(1).normal(size=shape)
    np.testing.assert_allclose(fused(zgrad.tensor(x)).detach().numpy(),
                               t_fused(torch.from_numpy(x)).detach().numpy(), rtol=1e-12, atol=1e-12)
    assert fused.bias.requires_grad == t_fused.bias.requires_grad


@pytest.mark.torch
@pytest.mark.parametrize("bias", [True, False])
def test_fuse_linear_bn_eval_matches_torch(bias):
    torch = require_torch()
    zgrad.manual_seed(0)
    linear, bn = nn.Linear(5, 4, bias=bias, dtype=F64).eval(), _eval_bn("BatchNorm1d", 4)
    t_linear = torch.nn.Linear(5, 4, bias=bias, dtype=torch.float64).eval()
    t_bn = torch.nn.BatchNorm1d(4, dtype=torch.float64).eval()
    t_linear.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in linear.state_dict().items()})
    t_bn.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in bn.state_dict().items()})
    fused, t_fused = nn.utils.fuse_linear_bn_eval(linear, bn), torch.nn.utils.fuse_linear_bn_eval(t_linear, t_bn)
    for name in ("weight", "bias"):
        np.testing.assert_allclose(getattr(fused, name).detach().numpy(), getattr(t_fused, name).detach().numpy(),
                                   rtol=1e-12, atol=1e-12)
        assert getattr(fused, name).requires_grad == getattr(t_fused, name).requires_grad


def test_skip_init_shapes_dtypes_devices_and_rng():
    zgrad.manual_seed(3)
    before = zgrad.get_rng_state()
    m = nn.utils.skip_init(nn.Linear, 5, 2, dtype=F64)
    assert np.array_equal(zgrad.get_rng_state().numpy(), before.numpy())  # no draws, as on PyTorch's meta device
    assert m.weight.shape == (2, 5) and m.bias.shape == (2,) and m.weight.dtype == F64
    assert m.weight.device.type == "cpu" and isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
    bn = nn.utils.skip_init(nn.BatchNorm2d, num_features=3, device="cpu")
    assert bn.running_mean.shape == (3,) and bn.num_batches_tracked.dtype == zgrad.int64


def test_skip_init_errors():
    with pytest.raises(RuntimeError, match="Expected a Module; got"):
        nn.utils.skip_init(int, 3)

    class NoDevice(nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="Module must support a 'device' arg to skip initialization"):
        nn.utils.skip_init(NoDevice, 3)


def test_convert_conv_weight_memory_format():
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.Sequential(nn.ConvTranspose2d(3, 2, 3)), nn.Conv3d(2, 2, 1))
    assert nn.utils.convert_conv2d_weight_memory_format(model, zgrad.channels_last) is model
    assert model[0].weight.is_contiguous()
    assert nn.utils.convert_conv3d_weight_memory_format(model, zgrad.channels_last_3d) is model
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        nn.utils.convert_conv2d_weight_memory_format(model, zgrad.channels_last_3d)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        nn.utils.convert_conv3d_weight_memory_format(model, zgrad.channels_last)
    with pytest.raises(TypeError, match="must be a zgrad.memory_format"):
        nn.utils.convert_conv2d_weight_memory_format(model, 3)


def _sequences(lengths=(3, 5, 1, 4)) -> list[zgrad.Tensor]:
    rng = np.random.default_rng(2)
    return [zgrad.tensor(rng.normal(size=(n, 2))) for n in lengths]


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_unpack_round_trip(enforce_sorted):
    seqs = _sequences((5, 4, 3, 1) if enforce_sorted else (3, 5, 1, 4))
    out = rnn.unpack_sequence(rnn.pack_sequence(seqs, enforce_sorted=enforce_sorted))
    assert len(out) == len(seqs)
    for a, b in zip(out, seqs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_unpad_round_trip_and_gradient(batch_first):
    seqs = [s.requires_grad_() for s in _sequences()]
    padded = rnn.pad_sequence(seqs, batch_first=batch_first)
    out = rnn.unpad_sequence(padded, zgrad.tensor([3, 5, 1, 4]), batch_first=batch_first)
    for a, b in zip(out, seqs):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    sum(o.sum() for o in out).backward()
    assert all(np.array_equal(s.grad.numpy(), np.ones(s.shape)) for s in seqs)
    assert padded.shape == ((4, 5, 2) if batch_first else (5, 4, 2))  # the input is left as it was
    with pytest.raises(ValueError, match="one length per sequence"):
        rnn.unpad_sequence(padded, [3, 5], batch_first=batch_first)


def test_invert_permutation():
    perm = zgrad.randperm(9)
    inverse = rnn.invert_permutation(perm)
    np.testing.assert_array_equal(perm.numpy()[inverse.numpy()], np.arange(9))
    np.testing.assert_array_equal(inverse.numpy(), np.argsort(perm.numpy()))
    assert inverse.dtype == perm.dtype and rnn.invert_permutation(None) is None
    packed = rnn.pack_sequence(_sequences(), enforce_sorted=False)
    np.testing.assert_array_equal(rnn.invert_permutation(packed.sorted_indices).numpy(),
                                  packed.unsorted_indices.numpy())


@pytest.mark.torch
@pytest.mark.parametrize("batch_first", [False, True])
def test_rnn_utils_match_torch(batch_first):
    torch = require_torch()
    seqs = _sequences()
    t_seqs = [torch.from_numpy(np.array(s.numpy())) for s in seqs]
    lengths = [3, 5, 1, 4]
    out = rnn.unpad_sequence(rnn.pad_sequence(seqs, batch_first=batch_first), zgrad.tensor(lengths), batch_first)
    t_out = torch.nn.utils.rnn.unpad_sequence(torch.nn.utils.rnn.pad_sequence(t_seqs, batch_first=batch_first),
                                              torch.tensor(lengths), batch_first)
    for a, b in zip(out, t_out):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    unpacked = rnn.unpack_sequence(rnn.pack_sequence(seqs, enforce_sorted=False))
    t_unpacked = torch.nn.utils.rnn.unpack_sequence(torch.nn.utils.rnn.pack_sequence(t_seqs, enforce_sorted=False))
    for a, b in zip(unpacked, t_unpacked):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    perm = np.random.default_rng(4).permutation(7)
    inverse = rnn.invert_permutation(zgrad.tensor(perm))
    t_inverse = torch.nn.utils.rnn.invert_permutation(torch.from_numpy(perm))
    np.testing.assert_array_equal(inverse.numpy(), t_inverse.numpy())
    assert str(inverse.dtype) == str(t_inverse.dtype).removeprefix("torch.")

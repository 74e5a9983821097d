"""The new nn functions and modules on zgrad's CUDA backend (Numba's simulator here) against its
CPU backend: forward and gradients, every array a CUDA array. A representative subset runs by
default; the rest is marked ``full``."""

from __future__ import annotations

import numpy as np
import pytest

import test_nn_functional_gaps as gaps
import zgrad
from cuda_helpers import check_device, requires_cuda, strict_cuda

pytestmark = requires_cuda

SUBSET = {
    "pad_constant_value_crop", "pad_reflect_2d", "pad_circular_1d", "pixel_shuffle", "interpolate_bilinear_True_1",
    "interpolate_nearest_None_0", "elu_alpha_large_x", "prelu_channels", "normalize_zero_rows", "cosine_similarity",
    "bce_logits_weights_mean", "bce_weight_sum", "smooth_l1_none", "kl_div_zero_targets_sum",
    "conv_transpose2d_stride2_padding_output_padding", "conv_transpose2d_groups2", "instance_norm_affine",
}


def _params() -> list:
    return [pytest.param(p.values[0], id=p.id, marks=() if p.id in SUBSET else (pytest.mark.full,))
            for p in gaps.CASES]


@pytest.mark.parametrize("c", _params())
def test_case_on_cuda_matches_cpu(c):
    check_device(c.fn, c.shapes, domain=c.domain, **gaps._float32_tolerance(c.name))


def test_one_hot_on_cuda():
    with strict_cuda():
        out = zgrad.nn.functional.one_hot(zgrad.tensor([2, 0, 1]), 4)
        assert out.is_cuda and out.dtype == zgrad.int64
        np.testing.assert_array_equal(out.cpu().numpy(), np.eye(4, dtype=np.int64)[[2, 0, 1]])


def _packed_lstm(lib, x, *params):
    """An LSTM with the given parameters on a packed batch of lengths 4, 2, 3."""
    lstm = lib.nn.LSTM(3, 2, bidirectional=True)
    with lib.no_grad():
        for p, value in zip(lstm.parameters(), params):
            p.copy_(value)
    packed = lib.nn.utils.rnn.pack_padded_sequence(x, [4, 2, 3], enforce_sorted=False)
    out, (h, c) = lstm(packed)
    padded, _ = lib.nn.utils.rnn.pad_packed_sequence(out)
    return padded.sum() + (h * c).sum()


@pytest.mark.full
def test_packed_lstm_on_cuda_matches_cpu():
    shapes = [(4, 3, 3)] + [(8, 3), (8, 2), (8,), (8,)] * 2
    check_device(_packed_lstm, shapes)


def _rnn(lib, x, *params):
    rnn = lib.nn.RNN(3, 2, num_layers=2, nonlinearity="relu")
    with lib.no_grad():
        for p, value in zip(rnn.parameters(), params):
            p.copy_(value)
    out, h = rnn(x)
    return out.sum() + h.sum()


def test_rnn_on_cuda_matches_cpu():
    shapes = [(4, 2, 3), (2, 3), (2, 2), (2,), (2,), (2, 2), (2, 2), (2,), (2,)]
    check_device(_rnn, shapes)


def _modules_run() -> list:
    """InstanceNorm2d (running statistics, then evaluation), ConvTranspose2d, Upsample and a packed
    round trip on the current default device: the host copies of every result."""
    zgrad.manual_seed(0)
    x = zgrad.tensor(np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32), requires_grad=True)
    norm = zgrad.nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    deconv = zgrad.nn.ConvTranspose2d(3, 2, 3, stride=2)
    deconv.load_state_dict({k: zgrad.full(v.shape, 0.1) for k, v in deconv.state_dict().items()})
    y = zgrad.nn.Upsample(scale_factor=2, mode="bilinear")(deconv(norm(x)))
    y.sum().backward()
    norm.eval()
    evaluated = norm(x.detach())
    rnn_utils = zgrad.nn.utils.rnn
    packed = rnn_utils.pack_sequence([x.detach()[0, 0], x.detach()[0, 1, :2]], enforce_sorted=False)
    padded, _ = rnn_utils.pad_packed_sequence(packed, batch_first=True)
    return [t._host() for t in (y.detach(), x.grad, norm.running_mean, norm.running_var, evaluated, padded)]


def test_modules_on_cuda_match_cpu():
    expected = _modules_run()
    with strict_cuda():
        results = _modules_run()
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)

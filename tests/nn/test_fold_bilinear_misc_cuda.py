"""``unfold``/``fold``, ``bilinear``, ``local_response_norm``, LP pooling, max unpooling, RReLU,
alpha dropout and the multi-class margin losses on zgrad's CUDA backend (Numba's simulator here)
against its CPU backend: forward and gradients, every array a CUDA array."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, is_device_array, requires_cuda, strict_cuda

pytestmark = requires_cuda

UNPOOL_INDEX = np.array([[[[0, 3], [13, 10]], [[6, 2], [8, 15]]]])
MULTILABEL_TARGET = [[2, 0, -1, 1], [3, -1, 0, 0]]


def F(lib):
    return lib.nn.functional


CASES = {
    "unfold": (lambda lib, x: F(lib).unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [(2, 2, 4, 5)]),
    "fold": (lambda lib, c: F(lib).fold(c, (4, 5), 2, padding=1, stride=2), [(2, 8, 9)]),
    "bilinear": (lambda lib, a, b, w, bias: F(lib).bilinear(a, b, w, bias), [(3, 2), (3, 4), (5, 2, 4), (5,)]),
    "local_response_norm": (lambda lib, x: F(lib).local_response_norm(x, 3, 0.5, 0.7, 1.5), [(2, 4, 3)]),
    "lp_pool2d": (lambda lib, x: F(lib).lp_pool2d(x.abs() + 0.1, 2, 2), [(1, 2, 4, 4)]),
    "max_unpool2d": (lambda lib, x: F(lib).max_unpool2d(x, lib.tensor(UNPOOL_INDEX), 2), [(1, 2, 2, 2)]),
    "multi_margin_loss": (lambda lib, x, w: F(lib).multi_margin_loss(x, lib.tensor([1, 3]), p=2, weight=w),
                          [(2, 4), (4,)]),
    "multilabel_margin_loss": (lambda lib, x: F(lib).multilabel_margin_loss(x, lib.tensor(MULTILABEL_TARGET)),
                               [(2, 4)]),
    "rrelu_eval": (lambda lib, x: F(lib).rrelu(x, 0.1, 0.3), [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_on_cuda_matches_cpu(name):
    fn, shapes = CASES[name]
    check_device(fn, shapes)


def test_random_layers_run_on_cuda():
    with strict_cuda():
        zgrad.manual_seed(0)
        x = zgrad.randn(4, 3, 5, requires_grad=True)
        dropped = F(zgrad).feature_alpha_dropout(x, 0.5, training=True)
        slopes = F(zgrad).rrelu(x, 0.1, 0.3, training=True)
        (dropped.sum() + slopes.sum()).backward()
        assert all(is_device_array(t._data) for t in (dropped, slopes, x.grad))
        values, out = x.detach()._host(), slopes.detach()._host()
    ratio = out[values < 0] / values[values < 0]
    assert ratio.min() >= 0.1 - 1e-6 and ratio.max() <= 0.3 + 1e-6

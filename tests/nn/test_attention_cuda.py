"""``F.scaled_dot_product_attention`` on zgrad's CUDA kernels (Numba's simulator here) against the
CPU kernels: forward and gradients on small shapes over the argument combinations, and dropout
drawing the same mask on both backends under ``manual_seed``."""

from __future__ import annotations

import numpy as np
import pytest

from cuda_helpers import check_device, requires_cuda

pytestmark = requires_cuda

QKV = [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3)]
_MASK = np.random.default_rng(3).random((3, 5)) > 0.4
_MASK[1] = False  # a fully masked row


def _sdpa(lib, *args, **kwargs):
    return lib.nn.functional.scaled_dot_product_attention(*args, **kwargs)


CASES = {
    "plain": (lambda lib, q, k, v: _sdpa(lib, q, k, v, scale=0.6), QKV),
    "causal_l_lt_s": (lambda lib, q, k, v: _sdpa(lib, q, k, v, is_causal=True), QKV),
    "causal_l_gt_s": (lambda lib, q, k, v: _sdpa(lib, q, k, v, is_causal=True), [(1, 2, 5, 4), (1, 2, 3, 4),
                                                                                   (1, 2, 3, 3)]),
    "gqa_3d": (lambda lib, q, k, v: _sdpa(lib, q, k, v, enable_gqa=True), [(4, 3, 4), (2, 5, 4), (2, 5, 3)]),
    "bool_mask": (lambda lib, q, k, v: _sdpa(lib, q, k, v, attn_mask=lib.tensor(_MASK)), QKV),
    "float_mask_b1ls": (lambda lib, q, k, v, m: _sdpa(lib, q, k, v, attn_mask=m), [*QKV, (2, 1, 3, 5)]),
    "dropout": (lambda lib, q, k, v: (lib.manual_seed(5), _sdpa(lib, q, k, v, dropout_p=0.4))[1], QKV),
}


@pytest.mark.parametrize("fn, shapes", [pytest.param(fn, shapes, id=name) for name, (fn, shapes) in CASES.items()])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cuda_matches_cpu(fn, shapes, dtype):
    check_device(fn, shapes, dtype=dtype)

"""``F.scaled_dot_product_attention`` on zgrad's CUDA kernels (Numba's simulator here) against the
CPU kernels: forward and gradients on small shapes over the argument combinations, and dropout
drawing the same mask on both backends under ``manual_seed``. Both CUDA paths: the fused kernels
(no cuBLAS, as in the simulator) and the matrix products a GPU with cuBLAS takes (here through
the stand-in that computes cuBLAS's GEMM on the simulator's memory), also in several chunks."""

from __future__ import annotations

import numpy as np
import pytest
from cublas_stand_in import install_stand_in
from cuda_helpers import REAL_GPU, SIMULATOR, check_device, requires_cuda

pytestmark = requires_cuda


@pytest.fixture
def stand_in(monkeypatch):
    return install_stand_in(monkeypatch)


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
    "gqa_float_mask": (lambda lib, q, k, v, m: _sdpa(lib, q, k, v, attn_mask=m, enable_gqa=True),
                       [(2, 4, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3), (2, 4, 3, 5)]),
    "gqa_causal": (lambda lib, q, k, v: _sdpa(lib, q, k, v, is_causal=True, enable_gqa=True),
                   [(2, 4, 6, 4), (2, 2, 5, 4), (2, 2, 5, 3)]),
    "bool_mask": (lambda lib, q, k, v: _sdpa(lib, q, k, v, attn_mask=lib.tensor(_MASK)), QKV),
    "float_mask_b1ls": (lambda lib, q, k, v, m: _sdpa(lib, q, k, v, attn_mask=m), [*QKV, (2, 1, 3, 5)]),
    "dropout": (lambda lib, q, k, v: (lib.manual_seed(5), _sdpa(lib, q, k, v, dropout_p=0.4))[1], QKV),
}


@pytest.mark.parametrize("fn, shapes", [pytest.param(fn, shapes, id=name) for name, (fn, shapes) in CASES.items()])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cuda_matches_cpu(fn, shapes, dtype):
    check_device(fn, shapes, dtype=dtype)


@pytest.mark.skipif(not SIMULATOR, reason="the stand-in reads the simulator's host memory")
@pytest.mark.parametrize("fn, shapes", [pytest.param(fn, shapes, id=name) for name, (fn, shapes) in CASES.items()])
@pytest.mark.parametrize("chunk", ["one chunk", "a head a chunk", "blocks of two warps"])
def test_by_matrix_products_matches_cpu(stand_in, monkeypatch, fn, shapes, chunk):
    """The products path's row kernels run a warp per row; with blocks of 64 threads (the
    simulator's own 8 make one partial warp) two warps share a block and its rows."""
    from zgrad.kernels.cuda import attention
    from zgrad.kernels.cuda import runtime as rt
    if chunk == "a head a chunk":
        monkeypatch.setattr(attention, "SCORE_CHUNK_BYTES", 1)
    if chunk == "blocks of two warps":
        monkeypatch.setattr(rt, "SIM_BLOCK", 64)
    check_device(fn, shapes, dtype=np.float64)
    assert stand_in.calls, "attention did not run as matrix products"


@pytest.mark.gpu
@pytest.mark.skipif(not REAL_GPU, reason="needs a real CUDA GPU (run with ZGRAD_TEST_REAL_GPU=1 on a machine with one)")
@pytest.mark.parametrize("fn, shapes", [pytest.param(fn, shapes, id=name) for name, (fn, shapes) in CASES.items()])
def test_on_a_gpu_attention_runs_as_cublas_products(monkeypatch, fn, shapes):
    from zgrad.kernels.cuda import attention, cublas
    matmul = attention.matmul
    assert cublas.available(), cublas.INSTALL_HINT
    products = []
    monkeypatch.setattr(attention, "matmul", lambda *args: products.append(args) or matmul(*args))
    check_device(fn, shapes, dtype=np.float64)
    assert products, "attention did not run as cuBLAS products"

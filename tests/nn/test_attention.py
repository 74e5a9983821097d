"""``F.scaled_dot_product_attention`` (the fused kernels) against PyTorch: forward and every
gradient in float64 to ~1e-12 and in float32, over masks of both kinds and their broadcast shapes,
``is_causal`` with L != S, ``scale``, grouped-query attention, 2- to 5-D inputs and Ev != E; fully
masked rows as torch's CPU kernels give them; dropout by its statistics, its reproducibility and
finite differences; and the documented errors."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import central_differences, check_torch, random_inputs

F = zgrad.nn.functional


def _sdpa(lib, *args, **kwargs):
    return lib.nn.functional.scaled_dot_product_attention(*args, **kwargs)


def _bool_mask(shape, seed=3, empty_row=None):
    mask = np.random.default_rng(seed).random(shape) > 0.4
    mask[..., :, 0] = True  # every row sees a key unless a test empties it
    if empty_row is not None:
        mask[..., empty_row, :] = False
    return mask


B, H, L, S, E, EV = 2, 3, 70, 130, 8, 6  # L and S cross the kernels' block sizes (panels: causal_several_panels)
QKV = [(B, H, L, E), (B, H, S, E), (B, H, S, EV)]

CASES = {
    "plain": (lambda lib, q, k, v: _sdpa(lib, q, k, v), QKV),
    "short": (lambda lib, q, k, v: _sdpa(lib, q, k, v), [(1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)]),
    "3d": (lambda lib, q, k, v: _sdpa(lib, q, k, v), [(4, 9, 8), (4, 11, 8), (4, 11, 5)]),
    "2d": (lambda lib, q, k, v: _sdpa(lib, q, k, v), [(9, 8), (11, 8), (11, 5)]),
    "5d_broadcast_batch": (lambda lib, q, k, v: _sdpa(lib, q, k, v), [(2, 3, 2, 9, 8), (1, 3, 2, 11, 8),
                                                                        (2, 1, 2, 11, 8)]),
    "scale": (lambda lib, q, k, v: _sdpa(lib, q, k, v, scale=0.3), QKV),
    "causal_l_lt_s": (lambda lib, q, k, v: _sdpa(lib, q, k, v, is_causal=True), QKV),
    "causal_l_gt_s": (lambda lib, q, k, v: _sdpa(lib, q, k, v, is_causal=True),
                      [(B, H, S, E), (B, H, L, E), (B, H, L, EV)]),
    "causal_square": (lambda lib, q, k, v: _sdpa(lib, q, k, v, is_causal=True, scale=0.7),
                      [(B, H, L, E), (B, H, L, E), (B, H, L, EV)]),
    "causal_several_panels": (lambda lib, q, k, v: _sdpa(lib, q, k, v, is_causal=True),
                              [(1, 2, 800, 8), (1, 2, 420, 8), (1, 2, 420, 4)]),
    "gqa": (lambda lib, q, k, v: _sdpa(lib, q, k, v, enable_gqa=True), [(B, 4, L, E), (B, 2, S, E), (B, 2, S, EV)]),
    "gqa_causal": (lambda lib, q, k, v: _sdpa(lib, q, k, v, is_causal=True, enable_gqa=True),
                   [(B, 6, L, E), (B, 2, S, E), (B, 2, S, EV)]),
    "gqa_3d": (lambda lib, q, k, v: _sdpa(lib, q, k, v, enable_gqa=True), [(4, 9, 8), (2, 11, 8), (2, 11, 8)]),
    "bool_mask_ls": (lambda lib, q, k, v: _sdpa(lib, q, k, v, attn_mask=lib.tensor(_bool_mask((L, S)))), QKV),
    "bool_mask_b1ls": (lambda lib, q, k, v: _sdpa(lib, q, k, v, attn_mask=lib.tensor(_bool_mask((B, 1, L, S)))),
                       QKV),
    "bool_mask_bhls": (lambda lib, q, k, v: _sdpa(lib, q, k, v, attn_mask=lib.tensor(_bool_mask((B, H, L, S)))),
                       QKV),
    "bool_mask_padding": (lambda lib, q, k, v: _sdpa(lib, q, k, v,
                                                     attn_mask=lib.tensor(_bool_mask((B, 1, 1, S)))), QKV),
    "bool_mask_gqa": (lambda lib, q, k, v: _sdpa(lib, q, k, v, attn_mask=lib.tensor(_bool_mask((B, 4, L, S))),
                                                 enable_gqa=True), [(B, 4, L, E), (B, 2, S, E), (B, 2, S, EV)]),
    "float_mask_ls": (lambda lib, q, k, v, m: _sdpa(lib, q, k, v, attn_mask=m), [*QKV, (L, S)]),
    "float_mask_b1ls": (lambda lib, q, k, v, m: _sdpa(lib, q, k, v, attn_mask=m), [*QKV, (B, 1, L, S)]),
    "float_mask_bhls": (lambda lib, q, k, v, m: _sdpa(lib, q, k, v, attn_mask=m, scale=1.5), [*QKV, (B, H, L, S)]),
    "float_mask_h1s": (lambda lib, q, k, v, m: _sdpa(lib, q, k, v, attn_mask=m), [*QKV, (H, 1, S)]),
    "float_mask_3d": (lambda lib, q, k, v, m: _sdpa(lib, q, k, v, attn_mask=m), [(4, 9, 8), (4, 11, 8), (4, 11, 5),
                                                                                (9, 11)]),
    "fully_masked_bool_row": (lambda lib, q, k, v: _sdpa(lib, q, k, v,
                                                         attn_mask=lib.tensor(_bool_mask((L, S), empty_row=5))), QKV),
    "fully_masked_float_row": (lambda lib, q, k, v: _sdpa(
        lib, q, k, v, attn_mask=lib.tensor(np.where(_bool_mask((B, 1, L, S), empty_row=7), 0.0, -np.inf)).to(q.dtype)),
        QKV),
    "empty_keys": (lambda lib, q, k, v: _sdpa(lib, q, k, v), [(1, 2, 3, 4), (1, 2, 0, 4), (1, 2, 0, 5)]),
}


def _params():
    return [pytest.param(fn, shapes, id=name) for name, (fn, shapes) in CASES.items()]


@pytest.mark.torch
@pytest.mark.parametrize("fn, shapes", _params())
def test_float64_matches_torch(fn, shapes):
    check_torch(fn, shapes, dtype=np.float64)


@pytest.mark.torch
@pytest.mark.parametrize("fn, shapes", _params())
def test_float32_matches_torch(fn, shapes):
    check_torch(fn, shapes, dtype=np.float32, rtol=1e-4, atol=1e-5)


# Large enough for the kernels' parallel variant (PARALLEL_MIN_QUERY_SIZE query elements), where
# Numba has more than one thread.
PARALLEL_CASES = {
    "gqa_causal": (lambda lib, q, k, v: _sdpa(lib, q, k, v, is_causal=True, enable_gqa=True),
                   [(2, 4, 200, 32), (2, 2, 230, 32), (2, 2, 230, 16)]),
    "float_mask": (lambda lib, q, k, v, m: _sdpa(lib, q, k, v, attn_mask=m), [(2, 4, 200, 32), (2, 4, 230, 32),
                                                                           (2, 4, 230, 16), (2, 1, 200, 230)]),
}


@pytest.mark.torch
@pytest.mark.parametrize("fn, shapes", [pytest.param(fn, shapes, id=name) for name, (fn, shapes) in
                                        PARALLEL_CASES.items()])
def test_parallel_kernels_match_torch(fn, shapes):
    check_torch(fn, shapes, dtype=np.float64)


# --- dropout --------------------------------------------------------------------------------------

def _dropout_weights(p: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights with dropout, weights without) of a (2, 3, 64, 100) attention: values = identity."""
    q, k = (zgrad.tensor(a) for a in random_inputs([(2, 3, 64, 8), (2, 3, 100, 8)], np.float64, (-2, 2), 0))
    eye = zgrad.tensor(np.eye(100))
    zgrad.manual_seed(seed)
    dropped = F.scaled_dot_product_attention(q, k, eye, dropout_p=p).numpy()
    return dropped, F.scaled_dot_product_attention(q, k, eye).numpy()


def test_dropout_zeroes_weights_with_probability_p_and_scales_the_rest():
    p = 0.3
    dropped, weights = _dropout_weights(p, 0)
    kept = dropped != 0
    assert abs(1 - kept.mean() - p) < 0.01  # 38400 draws: the standard deviation is 0.0023
    np.testing.assert_allclose(dropped[kept], weights[kept] / (1 - p), rtol=1e-14)
    assert abs(dropped.sum(-1).mean() - 1) < 0.01  # the expected value is kept


def test_dropout_is_reproducible_under_manual_seed():
    first, _ = _dropout_weights(0.5, 7)
    again, _ = _dropout_weights(0.5, 7)
    other, _ = _dropout_weights(0.5, 8)
    np.testing.assert_array_equal(first, again)
    assert np.mean((first != 0) != (other != 0)) > 0.3


def test_dropout_one_gives_zeros():
    dropped, _ = _dropout_weights(1.0, 0)
    assert not dropped.any()


def test_dropout_gradient_matches_finite_differences_with_a_fixed_seed():
    shapes = [(1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 3), (5, 7)]
    arrays = random_inputs(shapes, np.float64, (-2, 2), 1)
    upstream = np.random.default_rng(2).standard_normal((1, 2, 5, 3))

    def forward(*tensors):
        zgrad.manual_seed(11)
        return F.scaled_dot_product_attention(*tensors[:3], attn_mask=tensors[3], dropout_p=0.4)

    inputs = [zgrad.tensor(a, requires_grad=True) for a in arrays]
    forward(*inputs).backward(zgrad.tensor(upstream))

    def objective() -> float:
        with zgrad.no_grad():
            return float(np.sum(forward(*(zgrad.tensor(a) for a in arrays)).numpy() * upstream))

    for tensor, expected in zip(inputs, central_differences(objective, arrays)):
        np.testing.assert_allclose(tensor.grad.numpy(), expected, rtol=1e-6, atol=1e-7)


# --- errors ---------------------------------------------------------------------------------------

def _qkv(*shapes, dtype=np.float32):
    return [zgrad.tensor(a) for a in random_inputs(shapes or [(1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)], dtype,
                                                   (-1, 1), 0)]


def test_mask_with_is_causal_is_refused():
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(*_qkv(), attn_mask=zgrad.ones(3, 5, dtype=zgrad.bool), is_causal=True)


def test_mixed_dtypes_are_refused():
    q, k, v = _qkv()
    with pytest.raises(RuntimeError, match="Expected query, key, and value to have the same dtype"):
        F.scaled_dot_product_attention(q, k.double(), v)


def test_integer_inputs_are_refused():
    q, k, v = (t.long() for t in _qkv())
    with pytest.raises(RuntimeError, match="expected floating point"):
        F.scaled_dot_product_attention(q, k, v)


def test_mask_of_another_dtype_is_refused():
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype to be bool or float or to match query dtype"):
        F.scaled_dot_product_attention(*_qkv(), attn_mask=zgrad.zeros(3, 5, dtype=zgrad.float64))


def test_mask_that_does_not_broadcast_is_refused():
    with pytest.raises(RuntimeError, match="attn_mask of shape"):
        F.scaled_dot_product_attention(*_qkv(), attn_mask=zgrad.zeros(4, 5))


def test_head_counts_that_do_not_divide_are_refused():
    with pytest.raises(RuntimeError, match="Number of heads in key and value must divide the number of heads in query"):
        F.scaled_dot_product_attention(*_qkv((1, 4, 3, 4), (1, 3, 5, 4), (1, 3, 5, 4)), enable_gqa=True)


def test_head_counts_without_enable_gqa_must_broadcast():
    with pytest.raises(RuntimeError, match="do not broadcast"):
        F.scaled_dot_product_attention(*_qkv((1, 4, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)))


def test_shapes_that_do_not_fit_are_refused():
    with pytest.raises(RuntimeError, match="do not fit"):
        F.scaled_dot_product_attention(*_qkv((1, 2, 3, 4), (1, 2, 5, 3), (1, 2, 5, 4)))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.scaled_dot_product_attention(*_qkv((4,), (5, 4), (5, 4)))


def test_dropout_probability_outside_0_1_is_refused():
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.scaled_dot_product_attention(*_qkv(), dropout_p=1.5)

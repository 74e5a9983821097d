"""nn.MultiheadAttention and F.multi_head_attention_forward against PyTorch in float64, on torch's
weights (state dict moved into zgrad and back): outputs, attention weights, and the gradients of
the inputs and of every parameter, for each module option, mask kind and layout; the errors with
PyTorch's types and messages."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import zgrad
from helpers import error_of, require_torch
from module_reference import check_module

pytestmark = pytest.mark.torch

E, H, N, L, S = 6, 2, 2, 4, 5

MODULE_OPTIONS = {
    "plain": {},
    "bias_kv": dict(add_bias_kv=True),
    "zero_attn": dict(add_zero_attn=True),
    "kdim_vdim": dict(kdim=3, vdim=5),
    "no_bias": dict(bias=False),
    "all": dict(add_bias_kv=True, add_zero_attn=True, kdim=3, vdim=5),
}


def _bool_mask(shape, seed):
    """True (not allowed) at random, never in column 0, so every row keeps a key."""
    mask = np.random.default_rng(seed).random(shape) < 0.4
    mask[..., 0] = False
    return mask


def _float_mask(shape, seed):
    values = np.random.default_rng(seed).standard_normal(shape)
    values[_bool_mask(shape, seed + 1)] = -np.inf
    return values


def _masks(kind, lib, batch, tgt, src):
    """(attn_mask, key_padding_mask, is_causal) of ``kind`` for ``batch`` (None: unbatched)."""
    heads_first = (H if batch is None else batch * H, tgt, src)
    padding = (src,) if batch is None else (batch, src)
    t = lib.tensor
    table = {
        "none": lambda: (None, None, False),
        "attn_bool": lambda: (t(_bool_mask((tgt, src), 1)), None, False),
        "attn_float": lambda: (t(_float_mask((tgt, src), 2)), None, False),
        "attn_bool_3d": lambda: (t(_bool_mask(heads_first, 3)), None, False),
        "attn_float_3d": lambda: (t(_float_mask(heads_first, 4)), None, False),
        "kpm_bool": lambda: (None, t(_bool_mask(padding, 5)), False),
        "kpm_float": lambda: (None, t(_float_mask(padding, 6)), False),
        "both_bool": lambda: (t(_bool_mask((tgt, src), 7)), t(_bool_mask(padding, 8)), False),
        "both_float": lambda: (t(_float_mask(heads_first, 9)), t(_float_mask(padding, 10)), False),
        "causal": lambda: (lib.nn.Transformer.generate_square_subsequent_mask(tgt, dtype=lib.float64), None, True),
        "causal_bool": lambda: (t(np.triu(np.ones((tgt, src), dtype=bool), 1)), None, True),
        "causal_kpm": lambda: (lib.nn.Transformer.generate_square_subsequent_mask(tgt, dtype=lib.float64),
                               t(_float_mask(padding, 11)), True),
    }
    return table[kind]()


def _shapes(options, layout, tgt, src):
    kdim, vdim = options.get("kdim", E), options.get("vdim", E)
    if layout == "unbatched":
        return [(tgt, E), (src, kdim), (src, vdim)]
    if layout == "batch_first":
        return [(N, tgt, E), (N, src, kdim), (N, src, vdim)]
    return [(tgt, N, E), (src, N, kdim), (src, N, vdim)]


def _check(options, mask, layout="seq_first", need_weights=True, average=True, seed=0, train=True):
    tgt = S if mask.startswith("causal") else L
    batch = None if layout == "unbatched" else N

    def make(lib):
        return lib.nn.MultiheadAttention(E, H, batch_first=layout == "batch_first", dtype=lib.float64, **options)

    def call(lib, module, query, key, value):
        attn_mask, padding, is_causal = _masks(mask, lib, batch, tgt, S)
        return module(query, key, value, key_padding_mask=padding, need_weights=need_weights, attn_mask=attn_mask,
                      average_attn_weights=average, is_causal=is_causal)

    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape) for shape in _shapes(options, layout, tgt, S)]
    return check_module(make, call, arrays, seed=seed, train=train)


MASKS = ["none", "attn_bool", "attn_float", "attn_bool_3d", "attn_float_3d", "kpm_bool", "kpm_float", "both_bool",
         "both_float", "causal", "causal_bool", "causal_kpm"]


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("options", MODULE_OPTIONS)
def test_options_and_masks_with_weights(options, mask):
    _check(MODULE_OPTIONS[options], mask)


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("options", ["plain", "all"])
def test_masks_without_weights(options, mask):
    _check(MODULE_OPTIONS[options], mask, need_weights=False)


@pytest.mark.parametrize("need_weights,average,layout",
                         list(itertools.product([True, False], [True, False], ["seq_first", "batch_first",
                                                                               "unbatched"])))
@pytest.mark.parametrize("mask", ["both_float", "both_bool", "causal"])
def test_layouts_and_weight_options(need_weights, average, layout, mask):
    _check(MODULE_OPTIONS["all"], mask, layout=layout, need_weights=need_weights, average=average)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("shared", ["self", "key_is_value"])
def test_shared_inputs(batch_first, need_weights, shared):
    """Self-attention (query, key and value one tensor) and key is value, which PyTorch projects
    from the packed weight in one and two products."""
    def make(lib):
        return lib.nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=lib.float64)

    def call(lib, module, x, memory):
        key = x if shared == "self" else memory
        return module(x, key, key, need_weights=need_weights)

    rng = np.random.default_rng(3)
    shape = (N, L, E) if batch_first else (L, N, E)
    check_module(make, call, [rng.standard_normal(shape), rng.standard_normal(shape)])


def test_dropout_is_off_in_eval_mode():
    module = _check(dict(dropout=0.5), "attn_float", train=False)
    assert module.dropout == 0.5


@pytest.mark.torch
def test_dropout_one_leaves_the_output_bias():
    """All weights dropped: the output is out_proj's bias, as torch's (weights returned all zero)."""
    torch = require_torch()
    torch_module = torch.nn.MultiheadAttention(E, H, dropout=1.0).double()
    module = zgrad.nn.MultiheadAttention(E, H, dropout=1.0, dtype=zgrad.float64)
    with torch.no_grad():
        torch_module.out_proj.bias.uniform_()
    module.load_state_dict({k: zgrad.tensor(v.numpy()) for k, v in torch_module.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((L, N, E))
    for need_weights in (True, False):
        out, weights = module(zgrad.tensor(x), zgrad.tensor(x), zgrad.tensor(x), need_weights=need_weights)
        bias = torch_module.out_proj.bias.detach().numpy()
        np.testing.assert_allclose(out.numpy(), np.broadcast_to(bias, (L, N, E)), rtol=1e-12)
        if need_weights:
            expected = torch_module(torch.tensor(x), torch.tensor(x), torch.tensor(x))[1].detach().numpy()
            np.testing.assert_array_equal(weights.numpy(), expected)


@pytest.mark.torch
def test_parameters_and_init_as_torch():
    torch = require_torch()
    for options in MODULE_OPTIONS.values():
        ours = zgrad.nn.MultiheadAttention(E, H, **options)
        theirs = torch.nn.MultiheadAttention(E, H, **options)
        assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
        assert list(ours.state_dict()) == list(theirs.state_dict())
        assert (ours.in_proj_weight is None) == (theirs.in_proj_weight is None)
        assert ours.in_proj_weight is None or ours.in_proj_weight.dtype == zgrad.float32
        assert type(ours.out_proj).__name__ == type(theirs.out_proj).__name__
        assert ours._qkv_same_embed_dim == theirs._qkv_same_embed_dim and ours.head_dim == theirs.head_dim
    module = zgrad.nn.MultiheadAttention(64, 4, add_bias_kv=True)
    bound = np.sqrt(6.0 / (64 + 3 * 64))  # xavier_uniform_ of the (3E, E) packed weight
    weight = module.in_proj_weight.detach().numpy()
    assert np.abs(weight).max() <= bound and np.abs(weight).max() > 0.9 * bound
    assert not module.in_proj_bias.detach().numpy().any() and not module.out_proj.bias.detach().numpy().any()
    assert module.bias_k.detach().numpy().std() > 0
    assert zgrad.nn.modules.activation.MultiheadAttention is zgrad.nn.MultiheadAttention


@pytest.mark.torch
def test_functional_static_key_and_value():
    """F.multi_head_attention_forward with static_k/static_v, the weights as inputs."""
    torch = require_torch()
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in [(L, N, E), (S, N, E), (S, N, E), (3 * E, E), (3 * E,), (E, E), (E,),
                                               (N * H, S, E // H), (N * H, S, E // H)]]
    results = []
    for lib in (torch, zgrad):
        tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
        q, k, v, w, b, ow, ob, sk, sv = tensors
        out, weights = lib.nn.functional.multi_head_attention_forward(
            q, k, v, E, H, w, b, None, None, False, 0.0, ow, ob, static_k=sk, static_v=sv,
            average_attn_weights=False)
        (out.sum() + (weights * weights).sum()).backward()
        results.append([out.detach().numpy(), weights.detach().numpy()] +
                       [None if t.grad is None else t.grad.numpy() for t in tensors])
    for i, (expected, got) in enumerate(zip(*results)):
        assert (expected is None) == (got is None), i
        if got is not None:
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=str(i))


def _mha(lib, *args, **kwargs):
    return lib.nn.MultiheadAttention(*args, **kwargs)


def _x(lib, *shape, dtype=None):
    return lib.ones(*shape, dtype=dtype or lib.float32)


ERRORS = {
    "embed_dim_zero": lambda lib: _mha(lib, 0, 2),
    "not_divisible": lambda lib: _mha(lib, 6, 4),
    "int_attn_mask": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E),
                                                 attn_mask=lib.zeros(L, S, dtype=lib.int64)),
    "int_key_padding_mask": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E),
                                                        key_padding_mask=lib.zeros(N, S, dtype=lib.int64)),
    "causal_without_mask": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E),
                                                       is_causal=True),
    "attn_mask_2d_shape": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E),
                                                      attn_mask=_x(lib, L, L)),
    "attn_mask_3d_shape": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E),
                                                      attn_mask=_x(lib, H, L, S)),
    "attn_mask_4d": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E),
                                                attn_mask=_x(lib, 1, N * H, L, S)),
    "unbatched_attn_mask_3d_shape": lambda lib: _mha(lib, E, H)(_x(lib, L, E), _x(lib, S, E), _x(lib, S, E),
                                                                attn_mask=_x(lib, 2 * H, L, S)),
    "key_dims": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, E), _x(lib, S, N, E)),
    "unbatched_key_dims": lambda lib: _mha(lib, E, H)(_x(lib, L, E), _x(lib, S, N, E), _x(lib, S, E)),
    "query_4d": lambda lib: _mha(lib, E, H)(_x(lib, 1, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E)),
    "padding_mask_dims": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E),
                                                     key_padding_mask=_x(lib, S)),
    "unbatched_padding_mask_dims": lambda lib: _mha(lib, E, H)(_x(lib, L, E), _x(lib, S, E), _x(lib, S, E),
                                                               key_padding_mask=_x(lib, N, S)),
    "padding_mask_batch": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E),
                                                      key_padding_mask=_x(lib, N + 1, S)),
    "padding_mask_length": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E),
                                                       key_padding_mask=_x(lib, N, S + 1)),
    "embed_dim_of_query": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E + 2), _x(lib, S, N, E), _x(lib, S, N, E)),
    "key_value_shapes": lambda lib: _mha(lib, E, H)(_x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S + 1, N, E)),
    "separate_key_value_shapes": lambda lib: _mha(lib, E, H, kdim=3)(_x(lib, L, N, E), _x(lib, S, N, 3),
                                                                     _x(lib, S + 1, N, E)),
    "functional_bias_k_only": lambda lib: lib.nn.functional.multi_head_attention_forward(
        _x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E), E, H, _x(lib, 3 * E, E), None, _x(lib, 1, 1, E), None,
        False, 0.0, _x(lib, E, E), None),
    "functional_no_in_proj_weight": lambda lib: lib.nn.functional.multi_head_attention_forward(
        _x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E), E, H, None, None, None, None, False, 0.0,
        _x(lib, E, E), None),
    "functional_no_k_proj_weight": lambda lib: lib.nn.functional.multi_head_attention_forward(
        _x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E), E, H, None, None, None, None, False, 0.0,
        _x(lib, E, E), None, use_separate_proj_weight=True, q_proj_weight=_x(lib, E, E)),
    "functional_static_k_heads": lambda lib: lib.nn.functional.multi_head_attention_forward(
        _x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E), E, H, _x(lib, 3 * E, E), None, None, None, False, 0.0,
        _x(lib, E, E), None, static_k=_x(lib, N, S, E // H)),
    "functional_bias_and_static_v": lambda lib: lib.nn.functional.multi_head_attention_forward(
        _x(lib, L, N, E), _x(lib, S, N, E), _x(lib, S, N, E), E, H, _x(lib, 3 * E, E), None, _x(lib, 1, 1, E),
        _x(lib, 1, 1, E), False, 0.0, _x(lib, E, E), None, static_v=_x(lib, N * H, S, E // H)),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", ERRORS)
def test_errors_as_torch(name):
    torch = require_torch()
    expected = error_of(ERRORS[name], torch)
    assert expected is not None, "torch raised nothing: the case is wrong"
    assert error_of(ERRORS[name], zgrad) == expected


def test_mismatched_mask_types_warn_as_torch():
    module = zgrad.nn.MultiheadAttention(E, H)
    x = zgrad.ones(L, N, E)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        module(x, x, x, key_padding_mask=zgrad.zeros(N, L, dtype=zgrad.bool), attn_mask=zgrad.zeros(L, L))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module(x, x, x, key_padding_mask=zgrad.zeros(N, L), attn_mask=zgrad.zeros(L, L))

"""The Transformer layers and stacks against PyTorch in float64 on torch's weights (state dict
moved into zgrad and back), dropout 0: outputs and the gradients of the inputs and of every
parameter, over norm_first, activations, batch_first, bias and masks; the causal mask, the
errors, and the module paths."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import zgrad
from helpers import error_of, require_torch
from module_reference import check_module

pytestmark = [pytest.mark.torch,
              pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),  # torch's nested-tensor note
              pytest.mark.filterwarnings("ignore:Support for mismatched")]  # float causal mask, bool padding

D, HEADS, FF, N, S, T = 8, 2, 16, 2, 5, 4


def _activation(lib, name):
    """The activation argument: a name, or a callable (a module, or a function of lib)."""
    if name == "module":
        return lib.nn.GELU(approximate="tanh")
    if name == "function":
        return lib.nn.functional.silu
    return name


def _padding(lib, batch, length, seed):
    mask = np.random.default_rng(seed).random((batch, length)) < 0.4
    mask[:, 0] = False
    return lib.tensor(mask)


def _causal(lib, size):
    return lib.nn.Transformer.generate_square_subsequent_mask(size, dtype=lib.float64)


def _random_mask(lib, shape, seed, kind):
    values = np.random.default_rng(seed).random(shape) < 0.3
    values[..., 0] = False
    if kind == "bool":
        return lib.tensor(values)
    return lib.tensor(np.where(values, -np.inf, np.random.default_rng(seed + 1).standard_normal(shape)))


def _sequence(batch_first, length, unbatched=False):
    if unbatched:
        return (length, D)
    return (N, length, D) if batch_first else (length, N, D)


ENCODER_MASKS = ["none", "causal", "causal_hint", "bool", "padding", "causal_padding"]


def _encoder_masks(lib, kind, unbatched=False):
    """(src_mask, src_key_padding_mask, is_causal) of ``kind``."""
    padding = None if unbatched else _padding(lib, N, S, 1)
    return {
        "none": (None, None, False),
        "causal": (_causal(lib, S), None, False),
        "causal_hint": (_causal(lib, S), None, True),
        "bool": (_random_mask(lib, (S, S), 2, "bool"), None, False),
        "padding": (None, padding, False),
        "causal_padding": (_causal(lib, S), padding, True),
    }[kind]


@pytest.mark.parametrize("norm_first,activation,batch_first,bias",
                         [(False, "relu", False, True), (True, "gelu", True, True), (False, "module", True, False),
                          (True, "function", False, False)])
@pytest.mark.parametrize("masks", ENCODER_MASKS)
def test_encoder_layer(norm_first, activation, batch_first, bias, masks):
    def make(lib):
        return lib.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, activation=_activation(lib, activation),
                                              batch_first=batch_first, norm_first=norm_first, bias=bias,
                                              layer_norm_eps=1e-6, dtype=lib.float64)

    def call(lib, layer, src):
        mask, padding, is_causal = _encoder_masks(lib, masks)
        return layer(src, src_mask=mask, src_key_padding_mask=padding, is_causal=is_causal)

    check_module(make, call, [np.random.default_rng(0).standard_normal(_sequence(batch_first, S))])


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_unbatched(norm_first):
    def make(lib):
        return lib.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, norm_first=norm_first, dtype=lib.float64)

    def call(lib, layer, src):
        return layer(src, src_mask=_causal(lib, S))

    check_module(make, call, [np.random.default_rng(1).standard_normal((S, D))])


DECODER_MASKS = ["none", "causal", "memory_padding", "all"]


def _decoder_masks(lib, kind):
    """The keyword masks of a decoder (layer) call of ``kind``."""
    if kind == "none":
        return {}
    if kind == "causal":
        return dict(tgt_mask=_causal(lib, T))
    if kind == "memory_padding":
        return dict(memory_key_padding_mask=_padding(lib, N, S, 3))
    return dict(tgt_mask=_causal(lib, T), memory_mask=_random_mask(lib, (T, S), 4, "float"),
                tgt_key_padding_mask=_padding(lib, N, T, 5), memory_key_padding_mask=_padding(lib, N, S, 6))


@pytest.mark.parametrize("norm_first,activation,batch_first",
                         [(False, "relu", False), (True, "gelu", True), (False, "module", True)])
@pytest.mark.parametrize("masks", DECODER_MASKS)
def test_decoder_layer(norm_first, activation, batch_first, masks):
    def make(lib):
        return lib.nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0, activation=_activation(lib, activation),
                                              batch_first=batch_first, norm_first=norm_first, dtype=lib.float64)

    def call(lib, layer, tgt, memory):
        return layer(tgt, memory, **_decoder_masks(lib, masks))

    rng = np.random.default_rng(2)
    check_module(make, call, [rng.standard_normal(_sequence(batch_first, T)),
                              rng.standard_normal(_sequence(batch_first, S))])


@pytest.mark.parametrize("batch_first,norm,masks",
                         list(itertools.product([False, True], [False, True], ["none", "causal", "causal_padding"])))
def test_encoder_stack(batch_first, norm, masks):
    """Two layers and a final norm; a causal mask is detected (is_causal None) as torch does."""
    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=batch_first, dtype=lib.float64)
        final = lib.nn.LayerNorm(D, dtype=lib.float64) if norm else None
        return lib.nn.TransformerEncoder(layer, 2, final, enable_nested_tensor=False)

    def call(lib, encoder, src):
        mask, padding, _ = _encoder_masks(lib, masks)
        return encoder(src, mask=mask, src_key_padding_mask=padding)

    check_module(make, call, [np.random.default_rng(3).standard_normal(_sequence(batch_first, S))])


@pytest.mark.parametrize("batch_first,masks", list(itertools.product([False, True], ["causal", "all"])))
def test_decoder_stack(batch_first, masks):
    def make(lib):
        layer = lib.nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0, batch_first=batch_first, dtype=lib.float64)
        return lib.nn.TransformerDecoder(layer, 2, lib.nn.LayerNorm(D, dtype=lib.float64))

    def call(lib, decoder, tgt, memory):
        return decoder(tgt, memory, **_decoder_masks(lib, masks))

    rng = np.random.default_rng(4)
    check_module(make, call, [rng.standard_normal(_sequence(batch_first, T)),
                              rng.standard_normal(_sequence(batch_first, S))])


@pytest.mark.parametrize("batch_first,norm_first,activation,masks",
                         [(False, False, "relu", "none"), (True, True, "gelu", "all"), (False, True, "function", "all"),
                          (True, False, "relu", "causal")])
def test_transformer(batch_first, norm_first, activation, masks):
    """(A module activation is left out: torch's TransformerDecoderLayer.__setstate__ turns it into
    relu when TransformerDecoder deep-copies the layer; zgrad keeps the module.)"""
    def make(lib):
        return lib.nn.Transformer(D, HEADS, 2, 2, FF, dropout=0.0, activation=_activation(lib, activation),
                                  batch_first=batch_first, norm_first=norm_first, dtype=lib.float64)

    def call(lib, model, src, tgt):
        decoder_masks = _decoder_masks(lib, masks)
        if masks == "all":
            decoder_masks["src_key_padding_mask"] = decoder_masks["memory_key_padding_mask"]
            decoder_masks["src_mask"] = _random_mask(lib, (S, S), 7, "bool")
        return model(src, tgt, **decoder_masks)

    rng = np.random.default_rng(5)
    check_module(make, call, [rng.standard_normal(_sequence(batch_first, S)),
                              rng.standard_normal(_sequence(batch_first, T))])


def test_transformer_unbatched():
    def make(lib):
        return lib.nn.Transformer(D, HEADS, 1, 1, FF, dropout=0.0, dtype=lib.float64)

    rng = np.random.default_rng(6)
    check_module(make, lambda lib, model, src, tgt: model(src, tgt, tgt_mask=_causal(lib, T)),
                 [rng.standard_normal((S, D)), rng.standard_normal((T, D))])


@pytest.mark.torch
def test_transformer_parameters_and_init_as_torch():
    torch = require_torch()
    ours, theirs = zgrad.nn.Transformer(16, 4, 2, 1, 32), torch.nn.Transformer(16, 4, 2, 1, 32)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    weight = ours.encoder.layers[0].linear1.weight.detach().numpy()  # xavier_uniform_ over every matrix
    bound = np.sqrt(6.0 / (16 + 32))
    assert np.abs(weight).max() <= bound and np.abs(weight).max() > 0.9 * bound
    assert ours.encoder.layers[0].linear1.weight is not ours.encoder.layers[1].linear1.weight
    assert (ours.d_model, ours.nhead, ours.batch_first) == (16, 4, False)
    assert repr(zgrad.nn.TransformerEncoderLayer(4, 2, 8)) == repr(torch.nn.TransformerEncoderLayer(4, 2, 8))


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [None, "float64"])
def test_generate_square_subsequent_mask_as_torch(dtype):
    torch = require_torch()
    ours = zgrad.nn.Transformer.generate_square_subsequent_mask(5, dtype=dtype and getattr(zgrad, dtype))
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=dtype and getattr(torch, dtype))
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


ERRORS = {
    "activation_name": lambda lib: lib.nn.TransformerEncoderLayer(D, HEADS, activation="tanh"),
    "decoder_activation_name": lambda lib: lib.nn.TransformerDecoderLayer(D, HEADS, activation="selu"),
    "batch_mismatch": lambda lib: lib.nn.Transformer(D, HEADS, 1, 1, FF)(lib.ones(S, N, D), lib.ones(T, N + 1, D)),
    "batch_first_mismatch": lambda lib: lib.nn.Transformer(D, HEADS, 1, 1, FF, batch_first=True)(
        lib.ones(N, S, D), lib.ones(N + 1, T, D)),
    "d_model": lambda lib: lib.nn.Transformer(D, HEADS, 1, 1, FF)(lib.ones(S, N, D), lib.ones(T, N, D + 1)),
    "int_src_mask": lambda lib: lib.nn.TransformerEncoderLayer(D, HEADS, FF)(
        lib.ones(S, N, D), src_mask=lib.zeros(S, S, dtype=lib.int64)),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", ERRORS)
def test_errors_as_torch(name):
    torch = require_torch()
    expected = error_of(ERRORS[name], torch)
    assert expected is not None, "torch raised nothing: the case is wrong"
    assert error_of(ERRORS[name], zgrad) == expected


def test_module_paths():
    transformer = zgrad.nn.modules.transformer
    for name in ("Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                 "TransformerDecoderLayer"):
        assert getattr(transformer, name) is getattr(zgrad.nn, name)
    assert zgrad.nn.modules.MultiheadAttention is zgrad.nn.MultiheadAttention

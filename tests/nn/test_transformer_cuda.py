"""The attention and Transformer modules and the new activations on zgrad's CUDA backend (Numba's
simulator here) against its CPU backend: outputs and the gradients of the inputs and of every
parameter, every array a CUDA array (:func:`cuda_helpers.strict_cuda`)."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import TOLERANCE, check_device, requires_cuda, strict_cuda

pytestmark = requires_cuda

E, H, N, L, S = 4, 2, 2, 3, 4
TOL = TOLERANCE[np.dtype(np.float32)]

ACTIVATIONS = {
    "silu": lambda lib, x: lib.nn.functional.silu(x),
    "mish": lambda lib, x: lib.nn.Mish()(x * 3),
    "softplus": lambda lib, x: lib.nn.functional.softplus(x * 12, beta=2.0, threshold=10.0),
    "rms_norm": lambda lib, x: lib.nn.RMSNorm(4)(x),
    "gelu_tanh": lambda lib, x: lib.nn.GELU(approximate="tanh")(x),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_on_cuda_matches_cpu(name):
    check_device(ACTIVATIONS[name], [(3, 4)])


def _run(make, state, arrays, call):
    """Host copies of the outputs, the inputs' gradients and the parameters' gradients (by name) of
    ``call(module, *inputs)`` on the current default device, the module loaded with ``state``."""
    module = make()
    module.load_state_dict({name: zgrad.tensor(value) for name, value in state.items()})
    inputs = [zgrad.tensor(a, requires_grad=True) for a in arrays]
    outputs = [o for o in call(module, *inputs) if o is not None]
    rng = np.random.default_rng(1)
    loss = sum((o * zgrad.tensor(rng.standard_normal(o.shape).astype(np.float32))).sum() for o in outputs)
    loss.backward()
    values = [o.detach()._host() for o in outputs] + [t.grad._host() for t in inputs]
    return values, {name: p.grad._host() for name, p in module.named_parameters()}


def _check(make, call, shapes):
    zgrad.manual_seed(0)
    state = {name: value._host() for name, value in make().state_dict().items()}
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    expected, expected_grads = _run(make, state, arrays, call)
    with strict_cuda():
        got, grads = _run(make, state, arrays, call)
    for i, (value, reference) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(value, reference, err_msg=f"array {i}", **TOL)
    for name, grad in grads.items():
        np.testing.assert_allclose(grad, expected_grads[name], err_msg=name, **TOL)


def _bool(shape, seed):
    mask = np.random.default_rng(seed).random(shape) < 0.4
    mask[..., 0] = False
    return zgrad.tensor(mask)


MHA_CASES = {
    "weights_masks": (dict(add_bias_kv=True), dict(attn_mask=lambda: _bool((L, S), 1),
                                                   key_padding_mask=lambda: _bool((N, S), 2))),
    "sdpa_zero_attn_kdim": (dict(add_zero_attn=True, kdim=3, vdim=5), dict(need_weights=False,
                                                                            key_padding_mask=lambda: _bool((N, S), 3))),
    "sdpa_float_mask_per_head": (dict(), dict(need_weights=False, average_attn_weights=False,
                                              attn_mask=lambda: zgrad.tensor(np.random.default_rng(4).standard_normal(
                                                  (N * H, L, S)).astype(np.float32)))),
    "per_head_weights_batch_first": (dict(batch_first=True), dict(average_attn_weights=False)),
}


@pytest.mark.parametrize("case", MHA_CASES)
def test_multihead_attention_on_cuda_matches_cpu(case):
    options, arguments = MHA_CASES[case]
    first = options.get("batch_first", False)
    shapes = [(N, L, E) if first else (L, N, E)] + [
        (N, S, d) if first else (S, N, d) for d in (options.get("kdim", E), options.get("vdim", E))]

    def call(module, q, k, v):
        return module(q, k, v, **{k: (a() if callable(a) else a) for k, a in arguments.items()})

    _check(lambda: zgrad.nn.MultiheadAttention(E, H, **options), call, shapes)


def test_transformer_on_cuda_matches_cpu():
    def make():
        return zgrad.nn.Transformer(E, H, 1, 1, 8, dropout=0.0, activation="gelu", norm_first=True)

    def call(model, src, tgt):
        mask = zgrad.nn.Transformer.generate_square_subsequent_mask(L)
        return (model(src, tgt, tgt_mask=mask, src_key_padding_mask=_bool((N, S), 5)),)

    _check(make, call, [(S, N, E), (L, N, E)])


def test_encoder_stack_on_cuda_matches_cpu():
    def make():
        layer = zgrad.nn.TransformerEncoderLayer(E, H, 8, dropout=0.0, batch_first=True)
        return zgrad.nn.TransformerEncoder(layer, 2, zgrad.nn.LayerNorm(E))

    def call(model, src):
        return (model(src, mask=zgrad.nn.Transformer.generate_square_subsequent_mask(S), is_causal=True),)

    _check(make, call, [(N, S, E)])


def test_deepcopy_of_a_cuda_module_copies_its_memory():
    """TransformerEncoder clones its layer with copy.deepcopy, which must copy CUDA arrays."""
    import copy

    with strict_cuda():
        layer = zgrad.nn.Linear(3, 2)
        twin = copy.deepcopy(layer)
        assert twin.weight.is_cuda and twin.weight._data is not layer.weight._data
        np.testing.assert_array_equal(twin.weight.detach()._host(), layer.weight.detach()._host())

"""LSTM, GRU, LSTMCell, GRUCell: outputs and every gradient (input, initial states, parameters)
against PyTorch with the same weights (float32 and float64), against float64 finite differences,
and PyTorch's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import zgrad
from helpers import check_finite_differences, require_torch
from zgrad import nn

TOLERANCE = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flatten(item)]
    return [value]


def _run(lib, module, x, states, upstream_seed):
    """Every output of ``module(x, states)`` and the gradients of a random weighting of them."""
    inputs = [lib.tensor(x, requires_grad=True)] + [lib.tensor(s, requires_grad=True) for s in states]
    if not states:
        result = module(inputs[0])
    elif len(states) == 1:
        result = module(inputs[0], inputs[1])
    else:
        result = module(inputs[0], tuple(inputs[1:]))
    outputs = _flatten(result)
    rng = np.random.default_rng(upstream_seed)
    total = sum((out * lib.tensor(rng.standard_normal(tuple(out.shape)).astype(x.dtype))).sum() for out in outputs)
    total.backward()
    grads = [t.grad for t in inputs] + [p.grad for _, p in module.named_parameters()]
    as_numpy = (lambda t: t.numpy()) if lib is zgrad else (lambda t: t.detach().numpy())
    return [as_numpy(o) for o in outputs], [None if g is None else as_numpy(g) for g in grads]


def compare_with_torch(kind, kwargs, x_shape, state_shapes=(), dtype=np.float32, training=False):
    """Build the zgrad and torch layers with the same weights and compare everything."""
    torch = require_torch()
    zgrad.manual_seed(0)
    ours = getattr(nn, kind)(**kwargs, dtype=dtype)
    theirs = getattr(torch.nn, kind)(**kwargs, dtype=getattr(torch, np.dtype(dtype).name))
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    with torch.no_grad():
        for name, param in theirs.named_parameters():
            assert tuple(param.shape) == getattr(ours, name).shape, name
            param.copy_(torch.from_numpy(getattr(ours, name).numpy()))
    ours.train(training)
    theirs.train(training)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape).astype(dtype)
    states = [rng.standard_normal(s).astype(dtype) * 0.5 for s in state_shapes]
    out, grads = _run(zgrad, ours, x, states, 2)
    ref_out, ref_grads = _run(torch, theirs, x, states, 2)
    tol = TOLERANCE[dtype]
    assert len(out) == len(ref_out)
    for i, (a, b) in enumerate(zip(out, ref_out)):
        assert a.shape == b.shape and a.dtype == b.dtype, (i, a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, err_msg=f"output {i}", **tol)
    names = ["input"] + [f"state {i}" for i in range(len(states))] + [n for n, _ in ours.named_parameters()]
    for name, a, b in zip(names, grads, ref_grads):
        assert (a is None) == (b is None), name
        np.testing.assert_allclose(a, b, err_msg=f"gradient of {name}", **tol)


T, B, I, H = 5, 3, 4, 6

CONFIGS = [
    pytest.param("LSTM", dict(input_size=I, hidden_size=H), (T, B, I), (), id="lstm"),
    pytest.param("LSTM", dict(input_size=I, hidden_size=H, num_layers=2), (T, B, I), ((2, B, H), (2, B, H)),
                 id="lstm-2layers-states"),
    pytest.param("LSTM", dict(input_size=I, hidden_size=H, num_layers=2, bidirectional=True), (T, B, I),
                 ((4, B, H), (4, B, H)), id="lstm-bidirectional"),
    pytest.param("LSTM", dict(input_size=I, hidden_size=H, batch_first=True, bias=False), (B, T, I), (),
                 id="lstm-batch_first-nobias"),
    pytest.param("LSTM", dict(input_size=I, hidden_size=H, num_layers=2), (T, I), ((2, H), (2, H)),
                 id="lstm-unbatched"),
    pytest.param("LSTM", dict(input_size=I, hidden_size=H, num_layers=3, dropout=0.5), (T, B, I), (),
                 id="lstm-dropout-eval"),
    pytest.param("GRU", dict(input_size=I, hidden_size=H), (T, B, I), (), id="gru"),
    pytest.param("GRU", dict(input_size=I, hidden_size=H, num_layers=2, bidirectional=True, batch_first=True),
                 (B, T, I), ((4, B, H),), id="gru-bidirectional-batch_first-state"),
    pytest.param("GRU", dict(input_size=I, hidden_size=H, bias=False), (T, I), ((1, H),), id="gru-unbatched-nobias"),
    pytest.param("LSTMCell", dict(input_size=I, hidden_size=H), (B, I), ((B, H), (B, H)), id="lstmcell"),
    pytest.param("LSTMCell", dict(input_size=I, hidden_size=H), (B, I), (), id="lstmcell-zero-state"),
    pytest.param("LSTMCell", dict(input_size=I, hidden_size=H, bias=False), (I,), ((H,), (H,)),
                 id="lstmcell-unbatched"),
    pytest.param("GRUCell", dict(input_size=I, hidden_size=H), (B, I), ((B, H),), id="grucell"),
    pytest.param("GRUCell", dict(input_size=I, hidden_size=H), (I,), (), id="grucell-unbatched"),
]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind, kwargs, x_shape, state_shapes", CONFIGS)
def test_matches_torch(kind, kwargs, x_shape, state_shapes, dtype):
    compare_with_torch(kind, kwargs, x_shape, state_shapes, dtype)


@pytest.mark.torch
def test_larger_lstm_matches_torch():
    compare_with_torch("LSTM", dict(input_size=32, hidden_size=48, num_layers=2), (12, 7, 32), ((2, 7, 48),) * 2)


def _functional(kind, kwargs, n_states, seed=None):
    """fn(lib, x, *states, *params) running a zgrad layer whose parameters are the given tensors."""
    zgrad.manual_seed(0)
    module = getattr(nn, kind)(**kwargs, dtype=np.float64)
    names = [n for n, _ in module.named_parameters()]

    def fn(lib, x, *rest):
        states, params = rest[:n_states], rest[n_states:]
        for name, value in zip(names, params):
            module._parameters[name] = value  # differentiate with respect to these tensors
        if seed is not None:
            zgrad.manual_seed(seed)  # the same dropout masks on every call
        if n_states == 0:
            result = module(x)
        elif n_states == 1:
            result = module(x, states[0])
        else:
            result = module(x, tuple(states))
        outputs = _flatten(result)
        return zgrad.cat([o.reshape(-1) for o in outputs])

    return fn, [tuple(p.shape) for _, p in module.named_parameters()]


FD_CONFIGS = [
    pytest.param("LSTM", dict(input_size=3, hidden_size=2, num_layers=2, bidirectional=True), (3, 2, 3),
                 [(4, 2, 2), (4, 2, 2)], id="lstm-2layers-bidirectional"),
    pytest.param("GRU", dict(input_size=3, hidden_size=2, num_layers=2, bidirectional=True, batch_first=True),
                 (2, 3, 3), [(4, 2, 2)], id="gru-2layers-bidirectional"),
    pytest.param("LSTMCell", dict(input_size=3, hidden_size=2), (2, 3), [(2, 2), (2, 2)], id="lstmcell"),
    pytest.param("GRUCell", dict(input_size=3, hidden_size=2, bias=False), (2, 3), [(2, 2)], id="grucell"),
]


@pytest.mark.parametrize("kind, kwargs, x_shape, state_shapes", FD_CONFIGS)
def test_finite_differences(kind, kwargs, x_shape, state_shapes):
    fn, param_shapes = _functional(kind, kwargs, len(state_shapes))
    check_finite_differences(fn, [x_shape, *state_shapes, *param_shapes], domain=(-1.0, 1.0))


def test_dropout_between_layers_in_training():
    kwargs = dict(input_size=3, hidden_size=2, num_layers=3, dropout=0.4)
    fn, param_shapes = _functional("LSTM", kwargs, 0, seed=5)
    check_finite_differences(fn, [(4, 2, 3), *param_shapes], domain=(-1.0, 1.0))
    zgrad.manual_seed(0)
    lstm = nn.LSTM(**kwargs)
    x = zgrad.randn(4, 2, 3)
    train_a, train_b = lstm(x)[0].numpy(), lstm(x)[0].numpy()
    assert not np.allclose(train_a, train_b)  # fresh masks per call
    lstm.eval()
    eval_a, eval_b = lstm(x)[0].numpy(), lstm(x)[0].numpy()
    np.testing.assert_array_equal(eval_a, eval_b)
    lstm.dropout = 0.0
    lstm.train()
    np.testing.assert_allclose(lstm(x)[0].numpy(), eval_a)


def test_parameters_names_shapes_and_init():
    zgrad.manual_seed(0)
    lstm = nn.LSTM(10, 64, num_layers=2, bidirectional=True)
    names = [n for n, _ in lstm.named_parameters()]
    assert names[:8] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
                         "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse"]
    assert lstm.weight_ih_l0.shape == (256, 10) and lstm.weight_ih_l1.shape == (256, 128)
    bound = 1 / math.sqrt(64)
    values = np.concatenate([p.numpy().ravel() for p in lstm.parameters()])
    assert values.min() >= -bound and values.max() <= bound
    assert abs(values.std() - bound / math.sqrt(3)) < 0.01 * bound  # U(-b, b)
    assert nn.GRU(3, 5).weight_hh_l0.shape == (15, 5)
    assert [n for n, _ in nn.GRUCell(3, 5, bias=False).named_parameters()] == ["weight_ih", "weight_hh"]
    assert repr(nn.LSTM(3, 4, num_layers=2, batch_first=True)) == "LSTM(3, 4, num_layers=2, batch_first=True)"
    assert nn.LSTM(3, 4, dtype=zgrad.float64).weight_hh_l0.dtype == np.float64


@pytest.mark.torch
def test_lstm_state_dict_loads_into_torch():
    torch = require_torch()
    lstm = nn.LSTM(4, 3, num_layers=2)
    reference = torch.nn.LSTM(4, 3, num_layers=2)
    reference.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in lstm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(lstm(zgrad.tensor(x))[0].numpy(), reference(torch.tensor(x))[0].detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_gradient_only_for_parameters_and_repeated_backward():
    zgrad.manual_seed(0)
    gru = nn.GRU(4, 3)
    x = zgrad.randn(6, 2, 4)  # does not require grad
    out, h = gru(x)
    (out.sum() + h.sum()).backward()
    first = gru.weight_hh_l0.grad.numpy().copy()
    out, h = gru(x)
    (out.sum() + h.sum()).backward()
    np.testing.assert_allclose(gru.weight_hh_l0.grad.numpy(), 2 * first, rtol=1e-6)


def test_lstm_learns_to_remember_the_first_token():
    zgrad.manual_seed(0)
    lstm, head = nn.LSTM(3, 16, batch_first=True), nn.Linear(16, 3)
    opt = zgrad.optim.Adam([*lstm.parameters(), *head.parameters()], lr=0.05)
    rng = np.random.default_rng(0)
    first = rng.integers(0, 3, size=32)
    x = rng.standard_normal((32, 6, 3)).astype(np.float32) * 0.1
    x[np.arange(32), 0, first] += 2.0
    losses = []
    for _ in range(60):
        out, _ = lstm(zgrad.tensor(x))
        loss = nn.functional.cross_entropy(head(out[:, -1]), zgrad.tensor(first))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.1 * losses[0]


def test_errors_name_the_layer_and_shapes():
    lstm = nn.LSTM(4, 5, num_layers=2)
    with pytest.raises(ValueError, match=r"LSTM\(4, 5, num_layers=2\): Expected input to be 2D or 3D, got 4D instead"):
        lstm(zgrad.zeros(2, 3, 4, 1))
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 4, got 3"):
        lstm(zgrad.zeros(7, 2, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 2, 5\), got \[1, 2, 5\]"):
        lstm(zgrad.zeros(7, 2, 4), (zgrad.zeros(1, 2, 5), zgrad.zeros(2, 2, 5)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(2, 2, 5\), got \[2, 3, 5\]"):
        lstm(zgrad.zeros(7, 2, 4), (zgrad.zeros(2, 2, 5), zgrad.zeros(2, 3, 5)))
    with pytest.raises(RuntimeError, match=r"For unbatched 2-D input, hx and cx should also be 2-D but got "
                                           r"\(3-D, 2-D\) tensors"):
        lstm(zgrad.zeros(7, 4), (zgrad.zeros(2, 1, 5), zgrad.zeros(2, 5)))
    with pytest.raises(RuntimeError, match=r"For batched 3-D input, hx and cx should also be 3-D but got "
                                           r"\(3-D, 2-D\) tensors"):
        lstm(zgrad.zeros(7, 2, 4), (zgrad.zeros(2, 2, 5), zgrad.zeros(2, 5)))
    with pytest.raises(RuntimeError, match="For batched 3-D input, hx should also be 3-D but got 2-D tensor"):
        nn.GRU(4, 5)(zgrad.zeros(7, 2, 4), zgrad.zeros(2, 5))
    with pytest.raises(RuntimeError, match=r"GRU\(4, 5\): Expected hidden size \(1, 2, 5\), got \[1, 3, 5\]"):
        nn.GRU(4, 5)(zgrad.zeros(7, 2, 4), zgrad.zeros(1, 3, 5))
    with pytest.raises(ValueError, match=r"RNN input dtype \(float64\) does not match weight dtype \(float32\)"):
        lstm(zgrad.zeros(7, 2, 4, dtype=zgrad.float64))
    cell = nn.LSTMCell(4, 5)
    with pytest.raises(ValueError, match=r"LSTMCell\(4, 5\): Expected input to be 1D or 2D, got 3D instead"):
        cell(zgrad.zeros(1, 2, 4))
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 3 expected 4"):
        cell(zgrad.zeros(2, 3))
    with pytest.raises(RuntimeError, match="Input batch size 2 doesn't match hidden0 batch size 3"):
        cell(zgrad.zeros(2, 4), (zgrad.zeros(3, 5), zgrad.zeros(2, 5)))
    with pytest.raises(RuntimeError, match="Input batch size 2 doesn't match hidden1 batch size 3"):
        cell(zgrad.zeros(2, 4), (zgrad.zeros(2, 5), zgrad.zeros(3, 5)))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 4, expected 5"):
        nn.GRUCell(4, 5)(zgrad.zeros(2, 4), zgrad.zeros(2, 4))
    with pytest.raises(ValueError, match=r"LSTMCell\(4, 5\): Expected hx\[1\] to be 1D or 2D, got 3D instead"):
        cell(zgrad.zeros(2, 4), (zgrad.zeros(2, 5), zgrad.zeros(1, 2, 5)))
    with pytest.raises(ValueError, match="Expected hidden to be 1D or 2D, got 3D instead"):
        nn.GRUCell(4, 5)(zgrad.zeros(2, 4), zgrad.zeros(1, 2, 5))
    with pytest.raises(ValueError, match="dropout should be a number in range \\[0, 1\\]"):
        nn.LSTM(4, 5, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.GRU(4, 0)
    with pytest.raises(TypeError, match="hidden_size should be of type int, got: float"):
        nn.LSTM(4, 5.0)
    with pytest.raises(NotImplementedError, match="proj_size"):
        nn.LSTM(4, 5, proj_size=2)


@pytest.mark.parametrize("make", [lambda: nn.LSTM(4, 5, num_layers=2), lambda: nn.GRU(4, 5, num_layers=2)],
                         ids=["LSTM", "GRU"])
def test_initial_states_of_another_dtype_are_rejected_not_cast(make):
    """PyTorch fails on a float64 state of a float32 layer (in its matrix product); zgrad used to
    cast it silently."""
    layer = make()
    x = zgrad.zeros(7, 2, 4)
    wide = zgrad.zeros(2, 2, 5, dtype=zgrad.float64)
    state = zgrad.zeros(2, 2, 5)
    name = "LSTM" if isinstance(layer, nn.LSTM) else "GRU"
    if name == "LSTM":
        with pytest.raises(RuntimeError, match=r"LSTM\(4, 5, num_layers=2\): Expected hidden\[0\] dtype float32, "
                                               r"got float64"):
            layer(x, (wide, state))
        with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] dtype float32, got float64"):
            layer(x, (state, wide))
        with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] dtype float32, got float64"):
            layer(zgrad.zeros(7, 4), (zgrad.zeros(2, 5, dtype=zgrad.float64), zgrad.zeros(2, 5)))
    else:
        with pytest.raises(RuntimeError, match=r"GRU\(4, 5, num_layers=2\): Expected hidden dtype float32, got float64"):
            layer(x, wide)
    layer.double()
    layer(x.double(), (wide, wide) if name == "LSTM" else wide)  # matching dtypes run


def test_cell_states_of_another_dtype_are_rejected():
    x, wide = zgrad.zeros(2, 4), zgrad.zeros(2, 5, dtype=zgrad.float64)
    with pytest.raises(RuntimeError, match=r"LSTMCell\(4, 5\): Expected hidden1 dtype float32, got float64"):
        nn.LSTMCell(4, 5)(x, (zgrad.zeros(2, 5), wide))
    with pytest.raises(RuntimeError, match=r"GRUCell\(4, 5\): Expected hidden0 dtype float32, got float64"):
        nn.GRUCell(4, 5)(x, wide)

"""nn: Module bookkeeping, state dicts, layers against PyTorch, and an MLP that learns."""

from __future__ import annotations

import math

import numpy as np
import pytest

import zgrad
from zgrad import nn
from helpers import check, torch


class TwoLayer(nn.Module):
    def __init__(self, n_in=3, n_hidden=4, n_out=2):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(n_hidden, n_out, bias=False)
        self.scale = nn.Parameter(zgrad.ones(1))
        self.not_a_parameter = zgrad.ones(2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


def test_parameters_and_named_parameters():
    model = TwoLayer()
    names = [name for name, _ in model.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert [p.shape for p in model.parameters()] == [(1,), (4, 3), (4,), (2, 4)]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf for p in model.parameters())
    assert model.fc2.bias is None
    assert [type(m).__name__ for m in model.modules()] == ["TwoLayer", "Linear", "Tanh", "Linear"]


def test_shared_parameter_listed_once():
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(model.parameters())) == 2
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias"]


def test_call_runs_forward_and_zero_grad():
    model = TwoLayer()
    out = model(zgrad.randn(5, 3))
    assert out.shape == (5, 2) and out.requires_grad
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_state_dict_round_trip():
    zgrad.manual_seed(0)
    source, target = TwoLayer(), TwoLayer()
    x = zgrad.randn(4, 3)
    state = source.state_dict()
    assert list(state) == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert not np.shares_memory(state["fc1.weight"].numpy(), source.fc1.weight.numpy()), "state_dict copies"
    assert not np.allclose(source(x).numpy(), target(x).numpy())
    target.load_state_dict(state)
    np.testing.assert_array_equal(source(x).numpy(), target(x).numpy())
    target.load_state_dict({k: v.numpy() for k, v in state.items()})  # plain arrays work too


def test_load_state_dict_strict_errors_name_the_keys():
    model = TwoLayer()
    state = model.state_dict()
    del state["fc1.bias"]
    state["fc3.weight"] = zgrad.ones(1)
    with pytest.raises(RuntimeError) as info:  # PyTorch's type; a KeyError too
        model.load_state_dict(state)
    message = str(info.value)
    assert isinstance(info.value, KeyError)
    assert 'Missing key(s) in state_dict: "fc1.bias". ' in message and 'Unexpected key(s) in state_dict: "fc3.weight". ' in message
    before = model.fc1.weight.numpy().copy()
    state["fc1.weight"] = zgrad.zeros(4, 3)
    model.load_state_dict(state, strict=False)
    assert np.all(model.fc1.weight.numpy() == 0) and not np.all(before == 0)


def test_load_state_dict_shape_mismatch_loads_nothing():
    model = TwoLayer()
    state = {k: zgrad.zeros(v.shape) for k, v in model.state_dict().items()}
    state["fc2.weight"] = zgrad.zeros(3, 3)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"size mismatch for fc2.weight: copying a param with shape zgrad.Size\(\[3, 3\]\) "
                                         r"from checkpoint, the shape in current model is zgrad.Size\(\[2, 4\]\)"):
        model.load_state_dict(state)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=f"{name} changed by a failed load")


@pytest.mark.torch
def test_linear_init_bounds_like_pytorch():
    zgrad.manual_seed(0)
    layer = nn.Linear(256, 300)
    bound = 1 / math.sqrt(256)
    for p in (layer.weight, layer.bias):
        values = p.numpy()
        assert p.dtype == np.float32
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.95 * bound, "uniform over the whole range"
    w = layer.weight.numpy()
    assert abs(w.mean()) < 0.02 * bound and abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound
    if torch is not None:
        reference = torch.nn.Linear(256, 300).weight.detach().numpy()
        assert abs(np.abs(reference).max() - np.abs(w).max()) < 0.01 * bound
        assert abs(reference.std() - w.std()) < 0.02 * bound
    assert nn.Linear(2, 3, dtype=np.float64).weight.dtype == np.float64
    assert "in_features=256, out_features=300, bias=True" in repr(layer)


def test_linear_layer_matches_functional_and_torch():
    layer = nn.Linear(3, 2, dtype=np.float64)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    x = zgrad.randn(4, 3, dtype=np.float64)
    np.testing.assert_allclose(layer(x).numpy(), x.numpy() @ w.T + b, rtol=1e-12)
    check(lambda lib, x, w, b: lib.nn.functional.relu(lib.nn.functional.linear(x, w, b)), [(4, 3), (2, 3), (2,)])


@pytest.mark.parametrize("name", ["ReLU", "Tanh", "Sigmoid"])
def test_activation_modules(name):
    module = getattr(nn, name)()
    x = zgrad.randn(3, 4)
    expected = {"ReLU": zgrad.relu, "Tanh": zgrad.tanh, "Sigmoid": zgrad.sigmoid}[name](x)
    np.testing.assert_array_equal(module(x).numpy(), expected.numpy())
    assert list(module.parameters()) == []


def test_sequential():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    assert len(model) == 3 and isinstance(model[1], nn.ReLU)
    x = zgrad.randn(2, 3)
    np.testing.assert_array_equal(model(x).numpy(), model[2](model[1](model[0](x))).numpy())
    assert "(1): ReLU()" in repr(model)
    with pytest.raises(TypeError, match="Sequential expects Modules, got int at position 1"):
        nn.Sequential(nn.ReLU(), 3)


@pytest.mark.torch
def test_sequential_against_torch():
    if torch is None:
        pytest.skip("torch is not installed")
    zgrad.manual_seed(1)
    mine = nn.Sequential(nn.Linear(3, 5), nn.Sigmoid(), nn.Linear(5, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Sigmoid(), torch.nn.Linear(5, 2))
    with torch.no_grad():
        for (name, p), (ref_name, q) in zip(mine.named_parameters(), ref.named_parameters()):
            assert name == ref_name
            q.copy_(torch.from_numpy(p.numpy()))
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    out, ref_out = mine(zgrad.tensor(x)), ref(torch.tensor(x))
    np.testing.assert_allclose(out.numpy(), ref_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    targets = np.array([0, 1, 1, 0])
    nn.functional.cross_entropy(out, targets).backward()
    torch.nn.functional.cross_entropy(ref_out, torch.tensor(targets)).backward()
    for p, q in zip(mine.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)


def _spirals(n_per_class: int, rng: np.random.Generator, turns: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals with a little noise: no linear model separates them."""
    t = np.sqrt(rng.uniform(0.02, 1, n_per_class)) * turns * 2 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (turns * 2 * np.pi)
    points = np.concatenate([arm, -arm]) + rng.normal(0, 0.02, (2 * n_per_class, 2))
    return points.astype(np.float32), np.repeat([0, 1], n_per_class)


def _train_classifier(model, points, labels, steps):
    optimizer = zgrad.optim.Adam(model.parameters(), lr=0.02)
    x = zgrad.tensor(points)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        optimizer.step()
    return loss.item()


def _accuracy(model, points, labels):
    with zgrad.no_grad():
        return float(np.mean(model(zgrad.tensor(points)).argmax(dim=1).numpy() == labels))


def test_mlp_learns_two_spirals():
    zgrad.manual_seed(0)
    rng = np.random.default_rng(0)
    train, test = _spirals(150, rng), _spirals(150, rng)
    model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))
    loss = _train_classifier(model, *train, steps=300)
    accuracy, held_out = _accuracy(model, *train), _accuracy(model, *test)
    assert accuracy > 0.9 and held_out > 0.9, f"accuracy {accuracy:.2f} (held out {held_out:.2f}), loss {loss:.3f}"
    linear = nn.Linear(2, 2)
    _train_classifier(linear, *train, steps=300)
    assert _accuracy(linear, *train) < 0.8, "the task must need the hidden layers"


def test_regression_with_sgd_and_mse():
    zgrad.manual_seed(0)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 3)).astype(np.float32)
    true_w = np.array([[1.5], [-2.0], [0.5]], dtype=np.float32)
    y = x @ true_w + 0.3
    model = nn.Linear(3, 1)
    optimizer = zgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(150):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(zgrad.tensor(x)), zgrad.tensor(y))
        loss.backward()
        optimizer.step()
    assert loss.item() < 1e-6
    np.testing.assert_allclose(model.weight.numpy(), true_w.T, atol=1e-3)
    np.testing.assert_allclose(model.bias.numpy(), [0.3], atol=1e-3)


def test_a_load_that_matched_every_key_prints_as_pytorchs():
    model = TwoLayer()
    assert repr(model.load_state_dict(model.state_dict())) == "<All keys matched successfully>"
    state = model.state_dict()
    del state["fc1.weight"], state["scale"]
    result = model.load_state_dict(state, strict=False)
    assert result.missing_keys == ["scale", "fc1.weight"]  # the module's order, as PyTorch's
    assert str(result) == "IncompatibleKeys(missing_keys=['scale', 'fc1.weight'], unexpected_keys=[])"

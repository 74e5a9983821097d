"""``zgrad.nn.utils.prune`` against ``torch.nn.utils.prune``: masks of the deterministic methods,
invariants of the random ones, ``remove``, ``is_pruned``, state dicts and error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

import zgrad
import zgrad.nn as znn
from zgrad.nn.utils import prune as zprune

torch = pytest.importorskip("torch")
tprune = pytest.importorskip("torch.nn.utils.prune")


def _pair(in_features: int = 5, out_features: int = 4, seed: int = 0):
    """A zgrad and a torch Linear with the same distinct-valued weights."""
    rng = np.random.default_rng(seed)
    values = rng.permutation(in_features * out_features).astype(np.float32) + 1.0
    values *= rng.choice([-1.0, 1.0], size=values.shape).astype(np.float32)
    weight = values.reshape(out_features, in_features) / 10
    z, t = znn.Linear(in_features, out_features), torch.nn.Linear(in_features, out_features)
    with zgrad.no_grad():
        z.weight.copy_(zgrad.tensor(weight))
        z.bias.copy_(zgrad.tensor(t.bias.detach().numpy()))
    with torch.no_grad():
        t.weight.copy_(torch.tensor(weight))
    return z, t


def _same_mask(z, t, name: str = "weight") -> None:
    np.testing.assert_array_equal(getattr(z, name + "_mask").numpy(), getattr(t, name + "_mask").numpy())


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value).__name__, str(info.value).replace("torch.", "zgrad.")


@pytest.mark.torch
@pytest.mark.parametrize("amount", [0, 3, 7, 20, 0.0, 0.3, 0.5, 1.0])
def test_l1_unstructured_matches_torch(amount) -> None:
    z, t = _pair()
    zprune.l1_unstructured(z, "weight", amount)
    tprune.l1_unstructured(t, "weight", amount)
    _same_mask(z, t)
    np.testing.assert_allclose(z.weight.numpy(), t.weight.detach().numpy())


@pytest.mark.torch
@pytest.mark.parametrize("n", [1, 2, math.inf])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("amount", [1, 2, 0.5])
def test_ln_structured_matches_torch(n, dim, amount) -> None:
    z, t = _pair()
    zprune.ln_structured(z, "weight", amount, n=n, dim=dim)
    tprune.ln_structured(t, "weight", amount, n=n, dim=dim)
    _same_mask(z, t)


@pytest.mark.torch
def test_importance_scores_match_torch() -> None:
    z, t = _pair()
    scores = np.arange(20, dtype=np.float32).reshape(4, 5)[::-1].copy()
    zprune.l1_unstructured(z, "weight", 6, importance_scores=zgrad.tensor(scores))
    tprune.l1_unstructured(t, "weight", 6, importance_scores=torch.tensor(scores))
    _same_mask(z, t)
    z, t = _pair()
    zprune.ln_structured(z, "weight", 2, 1, 0, importance_scores=zgrad.tensor(scores))
    tprune.ln_structured(t, "weight", 2, 1, 0, importance_scores=torch.tensor(scores))
    _same_mask(z, t)


@pytest.mark.torch
def test_custom_from_mask_and_identity_match_torch() -> None:
    mask = (np.arange(20).reshape(4, 5) % 3 != 0).astype(np.float32)
    z, t = _pair()
    zprune.custom_from_mask(z, "weight", zgrad.tensor(mask))
    tprune.custom_from_mask(t, "weight", torch.tensor(mask))
    _same_mask(z, t)
    zprune.identity(z, "bias")
    tprune.identity(t, "bias")
    _same_mask(z, t, "bias")
    np.testing.assert_allclose(z.weight.numpy(), t.weight.detach().numpy())


@pytest.mark.torch
def test_global_unstructured_matches_torch() -> None:
    z1, t1 = _pair(5, 4, seed=1)
    z2, t2 = _pair(3, 6, seed=2)
    with zgrad.no_grad():
        z2.weight.mul_(0.73)
    with torch.no_grad():
        t2.weight.mul_(0.73)
    for amount in (9, 0.25):
        zprune.global_unstructured([(z1, "weight"), (z2, "weight")], zprune.L1Unstructured, amount=amount)
        tprune.global_unstructured([(t1, "weight"), (t2, "weight")], tprune.L1Unstructured, amount=amount)
        _same_mask(z1, t1)
        _same_mask(z2, t2)
    assert int((z1.weight_mask == 0).sum().item() + (z2.weight_mask == 0).sum().item()) == 9 + round(0.25 * 29)


@pytest.mark.torch
def test_iterative_pruning_composes_masks_like_torch() -> None:
    z, t = _pair(6, 5)
    steps = [("l1_unstructured", dict(amount=4)), ("ln_structured", dict(amount=1, n=2, dim=0)),
             ("ln_structured", dict(amount=0.4, n=1, dim=1)), ("l1_unstructured", dict(amount=0.5)),
             ("ln_structured", dict(amount=1, n=2, dim=0))]
    for fn, kwargs in steps:
        getattr(zprune, fn)(z, "weight", **kwargs)
        getattr(tprune, fn)(t, "weight", **kwargs)
        _same_mask(z, t)
    hook = next(iter(z._forward_pre_hooks.values()))
    assert isinstance(hook, zprune.PruningContainer) and len(hook) == len(steps)
    assert len(z._forward_pre_hooks) == 1


@pytest.mark.torch
def test_structured_after_structured_error_counts_remaining_channels() -> None:
    z, t = _pair(3, 2)
    mask = np.array([[0, 1, 1], [0, 1, 1]], dtype=np.float32)
    zprune.custom_from_mask(z, "weight", zgrad.tensor(mask))
    tprune.custom_from_mask(t, "weight", torch.tensor(mask))
    name, message = _error(lambda: zprune.ln_structured(z, "weight", 3, n=2, dim=1))
    assert (name, message) == ("ValueError", "amount=3 should be smaller than the number of parameters to prune=2")
    zprune.ln_structured(z, "weight", 1, n=2, dim=1)
    tprune.ln_structured(t, "weight", 1, n=2, dim=1)
    _same_mask(z, t)


@pytest.mark.torch
@pytest.mark.parametrize("amount", [0, 5, 0.3, 0.5, 1.0])
def test_random_unstructured_invariants(amount) -> None:
    z, _ = _pair()
    orig = z.weight.numpy().copy()
    zprune.random_unstructured(z, "weight", amount)
    mask = z.weight_mask.numpy()
    expected = amount if isinstance(amount, int) else round(amount * 20)
    assert int((mask == 0).sum()) == expected and set(np.unique(mask)) <= {0.0, 1.0}
    np.testing.assert_allclose(z.weight.numpy(), orig * mask)
    x = zgrad.ones(2, 5)
    np.testing.assert_allclose(z(x).numpy(), (np.ones((2, 5)) @ (orig * mask).T + z.bias.numpy()), rtol=1e-5)


@pytest.mark.torch
@pytest.mark.parametrize("dim", [0, 1])
def test_random_structured_invariants(dim) -> None:
    z, _ = _pair()
    zprune.random_structured(z, "weight", 2, dim=dim)
    mask = z.weight_mask.numpy()
    channels = mask.sum(axis=1 - dim)
    assert int((channels == 0).sum()) == 2 and set(np.unique(channels)) <= {0.0, float(mask.shape[1 - dim])}
    zprune.random_structured(z, "weight", 1, dim=dim)  # among the channels left
    assert int((z.weight_mask.numpy().sum(axis=1 - dim) == 0).sum()) == 3


@pytest.mark.torch
def test_attributes_forward_hook_and_state_dict() -> None:
    z, t = _pair()
    param = z.weight
    zprune.l1_unstructured(z, "weight", 5)
    tprune.l1_unstructured(t, "weight", 5)
    assert z.weight_orig is param and isinstance(z.weight_orig, znn.Parameter)
    assert "weight" not in z._parameters and "weight_mask" in z._buffers
    assert sorted(z.state_dict()) == sorted(t.state_dict()) == ["bias", "weight_mask", "weight_orig"]
    assert [n for n, _ in z.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert z.weight.requires_grad and not z.weight_mask.requires_grad
    with zgrad.no_grad():
        z.weight_orig.fill_(2.0)
    z(zgrad.ones(1, 5))  # the pre-hook recomputes weight
    np.testing.assert_allclose(z.weight.numpy(), 2.0 * z.weight_mask.numpy())
    out = z(zgrad.ones(1, 5)).sum()
    out.backward()
    np.testing.assert_allclose(z.weight_orig.grad.numpy(), z.weight_mask.numpy() * np.ones((4, 5)))


@pytest.mark.torch
def test_remove_and_is_pruned() -> None:
    z, t = _pair()
    model = znn.Sequential(znn.ReLU(), z)
    assert not zprune.is_pruned(model)
    param = z.weight
    zprune.l1_unstructured(z, "weight", 0.5)
    zprune.ln_structured(z, "weight", 1, n=2, dim=0)
    tprune.l1_unstructured(t, "weight", 0.5)
    tprune.ln_structured(t, "weight", 1, n=2, dim=0)
    assert zprune.is_pruned(model) and tprune.is_pruned(t)
    zprune.remove(z, "weight")
    tprune.remove(t, "weight")
    assert not zprune.is_pruned(model)
    assert z.weight is param and isinstance(z.weight, znn.Parameter)
    assert sorted(z.state_dict()) == sorted(t.state_dict()) == ["bias", "weight"]
    assert len(z._forward_pre_hooks) == 0 and "weight_mask" not in z._buffers
    np.testing.assert_allclose(z.weight.numpy(), t.weight.detach().numpy())


@pytest.mark.torch
def test_prune_method_directly() -> None:
    values = [3.0, -1.0, 2.0, 5.0]
    got = zprune.L1Unstructured(0.3).prune(zgrad.tensor(values)).numpy()
    np.testing.assert_array_equal(got, tprune.L1Unstructured(0.3).prune(torch.tensor(values)).numpy())
    mask = [1.0, 0.0, 1.0, 1.0]
    got = zprune.L1Unstructured(1).compute_mask(zgrad.tensor(values), zgrad.tensor(mask)).numpy()
    want = tprune.L1Unstructured(1).compute_mask(torch.tensor(values), torch.tensor(mask)).numpy()
    np.testing.assert_array_equal(got, want)
    assert zprune.PruningContainer.__name__ == "PruningContainer"
    assert [c.PRUNING_TYPE for c in (zprune.L1Unstructured, zprune.LnStructured, zprune.CustomFromMask)] == \
        [c.PRUNING_TYPE for c in (tprune.L1Unstructured, tprune.LnStructured, tprune.CustomFromMask)]


@pytest.mark.torch
@pytest.mark.parametrize("call", [
    lambda p, m: p.l1_unstructured(m, "weight", -1),
    lambda p, m: p.l1_unstructured(m, "weight", -0.1),
    lambda p, m: p.l1_unstructured(m, "weight", 21),
    lambda p, m: p.random_unstructured(m, "weight", 1.5),
    lambda p, m: p.l1_unstructured(m, "weight", "a"),
    lambda p, m: p.ln_structured(m, "weight", 5, n=2, dim=0),
    lambda p, m: p.random_structured(m, "bias", 1, dim=0),
    lambda p, m: p.remove(m, "weight"),
    lambda p, m: p.global_unstructured([(m, "weight")], p.RandomStructured, amount=2),
    lambda p, m: p.global_unstructured([(m, "weight")], p.L1Unstructured, amount=2, importance_scores=[1]),
], ids=["negative", "negative-float", "too-many", "float-above-1", "str", "too-many-channels", "1-d-structured",
        "remove-unpruned", "global-structured", "global-scores-list"])
@pytest.mark.torch
def test_errors_match_torch(call) -> None:
    z, t = _pair()
    zname, zmessage = _error(lambda: call(zprune, z))
    tname, tmessage = _error(lambda: call(tprune, t))
    assert zname == tname
    assert zmessage.replace("zgrad.", "") == tmessage.replace("zgrad.", "")

"""``zgrad.nn.utils.parametrize`` / ``parametrizations`` and the hook forms ``weight_norm`` /
``spectral_norm`` against torch 2.13: each module is built in both libraries in float64, torch's
state dict (parameters and the power-iteration buffers) is loaded into zgrad's, and forward
outputs, parameter gradients, state dicts, reprs and error messages are compared."""

from __future__ import annotations

import copy
import pickle
import re
import warnings

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda, strict_cuda
from helpers import require_torch

X_LINEAR = np.random.default_rng(0).standard_normal((5, 3))
X_CONV = np.random.default_rng(1).standard_normal((2, 4, 6, 6))


def _z(t):
    return zgrad.tensor(t.detach().numpy())


def _build(lib, kind):
    lib.manual_seed(0)
    if kind == "linear":
        return lib.nn.Linear(3, 4).double()
    if kind == "linear_wide":
        return lib.nn.Linear(5, 3).double()
    if kind == "conv":
        return lib.nn.Conv2d(4, 6, 3, padding=1).double()
    if kind == "conv_transpose":
        return lib.nn.ConvTranspose2d(4, 6, 3).double()
    raise AssertionError(kind)


def _input(kind):
    return X_LINEAR if kind == "linear" else (np.random.default_rng(2).standard_normal((5, 5)) if kind == "linear_wide"
                                               else X_CONV)


def _pair(kind, apply):
    """A torch and a zgrad module with ``apply(lib, module)`` done, zgrad's loaded from torch's state dict."""
    torch = require_torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        t = apply(torch, _build(torch, kind))
        z = apply(zgrad, _build(zgrad, kind))
    assert list(z.state_dict()) == list(t.state_dict())
    z.load_state_dict({k: _z(v) for k, v in t.state_dict().items()})
    return t, z


def _step(lib, module, x):
    """Forward ``x`` and backward a fixed weighting; returns the output and each parameter's grad by name."""
    x = lib.tensor(x)
    out = module(x)
    weights = lib.tensor(np.linspace(-1.0, 2.0, out.numel()).reshape(tuple(out.shape)))
    module.zero_grad()
    (out * weights).sum().backward()
    return out.detach().numpy(), {n: p.grad.numpy() for n, p in module.named_parameters()}


def _assert_same_step(t, z, x, rtol=1e-10, atol=1e-12):
    out_t, grads_t = _step(require_torch(), t, x)
    out_z, grads_z = _step(zgrad, z, x)
    np.testing.assert_allclose(out_z, out_t, rtol=rtol, atol=atol)
    assert list(grads_z) == list(grads_t)
    for name in grads_t:
        np.testing.assert_allclose(grads_z[name], grads_t[name], rtol=rtol, atol=atol, err_msg=name)


def _assert_same_state(t, z, rtol=1e-10, atol=1e-12):
    st, sz = t.state_dict(), z.state_dict()
    assert list(sz) == list(st)
    for key in st:
        assert tuple(sz[key].shape) == tuple(st[key].shape), key
        np.testing.assert_allclose(sz[key].numpy(), st[key].numpy(), rtol=rtol, atol=atol, err_msg=key)


def _normalized(message):
    """An error message with the libraries' spellings of sizes and dtypes made alike."""
    return re.sub(r"(torch|zgrad)\.(?=Size|float|int)", "", str(message))


# --- weight norm ----------------------------------------------------------------------------------

@pytest.mark.torch
@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None])
@pytest.mark.parametrize("form", ["parametrization", "hook"])
def test_weight_norm_matches_torch(kind, dim, form):
    def apply(lib, m):
        fn = lib.nn.utils.parametrizations.weight_norm if form == "parametrization" else lib.nn.utils.weight_norm
        return fn(m, dim=dim)

    t, z = _pair(kind, apply)
    _assert_same_state(t, z)
    for _ in range(2):
        _assert_same_step(t, z, _input(kind))
    np.testing.assert_allclose(z.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-12)
    expected = ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"] \
        if form == "parametrization" else ["bias", "weight_g", "weight_v"]
    assert [n for n, _ in z.named_parameters()] == expected
    g = z.parametrizations.weight.original0 if form == "parametrization" else z.weight_g
    assert g.shape == t.state_dict()[expected[1]].shape


@pytest.mark.torch
def test_weight_norm_reprs_match_torch():
    torch = require_torch()
    for lib in (torch, zgrad):
        lib.manual_seed(0)
    pt = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 4))
    pz = zgrad.nn.utils.parametrizations.weight_norm(zgrad.nn.Linear(3, 4))
    assert repr(pz) == repr(pt)
    assert type(pz).__name__ == "ParametrizedLinear" and isinstance(pz, zgrad.nn.Linear)
    assert repr(zgrad.nn.utils.parametrizations.spectral_norm(zgrad.nn.Conv2d(2, 3, 3))) == \
        repr(torch.nn.utils.parametrizations.spectral_norm(torch.nn.Conv2d(2, 3, 3)))
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        hooked = zgrad.nn.utils.weight_norm(zgrad.nn.Linear(3, 4))
    assert repr(hooked) == "Linear(in_features=3, out_features=4, bias=True)"


@pytest.mark.torch
@pytest.mark.parametrize("form", ["parametrization", "hook"])
def test_removing_weight_norm_leaves_the_normalized_weight(form):
    torch = require_torch()

    def apply(lib, m):
        fn = lib.nn.utils.parametrizations.weight_norm if form == "parametrization" else lib.nn.utils.weight_norm
        return fn(m, dim=1)

    t, z = _pair("linear", apply)
    _assert_same_step(t, z, X_LINEAR)  # the hook form's weight is recomputed by a forward
    if form == "parametrization":
        torch.nn.utils.parametrize.remove_parametrizations(t, "weight")
        zgrad.nn.utils.parametrize.remove_parametrizations(z, "weight")
        assert type(z) is zgrad.nn.Linear and not hasattr(z, "parametrizations")
    else:
        torch.nn.utils.remove_weight_norm(t)
        zgrad.nn.utils.remove_weight_norm(z)
        assert not z._forward_pre_hooks
    assert [n for n, _ in z.named_parameters()] == [n for n, _ in t.named_parameters()] == ["bias", "weight"]
    assert isinstance(z.weight, zgrad.nn.Parameter)
    _assert_same_state(t, z)
    _assert_same_step(t, z, X_LINEAR)


def test_parametrized_weight_norm_loads_a_state_dict_of_the_old_weight_norm():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = zgrad.nn.utils.weight_norm(zgrad.nn.Conv2d(2, 3, 3))
    saved = old.state_dict()
    assert {"weight_g", "weight_v"} <= set(saved)
    new = zgrad.nn.utils.parametrizations.weight_norm(zgrad.nn.Conv2d(2, 3, 3))
    assert repr(new.load_state_dict(saved)) == "<All keys matched successfully>"
    x = zgrad.randn(1, 2, 5, 5)
    np.testing.assert_allclose(new(x).detach().numpy(), old(x).detach().numpy(), rtol=1e-6)
    assert "weight_g" in saved  # the caller's dict is left as it was


@pytest.mark.torch
def test_hook_weight_norm_misuse_messages_match_torch():
    torch = require_torch()
    errors = []
    for lib in (torch, zgrad):
        m = lib.nn.Linear(3, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            lib.nn.utils.weight_norm(m)
            with pytest.raises(RuntimeError) as twice:
                lib.nn.utils.weight_norm(m)
        with pytest.raises(ValueError) as missing:
            lib.nn.utils.remove_weight_norm(m, "bias")
        with pytest.raises(ValueError) as missing_sn:
            lib.nn.utils.remove_spectral_norm(m)
        errors.append((str(twice.value), str(missing.value), str(missing_sn.value)))
    assert errors[1] == errors[0]


# --- spectral norm --------------------------------------------------------------------------------

@pytest.mark.torch
@pytest.mark.parametrize("kind", ["linear", "conv", "conv_transpose"])
@pytest.mark.parametrize("form", ["parametrization", "hook"])
@pytest.mark.parametrize("n_power_iterations", [1, 3])
def test_spectral_norm_matches_torch_in_training_and_eval(kind, form, n_power_iterations):
    def apply(lib, m):
        fn = lib.nn.utils.parametrizations.spectral_norm if form == "parametrization" else lib.nn.utils.spectral_norm
        return fn(m, n_power_iterations=n_power_iterations)

    t, z = _pair(kind, apply)
    for _ in range(3):  # each training forward advances u and v
        _assert_same_step(t, z, _input(kind), rtol=1e-8, atol=1e-10)
        _assert_same_state(t, z, rtol=1e-8, atol=1e-10)
    before = {k: v.numpy().copy() for k, v in z.state_dict().items()}
    t.eval()
    z.eval()
    for _ in range(2):  # in eval mode they stay
        _assert_same_step(t, z, _input(kind), rtol=1e-8, atol=1e-10)
    _assert_same_state(t, z, rtol=1e-8, atol=1e-10)
    for key, value in z.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key], err_msg=key)


@pytest.mark.torch
def test_spectral_norm_layout_and_default_dim():
    torch = require_torch()
    t, z = _pair("conv_transpose", lambda lib, m: lib.nn.utils.parametrizations.spectral_norm(m))
    assert z.parametrizations.weight[0].dim == t.parametrizations.weight[0].dim == 1
    assert z.parametrizations.weight[0]._u.shape == (6,)  # ConvTranspose2d(4, 6): weight (4, 6, 3, 3), rows dim 1
    t, z = _pair("linear", lambda lib, m: lib.nn.utils.spectral_norm(m))
    assert [n for n, _ in z.named_parameters()] == ["bias", "weight_orig"]
    assert [n for n, _ in z.named_buffers()] == ["weight_u", "weight_v"]
    assert not isinstance(z.weight, zgrad.nn.Parameter)
    torch.nn.utils.remove_spectral_norm(t)
    zgrad.nn.utils.remove_spectral_norm(z)
    assert list(z.state_dict()) == list(t.state_dict()) == ["bias", "weight"]
    _assert_same_state(t, z)
    # The largest singular value of the normalized weight is about 1 after enough iterations.
    m = zgrad.nn.utils.parametrizations.spectral_norm(zgrad.nn.Linear(6, 5).double(), n_power_iterations=30)
    m(zgrad.zeros(1, 6, dtype=zgrad.float64))
    assert abs(np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)[0] - 1.0) < 1e-6


@pytest.mark.torch
def test_spectral_norm_misuse_messages_match_torch():
    torch = require_torch()
    seen = []
    for lib in (torch, zgrad):
        messages = []
        for call in (lambda: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 4), n_power_iterations=0),
                     lambda: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 4), dim=2),
                     lambda: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 4), name="gamma"),
                     lambda: lib.nn.utils.spectral_norm(lib.nn.Linear(3, 4), n_power_iterations=0),
                     lambda: lib.nn.utils.spectral_norm(lib.nn.utils.spectral_norm(lib.nn.Linear(3, 4))),
                     lambda: lib.nn.utils.spectral_norm(lib.nn.Linear(3, 4, bias=False), name="bias")):
            with pytest.raises((ValueError, IndexError, RuntimeError)) as info:
                call()
            messages.append((type(info.value).__name__, str(info.value)))
        seen.append(messages)
    assert seen[1] == seen[0]


# --- orthogonal -----------------------------------------------------------------------------------

@pytest.mark.torch
@pytest.mark.parametrize("kind", ["linear", "linear_wide"])
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_matches_torch(kind, orthogonal_map):
    t, z = _pair(kind, lambda lib, m: lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map=orthogonal_map))
    _assert_same_step(t, z, _input(kind), rtol=1e-8, atol=1e-10)
    w = z.weight.detach().numpy()
    small = min(w.shape)
    gram = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-10)


def test_orthogonal_weight_can_be_assigned():
    m = zgrad.nn.utils.parametrizations.orthogonal(zgrad.nn.Linear(4, 4).double())
    q = np.linalg.qr(np.random.default_rng(3).standard_normal((4, 4)))[0]
    m.weight = zgrad.tensor(q)
    np.testing.assert_allclose(m.weight.detach().numpy(), q, atol=1e-12)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions."):
        zgrad.nn.utils.parametrizations.orthogonal(m, "bias")


# --- register_parametrization ---------------------------------------------------------------------

def _symmetric(lib):
    class Symmetric(lib.nn.Module):
        calls = 0

        def forward(self, X):  # noqa: N803
            Symmetric.calls += 1
            return X.triu() + X.triu(1).mT

        def right_inverse(self, A):  # noqa: N803
            return A.triu()

    return Symmetric


def _scale(lib):
    class Scale(lib.nn.Module):
        def forward(self, X):  # noqa: N803
            return 2.0 * X

        def right_inverse(self, A):  # noqa: N803
            return A / 2.0

    return Scale


@pytest.mark.torch
def test_custom_parametrization_with_right_inverse_matches_torch():
    torch = require_torch()
    P = torch.nn.utils.parametrize  # noqa: N806

    def apply(lib, m):
        lib.nn.utils.parametrize.register_parametrization(m, "weight", _symmetric(lib)())
        lib.nn.utils.parametrize.register_parametrization(m, "weight", _scale(lib)())
        return m

    t = apply(torch, torch.nn.Linear(4, 4).double())
    z = apply(zgrad, zgrad.nn.Linear(4, 4).double())
    assert repr(z) == repr(t)
    assert list(z.state_dict()) == list(t.state_dict()) == ["bias", "parametrizations.weight.original"]
    z.load_state_dict({k: _z(v) for k, v in t.state_dict().items()})
    _assert_same_step(t, z, np.random.default_rng(4).standard_normal((3, 4)))
    w = z.weight.detach().numpy()
    np.testing.assert_allclose(w, w.T)
    # Assigning goes through right_inverse (last parametrization first), keeping the same original.
    original = z.parametrizations.weight.original
    s = np.random.default_rng(5).standard_normal((4, 4))
    s = s + s.T
    t.weight = torch.tensor(s)
    z.weight = zgrad.tensor(s)
    assert z.parametrizations.weight.original is original
    np.testing.assert_allclose(z.weight.detach().numpy(), s, rtol=1e-12)
    _assert_same_state(t, z)
    assert P.is_parametrized(t) and zgrad.nn.utils.parametrize.is_parametrized(z)
    assert zgrad.nn.utils.parametrize.is_parametrized(z, "weight")
    assert not zgrad.nn.utils.parametrize.is_parametrized(z, "bias")
    assert zgrad.nn.utils.parametrize.type_before_parametrizations(z) is zgrad.nn.Linear


def test_leave_parametrized_false_restores_the_original_and_class():
    P = zgrad.nn.utils.parametrize  # noqa: N806
    m = zgrad.nn.Linear(4, 4).double()
    weight = m.weight
    before = weight.detach().numpy().copy()
    P.register_parametrization(m, "weight", _scale(zgrad)())
    np.testing.assert_allclose(m.weight.detach().numpy(), before)  # right_inverse then forward
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), before / 2)
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    assert type(m) is zgrad.nn.Linear and m.weight is weight
    np.testing.assert_allclose(m.weight.detach().numpy(), before / 2)
    assert zgrad.nn.utils.parametrize.type_before_parametrizations(m) is zgrad.nn.Linear


def test_parametrized_module_trains_caches_copies_and_refuses_pickle():
    P = zgrad.nn.utils.parametrize  # noqa: N806
    Symmetric = _symmetric(zgrad)  # noqa: N806
    m = P.register_parametrization(zgrad.nn.Linear(4, 4).double(), "weight", Symmetric())
    Symmetric.calls = 0
    with P.cached():
        a, b = m.weight, m.weight
        with P.cached():
            assert m.weight is a
    assert a is b and Symmetric.calls == 1
    _ = m.weight
    assert Symmetric.calls == 2 and m.weight is not a
    opt = zgrad.optim.SGD(m.parameters(), lr=0.1)
    before = m.parametrizations.weight.original.detach().numpy().copy()
    m(zgrad.ones(2, 4, dtype=zgrad.float64)).sum().backward()
    opt.step()
    after = m.parametrizations.weight.original.detach().numpy()
    assert not np.allclose(after, before)
    np.testing.assert_allclose(m.weight.detach().numpy(), m.weight.detach().numpy().T)
    twin = copy.deepcopy(m)
    assert type(twin) is type(m) and twin.parametrizations.weight.original is not m.parametrizations.weight.original
    np.testing.assert_array_equal(twin.weight.detach().numpy(), m.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only supported through"):
        pickle.dumps(m)
    target = zgrad.nn.Linear(4, 4).double()
    P.transfer_parametrizations_and_params(m, target)
    assert target.parametrizations.weight.original is m.parametrizations.weight.original
    np.testing.assert_array_equal(target.weight.detach().numpy(), m.weight.detach().numpy())


def test_buffer_and_sequence_originals():
    P = zgrad.nn.utils.parametrize  # noqa: N806
    m = zgrad.nn.BatchNorm1d(3)
    P.register_parametrization(m, "running_var", _scale(zgrad)())
    assert "parametrizations.running_var.original" in m.state_dict()
    np.testing.assert_allclose(m.running_var.numpy(), np.ones(3))
    assert [n for n, _ in m.named_buffers()][:1] == ["running_mean"]
    wn = zgrad.nn.utils.parametrizations.weight_norm(zgrad.nn.Linear(3, 2))
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        P.remove_parametrizations(wn, "weight", leave_parametrized=False)
    P.remove_parametrizations(wn, "weight")
    assert isinstance(wn.weight, zgrad.nn.Parameter) and type(wn) is zgrad.nn.Linear


@pytest.mark.torch
def test_register_parametrization_misuse_messages_match_torch():
    torch = require_torch()

    def make(lib):
        class Shrink(lib.nn.Module):
            def forward(self, X):  # noqa: N803
                return X[:-1]

        class NotATensor(lib.nn.Module):
            def forward(self, X):  # noqa: N803
                return 3

        class NoInverse(lib.nn.Module):
            def forward(self, X):  # noqa: N803
                return X

        return Shrink, NotATensor, NoInverse

    seen = []
    for lib in (torch, zgrad):
        P = lib.nn.utils.parametrize  # noqa: N806
        Shrink, NotATensor, NoInverse = make(lib)  # noqa: N806
        messages = []
        calls = [lambda: P.register_parametrization(lib.nn.Linear(3, 4), "gamma", NoInverse()),
                 lambda: P.register_parametrization(lib.nn.Linear(3, 4).double(), "weight", Shrink()),
                 lambda: P.register_parametrization(lib.nn.Linear(3, 4), "weight", NotATensor()),
                 lambda: P.register_parametrization(P.register_parametrization(lib.nn.Linear(3, 4), "weight",
                                                                               NoInverse()), "weight", Shrink()),
                 lambda: P.remove_parametrizations(lib.nn.Linear(3, 4), "weight"),
                 lambda: setattr(P.register_parametrization(lib.nn.Linear(3, 4), "weight", NoInverse()), "weight",
                                 lib.zeros(4, 3))]
        for call in calls:
            with pytest.raises((ValueError, RuntimeError)) as info:
                call()
            messages.append((type(info.value).__name__, _normalized(info.value)))
        assert P.register_parametrization(lib.nn.Linear(3, 4), "weight", Shrink(), unsafe=True).weight.shape == (3, 3)
        seen.append(messages)
    assert seen[1] == seen[0]


# --- CUDA (the simulator here) --------------------------------------------------------------------

@requires_cuda
def test_parametrized_linear_runs_on_cuda_as_on_the_cpu():
    results = []
    reference = None
    for device in ("cpu", "cuda"):
        context = strict_cuda() if device == "cuda" else warnings.catch_warnings()
        with context:
            m = zgrad.nn.Linear(3, 4).double()
            zgrad.nn.utils.parametrizations.weight_norm(m)
            zgrad.nn.utils.parametrizations.spectral_norm(m, "bias")  # a 1-D tensor: normalized
            zgrad.nn.utils.parametrizations.spectral_norm(m)  # a second parametrization of the weight
            if reference is None:
                reference = {k: v.numpy().copy() for k, v in m.state_dict().items()}
            else:
                m.load_state_dict(reference)
            x = zgrad.tensor(X_LINEAR)
            out = m(x)
            out.sum().backward()
            if device == "cuda":
                assert out.device.type == "cuda" and m.parametrizations.weight[1]._u.device.type == "cuda"
            results.append([out._host()] + [p.grad._host() for _, p in m.named_parameters()]
                           + [b._host() for _, b in m.named_buffers()])
    for got, expected in zip(results[1], results[0]):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-11)

"""Random tensors and generators, as PyTorch's: ``zgrad.Generator`` (seed, state, device), the
default generator's functions (``manual_seed``, ``seed``, ``initial_seed``, ``get_rng_state``,
``set_rng_state``), and every random function with its ``generator=``: ``rand``, ``randn``,
``randint``, ``randperm``, the ``*_like`` forms, ``normal`` (its four forms), ``bernoulli``,
``multinomial`` and the in-place fills (``uniform_``, ``normal_``, ``random_``, ``bernoulli_``,
``exponential_``, ``log_normal_``, ``cauchy_``, ``geometric_``).

zgrad's streams differ from PyTorch's, so values are checked for reproducibility and by their
distribution (ranges, moments, frequencies); dtypes, shapes, errors and the (zero) gradients of
``normal`` and ``bernoulli`` are compared with PyTorch where it is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import torch

# Each draws 4000 values with generator ``g`` (None: the default generator) through one API.
DRAWS = {
    "rand": lambda g: zgrad.rand(4000, generator=g),
    "randn": lambda g: zgrad.randn(40, 100, generator=g, dtype=zgrad.float64),
    "randint": lambda g: zgrad.randint(-3, 7, (4000,), generator=g),
    "randperm": lambda g: zgrad.randperm(4000, generator=g),
    "rand_like": lambda g: zgrad.rand_like(zgrad.zeros(4000), generator=g),
    "randn_like": lambda g: zgrad.randn_like(zgrad.zeros(4000), generator=g),
    "randint_like": lambda g: zgrad.randint_like(zgrad.zeros(4000), 2, 9, generator=g),
    "normal_tensors": lambda g: zgrad.normal(zgrad.zeros(4000), zgrad.ones(4000), generator=g),
    "normal_numbers": lambda g: zgrad.normal(1.0, 2.0, (4000,), generator=g),
    "bernoulli": lambda g: zgrad.bernoulli(zgrad.full((4000,), 0.3), generator=g),
    "multinomial": lambda g: zgrad.multinomial(zgrad.tensor([1.0, 2.0, 3.0]), 4000, True, generator=g),
    "uniform_": lambda g: zgrad.empty(4000).uniform_(-1, 1, generator=g),
    "normal_": lambda g: zgrad.empty(4000).normal_(2, 3, generator=g),
    "random_": lambda g: zgrad.empty(4000, dtype=zgrad.int64).random_(0, 50, generator=g),
    "bernoulli_": lambda g: zgrad.empty(4000).bernoulli_(0.2, generator=g),
    "exponential_": lambda g: zgrad.empty(4000).exponential_(2.0, generator=g),
    "log_normal_": lambda g: zgrad.empty(4000).log_normal_(generator=g),
    "cauchy_": lambda g: zgrad.empty(4000).cauchy_(generator=g),
    "geometric_": lambda g: zgrad.empty(4000, dtype=zgrad.int32).geometric_(0.3, generator=g),
}


# --- generators -----------------------------------------------------------------------------------

def test_a_new_generator_starts_from_pytorchs_default_seed_and_reseeds():
    g = zgrad.Generator()
    assert g.initial_seed() == 67280421310721 and g.device == zgrad.device("cpu")
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    seed = g.seed()
    assert isinstance(seed, int) and 0 <= seed < 2**64 and g.initial_seed() == seed
    assert g.manual_seed(-1).initial_seed() == 2**64 - 1  # negative seeds wrap, as PyTorch's
    assert zgrad.Generator("cuda").device.type == "cuda"


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_every_random_function_is_reproducible_from_a_generator_or_manual_seed(name):
    draw = DRAWS[name]
    first = draw(zgrad.Generator().manual_seed(11)).numpy()
    np.testing.assert_array_equal(draw(zgrad.Generator().manual_seed(11)).numpy(), first)
    assert not np.array_equal(draw(zgrad.Generator().manual_seed(12)).numpy(), first)
    zgrad.manual_seed(11)
    np.testing.assert_array_equal(draw(None).numpy(), first)  # the default generator is a Generator too


def test_a_generator_has_its_own_stream():
    zgrad.manual_seed(3)
    expected = zgrad.rand(5).numpy()
    zgrad.manual_seed(3)
    zgrad.rand(7, generator=zgrad.Generator())  # draws elsewhere: the default stream does not move
    np.testing.assert_array_equal(zgrad.rand(5).numpy(), expected)


def test_state_round_trip_replays_the_stream():
    g = zgrad.Generator().manual_seed(1)
    zgrad.randn(3, generator=g)  # leaves a cached half of a draw in some bit generators
    state = g.get_state()
    assert state.dtype == zgrad.uint8 and state.ndim == 1
    expected = zgrad.randn(9, generator=g).numpy()
    other = zgrad.Generator().set_state(state)
    np.testing.assert_array_equal(zgrad.randn(9, generator=other).numpy(), expected)
    assert other.initial_seed() == 1

    zgrad.manual_seed(4)
    saved = zgrad.get_rng_state()
    a = zgrad.rand(4).numpy()
    zgrad.set_rng_state(saved)
    np.testing.assert_array_equal(zgrad.rand(4).numpy(), a)


def test_default_generator_functions():
    assert zgrad.manual_seed(9) is zgrad.default_generator and zgrad.initial_seed() == 9
    assert zgrad.random.initial_seed() == 9 and zgrad.random.default_generator is zgrad.default_generator
    seed = zgrad.seed()
    assert zgrad.initial_seed() == seed
    assert isinstance(zgrad.Generator(), zgrad.Generator)


def test_fork_rng_restores_the_default_stream():
    zgrad.manual_seed(8)
    expected = zgrad.rand(3).numpy()
    zgrad.manual_seed(8)
    with zgrad.random.fork_rng():
        zgrad.manual_seed(100)
        zgrad.rand(10)
    np.testing.assert_array_equal(zgrad.rand(3).numpy(), expected)
    with zgrad.random.fork_rng(enabled=False):
        zgrad.manual_seed(8)
    np.testing.assert_array_equal(zgrad.rand(3).numpy(), expected)


def test_cuda_default_generator_functions():
    zgrad.cuda.manual_seed_all(21)
    assert zgrad.cuda.initial_seed() == 21 and zgrad.cuda.default_generators[0].device.type == "cuda"
    state = zgrad.cuda.get_rng_state()
    zgrad.manual_seed(5)  # seeds the CUDA default generator too, as PyTorch's
    assert zgrad.cuda.initial_seed() == 5
    zgrad.cuda.set_rng_state(state)
    assert zgrad.cuda.initial_seed() == 21 and zgrad.initial_seed() == 5
    zgrad.cuda.seed_all()
    assert zgrad.cuda.initial_seed() != 21


def test_generator_errors():
    g = zgrad.Generator()
    with pytest.raises(TypeError, match="manual_seed expects an int, got float"):
        g.manual_seed(1.5)
    with pytest.raises(ValueError, match="Overflow"):
        g.manual_seed(2**64)
    with pytest.raises(TypeError, match="uint8 tensor"):
        g.set_state(zgrad.zeros(56))
    with pytest.raises(RuntimeError, match="Expected a state of 56 bytes"):
        g.set_state(zgrad.zeros(5, dtype=zgrad.uint8))
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'cuda'"):
        zgrad.rand(2, generator=zgrad.Generator("cuda"))
    with pytest.raises(TypeError, match="generator must be a zgrad.Generator or None"):
        zgrad.rand(2, generator=np.random.default_rng(0))


# --- distributions --------------------------------------------------------------------------------

def _generator() -> zgrad.Generator:
    return zgrad.Generator().manual_seed(2024)


def test_uniform_and_normal_moments():
    g = _generator()
    u = zgrad.rand(200_000, generator=g, dtype=zgrad.float64).numpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    n = zgrad.randn(200_000, generator=g).numpy()
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    assert zgrad.normal(zgrad.tensor([[-5.0], [5.0]]), zgrad.tensor([0.5, 2.0, 4.0]), generator=g).shape == (2, 3)
    many = zgrad.normal(zgrad.full((100_000,), 3.0), 2.0, generator=g).numpy()
    assert abs(many.mean() - 3) < 0.03 and abs(many.std() - 2) < 0.03
    by_std = zgrad.normal(-1.0, zgrad.full((100_000,), 0.5), generator=g).numpy()
    assert abs(by_std.mean() + 1) < 0.01 and abs(by_std.std() - 0.5) < 0.01
    exponential = zgrad.empty(100_000, dtype=zgrad.float64).exponential_(4.0, generator=g).numpy()
    assert exponential.min() >= 0 and abs(exponential.mean() - 0.25) < 0.005
    log_normal = np.log(zgrad.empty(100_000, dtype=zgrad.float64).log_normal_(1.0, 0.5, generator=g).numpy())
    assert abs(log_normal.mean() - 1) < 0.01 and abs(log_normal.std() - 0.5) < 0.01
    cauchy = zgrad.empty(100_000, dtype=zgrad.float64).cauchy_(2.0, 3.0, generator=g).numpy()
    quartiles = np.percentile(cauchy, [25, 50, 75])  # median 2, quartiles at median -/+ sigma
    np.testing.assert_allclose(quartiles, [-1.0, 2.0, 5.0], atol=0.1)
    geometric = zgrad.empty(100_000, dtype=zgrad.int64).geometric_(0.25, generator=g).numpy()
    assert geometric.min() == 1 and abs(geometric.mean() - 4) < 0.05 and abs((geometric == 1).mean() - 0.25) < 0.01


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_floating_fills_in_every_floating_dtype(dtype):
    g = _generator()
    for t in (zgrad.rand(5000, generator=g, dtype=getattr(zgrad, dtype)), zgrad.empty(5000, dtype=getattr(zgrad, dtype))
              .uniform_(2, 3, generator=g)):
        assert t.dtype == np.dtype(dtype) and np.isfinite(t.numpy()).all()
    assert zgrad.randn(5000, dtype=getattr(zgrad, dtype), generator=g).numpy().std() == pytest.approx(1, abs=0.05)
    strided = zgrad.zeros(10, 6, dtype=getattr(zgrad, dtype))[:, ::2]
    strided.normal_(5, 0.1, generator=g)
    assert (strided.numpy() > 4).all()


def test_integer_draws_cover_their_range():
    g = _generator()
    r = zgrad.randint(-3, 7, (20_000,), generator=g).numpy()
    assert r.dtype == np.int64 and set(np.unique(r)) == set(range(-3, 7))
    assert set(np.unique(zgrad.randint(4, (1000,), generator=g).numpy())) == {0, 1, 2, 3}
    assert set(np.unique(zgrad.randint(high=2, size=(100,), dtype=zgrad.bool, generator=g).numpy())) == {False, True}
    like = zgrad.randint_like(zgrad.zeros(2, 500, dtype=zgrad.int8), 5, generator=g)
    assert like.dtype == np.int8 and like.shape == (2, 500) and set(np.unique(like.numpy())) == set(range(5))
    p = zgrad.randperm(1000, generator=g).numpy()
    assert sorted(p) == list(range(1000)) and not np.array_equal(p, np.arange(1000))
    assert zgrad.randperm(0).shape == (0,)


def test_bernoulli_frequencies():
    g = _generator()
    probs = zgrad.tensor([0.0, 0.25, 1.0]).reshape(3, 1).expand(3, 20_000).contiguous()
    draws = zgrad.bernoulli(probs, generator=g).numpy()
    assert set(np.unique(draws)) <= {0.0, 1.0}
    np.testing.assert_allclose(draws.mean(axis=1), [0.0, 0.25, 1.0], atol=0.01)
    assert zgrad.bernoulli(zgrad.zeros(20_000), 0.7, generator=g).numpy().mean() == pytest.approx(0.7, abs=0.01)
    assert zgrad.zeros(20_000).bernoulli_(zgrad.full((20_000,), 0.4), generator=g).numpy().mean() == \
        pytest.approx(0.4, abs=0.01)
    as_int = zgrad.zeros(1000, dtype=zgrad.int64).bernoulli_(0.5, generator=g)
    assert as_int.dtype == np.int64 and set(np.unique(as_int.numpy())) == {0, 1}


def test_multinomial_frequencies_and_without_replacement():
    g = _generator()
    weights = zgrad.tensor([[1.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 0.0]])
    draws = zgrad.multinomial(weights, 40_000, replacement=True, generator=g).numpy()
    assert draws.shape == (2, 40_000) and draws.dtype == np.int64
    np.testing.assert_allclose(np.bincount(draws[0], minlength=4) / 40_000, [0.125, 0, 0.375, 0.5], atol=0.01)
    assert (draws[1] == 2).all()
    rows = zgrad.multinomial(zgrad.ones(50, 10), 10, generator=g).numpy()
    assert all(sorted(row) == list(range(10)) for row in rows)
    # without replacement, zero-weight categories come only after every positive one
    picks = zgrad.multinomial(zgrad.tensor([0.0, 2.0, 0.0, 1.0]), 4, generator=g).numpy()
    assert set(picks[:2]) == {1, 3} and set(picks[2:]) == {0, 2}
    first = [zgrad.multinomial(zgrad.tensor([1.0, 9.0]), 1, generator=g).item() for _ in range(400)]
    assert np.mean(first) == pytest.approx(0.9, abs=0.05)
    assert zgrad.tensor([1.0, 2.0]).multinomial(3, True, generator=g).shape == (3,)


# --- against PyTorch: dtype, shape, errors, gradients ---------------------------------------------

# name: fn(lib) run on zgrad and torch; results must agree in dtype and shape.
SHAPES = {
    "rand": lambda lib: lib.rand(2, 3),
    "rand_tuple_f64": lambda lib: lib.rand((2, 3), dtype=lib.float64),
    "randn_f16": lambda lib: lib.randn(4, dtype=lib.float16),
    "randint": lambda lib: lib.randint(5, (2, 2)),
    "randint_low": lambda lib: lib.randint(-2, 5, (3,), dtype=lib.int32),
    "randint_float": lambda lib: lib.randint(0, 5, (3,), dtype=lib.float32),
    "randint_like": lambda lib: lib.randint_like(lib.zeros(2, 3, dtype=lib.float64), 4),
    "randperm": lambda lib: lib.randperm(6),
    "randperm_float": lambda lib: lib.randperm(6, dtype=lib.float32),
    "rand_like": lambda lib: lib.rand_like(lib.zeros(2, dtype=lib.float64)),
    "randn_like_dtype": lambda lib: lib.randn_like(lib.zeros(2), dtype=lib.float64),
    "normal_tensors": lambda lib: lib.normal(lib.zeros(3, 1), lib.ones(2)),
    "normal_mean": lambda lib: lib.normal(lib.zeros(3, dtype=lib.float64)),
    "normal_std": lambda lib: lib.normal(2.0, lib.ones(4)),
    "normal_size": lambda lib: lib.normal(2.0, 3.0, (2, 5)),
    "bernoulli": lambda lib: lib.bernoulli(lib.full((3,), 0.5, dtype=lib.float64)),
    "bernoulli_p": lambda lib: lib.bernoulli(lib.zeros(2, 2), 0.3),
    "multinomial_1d": lambda lib: lib.multinomial(lib.ones(5), 3),
    "multinomial_2d": lambda lib: lib.multinomial(lib.ones(2, 5), 7, replacement=True),
    "method_bernoulli": lambda lib: lib.zeros(3).bernoulli(),
    "method_multinomial": lambda lib: lib.ones(4).multinomial(2),
    "exponential_": lambda lib: lib.zeros(3, dtype=lib.float64).exponential_(),
    "bernoulli_": lambda lib: lib.zeros(3, dtype=lib.int32).bernoulli_(0.5),
    "random_": lambda lib: lib.zeros(3, dtype=lib.int16).random_(3),
    "uniform_": lambda lib: lib.zeros(2, dtype=lib.float16).uniform_(),
    "log_normal_": lambda lib: lib.zeros(2, dtype=lib.float16).log_normal_(),
    "cauchy_": lambda lib: lib.zeros(2, 2).cauchy_(1.0, 2.0),
    "geometric_": lambda lib: lib.zeros(3, dtype=lib.int64).geometric_(0.5),
}


def _torch_dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_dtype_and_shape_match_pytorch(name):
    ours, theirs = SHAPES[name](zgrad), SHAPES[name](torch)
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == _torch_dtype_name(theirs.dtype)


# name: fn(lib) that PyTorch refuses; zgrad must refuse it with an error of the same kind.
ERRORS = {
    "randint_empty_range": lambda lib: lib.randint(5, 3, (2,)),
    "randint_out_of_dtype": lambda lib: lib.randint(0, 300, (2,), dtype=lib.uint8),
    "rand_int_dtype": lambda lib: lib.rand(2, dtype=lib.int64),
    "randn_int_dtype": lambda lib: lib.randn(2, dtype=lib.int32),
    "randperm_negative": lambda lib: lib.randperm(-1),
    "normal_negative_std": lambda lib: lib.normal(0.0, -1.0, (2,)),
    "normal_negative_std_tensor": lambda lib: lib.normal(lib.zeros(2), -lib.ones(2)),
    "normal_int_mean": lambda lib: lib.normal(lib.zeros(2, dtype=lib.int64), 1.0),
    "normal_numbers_without_size": lambda lib: lib.normal(0.0, 1.0),
    "multinomial_3d": lambda lib: lib.multinomial(lib.ones(2, 2, 2), 1),
    "multinomial_too_many": lambda lib: lib.multinomial(lib.ones(3), 4),
    "multinomial_negative": lambda lib: lib.multinomial(lib.tensor([1.0, -1.0]), 1),
    "multinomial_zero_sum": lambda lib: lib.multinomial(lib.zeros(2), 1),
    "multinomial_int": lambda lib: lib.multinomial(lib.tensor([1, 2]), 1),
    "multinomial_no_samples": lambda lib: lib.multinomial(lib.ones(3), 0),
    "bernoulli_bad_p": lambda lib: lib.bernoulli(lib.tensor([1.5])),
    "bernoulli_int": lambda lib: lib.bernoulli(lib.ones(2, dtype=lib.int64)),
    "bernoulli__bad_p": lambda lib: lib.zeros(2).bernoulli_(1.5),
    "exponential__negative": lambda lib: lib.zeros(2).exponential_(-1.0),
    "exponential__zero": lambda lib: lib.zeros(2).exponential_(0.0),
    "uniform__int": lambda lib: lib.zeros(2, dtype=lib.int64).uniform_(),
    "normal__negative_std": lambda lib: lib.zeros(2).normal_(0, -1),
    "random__empty_range": lambda lib: lib.zeros(2).random_(5, 2),
    "randint_requires_grad": lambda lib: lib.randint(3, (2,), requires_grad=True),
    "log_normal__zero_std": lambda lib: lib.zeros(2).log_normal_(1.0, 0.0),
    "log_normal__int": lambda lib: lib.zeros(2, dtype=lib.int64).log_normal_(),
    "cauchy__zero_sigma": lambda lib: lib.zeros(2).cauchy_(0.0, 0.0),
    "cauchy__int": lambda lib: lib.zeros(2, dtype=lib.int64).cauchy_(),
    "geometric__p0": lambda lib: lib.zeros(2).geometric_(0.0),
    "geometric__p1": lambda lib: lib.zeros(2).geometric_(1.0),
}


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_pytorchs_kind(name):
    with pytest.raises(Exception) as theirs:
        ERRORS[name](torch)
    with pytest.raises(Exception) as ours:
        ERRORS[name](zgrad)
    # torch's NotImplementedError ("not implemented for 'Long'") is a RuntimeError, as DTypeError is
    expected = RuntimeError if issubclass(theirs.type, RuntimeError) else theirs.type
    assert isinstance(ours.value, expected), f"torch raised {theirs.type.__name__}: {theirs.value}; zgrad {ours.value!r}"


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("form", ["tensor_tensor", "tensor_float", "float_tensor", "bernoulli"])
def test_samples_have_zero_gradients_as_in_pytorch(form):
    def run(lib):
        mean = lib.tensor([[0.5, 1.0, -2.0]], dtype=lib.float64, requires_grad=True)
        std = lib.tensor([[1.0], [2.0]], dtype=lib.float64, requires_grad=True)
        out = {"tensor_tensor": lambda: lib.normal(mean, std), "tensor_float": lambda: lib.normal(mean, 2.0),
               "float_tensor": lambda: lib.normal(1.0, std),
               "bernoulli": lambda: lib.bernoulli(lib.sigmoid(mean))}[form]()
        assert out.requires_grad and out.grad_fn is not None
        (out * 3).sum().backward()
        return out, [None if t.grad is None else t.grad.numpy() for t in (mean, std)]

    ours, our_grads = run(zgrad)
    theirs, their_grads = run(torch)
    assert ours.shape == tuple(theirs.shape) and str(ours.dtype) == _torch_dtype_name(theirs.dtype)
    for a, b in zip(our_grads, their_grads):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)

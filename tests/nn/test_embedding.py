"""Embedding and EmbeddingBag: forward and gradients against PyTorch (float32 and float64) and
float64 finite differences, module behaviour, and PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
import zgrad.nn.functional as F
from helpers import check, check_torch, require_torch
from zgrad import nn

INDICES = np.array([[1, 4, 4, 0], [2, 4, 1, 3], [0, 0, 0, 5]], dtype=np.int64)  # repeats: gradients add up
FLAT = np.array([3, 1, 4, 1, 5, 0, 2, 6, 5, 3], dtype=np.int64)
OFFSETS = np.array([0, 2, 2, 7], dtype=np.int64)  # an empty bag in the middle
CSR_OFFSETS = np.array([0, 2, 2, 7, 10], dtype=np.int64)  # include_last_offset: the last one ends the last bag
WEIGHT = (7, 5)


def fn(**kwargs):
    return lambda lib, w: lib.nn.functional.embedding(lib.tensor(INDICES), w, **kwargs)


def test_embedding_matches_torch_and_finite_differences():
    check(fn(), [WEIGHT])


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [{"padding_idx": 4}, {"padding_idx": -3},
                                    {"scale_grad_by_freq": True, "padding_idx": 6},
                                    {"padding_idx": 0, "scale_grad_by_freq": True}], ids=str)
def test_embedding_padding_and_frequency_scaling(kwargs):
    # Not derivatives of the forward (the padding row is read but gets no gradient; frequency
    # scaling divides by counts), so checked against PyTorch and the formula, not finite differences.
    for dtype in (np.float32, np.float64):
        check_torch(fn(**kwargs), [WEIGHT], dtype=dtype)
    weight = zgrad.tensor(np.random.default_rng(0).standard_normal(WEIGHT), requires_grad=True)
    fn(**kwargs)(zgrad, weight).sum().backward()
    padding = kwargs["padding_idx"] % WEIGHT[0]
    grad = weight.grad.numpy()
    assert not np.any(grad[padding])
    counts = np.bincount(INDICES.ravel(), minlength=WEIGHT[0]).astype(float)
    expected = (counts > 0).astype(float) if kwargs.get("scale_grad_by_freq") else counts  # count * (1 / count)
    expected[padding] = 0
    np.testing.assert_allclose(grad, np.repeat(expected[:, None], WEIGHT[1], axis=1))


def test_embedding_index_shapes():
    for indices in (np.array(3), np.array([5, 5, 0]), np.arange(24).reshape(2, 3, 4) % 7):
        check(lambda lib, w: lib.nn.functional.embedding(lib.tensor(indices), w), [WEIGHT])


@pytest.mark.torch
def test_embedding_int32_indices_and_large_table_backward():
    rng = np.random.default_rng(0)
    indices = rng.integers(0, 3000, size=(35, 20)).astype(np.int32)
    check_torch(lambda lib, w: lib.nn.functional.embedding(lib.tensor(indices), w), [(3000, 40)])


@pytest.mark.torch
def test_embedding_max_norm_renormalizes_looked_up_rows_in_place():
    torch = require_torch()
    weight = np.random.default_rng(1).uniform(-2, 2, WEIGHT).astype(np.float32)
    for norm_type in (2.0, 1.0, float("inf")):
        z, t = zgrad.tensor(weight.copy(), requires_grad=True), torch.tensor(weight.copy(), requires_grad=True)
        out_z = F.embedding(zgrad.tensor(INDICES), z, max_norm=1.5, norm_type=norm_type)
        out_t = torch.nn.functional.embedding(torch.tensor(INDICES), t, max_norm=1.5, norm_type=norm_type)
        np.testing.assert_allclose(out_z.numpy(), out_t.detach().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(z.numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-6)
        assert not np.allclose(z.numpy(), weight)  # some rows were rescaled
        out_z.sum().backward()
        out_t.sum().backward()
        np.testing.assert_allclose(z.grad.numpy(), t.grad.numpy())


def test_module_init_padding_row_and_parameters():
    zgrad.manual_seed(0)
    emb = nn.Embedding(5000, 16, padding_idx=2)
    w = emb.weight.numpy()
    assert w.shape == (5000, 16) and w.dtype == np.float32
    assert not np.any(w[2])
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02  # N(0, 1), as PyTorch
    assert [name for name, _ in emb.named_parameters()] == ["weight"]
    out = emb(zgrad.tensor([[2, 3], [2, 2]]))
    out.sum().backward()
    assert not np.any(emb.weight.grad.numpy()[2]) and np.all(emb.weight.grad.numpy()[3] == 1)
    assert repr(emb) == "Embedding(5000, 16, padding_idx=2)"


def test_module_from_pretrained_and_dtype():
    table = zgrad.tensor(np.arange(12, dtype=np.float64).reshape(4, 3))
    emb = nn.Embedding.from_pretrained(table)
    assert not emb.weight.requires_grad
    np.testing.assert_array_equal(emb(zgrad.tensor([3, 0])).numpy(), [[9, 10, 11], [0, 1, 2]])
    assert nn.Embedding.from_pretrained(table, freeze=False).weight.requires_grad
    assert nn.Embedding(3, 2, dtype=zgrad.float64).weight.dtype == np.float64


def test_embedding_errors():
    emb = nn.Embedding(10, 3)
    with pytest.raises(IndexError, match=r"^Embedding\(10, 3\): index out of range in self: got index 12, valid "
                                         r"indices are 0\.\.9$"):
        emb(zgrad.tensor([[1, 12], [10, 3]]))
    with pytest.raises(IndexError, match=r"^Embedding\(10, 3\): index out of range in self: got index -1"):
        emb(zgrad.tensor([-1]))
    with pytest.raises(IndexError, match=r"^index out of range in self: got index 10, valid indices are 0\.\.9$"):
        F.embedding(zgrad.tensor([10]), emb.weight)  # the function has no layer to name
    bag = nn.EmbeddingBag(10, 3, mode="sum")
    with pytest.raises(IndexError, match=r"^EmbeddingBag\(10, 3, mode='sum'\): index out of range in self: got "
                                         r"index 11, valid indices are 0\.\.9$"):
        bag(zgrad.tensor([[1, 11]]))
    with pytest.raises(TypeError, match="Long, Int; but got float32"):
        emb(zgrad.tensor([1.0]))
    with pytest.raises(ValueError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(10, 3, padding_idx=10)
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.Embedding(10, 3, sparse=True)(zgrad.tensor([1]))
    with pytest.raises(ValueError, match="2D Tensor"):
        F.embedding(zgrad.tensor([0]), zgrad.zeros(2, 2, 2))
    with pytest.raises(ValueError, match="Shape of weight does not match"):
        nn.Embedding(3, 2, _weight=zgrad.zeros(2, 3))


# --- EmbeddingBag -----------------------------------------------------------------------------

def bag(mode, offsets=OFFSETS, indices=FLAT, **kwargs):
    def run(lib, w):
        off = None if offsets is None else lib.tensor(offsets)
        return lib.nn.functional.embedding_bag(lib.tensor(indices), w, off, mode=mode, **kwargs)
    return run


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 5}, {"offsets": CSR_OFFSETS, "include_last_offset": True}],
                         ids=["offsets", "padding", "include_last_offset"])
def test_embedding_bag_1d_with_offsets(mode, kwargs):
    check(bag(mode, **kwargs), [WEIGHT])


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input(mode):
    check(bag(mode, offsets=None, indices=INDICES), [WEIGHT])
    check(bag(mode, offsets=None, indices=INDICES, padding_idx=0), [WEIGHT])
    check_torch(bag(mode, offsets=None, indices=INDICES, include_last_offset=True), [WEIGHT])


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(mode):
    # Each entry's row gradient is divided by how often its index occurs in the input, as for
    # Embedding. Checked against that formula: PyTorch 2.13's CPU embedding_bag scales some rows
    # by another index's count (with FLAT, row 2 gets 0.5 and row 3 gets 2 instead of 1 and 1).
    weight = zgrad.ones(*WEIGHT, requires_grad=True)
    out = bag(mode, scale_grad_by_freq=True)(zgrad, weight)
    out.sum().backward()
    bounds = np.append(OFFSETS, FLAT.size)
    counts = np.bincount(FLAT, minlength=WEIGHT[0])
    expected = np.zeros(WEIGHT[0])
    for b in range(OFFSETS.size):
        members = FLAT[bounds[b]:bounds[b + 1]]
        for index in members:
            expected[index] += (1 / members.size if mode == "mean" else 1) / counts[index]
    np.testing.assert_allclose(weight.grad.numpy(), np.repeat(expected[:, None], WEIGHT[1], axis=1), rtol=1e-6)


def test_embedding_bag_per_sample_weights_gradients():
    def run(lib, w, psw):
        return lib.nn.functional.embedding_bag(lib.tensor(FLAT), w, lib.tensor(OFFSETS), mode="sum",
                                               per_sample_weights=psw, padding_idx=1)
    check(run, [WEIGHT, FLAT.shape])

    def run_2d(lib, w, psw):
        return lib.nn.functional.embedding_bag(lib.tensor(INDICES), w, mode="sum", per_sample_weights=psw)
    check(run_2d, [WEIGHT, INDICES.shape])


@pytest.mark.torch
def test_embedding_bag_module_matches_torch():
    torch = require_torch()
    for mode in ("sum", "mean", "max"):
        z = nn.EmbeddingBag(7, 5, mode=mode, include_last_offset=True)
        t = torch.nn.EmbeddingBag(7, 5, mode=mode, include_last_offset=True)
        with torch.no_grad():
            t.weight.copy_(torch.from_numpy(z.weight.numpy()))
        out = z(zgrad.tensor(FLAT), zgrad.tensor(CSR_OFFSETS))
        ref = t(torch.tensor(FLAT), torch.tensor(CSR_OFFSETS))
        np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-6)
    assert "mode='max'" in repr(z)


def test_embedding_bag_errors():
    w = zgrad.zeros(7, 5)
    with pytest.raises(ValueError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(zgrad.tensor(FLAT), w, zgrad.tensor([1, 3]))
    with pytest.raises(ValueError, match="offsets\\[-1\\] can not be greater than input's length 10, but got 11"):
        F.embedding_bag(zgrad.tensor(FLAT), w, zgrad.tensor([0, 11]))
    with pytest.raises(ValueError, match="non-decreasing"):
        F.embedding_bag(zgrad.tensor(FLAT), w, zgrad.tensor([0, 5, 3]))
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(zgrad.tensor(FLAT), w)
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        F.embedding_bag(zgrad.tensor(INDICES), w, zgrad.tensor([0]))
    with pytest.raises(ValueError, match="input has to be 1D or 2D Tensor, but got Tensor of dimension 3"):
        F.embedding_bag(zgrad.tensor(INDICES[None]), w)
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        nn.EmbeddingBag(7, 5, mode="median")
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for mode='sum'"):
        F.embedding_bag(zgrad.tensor(FLAT), w, zgrad.tensor(OFFSETS), per_sample_weights=zgrad.ones(10))
    with pytest.raises(ValueError, match="must have the same shape as the input"):
        F.embedding_bag(zgrad.tensor(FLAT), w, zgrad.tensor(OFFSETS), mode="sum", per_sample_weights=zgrad.ones(3))
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding_bag(zgrad.tensor([7]), w, zgrad.tensor([0]))


def test_embedding_in_a_language_model_step_trains():
    zgrad.manual_seed(0)
    emb, head = nn.Embedding(20, 8), nn.Linear(8, 20)
    opt = zgrad.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.5)
    tokens = zgrad.tensor(np.arange(12) % 20)
    targets = zgrad.tensor((np.arange(12) + 1) % 20)
    losses = []
    for _ in range(30):
        loss = F.cross_entropy(head(emb(tokens)), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]


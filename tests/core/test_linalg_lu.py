"""The LU family of ``zgrad.linalg`` (``lu_factor``, ``lu_factor_ex``, ``lu``, ``lu_solve``,
``inv_ex``, ``solve_ex``; the older ``zgrad.lu``, ``lu_solve``, ``lu_unpack``) and ``cholesky_ex``,
``cond``, ``vander``, ``diagonal``, ``tensorinv``, ``tensorsolve``: values, infos and gradients
equal PyTorch's (float64; square, tall and wide matrices, batches), and without PyTorch they
factorize and solve what they say."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from helpers import require_torch, torch

RNG = np.random.default_rng(11)
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]])
SPD = (lambda a: a @ a.T + 3 * np.eye(4))(RNG.standard_normal((4, 4)))
SOLVE_ARRAYS = [RNG.standard_normal((2, 4, 4)), RNG.standard_normal((2, 4, 3))]


def _run(lib, call, arrays):
    tensors = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = call(lib, *tensors)
    outs = [o for o in (out if isinstance(out, tuple) else (out,))]
    floating = [o for o in outs if o.is_floating_point() and o.requires_grad and o.numel()]
    if floating:
        sum((o * lib.tensor(np.linspace(0.3, 1.7, o.numel()).reshape(tuple(o.shape)))).sum()
            for o in floating).backward()
    return [o.detach().numpy() for o in outs], [t.grad.numpy() if t.grad is not None else None for t in tensors]


CASES = {
    "lu_factor_square": (lambda L, a: L.linalg.lu_factor(a), [RNG.standard_normal((4, 4))]),
    "lu_factor_tall_batch": (lambda L, a: L.linalg.lu_factor(a), [RNG.standard_normal((2, 5, 3))]),
    "lu_factor_wide": (lambda L, a: L.linalg.lu_factor(a), [RNG.standard_normal((3, 5))]),
    "lu_factor_ex_singular": (lambda L, a: L.linalg.lu_factor_ex(a.detach()), [SINGULAR]),
    "lu_square": (lambda L, a: L.linalg.lu(a), [RNG.standard_normal((2, 4, 4))]),
    "lu_tall": (lambda L, a: L.linalg.lu(a), [RNG.standard_normal((5, 2))]),
    "lu_wide_batch": (lambda L, a: L.linalg.lu(a), [RNG.standard_normal((2, 2, 4))]),
    "lu_solve": (lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b), SOLVE_ARRAYS),
    "lu_solve_adjoint": (lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b, adjoint=True), SOLVE_ARRAYS),
    "lu_solve_right": (lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b, left=False),
                       [RNG.standard_normal((4, 4)), RNG.standard_normal((2, 3, 4))]),
    "lu_solve_right_adjoint": (lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b, left=False,
                                                                  adjoint=True),
                               [RNG.standard_normal((4, 4)), RNG.standard_normal((3, 4))]),
    "inv_ex": (lambda L, a: L.linalg.inv_ex(a), [RNG.standard_normal((3, 4, 4))]),
    "solve_ex_vector": (lambda L, a, b: L.linalg.solve_ex(a, b), [RNG.standard_normal((2, 4, 4)),
                                                                 RNG.standard_normal((2, 4))]),
    "solve_ex_right": (lambda L, a, b: L.linalg.solve_ex(a, b, left=False), [RNG.standard_normal((4, 4)),
                                                                            RNG.standard_normal((2, 4))]),
    "legacy_lu": (lambda L, a: L.lu(a), [RNG.standard_normal((4, 4))]),
    "legacy_lu_infos": (lambda L, a: L.lu(a.detach(), get_infos=True), [SINGULAR]),
    "legacy_lu_solve": (lambda L, b, a: L.lu_solve(b, *L.lu(a)), [RNG.standard_normal((4, 2)),
                                                                RNG.standard_normal((4, 4))]),
    "legacy_lu_unpack": (lambda L, a: L.lu_unpack(*L.linalg.lu_factor(a)), [RNG.standard_normal((3, 4))]),
    "tensor_lu_solve": (lambda L, b, a: b.lu_solve(*a.lu()), [RNG.standard_normal((4, 2)),
                                                              RNG.standard_normal((4, 4))]),
    "cholesky_ex": (lambda L, a: L.linalg.cholesky_ex(a), [SPD]),
    "cholesky_ex_upper": (lambda L, a: L.linalg.cholesky_ex(a, upper=True), [SPD]),
    "cholesky_ex_not_pd": (lambda L, a: L.linalg.cholesky_ex(a.detach()), [SINGULAR + SINGULAR.T]),
    "cholesky_ex_batch_one_fails": (lambda L, a: L.linalg.cholesky_ex(a.detach()), [np.stack([SPD, -SPD])]),
    "lu_factor_singular_gradient": (lambda L, a: L.linalg.lu_factor_ex(a).LU, [np.diag([1.0, 0.0, 2.0])]),
    "cond": (lambda L, a: L.linalg.cond(a), [RNG.standard_normal((2, 3, 4))]),
    "cond_minus_2": (lambda L, a: L.linalg.cond(a, -2), [RNG.standard_normal((3, 3))]),
    # torch cannot differentiate it (its inv_ex output is modified in place)
    "cond_fro": (lambda L, a: L.linalg.cond(a.detach(), "fro"), [RNG.standard_normal((2, 3, 3))]),
    "cond_inf_singular": (lambda L, a: L.linalg.cond(a.detach(), float("inf")), [SINGULAR]),
    "cond_nuc": (lambda L, a: L.linalg.cond(a, "nuc"), [RNG.standard_normal((3, 3))]),
    "vander": (lambda L, x: L.linalg.vander(x), [RNG.standard_normal((2, 4))]),
    "vander_n": (lambda L, x: L.linalg.vander(x, N=6), [RNG.standard_normal(3)]),
    "vander_int": (lambda L, x: L.linalg.vander(x, N=3), [np.array([2, -3, 4])]),
    "diagonal": (lambda L, a: L.linalg.diagonal(a, offset=1), [RNG.standard_normal((2, 3, 4))]),
    "diagonal_dims": (lambda L, a: L.linalg.diagonal(a, offset=-1, dim1=0, dim2=2), [RNG.standard_normal((3, 2, 4))]),
    "tensorinv": (lambda L, a: L.linalg.tensorinv(a, 2), [RNG.standard_normal((2, 3, 6))]),
    "tensorinv_ind1": (lambda L, a: L.linalg.tensorinv(a, 1), [RNG.standard_normal((6, 2, 3))]),
    "tensorsolve": (lambda L, a, b: L.linalg.tensorsolve(a, b), [RNG.standard_normal((2, 3, 6)),
                                                                 RNG.standard_normal((2, 3))]),
    "tensorsolve_dims": (lambda L, a, b: L.linalg.tensorsolve(a, b, dims=(0,)), [RNG.standard_normal((6, 2, 3)),
                                                                                  RNG.standard_normal((2, 3))]),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    require_torch()
    call, arrays = CASES[name]
    (ours, our_grads), (theirs, their_grads) = _run(zgrad, call, arrays), _run(torch, call, arrays)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    for a, b in zip(our_grads, their_grads):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


ERRORS = [
    lambda L: L.linalg.lu_factor(L.tensor(SINGULAR)),
    lambda L: L.linalg.lu_factor(L.tensor(np.stack([np.eye(3), SINGULAR]))),
    lambda L: L.linalg.lu_factor(L.tensor(np.eye(3)), pivot=False),
    lambda L: L.linalg.inv_ex(L.tensor(SINGULAR), check_errors=True),
    lambda L: L.linalg.lu_solve(*L.linalg.lu_factor(L.tensor(RNG.standard_normal((4, 2)))),
                                L.ones(4, 1, dtype=L.float64)),
    lambda L: L.linalg.cholesky_ex(L.tensor(np.stack([SPD, -SPD])), check_errors=True),
    lambda L: L.linalg.vander(L.tensor([1.0, 2.0]), N=1),
    lambda L: L.linalg.tensorinv(L.ones(2, 3, 6), ind=0),
    lambda L: L.linalg.tensorinv(L.ones(2, 3, 5), ind=2),
    lambda L: L.linalg.tensorsolve(L.ones(6, 4), L.ones(6)),
    lambda L: L.linalg.cond(L.ones(3, 3), 3),
]


@pytest.mark.torch
@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_errors_match_torch(index):
    require_torch()
    messages = []
    for lib in (zgrad, torch):
        with pytest.raises(RuntimeError) as raised:
            ERRORS[index](lib)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


# --- without torch ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 6)])
def test_lu_reconstructs_its_matrix_and_lu_solve_solves(shape):
    a = zgrad.tensor(RNG.standard_normal(shape))
    permutation, lower, upper = zgrad.linalg.lu(a)
    np.testing.assert_allclose((permutation @ lower @ upper).numpy(), a.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.triu(lower.numpy(), 1), 0)
    np.testing.assert_array_equal(np.diagonal(lower.numpy(), axis1=-2, axis2=-1), 1)
    np.testing.assert_array_equal(np.tril(upper.numpy(), -1), 0)
    assert np.abs(np.tril(lower.numpy(), -1)).max() <= 1  # partial pivoting: multipliers at most 1
    if shape[-1] == shape[-2]:
        b = zgrad.tensor(RNG.standard_normal(shape[:-1] + (2,)))
        x = zgrad.linalg.lu_solve(*zgrad.linalg.lu_factor(a), b)
        np.testing.assert_allclose((a @ x).numpy(), b.numpy(), rtol=1e-10, atol=1e-10)


def test_singular_matrices_report_their_first_zero_pivot():
    batch = zgrad.tensor(np.stack([np.eye(3), SINGULAR, np.zeros((3, 3))]))
    _, pivots, info = zgrad.linalg.lu_factor_ex(batch)
    assert info.tolist() == [0, 3, 1] and pivots.dtype == zgrad.int32
    inverse, info = zgrad.linalg.inv_ex(batch)
    np.testing.assert_array_equal(inverse[0].numpy(), np.eye(3))
    assert np.isnan(inverse[1:].numpy()).all() and info.tolist() == [0, 3, 1]
    with pytest.raises(zgrad.linalg.LinAlgError, match=r"\(Batch element 1\): U\[3,3\] is zero"):
        zgrad.linalg.lu_factor(batch)
    factor, info = zgrad.linalg.cholesky_ex(zgrad.tensor(np.stack([SPD, np.diag([1.0, -1.0, 1.0, 1.0])])))
    assert info.tolist() == [0, 2]
    np.testing.assert_allclose((factor[0] @ factor[0].mT).numpy(), SPD, rtol=1e-12)


def test_gradients_match_finite_differences():
    a0 = RNG.standard_normal((3, 4))
    weights = RNG.standard_normal((3, 4))

    def loss(values):
        packed, _ = zgrad.linalg.lu_factor(zgrad.tensor(values))
        return float((packed * zgrad.tensor(weights)).sum())

    a = zgrad.tensor(a0, requires_grad=True)
    (zgrad.linalg.lu_factor(a).LU * zgrad.tensor(weights)).sum().backward()
    numeric = np.zeros_like(a0)
    for index in np.ndindex(a0.shape):
        step = np.zeros_like(a0)
        step[index] = 1e-6
        numeric[index] = (loss(a0 + step) - loss(a0 - step)) / 2e-6
    np.testing.assert_allclose(a.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_composed_forms_answer_what_they_say():
    x = zgrad.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(zgrad.linalg.vander(x).numpy(), np.vander([1.0, 2.0, 3.0], increasing=True))
    a = zgrad.tensor(RNG.standard_normal((2, 3, 6)))
    inverse = zgrad.linalg.tensorinv(a)
    np.testing.assert_allclose((a.reshape(6, 6) @ inverse.reshape(6, 6)).numpy(), np.eye(6), atol=1e-10)
    b = zgrad.tensor(RNG.standard_normal((2, 3)))
    solution = zgrad.linalg.tensorsolve(a, b)
    np.testing.assert_allclose(zgrad.tensordot(a, solution, 1).numpy(), b.numpy(), rtol=1e-10, atol=1e-10)
    assert abs(zgrad.linalg.cond(zgrad.eye(3, dtype=zgrad.float64)).item() - 1) < 1e-14
    assert zgrad.linalg.cond(zgrad.tensor(SINGULAR), "fro").item() == float("inf")
    assert zgrad.linalg.diagonal(zgrad.ones(2, 3, 4)).shape == (2, 3)
    with pytest.warns(UserWarning, match="torch.lu is deprecated"):
        packed, pivots = zgrad.lu(zgrad.tensor(SPD))
    with pytest.warns(UserWarning, match="torch.lu_solve is deprecated"):
        x = zgrad.lu_solve(zgrad.tensor(SPD[:, :2]), packed, pivots)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(SPD, SPD[:, :2]), rtol=1e-10, atol=1e-12)

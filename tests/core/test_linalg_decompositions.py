"""``zgrad.linalg``'s solves and decompositions (inv, det, slogdet, solve, pinv, lstsq, cholesky,
qr, svd, svdvals, eigh, eigvalsh): values and gradients against PyTorch in float64 and float32
and against finite differences, their result tuples, and PyTorch's refusals with its messages.

Inputs are built inside each case to be well conditioned (a random matrix plus a multiple of the
identity; A A^T + I for symmetric positive-definite ones); eigenvectors and singular vectors are
compared through their absolute values, which do not depend on LAPACK's choice of signs.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from zgrad.errors import AutogradError, DTypeError, LinAlgError, ShapeError
from helpers import case, check_finite_differences, check_torch, torch


def _eye(lib, a, scale=4.0):
    return lib.tensor(scale * np.eye(a.shape[-1]), dtype=a.dtype)


def _regular(lib, a):
    return a + _eye(lib, a)


def _spd(lib, a):
    return a @ a.transpose(-1, -2) + _eye(lib, a, 1.0)


def _qr(lib, a, mode="reduced"):
    q, r = lib.linalg.qr(a, mode=mode)
    return lib.cat([q.flatten(), r.flatten()])


def _svd(lib, a, full_matrices):
    u, s, vh = lib.linalg.svd(a, full_matrices=full_matrices)
    k = s.shape[-1]
    return lib.cat([u[..., :k].abs().flatten(), s.flatten(), vh[..., :k, :].abs().flatten()])


def _eigh(lib, a, uplo="L"):
    w, v = lib.linalg.eigh(_spd(lib, a), UPLO=uplo)
    return lib.cat([w.flatten(), v.abs().flatten()])


CASES = [
    case("inv", lambda lib, a: lib.linalg.inv(_regular(lib, a)), (3, 3)),
    case("inv-batch", lambda lib, a: lib.linalg.inv(_regular(lib, a)), (2, 3, 3)),
    case("inverse", lambda lib, a: lib.inverse(_regular(lib, a)), (2, 2)),
    case("det", lambda lib, a: lib.linalg.det(a), (2, 3, 3)),
    case("Tensor.det", lambda lib, a: _regular(lib, a).det(), (3, 3)),
    case("det-singular", lambda lib, u, v: lib.linalg.det(u @ v), (2, 1), (1, 2)),
    case("slogdet", lambda lib, a: lib.linalg.slogdet(a).logabsdet, (2, 3, 3)),
    case("logdet", lambda lib, a: lib.logdet(_spd(lib, a)), (2, 3, 3)),
    case("Tensor.logdet", lambda lib, a: _spd(lib, a).logdet(), (3, 3)),
    case("solve", lambda lib, a, b: lib.linalg.solve(_regular(lib, a), b), (3, 3), (3, 2)),
    case("solve-vector", lambda lib, a, b: lib.linalg.solve(_regular(lib, a), b), (2, 3, 3), (2, 3)),
    case("solve-broadcast", lambda lib, a, b: lib.linalg.solve(_regular(lib, a), b), (2, 3, 3), (3, 1)),
    case("solve-right", lambda lib, a, b: lib.linalg.solve(_regular(lib, a), b, left=False), (3, 3), (2, 3)),
    case("cholesky", lambda lib, a: lib.linalg.cholesky(_spd(lib, a)), (2, 3, 3)),
    case("cholesky-upper", lambda lib, a: lib.linalg.cholesky(_spd(lib, a), upper=True), (3, 3)),
    case("qr-tall", lambda lib, a: _qr(lib, a), (2, 4, 3)),
    case("qr-wide", lambda lib, a: _qr(lib, a), (3, 5)),
    case("qr-square-complete", lambda lib, a: _qr(lib, a, "complete"), (3, 3)),
    case("svd-tall", lambda lib, a: _svd(lib, a, False), (4, 3)),
    case("svd-wide-full", lambda lib, a: _svd(lib, a, True), (2, 3, 5)),
    case("svd-square", lambda lib, a: _svd(lib, a, False), (3, 3)),
    case("svdvals", lambda lib, a: lib.linalg.svdvals(a), (2, 4, 3)),
    case("eigh", lambda lib, a: _eigh(lib, a), (2, 3, 3)),
    case("eigh-upper", lambda lib, a: _eigh(lib, a, "U"), (3, 3)),
    case("eigvalsh", lambda lib, a: lib.linalg.eigvalsh(_spd(lib, a)), (3, 3)),
    case("pinv-tall", lambda lib, a: lib.linalg.pinv(a), (4, 3)),
    case("pinv-wide", lambda lib, a: lib.linalg.pinv(a), (2, 3, 5)),
    case("lstsq", lambda lib, a, b: lib.linalg.lstsq(a, b).solution, (5, 3), (5, 2)),
    case("solve_triangular", lambda lib, a, b: lib.linalg.solve_triangular(_regular(lib, a), b, upper=True),
         (2, 3, 3), (3, 2)),
    case("solve_triangular-unit-right", lambda lib, a, b: lib.linalg.solve_triangular(
        a, b, upper=False, left=False, unitriangular=True), (3, 3), (2, 3)),
    case("cholesky_solve", lambda lib, a, b: lib.cholesky_solve(b, lib.linalg.cholesky(_spd(lib, a))), (2, 3, 3),
         (3, 2)),
    case("Tensor.cholesky_solve-upper", lambda lib, a, b: b.cholesky_solve(lib.linalg.cholesky(_spd(lib, a), upper=True),
                                                                          upper=True), (3, 3), (2, 3, 1)),
    case("matrix_power", lambda lib, a: lib.linalg.matrix_power(a, 5), (2, 3, 3)),
    case("matrix_power-negative", lambda lib, a: lib.linalg.matrix_power(_regular(lib, a), -2), (3, 3)),
    case("matrix_power-0", lambda lib, a: lib.linalg.matrix_power(a, 0) * a, (3, 3)),
    case("multi_dot", lambda lib, a, b, c, d: lib.linalg.multi_dot([a, b, c, d]), (3,), (3, 4), (4, 2), (2,)),
    case("multi_dot-matrices", lambda lib, a, b: lib.linalg.multi_dot([a, b]), (2, 3), (3, 4)),
]


@pytest.mark.torch
@pytest.mark.parametrize("c", CASES)
def test_matches_torch_and_finite_differences(c):
    check_finite_differences(c.fn, c.shapes, domain=c.domain, rtol=1e-5, atol=1e-6)
    check_torch(c.fn, c.shapes, dtype=np.float64, domain=c.domain, rtol=1e-9, atol=1e-10)
    check_torch(c.fn, c.shapes, dtype=np.float32, domain=c.domain, rtol=2e-4, atol=2e-4)


@pytest.mark.torch
def test_result_tuples_match_torch():
    require = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 4, 3))
    square = a[..., :3, :] + 4 * np.eye(3)
    pairs = [
        (zgrad.linalg.slogdet(zgrad.tensor(square)), require.linalg.slogdet(require.tensor(square))),
        (zgrad.slogdet(zgrad.tensor(-square)), require.slogdet(require.tensor(-square))),
        (zgrad.linalg.qr(zgrad.tensor(a), mode="r"), require.linalg.qr(require.tensor(a), mode="r")),
        (zgrad.linalg.qr(zgrad.tensor(a), mode="complete"), require.linalg.qr(require.tensor(a), mode="complete")),
        (zgrad.linalg.lstsq(zgrad.tensor(a), zgrad.tensor(a[..., :2])),
         require.linalg.lstsq(require.tensor(a), require.tensor(a[..., :2]))),
        (zgrad.linalg.lstsq(zgrad.tensor(a), zgrad.tensor(a[..., :2] + 1), driver="gelsd"),
         require.linalg.lstsq(require.tensor(a), require.tensor(a[..., :2] + 1), driver="gelsd")),
    ]
    for ours, ref in pairs:
        assert len(ours) == len(ref)
        for name in type(ours)._fields:
            x, y = getattr(ours, name), getattr(ref, name)
            assert x.shape == tuple(y.shape) and str(x.dtype) == str(y.dtype).replace("torch.", ""), name
            if name not in ("Q",):  # complete Q's extra columns are any orthonormal completion
                np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
    assert zgrad.linalg.slogdet(zgrad.tensor(square)).sign.requires_grad is False


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_matrix_rank_integer_powers_and_negative_logdet_match_torch():
    rng = np.random.default_rng(2)
    low_rank = rng.standard_normal((2, 4, 2)) @ rng.standard_normal((2, 2, 3))
    for kwargs in ({}, {"atol": 1.0}, {"rtol": 0.5}, {"hermitian": False}):
        ours = zgrad.linalg.matrix_rank(zgrad.tensor(low_rank), **kwargs)
        ref = torch.linalg.matrix_rank(torch.tensor(low_rank), **kwargs)
        assert ours.dtype == np.int64 and ours.tolist() == ref.tolist()
    negative = zgrad.logdet(zgrad.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert np.isnan(negative.item()) and np.isnan(torch.logdet(torch.tensor([[1.0, 2.0], [3.0, 4.0]])).item())
    ints = np.arange(4).reshape(2, 2)
    power = zgrad.linalg.matrix_power(zgrad.tensor(ints), 3)
    assert power.dtype == np.int64 and power.tolist() == torch.linalg.matrix_power(torch.tensor(ints), 3).tolist()


def test_singular_and_indefinite_matrices_raise_linalg_error():
    assert issubclass(zgrad.linalg.LinAlgError, RuntimeError)
    with pytest.raises(LinAlgError, match="linalg.inv: .*singular"):
        zgrad.linalg.inv(zgrad.zeros(2, 2))
    with pytest.raises(LinAlgError, match="linalg.solve: The solver failed because the input matrix is singular"):
        zgrad.linalg.solve(zgrad.zeros(2, 2), zgrad.ones(2))
    with pytest.raises(zgrad.linalg.LinAlgError, match="linalg.cholesky: .*not positive-definite"):
        zgrad.linalg.cholesky(-zgrad.ones(2, 2))


ARGUMENT_ERRORS = [
    ("int", DTypeError, lambda: zgrad.linalg.inv(zgrad.ones(2, 2, dtype=zgrad.int64)),
     "linalg.inv: Expected a floating point or complex tensor as input. Got Long"),
    ("half", DTypeError, lambda: zgrad.linalg.det(zgrad.ones(2, 2, dtype=zgrad.float16)),
     "linalg.det: Low precision dtypes not supported. Got Half"),
    ("not-square", ShapeError, lambda: zgrad.linalg.cholesky(zgrad.ones(2, 3)),
     "linalg.cholesky: A must be batches of square matrices, but they are 2 by 3 matrices"),
    ("vector", ShapeError, lambda: zgrad.linalg.svd(zgrad.ones(2)),
     "linalg.svd: The input tensor A must have at least 2 dimensions."),
    ("solve-shapes", ShapeError, lambda: zgrad.linalg.solve(zgrad.ones(2, 2), zgrad.ones(3, 2)),
     "linalg.solve: Incompatible shapes of A and B for the equation AX = B (2x2 and 3x2)"),
    ("solve-dtypes", DTypeError, lambda: zgrad.linalg.solve(zgrad.ones(2, 2), zgrad.ones(2, dtype=zgrad.float64)),
     "linalg.solve: Expected A and B to have the same dtype, but found A of type Float and B of type Double instead"),
    ("lstsq-dtypes", DTypeError, lambda: zgrad.linalg.lstsq(zgrad.ones(2, 2), zgrad.ones(2, 2, dtype=zgrad.float64)),
     "torch.linalg.lstsq: Expected input and other to have the same dtype"),
    ("qr-mode", ValueError, lambda: zgrad.linalg.qr(zgrad.ones(2, 2), mode="x"),
     "qr received unrecognized mode 'x' but expected one of 'reduced' (default), 'r', or 'complete'"),
    ("eigh-uplo", ValueError, lambda: zgrad.linalg.eigh(zgrad.ones(2, 2), UPLO="X"),
     "Expected UPLO argument to be 'L' or 'U', but got X"),
    ("solve_triangular-vector", ShapeError, lambda: zgrad.linalg.solve_triangular(zgrad.ones(2, 2), zgrad.ones(2), upper=True),
     "linalg.solve_triangular: The input tensor B must have at least 2 dimensions."),
    ("cholesky_solve-vector", ShapeError, lambda: zgrad.cholesky_solve(zgrad.ones(3), zgrad.ones(3, 3)),
     "b should have at least 2 dimensions, but has 1 dimensions instead"),
    ("matrix_power-shape", ShapeError, lambda: zgrad.linalg.matrix_power(zgrad.ones(2, 3), 2),
     "linalg.matrix_power: A must be batches of square matrices, but they are 2x3 matrices"),
    ("matrix_power-int-inverse", DTypeError, lambda: zgrad.linalg.matrix_power(zgrad.ones(2, 2, dtype=zgrad.int64), -1),
     "linalg.inv: Expected a floating point or complex tensor as input. Got Long"),
    ("multi_dot-one", ValueError, lambda: zgrad.linalg.multi_dot([zgrad.ones(3)]),
     "multi_dot(): expected at least 2 tensors but got 1"),
    ("matrix_rank-int", DTypeError, lambda: zgrad.linalg.matrix_rank(zgrad.ones(2, 2, dtype=zgrad.int64)),
     "This function doesn't handle types other than float and double"),
    ("lstsq-driver", ValueError, lambda: zgrad.linalg.lstsq(zgrad.ones(2, 2), zgrad.ones(2, 2), driver="x"),
     "parameter `driver` should be one of (gels, gelsy, gelsd, gelss), but got x"),
]


@pytest.mark.parametrize("name, error, fn, message", ARGUMENT_ERRORS, ids=[e[0] for e in ARGUMENT_ERRORS])
def test_argument_errors(name, error, fn, message):
    with pytest.raises(error) as info:
        fn()
    assert message in str(info.value)


@pytest.mark.parametrize("mode, shape, message", [
    ("r", (3, 3), "The derivative of linalg.qr depends on Q, which is not computed when mode='r'"),
    ("complete", (4, 3), "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."),
])
def test_qr_modes_without_a_gradient(mode, shape, message):
    a = zgrad.ones(*shape, requires_grad=True)
    q, r = zgrad.linalg.qr(a * zgrad.tensor(np.arange(12.0)[:a.numel()].reshape(shape) ** 2), mode=mode)
    with pytest.raises(AutogradError, match=message):
        r.sum().backward()

"""``zgrad.special`` against ``torch.special``: values and gradients (float32, float64, and float64
finite differences), result dtypes over the dtype grid, special values (0, -0.0, +-1, inf, NaN),
number operands of xlogy/xlog1py, the refusals, and CUDA (Numba's simulator here) against the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda
from helpers import case, check_finite_differences, check_torch, require_torch, torch

UNIT = (0.05, 0.95)

CASES = [
    case("erf", lambda lib, a: lib.special.erf(a), (3, 4)),
    case("erfc", lambda lib, a: lib.special.erfc(a), (3, 4)),
    case("erfinv", lambda lib, a: lib.special.erfinv(a), (3, 4), domain=(-0.9, 0.9)),
    case("expit", lambda lib, a: lib.special.expit(a), (3, 4)),
    case("exp2", lambda lib, a: lib.special.exp2(a), (3, 4)),
    case("expm1", lambda lib, a: lib.special.expm1(a), (3, 4)),
    case("log1p", lambda lib, a: lib.special.log1p(a), (3, 4), domain=(-0.5, 2.0)),
    case("round_decimals", lambda lib, a: lib.special.round(a * 7, decimals=1) + a, (3, 4)),
    case("softmax", lambda lib, a: lib.special.softmax(a, 1), (3, 4)),
    case("log_softmax_dtype", lambda lib, a: lib.special.log_softmax(a, dim=0, dtype=lib.float64), (3, 4)),
    case("logsumexp", lambda lib, a: lib.special.logsumexp(a, (0, 1)), (3, 4)),
    case("logit", lambda lib, a: lib.special.logit(a), (3, 4), domain=UNIT),
    case("logit_eps", lambda lib, a: lib.special.logit(a, eps=0.2), (3, 4), domain=UNIT),
    case("ndtr", lambda lib, a: lib.special.ndtr(a * 3), (3, 4)),
    case("ndtri", lambda lib, a: lib.special.ndtri(a), (3, 4), domain=UNIT),
    case("sinc", lambda lib, a: lib.special.sinc(a), (3, 4)),
    case("entr", lambda lib, a: lib.special.entr(a), (3, 4), domain=(0.1, 2.0)),
    case("xlogy", lambda lib, a, b: lib.special.xlogy(a, b), (3, 4), (4,), domain=(0.1, 2.0)),
    case("xlogy_number", lambda lib, a: lib.special.xlogy(a, 2.5) + lib.special.xlogy(1.5, a), (3, 4), domain=(0.1, 2.0)),
    case("xlog1py", lambda lib, a, b: lib.special.xlog1py(a, b), (3, 1), (3, 4), domain=(0.1, 2.0)),
]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", CASES)
def test_matches_torch(op, dtype):
    check_torch(op.fn, op.shapes, dtype=dtype, domain=op.domain)


@pytest.mark.parametrize("op", CASES)
def test_matches_finite_differences(op):
    check_finite_differences(op.fn, op.shapes, domain=op.domain)


def _same_as_torch(fn, *arrays, rtol=2e-6, atol=1e-6) -> None:
    """fn on zgrad and torch: same dtype, shape and values (NaN where torch's), or both raise a
    RuntimeError (zgrad's a RuntimeError too)."""
    require_torch()
    try:
        expected = fn(torch, *(torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in arrays))
    except RuntimeError:
        with pytest.raises(RuntimeError):
            fn(zgrad, *(zgrad.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays))
        return
    got = fn(zgrad, *(zgrad.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays))
    ref = expected.numpy()
    assert (got.dtype, got.shape) == (ref.dtype, ref.shape), f"zgrad {got.dtype} {got.shape}, torch {ref.dtype} {ref.shape}"
    if ref.dtype.kind == "f":
        np.testing.assert_allclose(got.numpy().astype(np.float64), ref.astype(np.float64), equal_nan=True,
                                   rtol=max(rtol, 1e-3 if ref.dtype == np.float16 else 0), atol=atol)
    else:
        np.testing.assert_array_equal(got.numpy(), ref)


DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
UNARY = ["erf", "erfc", "erfinv", "expit", "exp2", "expm1", "log1p", "round", "logit", "ndtr", "ndtri", "sinc", "entr"]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_dtype_rules_match_torch(name, dtype):
    _same_as_torch(lambda lib, x: getattr(lib.special, name)(x), np.array([0, 1, 2, 3]).astype(dtype))


@pytest.mark.torch
@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("bool", "uint8"), ("int32", "float16"), ("float32", "float64"),
                                    ("float16", "float16")], ids=str)
@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_binary_dtype_rules_match_torch(name, dtypes):
    a, b = np.array([0, 1, 2, 1]).astype(dtypes[0]), np.array([3, 0, 1, 2]).astype(dtypes[1])
    _same_as_torch(lambda lib, x, y: getattr(lib.special, name)(x, y), a, b)
    _same_as_torch(lambda lib, x: getattr(lib.special, name)(x, 2.5), a)
    _same_as_torch(lambda lib, y: getattr(lib.special, name)(3, y), b)


SPECIAL = [0.0, -0.0, 1e-6, 0.3, 0.5, 1.0, -1.0, 1.5, -2.5, 40.0, np.inf, -np.inf, np.nan]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY)
def test_special_values_match_torch(name, dtype):
    float64_rtol = 1e-9 if name == "ndtri" else 1e-12  # ndtri: see its docstring's known gap
    _same_as_torch(lambda lib, t: getattr(lib.special, name)(t), np.array(SPECIAL, dtype=dtype),
                   rtol=4e-6 if dtype == "float32" else float64_rtol, atol=0)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_binary_special_values_match_torch(name):
    values = np.array([0.0, -0.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan])
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    _same_as_torch(lambda lib, x, y: getattr(lib.special, name)(x, y), a, b, rtol=1e-12, atol=0)


@pytest.mark.torch
def test_zero_gradients_where_torch_defines_them():
    for fn, values in [(lambda lib, t: lib.special.xlogy(t, lib.tensor([0.0, 3.0])), [0.0, 2.0]),
                       (lambda lib, t: lib.special.sinc(t), [0.0, 0.5]),
                       (lambda lib, t: lib.special.logit(t, eps=0.25), [0.1, 0.5, 0.9])]:
        grads = []
        for lib in (zgrad, torch):
            x = lib.tensor(values, requires_grad=True)
            fn(lib, x).sum().backward()
            grads.append(np.asarray(x.grad.tolist()))
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


@pytest.mark.torch
def test_refusals_match_torch():
    for lib in (torch, zgrad):
        with pytest.raises(TypeError):
            lib.special.xlogy(2, 3)
        with pytest.raises(TypeError):
            lib.special.softmax(lib.tensor([1.0, 2.0]))  # dim is required in torch.special


@requires_cuda
@pytest.mark.parametrize("op", [c for c in CASES if c.values[0].name in ("logit_eps", "ndtri", "sinc", "entr", "xlogy",
                                                                          "xlogy_number", "xlog1py", "ndtr")])
def test_cuda_matches_cpu(op):
    check_device(op.fn, op.shapes, domain=op.domain)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["logit", "ndtr", "sinc", "entr", "erf", "expit"])
def test_out_argument_as_torch(name):
    require_torch()
    x = np.array([0.2, 0.5, 0.7], dtype=np.float32)
    out = zgrad.empty(0, dtype=zgrad.float64)
    assert getattr(zgrad.special, name)(zgrad.tensor(x), out=out) is out
    expected = getattr(torch.special, name)(torch.from_numpy(x), out=torch.empty(0, dtype=torch.float64))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        getattr(zgrad.special, name)(zgrad.tensor(x, requires_grad=True), out=out)

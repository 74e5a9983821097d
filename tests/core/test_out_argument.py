"""The ``out=`` keyword (``zgrad.add(a, b, out=o)``, :mod:`zgrad.ops.out_argument`) against PyTorch:
the result written into ``out`` and ``out`` returned, for every function that takes it; resizing
(with PyTorch's warning when ``out`` held elements); the dtype rules (a castable dtype, or the
exact one for mm/matmul/max/clamp/...); tuple outs; the refusal under autograd; CUDA (Numba's
simulator here).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda
from helpers import require_torch, torch
from zgrad.ops.out_argument import OUT_RESIZE_WARNING

RNG = np.random.default_rng(0)
X = RNG.uniform(0.2, 0.9, (3, 4)).astype(np.float32)
Y = RNG.uniform(0.2, 0.9, (3, 4)).astype(np.float32)
I = np.array([[5, 3, 4, 7], [1, 2, 6, 9], [8, 2, 3, 4]])

UNARY = ["exp", "log", "sqrt", "tanh", "sigmoid", "neg", "square", "abs", "sin", "cos", "tan", "asin", "acos", "atan",
         "sinh", "cosh", "asinh", "atanh", "erf", "erfc", "erfinv", "log1p", "expm1", "log2", "log10", "exp2", "rsqrt",
         "reciprocal", "floor", "ceil", "round", "trunc", "frac", "sign", "nan_to_num", "signbit"]
BINARY = ["add", "sub", "mul", "div", "pow", "remainder", "maximum", "minimum", "atan2", "fmod", "hypot", "logaddexp",
          "logaddexp2", "copysign", "floor_divide"]
CALLS = {f"{name}": (lambda name: lambda lib, x, y, i, **out: getattr(lib, name)(x, **out))(name) for name in UNARY}
CALLS.update({name: (lambda name: lambda lib, x, y, i, **out: getattr(lib, name)(x, y, **out))(name) for name in BINARY})
CALLS.update({
    "add_alpha": lambda lib, x, y, i, **out: lib.add(x, y, alpha=2, **out),
    "div_floor": lambda lib, x, y, i, **out: lib.div(i, 2, rounding_mode="floor", **out),
    "acosh": lambda lib, x, y, i, **out: lib.acosh(x + 1, **out),
    "clamp": lambda lib, x, y, i, **out: lib.clamp(x, 0.3, 0.6, **out),
    "lerp": lambda lib, x, y, i, **out: lib.lerp(x, y, 0.25, **out),
    "bitwise_and": lambda lib, x, y, i, **out: lib.bitwise_and(i, 6, **out),
    "bitwise_or": lambda lib, x, y, i, **out: lib.bitwise_or(i, i * 2, **out),
    "bitwise_xor": lambda lib, x, y, i, **out: lib.bitwise_xor(i, 3, **out),
    "bitwise_not": lambda lib, x, y, i, **out: lib.bitwise_not(i, **out),
    "bitwise_left_shift": lambda lib, x, y, i, **out: lib.bitwise_left_shift(i, 2, **out),
    "bitwise_right_shift": lambda lib, x, y, i, **out: lib.bitwise_right_shift(i, 1, **out),
    "matmul": lambda lib, x, y, i, **out: lib.matmul(x, y.T, **out),
    "mm": lambda lib, x, y, i, **out: lib.mm(x, y.T, **out),
    "bmm": lambda lib, x, y, i, **out: lib.bmm(x[None], y.T[None], **out),
    "mv": lambda lib, x, y, i, **out: lib.mv(x, y[0], **out),
    "dot": lambda lib, x, y, i, **out: lib.dot(x[0], y[1], **out),
    "outer": lambda lib, x, y, i, **out: lib.outer(x[0], y[1], **out),
    "addmm": lambda lib, x, y, i, **out: lib.addmm(x[:, :3], x, y.T, beta=0.5, **out),
    "baddbmm": lambda lib, x, y, i, **out: lib.baddbmm(x[None, :, :3], x[None], y.T[None], **out),
    "addmv": lambda lib, x, y, i, **out: lib.addmv(x[:, 0], x, y[1], **out),
    "addr": lambda lib, x, y, i, **out: lib.addr(x, x[:, 0], y[0], **out),
    "cat": lambda lib, x, y, i, **out: lib.cat([x, y], 1, **out),
    "stack": lambda lib, x, y, i, **out: lib.stack([x, y], **out),
    "where": lambda lib, x, y, i, **out: lib.where(x > 0.5, x, y, **out),
    "gather": lambda lib, x, y, i, **out: lib.gather(x, 1, i % 4, **out),
    "index_select": lambda lib, x, y, i, **out: lib.index_select(x, 0, i[0] % 3, **out),
    "sum": lambda lib, x, y, i, **out: lib.sum(x, 1, **out),
    "sum_int": lambda lib, x, y, i, **out: lib.sum(i, (0, 1), keepdim=True, **out),
    "mean": lambda lib, x, y, i, **out: lib.mean(x, 0, **out),
    "prod": lambda lib, x, y, i, **out: lib.prod(x, 1, **out),
    "nansum": lambda lib, x, y, i, **out: lib.nansum(x, 1, **out),
    "cumsum": lambda lib, x, y, i, **out: lib.cumsum(x, 1, **out),
    "var": lambda lib, x, y, i, **out: lib.var(x, 1, **out),
    "std": lambda lib, x, y, i, **out: lib.std(x, 0, **out),
    "logsumexp": lambda lib, x, y, i, **out: lib.logsumexp(x, 1, **out),
    "argmax": lambda lib, x, y, i, **out: lib.argmax(x, 1, **out),
    "argmin": lambda lib, x, y, i, **out: lib.argmin(x, 0, **out),
    "max_all": lambda lib, x, y, i, **out: lib.max(x, **out),
    "max_other": lambda lib, x, y, i, **out: lib.max(x, y, **out),
    "min_all": lambda lib, x, y, i, **out: lib.min(x, **out),
    "all": lambda lib, x, y, i, **out: lib.all(x > 0.3, 1, **out),
    "any": lambda lib, x, y, i, **out: lib.any(x > 0.8, 0, **out),
    "amax": lambda lib, x, y, i, **out: lib.amax(x, 1, **out),
    "amin": lambda lib, x, y, i, **out: lib.amin(x, (0, 1), **out),
    "nanmean": lambda lib, x, y, i, **out: lib.nanmean(x, 1, **out),
    "cumprod": lambda lib, x, y, i, **out: lib.cumprod(x, 1, **out),
    "logcumsumexp": lambda lib, x, y, i, **out: lib.logcumsumexp(x, 0, **out),
    "median_all": lambda lib, x, y, i, **out: lib.median(x, **out),
    "searchsorted": lambda lib, x, y, i, **out: lib.searchsorted(lib.sort(x, 1).values, y, **out),
    "bucketize": lambda lib, x, y, i, **out: lib.bucketize(x, lib.tensor([0.3, 0.5, 0.7]), **out),
    "eq": lambda lib, x, y, i, **out: lib.eq(i, 3, **out),
    "ne": lambda lib, x, y, i, **out: lib.ne(i, i[1], **out),
    "lt": lambda lib, x, y, i, **out: lib.lt(x, y, **out),
    "le": lambda lib, x, y, i, **out: lib.le(x, 0.5, **out),
    "gt": lambda lib, x, y, i, **out: lib.gt(x, y, **out),
    "ge": lambda lib, x, y, i, **out: lib.ge(x, 0.5, **out),
    "logical_and": lambda lib, x, y, i, **out: lib.logical_and(x > 0.5, i, **out),
    "logical_or": lambda lib, x, y, i, **out: lib.logical_or(x > 0.5, y > 0.5, **out),
    "logical_xor": lambda lib, x, y, i, **out: lib.logical_xor(x > 0.5, y > 0.5, **out),
    "logical_not": lambda lib, x, y, i, **out: lib.logical_not(x > 0.5, **out),
    "tril": lambda lib, x, y, i, **out: lib.tril(x, **out),
    "triu": lambda lib, x, y, i, **out: lib.triu(x, 1, **out),
    "diag": lambda lib, x, y, i, **out: lib.diag(x, **out),
    "kron": lambda lib, x, y, i, **out: lib.kron(x, y, **out),
    "cross": lambda lib, x, y, i, **out: lib.cross(x[:, :3], y[:, :3], dim=1, **out),
    "inner": lambda lib, x, y, i, **out: lib.inner(x, y, **out),
    "tensordot": lambda lib, x, y, i, **out: lib.tensordot(x, y.T, 1, **out),
    "masked_select": lambda lib, x, y, i, **out: lib.masked_select(x, x > 0.5, **out),
    "take": lambda lib, x, y, i, **out: lib.take(x, i, **out),
    "nonzero": lambda lib, x, y, i, **out: lib.nonzero(x > 0.5, **out),
    "histc": lambda lib, x, y, i, **out: lib.histc(x, 4, 0, 1, **out),
    "index_add": lambda lib, x, y, i, **out: lib.index_add(x, 0, lib.tensor([2, 0]), y[:2], **out),
    "clamp_min": lambda lib, x, y, i, **out: lib.clamp_min(x, 0.5, **out),
    "clamp_max": lambda lib, x, y, i, **out: lib.clamp_max(x, 0.5, **out),
})
TUPLE_CALLS = {
    "max_dim": lambda lib, x, **out: lib.max(x, 1, **out),
    "min_dim_keepdim": lambda lib, x, **out: lib.min(x, 0, keepdim=True, **out),
    "sort": lambda lib, x, **out: lib.sort(x, 1, descending=True, **out),
    "topk": lambda lib, x, **out: lib.topk(x, 2, **out),
    "kthvalue": lambda lib, x, **out: lib.kthvalue(x, 2, 0, **out),
    "median_dim": lambda lib, x, **out: lib.median(x, 1, **out),
    "mode": lambda lib, x, **out: lib.mode(x, 1, **out),
    "cummax": lambda lib, x, **out: lib.cummax(x, 1, **out),
    "cummin": lambda lib, x, **out: lib.cummin(x, 0, **out),
}


def _inputs(lib):
    return lib.tensor(X), lib.tensor(Y), lib.tensor(I)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CALLS))
def test_result_is_written_into_out_as_torch(name):
    require_torch()
    fn = CALLS[name]
    expected = fn(torch, *_inputs(torch))
    for out_shape in (tuple(expected.shape), (0,)):  # a right-sized out, and an empty one resized
        out = zgrad.empty(out_shape, dtype=expected.numpy().dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            returned = fn(zgrad, *_inputs(zgrad), out=out)
        assert returned is out
        assert (out.dtype, out.shape) == (expected.numpy().dtype, tuple(expected.shape))
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=2e-6, atol=1e-6)
        np.testing.assert_array_equal(out.numpy(), fn(zgrad, *_inputs(zgrad)).numpy())


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(TUPLE_CALLS))
def test_tuple_out_as_torch(name):
    require_torch()
    fn = TUPLE_CALLS[name]
    expected = fn(torch, torch.tensor(X))
    outs = (zgrad.empty(0), zgrad.empty(0, dtype=zgrad.int64))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double instead"):
        fn(zgrad, zgrad.tensor(X), out=(zgrad.empty(0, dtype=zgrad.float64), outs[1]))
    got = fn(zgrad, zgrad.tensor(X), out=outs)
    assert got.values is outs[0] and got.indices is outs[1]
    np.testing.assert_array_equal(got.values.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy(), expected.indices.numpy())
    with pytest.raises(TypeError, match="must be a tuple of 2 Tensors"):
        fn(zgrad, zgrad.tensor(X), out=zgrad.empty(0))


@pytest.mark.torch
def test_out_of_another_shape_is_resized_with_torchs_warning():
    require_torch()
    for lib in (torch, zgrad):
        out = lib.zeros(5)
        with pytest.warns(UserWarning, match=r"^An output with one or more elements was resized since it had shape \[5\], "
                                             r"which does not match the required output shape \[3, 4\]\.") as record:
            lib.add(lib.tensor(X), 1, out=out)
        assert len(record) == 1 and out.shape == (3, 4)
        np.testing.assert_allclose(np.asarray(out.tolist()), X + 1, rtol=1e-6)
    assert OUT_RESIZE_WARNING.startswith("An output with one or more elements was resized")


# An out dtype that is not the result's, refused by the functions that check exactly (torch's
# wording differs between them; zgrad's is mm's).
_EXACT = "[Dd]ouble"


@pytest.mark.torch
@pytest.mark.parametrize("call, out_dtype, message", [
    (lambda lib, x, i, **out: lib.add(x, x, **out), "int64", "result type Float can't be cast to the desired output type Long"),
    (lambda lib, x, i, **out: lib.div(i, 2, **out), "int64", "result type Float can't be cast to the desired output type Long"),
    (lambda lib, x, i, **out: lib.exp(x, **out), "int32", "result type Float can't be cast to the desired output type Int"),
    (lambda lib, x, i, **out: lib.mm(x, x.T, **out), "float64", "Expected out tensor to have dtype float, but got double instead"),
    (lambda lib, x, i, **out: lib.matmul(x, x.T, **out), "float64", "Expected out tensor to have dtype float, but got double instead"),
    (lambda lib, x, i, **out: lib.add(i > 2, i > 3, **out), "bool", None),
    (lambda lib, x, i, **out: lib.add(i, i, **out), "float32", None),
    (lambda lib, x, i, **out: lib.exp(x, **out), "float64", None),
    (lambda lib, x, i, **out: lib.cat([i, i], **out), "float64", None),
    (lambda lib, x, i, **out: lib.sum(x, 0, **out), "int64", None),
    (lambda lib, x, i, **out: lib.cumsum(x * 4, 1, **out), "int64", None),
    (lambda lib, x, i, **out: lib.outer(x[0], x[1], **out), "float64", None),
    (lambda lib, x, i, **out: lib.floor(x, **out), "float64", _EXACT),
    (lambda lib, x, i, **out: lib.neg(x, **out), "float64", _EXACT),
    (lambda lib, x, i, **out: lib.amax(x, 0, **out), "float64", _EXACT),
    (lambda lib, x, i, **out: lib.max(x, **out), "float64", None),
    (lambda lib, x, i, **out: lib.min(x, x.T.T, **out), "float64", None),
    (lambda lib, x, i, **out: lib.max(x, **out), "int64", "(canCast|can't be cast)"),
], ids=["add_float_into_long", "true_div_into_long", "exp_into_int", "mm_exact", "matmul_exact", "bool_into_bool",
        "int_into_float", "float_into_double", "cat_int_into_double", "sum_into_long", "cumsum_in_long", "outer_double",
        "floor_exact", "neg_exact", "amax_exact", "max_all_castable", "min_other_castable", "max_all_into_long"])
def test_out_dtype_rules_match_torch(call, out_dtype, message):
    require_torch()
    results = []
    for lib in (torch, zgrad):
        out = lib.empty(0, dtype=getattr(lib, "bool" if out_dtype == "bool" else out_dtype))
        if message is None:
            call(lib, lib.tensor(X), lib.tensor(I), out=out)
            results.append(np.asarray(out.tolist()))
        else:
            with pytest.raises(RuntimeError, match=message if message[0] in "[(" else f"^{message}$"):
                call(lib, lib.tensor(X), lib.tensor(I), out=out)
    if results:
        np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("call", [
    lambda lib, x, o: lib.add(x, 1, out=o), lambda lib, x, o: lib.sqrt(x, out=o), lambda lib, x, o: lib.cat([x, x], out=o),
    lambda lib, x, o: lib.sum(x, 0, out=o), lambda lib, x, o: lib.mm(x, x.T, out=o),
], ids=["add", "sqrt", "cat", "sum", "mm"])
def test_out_refuses_arguments_that_require_grad_as_torch(call):
    require_torch()
    for lib in (torch, zgrad):
        with pytest.raises(RuntimeError, match=r"^\w+\(\): functions with out=\.\.\. arguments don't support automatic "
                                               r"differentiation, but one of the arguments requires grad\.$"):
            call(lib, lib.tensor(X, requires_grad=True), lib.empty(0))
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            call(lib, lib.tensor(X), lib.zeros(0, requires_grad=True))
        with lib.no_grad():
            out = lib.empty(0)
            assert call(lib, lib.tensor(X, requires_grad=True), out) is out
            assert not out.requires_grad


def test_out_is_written_in_place_where_views_see_it():
    out = zgrad.zeros(3, 4)
    view = out[1]
    zgrad.mul(zgrad.tensor(X), 2, out=out)
    np.testing.assert_allclose(view.numpy(), X[1] * 2)
    with pytest.raises(TypeError, match="argument 'out' must be a Tensor, not int"):
        zgrad.add(zgrad.tensor(X), 1, out=5)


def test_a_saved_value_overwritten_by_out_is_detected():
    x = zgrad.tensor(X, requires_grad=True)
    y = zgrad.tensor(Y)
    z = x * y  # saves y for x's gradient
    with zgrad.no_grad():
        zgrad.add(y, 1, out=y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


@requires_cuda
def test_cuda_out():
    x, y = zgrad.tensor(X, device="cuda"), zgrad.tensor(Y, device="cuda")
    out = zgrad.empty(0, device="cuda")
    assert zgrad.mul(x, y, out=out) is out and out.device.type == "cuda"
    np.testing.assert_allclose(out.cpu().numpy(), X * Y, rtol=1e-6)
    values, indices = zgrad.empty(0, device="cuda"), zgrad.empty(0, dtype=zgrad.int64, device="cuda")
    zgrad.max(x, 1, out=(values, indices))
    np.testing.assert_array_equal(indices.cpu().numpy(), X.argmax(1))
    with pytest.raises(RuntimeError, match="expected out on the result's device cuda"):
        zgrad.mul(x, y, out=zgrad.empty(0))

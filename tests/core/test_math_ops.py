"""The element-wise math functions (trigonometric, hyperbolic, error functions, logarithms and
exponentials, rounding, predicates, atan2/fmod/hypot/logaddexp/copysign/lerp, bitwise) against
PyTorch: values and gradients (float32 and float64, and float64 finite differences), result
dtypes over the dtype grid (bool, integers, floats, with PyTorch's refusals), special values (inf,
NaN, -0.0, ties), Tensor methods, in-place forms and operators.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from zgrad.errors import AutogradError, DTypeError
from helpers import case, check_finite_differences, check_torch, require_torch, torch

UNIT = (-0.9, 0.9)
POSITIVE = (0.5, 3.0)
ABOVE1 = (1.1, 3.0)

CASES = [
    case("sin", lambda lib, a: lib.sin(a), (3, 4)),
    case("cos", lambda lib, a: lib.cos(a), (3, 4)),
    case("tan", lambda lib, a: lib.tan(a), (3, 4), domain=(-1.2, 1.2)),
    case("asin", lambda lib, a: lib.asin(a), (3, 4), domain=UNIT),
    case("acos_method", lambda lib, a: a.acos(), (3, 4), domain=UNIT),
    case("atan", lambda lib, a: lib.atan(a * 3), (3, 4)),
    case("sinh", lambda lib, a: lib.sinh(a), (3, 4)),
    case("cosh_method", lambda lib, a: a.cosh(), (3, 4)),
    case("asinh", lambda lib, a: lib.asinh(a * 3), (3, 4)),
    case("acosh", lambda lib, a: lib.acosh(a), (3, 4), domain=ABOVE1),
    case("atanh", lambda lib, a: lib.atanh(a), (3, 4), domain=UNIT),
    case("aliases", lambda lib, a: lib.arcsin(a) + lib.arccos(a) * lib.arctan(a) + a.arcsinh() + lib.arctanh(a),
         (3, 4), domain=UNIT),
    case("arccosh", lambda lib, a: a.arccosh(), (5,), domain=ABOVE1),
    case("erf", lambda lib, a: lib.erf(a), (3, 4)),
    case("erfc", lambda lib, a: a.erfc(), (3, 4)),
    case("erfinv", lambda lib, a: lib.erfinv(a), (3, 4), domain=(-0.98, 0.98)),
    case("log1p", lambda lib, a: lib.log1p(a), (3, 4), domain=(-0.5, 2.0)),
    case("expm1", lambda lib, a: a.expm1(), (3, 4)),
    case("log2", lambda lib, a: lib.log2(a), (3, 4), domain=POSITIVE),
    case("log10", lambda lib, a: a.log10(), (3, 4), domain=POSITIVE),
    case("exp2", lambda lib, a: lib.exp2(a), (3, 4)),
    case("rsqrt", lambda lib, a: lib.rsqrt(a), (3, 4), domain=POSITIVE),
    case("reciprocal", lambda lib, a: a.reciprocal(), (3, 4), domain=POSITIVE),
    case("frac", lambda lib, a: lib.frac(a * 4) * a, (3, 4), domain=(0.05, 0.2)),
    case("rounding_zero_gradient", lambda lib, a: (lib.floor(a) + lib.ceil(a) + lib.round(a) + lib.trunc(a)
                                                   + lib.fix(a) + lib.sign(a) + lib.sgn(a)) * a, (3, 4)),
    case("round_decimals", lambda lib, a: lib.round(a * 7, decimals=2) + a, (3, 4)),
    case("nan_to_num", lambda lib, a: lib.nan_to_num(lib.log(a), nan=0.5), (3, 4)),
    case("clamp_min", lambda lib, a: lib.clamp_min(a, -0.2), (3, 4)),
    case("clamp_max_method", lambda lib, a: a.clamp_max(0.3), (3, 4)),
    case("atan2", lambda lib, a, b: lib.atan2(a, b), (3, 4), (3, 4)),
    case("arctan2_broadcast", lambda lib, a, b: a.arctan2(b), (3, 4), (4,)),
    case("fmod", lambda lib, a, b: lib.fmod(a * 3, b), (3, 4), (3, 4), domain=POSITIVE),
    case("fmod_negative_scalar", lambda lib, a: lib.fmod(a * -3, 0.7), (3, 4), domain=POSITIVE),
    case("hypot", lambda lib, a, b: lib.hypot(a, b), (3, 4), (1, 4)),
    case("logaddexp", lambda lib, a, b: lib.logaddexp(a, b), (3, 4), (3, 4)),
    case("logaddexp2", lambda lib, a, b: a.logaddexp2(b * 3), (3, 4), (3, 1)),
    case("copysign", lambda lib, a, b: lib.copysign(a, b), (3, 4), (3, 4)),
    case("copysign_scalar", lambda lib, a: a.copysign(-1.0), (3, 4)),
    case("lerp_tensor_weight", lambda lib, a, b, w: lib.lerp(a, b, w), (3, 4), (3, 4), (4,)),
    case("lerp_scalar_weight", lambda lib, a, b: a.lerp(b, 0.3), (3, 4), (3, 4)),
    case("inplace_recorded", lambda lib, a, b: (a * 1).sin_().atan2_(b).lerp_(b, 0.25).exp2_(), (3, 4), (3, 4)),
]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", CASES)
def test_matches_torch(op, dtype):
    check_torch(op.fn, op.shapes, dtype=dtype, domain=op.domain)


@pytest.mark.parametrize("op", CASES)
def test_matches_finite_differences(op):
    check_finite_differences(op.fn, op.shapes, domain=op.domain)


# --- dtypes -------------------------------------------------------------------------------------

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
UNARY = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc",
         "erfinv", "log1p", "expm1", "log2", "log10", "exp2", "rsqrt", "reciprocal", "floor", "ceil", "round", "trunc",
         "fix", "frac", "sign", "sgn", "nan_to_num", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit",
         "bitwise_not", "exp", "log", "tanh", "sigmoid", "sqrt", "abs", "neg"]
BINARY = ["atan2", "fmod", "hypot", "logaddexp", "logaddexp2", "copysign", "bitwise_and", "bitwise_or", "bitwise_xor",
          "bitwise_left_shift", "bitwise_right_shift", "remainder", "floor_divide", "pow"]


def _data(dtype: str, values) -> np.ndarray:
    return np.asarray(values).astype(dtype)


def _same_as_torch(fn, *arrays, **tol) -> None:
    """fn on zgrad and torch agree: same dtype, shape and values (NaN where torch's), or both raise
    (zgrad a RuntimeError or TypeError where torch raises one)."""
    require_torch()
    try:
        expected = fn(torch, *(torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in arrays))
    except (RuntimeError, TypeError) as refusal:
        with pytest.raises(RuntimeError if isinstance(refusal, RuntimeError) else TypeError):
            fn(zgrad, *(zgrad.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays))
        return
    got = fn(zgrad, *(zgrad.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays))
    ref = expected.numpy()
    assert got.dtype == ref.dtype, f"zgrad gives {got.dtype}, torch {ref.dtype}"
    assert got.shape == ref.shape
    if ref.dtype.kind == "f":
        tol = tol or dict(rtol=1e-3 if ref.dtype == np.float16 else 2e-6, atol=1e-6)
        np.testing.assert_allclose(got.numpy().astype(np.float64), ref.astype(np.float64), equal_nan=True, **tol)
    else:
        np.testing.assert_array_equal(got.numpy(), ref)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_dtype_rules_match_torch(name, dtype):
    _same_as_torch(lambda lib, x: getattr(lib, name)(x), _data(dtype, [0, 1, 2, 3, 7]))


@pytest.mark.torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_dtype_rules_match_torch(name, dtype):
    a, b = _data(dtype, [[5, 1, 0], [3, 7, 2]]), _data(dtype, [1, 3, 2])
    _same_as_torch(lambda lib, x, y: getattr(lib, name)(x, y), a, b)


@pytest.mark.torch
@pytest.mark.parametrize("scalar", [2, 1.5, True], ids=["int", "float", "bool"])
@pytest.mark.parametrize("dtype", ["uint8", "int32", "float32"])
@pytest.mark.parametrize("name", ["atan2", "fmod", "copysign", "bitwise_and", "bitwise_left_shift"])
def test_binary_with_a_number_promotes_like_torch(name, dtype, scalar):
    _same_as_torch(lambda lib, x: getattr(lib, name)(x, scalar), _data(dtype, [1, 2, 5]))


@pytest.mark.torch
@pytest.mark.parametrize("dtypes", [("int32", "int64"), ("uint8", "int8"), ("bool", "int16"), ("int32", "float32"),
                                    ("float32", "float64")], ids=str)
@pytest.mark.parametrize("name", ["atan2", "hypot", "copysign", "bitwise_or", "bitwise_right_shift", "fmod"])
def test_mixed_dtypes_promote_like_torch(name, dtypes):
    _same_as_torch(lambda lib, x, y: getattr(lib, name)(x, y), _data(dtypes[0], [1, 0, 6]), _data(dtypes[1], [2, 1, 1]))


# --- special values -----------------------------------------------------------------------------

SPECIAL = [0.0, -0.0, 0.4, -0.4, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, 1e-30, -1e-8, 1.0, -1.0, 0.9999999,
           -0.99999999999, 3e38, -7.2, 1e300, np.inf, -np.inf, np.nan]
SPECIAL_UNARY = [n for n in UNARY if n not in ("bitwise_not", "neg", "abs")] + ["neg", "abs"]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", SPECIAL_UNARY)
def test_special_values_match_torch(name, dtype):
    with np.errstate(all="ignore"):
        x = np.array(SPECIAL).astype(dtype)
    tol = dict(rtol=4e-6 if dtype == "float32" else 1e-13, atol=0)
    _same_as_torch(lambda lib, t: getattr(lib, name)(t), x, **tol)
    signs = getattr(zgrad, name)(zgrad.tensor(x)).numpy()
    if signs.dtype.kind == "f":  # -0.0 where torch gives -0.0 (a NaN's sign bit means nothing)
        ref = getattr(torch, name)(torch.from_numpy(x)).numpy()
        numbers = ~np.isnan(ref)
        np.testing.assert_array_equal(np.signbit(signs[numbers]), np.signbit(ref[numbers]))


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["atan2", "fmod", "hypot", "logaddexp", "logaddexp2", "copysign"])
def test_binary_special_values_match_torch(name, dtype):
    values = np.array([0.0, -0.0, 1.5, -2.0, 1e30, np.inf, -np.inf, np.nan])
    a, b = (v.astype(dtype) for v in np.meshgrid(values, values))
    _same_as_torch(lambda lib, x, y: getattr(lib, name)(x, y), a, b, rtol=4e-6 if dtype == "float32" else 1e-13, atol=0)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_erfinv_up_to_one(dtype):
    x = np.array([1 - 1e-7, -(1 - 1e-6), 0.999, 0.5, 0.25, 1e-3, -0.75] + ([1 - 1e-15, 1 - 1e-12] if dtype == "float64" else []),
                 dtype=dtype)
    _same_as_torch(lambda lib, t: lib.erfinv(t), x, rtol=3e-6 if dtype == "float32" else 1e-13, atol=0)


@pytest.mark.torch
@pytest.mark.parametrize("decimals", [-3, -1, 1, 2, 4])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_decimals_matches_torch(decimals, dtype):
    x = np.random.default_rng(3).uniform(-5000, 5000, 64).astype(dtype)
    x[:4] = [0.125, 2.5, -0.5, 1234.5]
    _same_as_torch(lambda lib, t: lib.round(t, decimals=decimals), x, rtol=0, atol=0)


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [{}, {"nan": 1.5}, {"posinf": 7.0, "neginf": -3.0}], ids=str)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_nan_to_num_defaults_and_values(kwargs, dtype):
    x = np.array([np.nan, np.inf, -np.inf, 2.0]).astype(dtype)
    _same_as_torch(lambda lib, t: lib.nan_to_num(t, **kwargs), x, rtol=0, atol=0)


# --- bitwise ------------------------------------------------------------------------------------

@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_shifts_out_of_range_match_torch(dtype):
    a = _data(dtype, [1, 3, 100, 127, 5, 64])
    if np.dtype(dtype).kind == "i":
        a[3] = -7
    b = _data(dtype, [0, 1, 7, 8, 63, 3])
    if np.dtype(dtype).kind == "i":
        b[5] = -1
    for name in ("bitwise_left_shift", "bitwise_right_shift"):
        _same_as_torch(lambda lib, x, y: getattr(lib, name)(x, y), a, b)


@pytest.mark.torch
def test_operators_and_reflected_forms_match_torch():
    a, b = np.array([12, 10, -3], np.int32), np.array([6, 3, 5], np.int64)
    ops = [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: x << 2, lambda x, y: x >> 1,
           lambda x, y: ~x, lambda x, y: 7 & x, lambda x, y: 5 | y, lambda x, y: 9 ^ x, lambda x, y: 1 << y,
           lambda x, y: 64 >> y, lambda x, y: (x > 0) & (y > 3), lambda x, y: ~(x > 0), lambda x, y: True ^ (y > 3)]
    for op in ops:
        _same_as_torch(lambda lib, x, y: op(x, y), a, b)


def test_inplace_operators_and_methods():
    x = zgrad.tensor([12, 10, 3])
    x &= 6
    x |= zgrad.tensor([1, 1, 1])
    x ^= 2
    x <<= 2
    x >>= 1
    assert x.tolist() == [((12 & 6 | 1) ^ 2) << 2 >> 1, ((10 & 6 | 1) ^ 2) << 2 >> 1, ((3 & 6 | 1) ^ 2) << 2 >> 1]
    m = zgrad.tensor([True, False])
    m.bitwise_not_()
    assert m.tolist() == [False, True]
    with pytest.raises(RuntimeError, match="not implemented for 'Float'"):
        zgrad.tensor([1.0]) & 1


# --- in place -----------------------------------------------------------------------------------

@pytest.mark.parametrize("method, args", [
    ("sin_", ()), ("erfinv_", ()), ("floor_", ()), ("round_", ()), ("frac_", ()), ("sign_", ()), ("nan_to_num_", ()),
    ("clamp_min_", (0.1,)), ("clamp_max_", (0.2,)), ("atan2_", (zgrad.tensor(0.5),)), ("fmod_", (0.3,)), ("hypot_", (zgrad.tensor([2.0, 1.0, 0.5]),)),
    ("copysign_", (-1.0,)), ("lerp_", (zgrad.tensor(2.0), 0.5)), ("arcsinh_", ()), ("rsqrt_", ()), ("exp2_", ()),
    ("exp_", ()), ("log_", ()), ("tanh_", ()), ("sigmoid_", ()), ("sqrt_", ()), ("abs_", ()), ("neg_", ()),
    ("pow_", (2.5,)), ("remainder_", (0.25,)), ("floor_divide_", (0.25,)),
])
def test_inplace_methods_match_out_of_place(method, args):
    values = np.array([0.3, 0.7, 0.55], np.float32)
    x = zgrad.tensor(values)
    assert getattr(x, method)(*args) is x
    expected = getattr(zgrad.tensor(values), method[:-1])(*args)
    np.testing.assert_allclose(x.numpy(), expected.numpy(), rtol=1e-6)


def test_inplace_refuses_what_torch_refuses():
    with pytest.raises(DTypeError, match="result type Float can't be cast to the desired output type Long"):
        zgrad.tensor([1, 2]).sin_()
    leaf = zgrad.tensor([0.5], requires_grad=True)
    with pytest.raises(AutogradError, match="leaf Variable"):
        leaf.cos_()
    with pytest.raises(RuntimeError):
        zgrad.ones(3).atan2_(zgrad.ones(2, 3))
    ints = zgrad.tensor([3, 4])
    ints.floor_()
    assert ints.dtype == zgrad.int64 and ints.tolist() == [3, 4]


def test_lerp_and_predicates_refuse_like_torch():
    with pytest.raises(DTypeError, match="expected dtype float32 for `end` but got dtype float64"):
        zgrad.lerp(zgrad.ones(2), zgrad.ones(2, dtype=zgrad.float64), 0.5)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        zgrad.lerp(zgrad.tensor([1]), zgrad.tensor([2]), 0.5)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        zgrad.round(zgrad.tensor([1]), decimals=1)
    flags = zgrad.isnan(zgrad.tensor([1.0, float("nan")], requires_grad=True))
    assert flags.dtype == zgrad.bool and not flags.requires_grad and flags.grad_fn is None


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "float16", "float32"])
@pytest.mark.parametrize("bounds", [(0.5, None), (1, 2), (True, None)], ids=str)
def test_clamp_dtypes_and_refusals_match_torch(bounds, dtype):
    _same_as_torch(lambda lib, t: lib.clamp(t, *bounds), _data(dtype, [0, 1, 3, 2]))


@pytest.mark.torch
def test_floor_divide_operator_matches_torch():
    a, b = np.array([7.5, -7.5, 3.0], np.float32), np.array([2, -2, 4], np.int64)
    for op in (lambda x, y: x // y, lambda x, y: 7 // y, lambda x, y: y // 3, lambda x, y: x.floor_divide(y)):
        _same_as_torch(lambda lib, x, y: op(x, y), a, b)


def test_functions_are_methods_and_exported():
    names = ["sin", "arcsin", "erfinv", "floor", "round", "nan_to_num", "isposinf", "signbit", "copysign", "lerp",
             "bitwise_left_shift", "clamp_min", "fix", "sgn", "logaddexp2"]
    for name in names:
        assert name in zgrad.__all__ and getattr(zgrad.Tensor, name) is getattr(zgrad, name)


@pytest.mark.torch
@pytest.mark.parametrize("weight", [0.0, 0.3, 0.5, 1.0, 1.7, "tensor", "broadcast"])
def test_lerp_is_torch_bit_for_bit(weight):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3, 5)).astype(np.float32)
    w = {"tensor": rng.uniform(-0.5, 1.5, (3, 5)), "broadcast": rng.uniform(-0.5, 1.5, (5,))}.get(weight)
    arrays = (a, b) if w is None else (a, b, w.astype(np.float32))
    fn = (lambda lib, x, y: lib.lerp(x, y, weight)) if w is None else (lambda lib, x, y, z: lib.lerp(x, y, z))
    _same_as_torch(fn, *arrays, rtol=0, atol=0)

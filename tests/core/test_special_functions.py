"""The special functions (lgamma, digamma, polygamma, mvlgamma, the Bessel functions i0 ... i1e,
erfcx, log_ndtr, zeta, the incomplete gamma functions) and the number functions (fmax, fmin,
ldexp, float_power, frexp, addcmul, addcdiv) against PyTorch (values and gradients, float32 and
float64) and float64 finite differences; the scalar kernels against mpmath at high precision
over wide ranges; the gradients PyTorch refuses; the aliases and the top-level in-place
functions; and the CUDA backend (Numba's simulator here) against the CPU, special values included.

The conformance table (tests/conformance) covers the dtype grid, the methods and in-place forms.
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from cuda_helpers import check_device, requires_cuda, strict_cuda
from helpers import case, check_finite_differences, check_torch, require_torch, torch

POSITIVE = (0.3, 4.0)

CASES = [
    case("lgamma", lambda lib, a: lib.lgamma(a), (3, 4), domain=(-3.7, 4.0)),
    case("digamma", lambda lib, a: lib.digamma(a), (3, 4), domain=POSITIVE),
    case("polygamma1", lambda lib, a: lib.polygamma(1, a), (3, 4), domain=POSITIVE),
    case("polygamma3", lambda lib, a: lib.polygamma(3, a), (3, 4), domain=POSITIVE),
    case("mvlgamma", lambda lib, a: lib.mvlgamma(a + 2, p=3), (3, 4), domain=POSITIVE),
    case("i0", lambda lib, a: lib.i0(a * 3), (3, 4)),
    case("i0e", lambda lib, a: lib.special.i0e(a * 20), (3, 4)),
    case("i1", lambda lib, a: lib.special.i1(a * 3), (3, 4)),
    case("i1e", lambda lib, a: lib.special.i1e(a * 20), (3, 4)),
    case("erfcx", lambda lib, a: lib.special.erfcx(a), (3, 4), domain=(-1.5, 12.0)),
    case("log_ndtr", lambda lib, a: lib.special.log_ndtr(a * 6), (3, 4)),
    case("gammainc", lambda lib, x: lib.special.gammainc(lib.tensor([0.5, 1.0, 2.5, 7.0], dtype=x.dtype), x)
         + lib.special.gammaincc(lib.tensor([[0.3], [2.0], [4.0]], dtype=x.dtype), x * 3), (3, 4), domain=POSITIVE),
    case("fmax_fmin", lambda lib, a, b: lib.fmax(a, b) * 2 + lib.fmin(a, b), (3, 4), (4,)),
    # non-negative exponents: torch's gradient is 0 for negative integer ones (2 ** -2 in integers)
    case("ldexp", lambda lib, a: lib.ldexp(a, lib.tensor([1, 2, 3, 0])), (3, 4)),
    case("float_power", lambda lib, a, b: lib.float_power(a, b), (3, 4), (3, 4), domain=POSITIVE),
    case("frexp", lambda lib, a: lib.frexp(a * 9).mantissa, (3, 4)),
    case("addcmul", lambda lib, a, b, c: lib.addcmul(a, b, c, value=0.5), (3, 4), (4,), (3, 1)),
    case("addcdiv", lambda lib, a, b, c: lib.addcdiv(a, b, c, value=2), (3, 4), (3, 4), (4,), domain=POSITIVE),
]


# torch's float64 trigamma (digamma's derivative, polygamma(1)) is good to about 1e-9 relative
# (its asymptotic series starts at x + 6); zgrad's is within 2e-14 of mpmath's (test below).
TORCH_FLOAT64_RTOL = {"digamma": 1e-8, "polygamma1": 1e-8}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", CASES)
def test_matches_torch(op, dtype):
    rtol = TORCH_FLOAT64_RTOL.get(op.name) if dtype == np.float64 else None
    check_torch(op.fn, op.shapes, dtype=dtype, domain=op.domain, rtol=rtol)


@pytest.mark.parametrize("op", CASES)
def test_matches_finite_differences(op):
    check_finite_differences(op.fn, op.shapes, domain=op.domain)


def _mpmath_cases():
    mpmath = pytest.importorskip("mpmath")
    x = [1e-8, 0.1, 0.5, 1.0, 2.5, 7.3, 9.99, 10.0, 15.0, 29.9, 30.1, 55.0, 300.0, 700.0]
    negative = [-0.3, -1.5, -2.7, -10.2, -50.5]
    return mpmath, [
        ("digamma", x + negative, lambda v: mpmath.digamma(v)),
        ("trigamma", x + negative, lambda v: mpmath.psi(1, v)),
        ("i0", x + [-v for v in x], lambda v: mpmath.besseli(0, v)),
        ("i1", x + [-v for v in x], lambda v: mpmath.besseli(1, v)),
        ("i0e", x + [-v for v in x], lambda v: mpmath.besseli(0, v) * mpmath.exp(-abs(v))),
        ("i1e", x + [-v for v in x], lambda v: mpmath.besseli(1, v) * mpmath.exp(-abs(v))),
        ("erfcx", x + negative + [-26.0, 1e10], lambda v: mpmath.exp(mpmath.mpf(v) ** 2) * mpmath.erfc(v)),
    ]


@pytest.mark.parametrize("name", ["digamma", "trigamma", "i0", "i1", "i0e", "i1e", "erfcx"])
def test_unary_kernels_match_mpmath(name):
    mpmath, cases = _mpmath_cases()
    _, values, reference = next(c for c in cases if c[0] == name)
    got = zgrad.kernels.dispatch_math.unary_math(name, np.array(values))
    with mpmath.workdps(40):
        expected = np.array([float(reference(v)) for v in values])
    np.testing.assert_allclose(got, expected, rtol=2e-14, atol=0)


@pytest.mark.parametrize("name", ["zeta", "igamma", "igammac"])
def test_binary_kernels_match_mpmath(name):
    mpmath = pytest.importorskip("mpmath")
    if name == "zeta":
        pairs = [(s, q) for s in (1.5, 2.0, 3.0, 4.5, 10.0) for q in (0.2, 1.0, 2.5, 10.0, 100.0)]
        pairs += [(s, q) for s in (2.0, 3.0, 4.0) for q in (-0.5, -2.3)]
        reference = mpmath.zeta
    else:
        pairs = [(a, x) for a in (0.1, 0.5, 1.0, 2.5, 10.0, 50.0) for x in (0.01, 0.5, 1.0, 3.0, 10.0, 60.0)]
        upper = name == "igammac"
        reference = lambda a, x: mpmath.gammainc(a, x, mpmath.inf, regularized=True) if upper else (  # noqa: E731
            mpmath.gammainc(a, 0, x, regularized=True))
    a, b = (np.array(column) for column in zip(*pairs))
    got = zgrad.kernels.dispatch_math.binary_math(name, a, b)
    with mpmath.workdps(40):
        expected = [float(reference(*p)) for p in pairs]
    np.testing.assert_allclose(got, expected, rtol=5e-13, atol=1e-300)


@pytest.mark.torch
def test_gradients_torch_refuses_are_refused_alike():
    require_torch()
    for lib in (torch, zgrad):
        a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        x = lib.tensor([0.5, 3.0], dtype=lib.float64, requires_grad=True)
        with pytest.raises(NotImplementedError, match="the derivative for 'igamma: input' is not implemented"):
            lib.special.gammainc(a, x).sum().backward()
        with pytest.raises(NotImplementedError, match="the derivative for 'igammac: input' is not implemented"):
            lib.special.gammaincc(a, x).sum().backward()
        with pytest.raises(NotImplementedError, match="the derivative for 'zeta' is not implemented"):
            lib.special.zeta(a, x).sum().backward()
        with pytest.raises(RuntimeError, match="does not support negative n"):
            lib.polygamma(-1, x)
        with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
            lib.mvlgamma(x, 0)
        with pytest.raises(RuntimeError, match="only supports floating-point dtypes"):
            lib.frexp(lib.tensor([1, 2]))
        with pytest.raises(RuntimeError, match="float_power_ has dtype Float"):
            lib.tensor([1.0, 2.0]).float_power_(2)


@pytest.mark.torch
def test_frexp_returns_named_int32_exponents_as_torch():
    require_torch()
    values = np.array([8.0, 0.3, -5.0, 0.0, -0.0, 1e-310, np.inf, np.nan])
    ours, theirs = zgrad.frexp(zgrad.tensor(values)), torch.frexp(torch.tensor(values))
    assert ours.exponent.dtype == zgrad.int32
    np.testing.assert_array_equal(ours.mantissa.numpy(), theirs.mantissa.numpy())
    np.testing.assert_array_equal(ours.exponent.numpy(), theirs.exponent.numpy())


def test_aliases_are_the_functions_themselves():
    pairs = [("absolute", "abs"), ("negative", "neg"), ("subtract", "sub"), ("multiply", "mul"), ("divide", "div"),
             ("true_divide", "div"), ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"),
             ("less_equal", "le"), ("not_equal", "ne"), ("igamma", "special.gammainc"),
             ("igammac", "special.gammaincc"), ("special.gammaln", "lgamma"), ("special.psi", "digamma"),
             ("special.digamma", "digamma"), ("special.multigammaln", "mvlgamma"), ("special.i0", "i0"),
             ("special.polygamma", "polygamma"), ("xlogy", "special.xlogy"), ("sinc", "special.sinc"),
             ("logit", "special.logit")]

    def resolve(path):
        target = zgrad
        for part in path.split("."):
            target = getattr(target, part)
        return target

    for alias, name in pairs:
        assert resolve(alias) is resolve(name), alias
    for alias, name in [("greater_", "gt_"), ("greater_equal_", "ge_"), ("less_", "lt_"), ("less_equal_", "le_"),
                        ("not_equal_", "ne_"), ("absolute", "abs"), ("true_divide", "div")]:
        assert getattr(zgrad.Tensor, alias) is getattr(zgrad.Tensor, name), alias


@pytest.mark.torch
def test_top_level_in_place_functions_are_torch_s_and_write_their_input():
    require_torch()
    names = zgrad.inplace_functions.__all__
    assert all(getattr(zgrad, name).__name__ == name for name in names)
    assert all(callable(getattr(torch, name, None)) for name in names)
    missing = sorted(n for n in dir(torch) if n.endswith("_") and not n.startswith("_") and callable(getattr(torch, n))
                     and hasattr(zgrad.Tensor, n) and not hasattr(zgrad, n))
    assert not missing, f"torch has top-level in-place functions zgrad's Tensor has methods for: {missing}"
    x = zgrad.tensor([-1.0, 0.5, 2.0])
    assert zgrad.clamp_(x, 0, 1) is x and x.tolist() == [0.0, 0.5, 1.0]
    assert zgrad.exp_(x) is x


# --- CUDA (Numba's simulator here) against the CPU --------------------------------------------------

EDGES = [0.0, -0.0, -1.0, -2.0, -2.5, 0.5, 1.0, 1e-30, 7.5, 31.0, -31.0, 100.0, np.inf, -np.inf, np.nan]
UNARY_KERNELS = ["lgamma", "digamma", "trigamma", "i0", "i0e", "i1", "i1e", "erfcx", "frexp_mantissa",
                 "frexp_exponent"]
BINARY_KERNELS = ["zeta", "igamma", "igammac", "igamma_derivative", "nextafter", "fmax", "fmin"]


def _on_cuda(fn, *arrays):
    with strict_cuda():
        result = fn(*(zgrad.tensor(a) for a in arrays))
        assert result.device.type == "cuda"
        return result._host()


def _assert_close(cuda, cpu, dtype, atol=0.0):
    np.testing.assert_allclose(cuda, cpu, rtol=2e-5 if dtype == np.float32 else 1e-12, atol=atol, equal_nan=True)


@requires_cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", UNARY_KERNELS)
def test_unary_kernels_on_cuda_match_cpu(name, dtype):
    values = np.array(EDGES + list(np.linspace(-12.3, 12.3, 9)), dtype)
    cpu = zgrad.kernels.dispatch_math.unary_math(name, values)
    cuda = _on_cuda(lambda t: zgrad.Tensor(zgrad.kernels.dispatch_math.unary_math(name, t._data)), values)
    _assert_close(cuda, cpu, dtype)


@requires_cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", BINARY_KERNELS)
def test_binary_kernels_on_cuda_match_cpu(name, dtype):
    values = np.array([0.0, -1.0, 0.5, 1.0, 2.0, 3.5, 40.0, np.inf, np.nan], dtype)
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    cpu = zgrad.kernels.dispatch_math.binary_math(name, a, b)
    cuda = _on_cuda(lambda x, y: zgrad.Tensor(zgrad.kernels.dispatch_math.binary_math(name, x._data, y._data)), a, b)
    _assert_close(cuda, cpu, dtype)


@requires_cuda
@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_integer_kernels_on_cuda_match_cpu(name):
    values = np.array([0, -12, 8, 18, 7, -1], np.int64)
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    cuda = _on_cuda(lambda x, y: getattr(zgrad, name)(x, y), a, b)
    np.testing.assert_array_equal(cuda, getattr(zgrad, name)(zgrad.tensor(a), zgrad.tensor(b)).numpy())


@requires_cuda
@pytest.mark.parametrize("op", [c for c in CASES if c.values[0].name in ("lgamma", "polygamma3", "i1e", "log_ndtr",
                                                                          "gammainc", "fmax_fmin", "frexp")])
def test_cuda_matches_cpu(op):
    check_device(op.fn, op.shapes, domain=op.domain)


POLYNOMIALS = [name for name in zgrad.special.__all__ if "polynomial" in name]


@requires_cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_orthogonal_polynomials_on_cuda_match_cpu(name, dtype):
    x, n = (v.ravel() for v in np.meshgrid(np.array([0.0, 0.3, -0.7, 1.0, -1.0, 2.5, np.inf, np.nan], dtype),
                                            np.array([-1, 0, 1, 2, 5, 7, 9, 12], dtype)))
    fn = getattr(zgrad.special, name)
    cpu = fn(zgrad.tensor(x), zgrad.tensor(n)).numpy()
    # float32 CUDA computes in float32, the CPU in float64: near a polynomial's zeros the two differ
    # by float32's rounding of the terms, not of the (small) result
    _assert_close(_on_cuda(fn, x, n), cpu, dtype, atol=1e-5 if dtype == np.float32 else 1e-13)


@pytest.mark.torch
def test_orthogonal_polynomials_are_not_differentiable_as_torch():
    require_torch()
    for lib in (zgrad, torch):
        x = lib.tensor([0.3, 0.5], requires_grad=True)
        assert not lib.special.legendre_polynomial_p(x, 3).requires_grad


@requires_cuda
@pytest.mark.parametrize("name", ["modified_bessel_i0", "modified_bessel_i1", "spherical_bessel_j0"])
def test_undifferentiated_bessel_functions_on_cuda_match_cpu(name):
    values = np.array(EDGES, np.float64)
    fn = getattr(zgrad.special, name)
    _assert_close(_on_cuda(fn, values), fn(zgrad.tensor(values)).numpy(), np.float64)


# mpmath keeps every digit it works with, so 20 give the double nearest each value (as 40 do, in a
# quarter of the time: its Bessel series slow down with the working precision).
MPMATH_DIGITS = 20
WIDE = np.concatenate([np.linspace(-60.0, 60.0, 241), [1e-6, -1e-3, 24.99, 25.01, 1e3, 1e5, 1e10]])


@pytest.mark.parametrize("order", [0, 1])
def test_bessel_j_matches_mpmath(order):
    mpmath = pytest.importorskip("mpmath")
    got = getattr(zgrad.special, f"bessel_j{order}")(zgrad.tensor(WIDE)).numpy()
    with mpmath.workdps(MPMATH_DIGITS):
        expected = [float(mpmath.besselj(order, v)) for v in WIDE]
    np.testing.assert_allclose(got, expected, rtol=0, atol=5e-16)


@pytest.mark.parametrize("order", [0, 1])
def test_bessel_y_matches_mpmath(order):
    mpmath = pytest.importorskip("mpmath")
    positive = np.concatenate([np.linspace(0.01, 60.0, 240), [1e-6, 1e-3, 24.99, 25.01, 1e3, 1e5, 1e10]])
    got = getattr(zgrad.special, f"bessel_y{order}")(zgrad.tensor(positive)).numpy()
    with mpmath.workdps(MPMATH_DIGITS):
        expected = np.array([float(mpmath.bessely(order, v)) for v in positive])
    np.testing.assert_allclose(got, expected, rtol=5e-16, atol=5e-16)


@pytest.mark.torch
@pytest.mark.parametrize("order", [0, 1])
def test_bessel_j_matches_torch_over_a_wide_range(order):
    require_torch()
    name = f"bessel_j{order}"
    got = getattr(zgrad.special, name)(zgrad.tensor(WIDE)).numpy()
    expected = getattr(torch.special, name)(torch.from_numpy(WIDE)).numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=5e-7)  # torch's own error reaches 1.6e-7 (J0(5.5))


@requires_cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"])
def test_bessel_on_cuda_matches_cpu(name, dtype):
    values = np.concatenate([EDGES, np.linspace(-40.0, 40.0, 17)]).astype(dtype)
    fn = getattr(zgrad.special, name)
    _assert_close(_on_cuda(fn, values), fn(zgrad.tensor(values)).numpy(), dtype, atol=2e-6 if dtype == np.float32 else 0)


@pytest.mark.parametrize("order", [0, 1])
def test_bessel_k_matches_mpmath(order):
    """K and its scaled form exp(x) K, from one set of reference values."""
    mpmath = pytest.importorskip("mpmath")
    positive = np.concatenate([np.linspace(0.01, 60.0, 240), [1e-6, 1e-3, 1.999, 2.001, 100.0, 700.0, 1e5]])
    with mpmath.workdps(MPMATH_DIGITS):
        reference = [mpmath.besselk(order, v) for v in positive]
        expected = {"": [float(k) for k in reference],
                    "scaled_": [float(k * mpmath.exp(v)) for k, v in zip(reference, positive)]}
    for prefix, values in expected.items():
        got = getattr(zgrad.special, f"{prefix}modified_bessel_k{order}")(zgrad.tensor(positive)).numpy()
        np.testing.assert_allclose(got, values, rtol=1e-14, atol=0, err_msg=f"{prefix}modified_bessel_k{order}")


@requires_cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", ["modified_bessel_k0", "scaled_modified_bessel_k1"])
def test_bessel_k_on_cuda_matches_cpu(name, dtype):
    values = np.concatenate([EDGES, np.linspace(0.1, 40.0, 17)]).astype(dtype)
    fn = getattr(zgrad.special, name)
    _assert_close(_on_cuda(fn, values), fn(zgrad.tensor(values)).numpy(), dtype, atol=1e-30)

"""``zgrad.special``: PyTorch's ``torch.special`` functions, under torch.special's names and
signatures.

Most are the functions of ``zgrad`` under another name (``expit`` is ``sigmoid``, ``gammaln``
is ``lgamma``, ``psi`` is ``digamma``, ``multigammaln`` is ``mvlgamma``), or the special
functions of :mod:`zgrad.ops.special_unary` and :mod:`zgrad.ops.special_binary` (``i0e``,
``i1``, ``i1e``, ``erfcx``, ``log_ndtr``, ``zeta``, ``gammainc``, ``gammaincc``); the rest
(``logit``, ``ndtr``, ``ndtri``, ``sinc``, ``entr``, ``xlogy``, ``xlog1py``) are compositions of
them, so they run on every backend and are differentiable through their parts; the orthogonal
polynomials (``chebyshev_polynomial_t`` ... ``legendre_polynomial_p``) are those of
:mod:`zgrad.ops.orthogonal_polynomials`. All but ``softmax`` and ``log_softmax`` take ``out=``,
as in PyTorch (:mod:`zgrad.ops.out_argument`). Not here yet: ``airy_ai``."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from zgrad import ops
from zgrad.creation import tensor
from zgrad.kernels.promotion import get_default_dtype, is_floating, opmath_dtype, result_type
from zgrad.ops._args import operand, refuse_dtype, tensor_arg
from zgrad.ops.orthogonal_polynomials import (
    chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v, chebyshev_polynomial_w,
    hermite_polynomial_h, hermite_polynomial_he, laguerre_polynomial_l, legendre_polynomial_p,
    shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u, shifted_chebyshev_polynomial_v,
    shifted_chebyshev_polynomial_w,
)
from zgrad.ops.out_argument import accepts_out
from zgrad.ops.special_binary import gammainc, gammaincc, zeta
from zgrad.ops.special_unary import (
    bessel_j0, bessel_j1, bessel_y0, bessel_y1, digamma, erfcx, i0, i0e, i1, i1e, lgamma, log_ndtr, modified_bessel_i0,
    modified_bessel_i1, modified_bessel_k0, modified_bessel_k1, mvlgamma, polygamma, scaled_modified_bessel_k0,
    scaled_modified_bessel_k1, spherical_bessel_j0,
)
from zgrad.tensor import Tensor

__all__ = [
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
    "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr",
    "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "xlog1py", "xlogy", "zeta",
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p", "modified_bessel_i0", "modified_bessel_i1", "spherical_bessel_j0", "bessel_j0",
    "bessel_j1",
    "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
]

erf = ops.erf
erfc = ops.erfc
erfinv = ops.erfinv
exp2 = ops.exp2
expm1 = ops.expm1
log1p = ops.log1p
logsumexp = ops.logsumexp
expit = ops.sigmoid
gammaln = lgamma
psi = digamma
multigammaln = mvlgamma

_SQRT_2 = math.sqrt(2.0)
_FLOAT64 = np.dtype(np.float64)


@accepts_out()
def round(input: Any, *, decimals: int = 0) -> Any:  # noqa: A001,A002 - torch.special's names
    """Each element rounded half to even at ``decimals`` places (see :func:`zgrad.round`).

    Raises:
        DTypeError: an integer tensor (torch.special.round has no integer kernel, unlike torch.round).
    """
    x = tensor_arg(input, "round")
    if x.dtype.kind in "iu":
        raise refuse_dtype("round_vml_cpu", x.dtype)
    return ops.round(x, decimals=decimals)


def softmax(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002 - torch's argument name
    """exp(x) / sum(exp(x)) along ``dim`` (required here, as in torch.special), in ``dtype`` if given."""
    return ops.softmax(input, dim, dtype=dtype)


def log_softmax(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002
    """log(softmax(x)) along ``dim`` (required), computed stably, in ``dtype`` if given."""
    return ops.log_softmax(input, dim, dtype=dtype)


def _composed(name: str, compute: Callable[[Tensor], Tensor], input: Any, work: Any = None) -> Tensor:  # noqa: A002
    """compute(x) for a function PyTorch has one kernel for: bool and integer tensors become the
    default float dtype (as PyTorch's floating functions do), the parts run in ``work`` (float32
    for float16 and bfloat16 unless given) and the result is rounded to the input's floating dtype
    once, at the end."""
    x = tensor_arg(input, name)
    dtype = x.dtype if is_floating(x.dtype) else get_default_dtype()
    work = opmath_dtype(dtype) if work is None else work
    return compute(x.to(work)).to(dtype)


@accepts_out()
def logit(input: Any, eps: float | None = None) -> Any:  # noqa: A002
    """log(p / (1 - p)) of each element, ``p`` first clamped into [eps, 1 - eps] when ``eps`` is
    given (the gradient is then 0 outside that interval); integers give the default float dtype."""
    def compute(x: Tensor) -> Tensor:
        p = x if eps is None else ops.clamp(x, eps, 1 - eps)
        return ops.log(ops.div(p, ops.sub(1, p)))
    return _composed("logit", compute, input)


@accepts_out()
def ndtr(input: Any) -> Any:  # noqa: A002
    """The standard normal distribution's CDF at each element: (1 + erf(x / sqrt(2))) / 2, written
    with erfc so that the lower tail keeps its precision."""
    return _composed("ndtr", lambda x: ops.mul(ops.erfc(ops.div(ops.neg(x), _SQRT_2)), 0.5), input)


@accepts_out()
def ndtri(input: Any) -> Any:  # noqa: A002
    """The inverse of :func:`ndtr`: sqrt(2) * erfinv(2p - 1); -inf at 0, inf at 1, NaN outside
    [0, 1]. Computed in float64, where ``2p - 1`` loses little of a float32 ``p`` near 0. Known
    gap: float64 ``p`` below about 1e-8 (or within it of 1) loses digits to that cancellation
    (relative error up to 1e-9 at 1e-6; -inf below about 1e-17, where PyTorch's is finite).

    Raises:
        DTypeError: a float16 or bfloat16 tensor (PyTorch has no kernel for them).
    """
    x = tensor_arg(input, "ndtri")
    if is_floating(x.dtype) and opmath_dtype(x.dtype) != x.dtype:
        raise refuse_dtype("ndtri_cpu", x.dtype)
    return _composed("ndtri", lambda p: ops.mul(ops.erfinv(ops.sub(ops.mul(p, 2), 1)), _SQRT_2), x, _FLOAT64)


@accepts_out()
def sinc(input: Any) -> Any:  # noqa: A002
    """The normalized sinc, sin(pi x) / (pi x), 1 (with gradient 0) at 0."""
    def compute(x: Tensor) -> Tensor:
        zero = ops.eq(x, 0)
        scaled = ops.mul(ops.where(zero, 1, x), math.pi)
        return ops.where(zero, 1, ops.div(ops.sin(scaled), scaled))
    return _composed("sinc", compute, input)


@accepts_out()
def entr(input: Any) -> Any:  # noqa: A002
    """The elementwise entropy: -x log(x) for x > 0, 0 at 0, -inf for x < 0 (NaN stays NaN).
    Known gap: the gradient at 0 is 0 where PyTorch's is inf."""
    def compute(x: Tensor) -> Tensor:
        safe = ops.where(ops.gt(x, 0), x, 1)
        return ops.where(ops.lt(x, 0), -math.inf, ops.sub(0, ops.mul(x, ops.log(safe))))
    return _composed("entr", compute, input)


def _times_log(log: Any, neutral: float, name: str, input: Any, other: Any) -> Any:  # noqa: A002
    """input * log(other), 0 where input is 0 and other is not NaN, in the floating type of the
    promoted operands (a number promotes as in arithmetic, and keeps its precision); ``neutral``
    is where ``log`` is 0, put in other's place there so that neither value nor gradient meets log(0)."""
    x, y = operand(input), operand(other)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        raise TypeError(f"special_{name}() expects a Tensor as input or other; got {type(x).__name__} and "
                        f"{type(y).__name__}")
    promoted = result_type(x, y)
    dtype = promoted if is_floating(promoted) else get_default_dtype()
    device = (x if isinstance(x, Tensor) else y).device
    x, y = (v.to(opmath_dtype(dtype)) if isinstance(v, Tensor) else tensor(v, opmath_dtype(dtype), device=device)
            for v in (x, y))
    vanishes = ops.logical_and(ops.eq(x, 0), ops.eq(y, y))
    return ops.mul(x, log(ops.where(vanishes, neutral, y))).to(dtype)


@accepts_out()
def xlogy(input: Any, other: Any) -> Any:  # noqa: A002
    """input * log(other), 0 where input is 0 (unless other is NaN); either may be a number.

    Raises:
        TypeError: neither ``input`` nor ``other`` is a tensor.
    """
    return _times_log(ops.log, 1, "xlogy", input, other)


@accepts_out()
def xlog1py(input: Any, other: Any) -> Any:  # noqa: A002
    """input * log1p(other), 0 where input is 0 (unless other is NaN); either may be a number.

    Raises:
        TypeError: neither ``input`` nor ``other`` is a tensor.
    """
    return _times_log(ops.log1p, 0, "xlog1py", input, other)

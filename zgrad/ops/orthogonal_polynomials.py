"""The classical orthogonal polynomials of ``torch.special``: ``chebyshev_polynomial_t/u/v/w``,
their shifted forms (of 2x - 1), ``hermite_polynomial_h/he``, ``laguerre_polynomial_l`` and
``legendre_polynomial_p``, each ``f(input, n)`` with a tensor or a number on either side. Not
differentiable, as in PyTorch (their results do not require grad). One factory makes them all.
"""

from __future__ import annotations

from typing import Any, Callable

from zgrad.kernels import dispatch_math
from zgrad.ops._args import operand
from zgrad.ops.out_argument import accepts_out
from zgrad.tensor import Tensor

__all__ = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p",
]


def _polynomial(name: str, shifted: bool = False) -> Callable[..., Any]:
    """torch.special's ``name`` (``shifted_`` + name where ``shifted``): the polynomial of degree
    ``n`` (truncated to an integer; 0 for a negative one) at ``input``."""
    public = f"shifted_{name}" if shifted else name
    where = "2 input - 1" if shifted else "input"

    def polynomial(input: Any, n: Any) -> Any:  # noqa: A002 - torch's argument name
        x, degree = operand(input), operand(n)
        if not isinstance(x, Tensor) and not isinstance(degree, Tensor):
            raise TypeError(f"{public}() expects a Tensor as input or n; got {type(x).__name__} and "
                            f"{type(degree).__name__}")
        return Tensor(dispatch_math.orthogonal_polynomial(
            name, *(v._data if isinstance(v, Tensor) else v for v in (x, degree)), shifted))

    polynomial.__name__ = polynomial.__qualname__ = public
    polynomial.__doc__ = (f"torch.special.{public}: the polynomial of degree ``n`` (a tensor or a number, truncated "
                          f"to an integer; 0 for a negative degree) at {where}, element-wise and broadcast, in the "
                          f"floating dtype the two promote to; not differentiable.\n\n    Raises:\n        "
                          f"DTypeError: float16 or bfloat16. TypeError: neither argument is a tensor.\n    ")
    return accepts_out()(polynomial)


chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t")
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u")
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v")
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w")
shifted_chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t", shifted=True)
shifted_chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u", shifted=True)
shifted_chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v", shifted=True)
shifted_chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w", shifted=True)
hermite_polynomial_h = _polynomial("hermite_polynomial_h")
hermite_polynomial_he = _polynomial("hermite_polynomial_he")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l")
legendre_polynomial_p = _polynomial("legendre_polynomial_p")

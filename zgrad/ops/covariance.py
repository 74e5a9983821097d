"""``cov`` and ``corrcoef``: the covariance and correlation matrices of the variables in the rows
of a matrix, composed of differentiable ops (so their gradients and CUDA forms come from those).
"""

from __future__ import annotations

import warnings
from typing import Any

from zgrad.kernels import dispatch
from zgrad.kernels.promotion import get_default_dtype, is_floating
from zgrad.ops._args import tensor_arg
from zgrad.ops.elementwise import clamp, sqrt
from zgrad.ops.functions import cast, div, mul, sub, transpose
from zgrad.ops.products import mm
from zgrad.ops.reduce import mean, sum
from zgrad.ops.shape import squeeze, unsqueeze
from zgrad.ops.triangular import diag
from zgrad.tensor import Tensor
from zgrad.warning_location import user_stacklevel

__all__ = ["cov", "corrcoef"]

DEGREES_OF_FREEDOM_WARNING = ("cov(): degrees of freedom is <= 0. Correction should be strictly less than the "
                              "number of observations.")


def _weights(weights: Any, observations: int, name: str, floating: bool) -> Tensor:
    """``weights`` checked as PyTorch checks ``fweights`` (integers) and ``aweights`` (floats).

    Raises:
        RuntimeError: a weight tensor of more than one dimension, of another length than the
            observations, of the wrong kind of dtype, or with a negative weight (PyTorch's messages).
    """
    w = tensor_arg(weights, "cov", name)
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with {w.ndim} "
                           "dimensions")
    if w.numel() != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input "
                           f"but got {w.numel()} != {observations}")
    if floating and not is_floating(w.dtype):
        raise RuntimeError(f"cov(): expected {name} to have floating point dtype but got {name} with "
                           f"{dispatch.scalar_type_name(w.dtype)} dtype")
    if not floating and w.dtype.kind not in "iu":
        raise RuntimeError(f"cov(): expected {name} to have integral dtype but got {name} with "
                           f"{dispatch.scalar_type_name(w.dtype)} dtype")
    if w.numel() and float(w.min().item()) < 0:
        raise RuntimeError(f"cov(): {name} cannot be negative")
    return w


def cov(input: Any, *, correction: int = 1, fweights: Any = None, aweights: Any = None) -> Tensor:  # noqa: A002
    """The covariance matrix of the variables in the rows of ``input`` (a 1-d input is one
    variable: the result is 0-d), observations in the columns, optionally weighted by integer
    frequency weights ``fweights`` and float observation weights ``aweights``; ``correction`` 1
    gives the unbiased estimate, 0 the maximum likelihood one. Non-floating input is computed in
    the default dtype.

    Raises:
        RuntimeError: ``input`` of more than two dimensions, or bad weights (PyTorch's messages).
    Warns:
        UserWarning: no degrees of freedom left (the result is then inf or nan, as PyTorch's).
    """
    x = tensor_arg(input, "cov")
    if x.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with {x.ndim} "
                           "dimensions")
    if not is_floating(x.dtype):
        x = cast(x, get_default_dtype())
    if x.ndim < 2:
        x = x.reshape((1, -1))
    observations = x.shape[1]
    w = None if fweights is None else _weights(fweights, observations, "fweights", False)
    a = None if aweights is None else _weights(aweights, observations, "aweights", True)
    if a is not None:
        w = a if w is None else mul(w, a)
    if w is None:
        total = float(observations)
        average = mean(x, 1)
        norm = total - correction
    else:
        total = sum(w)
        average = div(sum(mul(x, w), 1), total)
        if correction != 0 and a is not None:
            norm = sub(total, mul(div(sum(mul(w, a)), total), correction))
        else:
            norm = sub(total, correction)
    if float(norm.item() if isinstance(norm, Tensor) else norm) <= 0:
        warnings.warn(DEGREES_OF_FREEDOM_WARNING, stacklevel=user_stacklevel())
        norm = mul(norm, 0) if isinstance(norm, Tensor) else 0.0
    centred = sub(x, unsqueeze(average, 1))
    weighted = centred if w is None else mul(centred, w)
    return squeeze(div(mm(centred, transpose(weighted, 0, 1)), norm))


def corrcoef(input: Any) -> Tensor:  # noqa: A002
    """The Pearson correlation coefficients of the variables in the rows of ``input`` (see
    :func:`cov`), clipped to [-1, 1].

    Raises:
        RuntimeError: ``input`` of more than two dimensions (PyTorch's message).
    """
    c = cov(input)
    if c.ndim == 0:
        return div(c, c)
    stddev = sqrt(diag(c))
    c = div(div(c, unsqueeze(stddev, 1)), unsqueeze(stddev, 0))
    return clamp(c, -1, 1)

"""Array helpers of the linear-algebra gradients (transposes, identities, diagonals, triangles),
composed of dispatch ops so that they run on the arrays' own backend."""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels import dispatch

__all__ = ["mT", "mm", "constant", "diag_embed", "diagonal", "tril", "symmetrize_lower"]


def mT(x: Any) -> Any:
    """The transpose of each matrix of a batch (a view)."""
    return x.swapaxes(-1, -2)


def mm(*arrays: Any) -> Any:
    """The product of a chain of (batches of) matrices, left to right."""
    result = arrays[0]
    for a in arrays[1:]:
        result = dispatch.matmul(result, a)
    return result


def constant(value: np.ndarray, like: Any) -> Any:
    """``value`` on ``like``'s device, in its dtype."""
    return dispatch.asarray(value.astype(like.dtype), None, dispatch.device_type_of(like))


def diag_embed(v: Any) -> Any:
    """The diagonal matrices whose diagonals are the last dimension of ``v``."""
    n = v.shape[-1]
    return dispatch.binary("mul", v.reshape(v.shape + (1,)), constant(np.eye(n), v))


def diagonal(x: Any) -> Any:
    """The diagonal of each square matrix of a batch, shape (..., n)."""
    return dispatch.reduce_sum(dispatch.binary("mul", x, constant(np.eye(x.shape[-1]), x)), -1)


def tril(x: Any, k: int = 0) -> Any:
    """``x`` with the elements above its ``k``-th diagonal zeroed."""
    return dispatch.binary("mul", x, constant(np.tri(x.shape[-2], x.shape[-1], k), x))


def symmetrize_lower(x: Any) -> Any:
    """The symmetric matrix whose lower triangle (diagonal included) is ``x``'s."""
    below = tril(x, -1)
    return dispatch.binary("add", dispatch.binary("add", below, mT(below)), diag_embed(diagonal(x)))

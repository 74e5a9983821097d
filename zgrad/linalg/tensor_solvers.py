"""``tensorinv`` and ``tensorsolve``: the inverse and the solve of a tensor seen as a square matrix
(its leading dimensions as rows, the others as columns), as ``torch.linalg``'s, composed of
``inv`` and ``solve`` on the reshaped tensor."""

from __future__ import annotations

import math
from typing import Any, Sequence

from zgrad.linalg.solvers import inv, solve
from zgrad.ops._args import tensor_arg
from zgrad.ops.functions import reshape
from zgrad.ops.layout import movedim

__all__ = ["tensorinv", "tensorsolve"]


def _check_square(shape: tuple[int, ...], ind: int, name: str) -> None:
    rows, columns = math.prod(shape[:ind]), math.prod(shape[ind:])
    if rows != columns:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[{name}:]) == "
                           f"prod(self.shape[:{name}]), but got {columns} != {rows}")


def tensorinv(A: Any, ind: int = 2) -> Any:  # noqa: N803 - PyTorch's names
    """X of shape ``A.shape[ind:] + A.shape[:ind]`` with tensordot(A, X, ind) the identity: the
    inverse of ``A`` seen as a (prod(shape[:ind]), prod(shape[ind:])) matrix.

    Raises:
        RuntimeError: ``ind`` not positive, or that matrix not square (PyTorch's messages).
        LinAlgError: it is singular.
    """
    a = tensor_arg(A, "linalg.tensorinv", "A")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    _check_square(tuple(a.shape), ind, "ind")
    rows = math.prod(a.shape[:ind])
    return reshape(inv(reshape(a, (rows, rows))), (*a.shape[ind:], *a.shape[:ind]))


def tensorsolve(A: Any, B: Any, dims: Sequence[int] | None = None) -> Any:  # noqa: N803
    """X with tensordot(A, X, X.ndim) = B: ``A``'s dimensions ``dims`` first moved to the end, then
    ``A`` seen as a (B.numel(), rest) matrix and solved; X has shape ``A.shape[B.ndim:]``.

    Raises:
        RuntimeError: that matrix not square (PyTorch's message). LinAlgError: it is singular.
    """
    a, b = tensor_arg(A, "linalg.tensorsolve", "A"), tensor_arg(B, "linalg.tensorsolve", "B")
    if dims is not None:
        dims = [d % a.ndim for d in dims]
        a = movedim(a, dims, list(range(a.ndim - len(dims), a.ndim)))
    _check_square(tuple(a.shape), b.ndim, "other.ndim")
    rows = math.prod(a.shape[:b.ndim])
    solution = solve(reshape(a, (rows, rows)), reshape(b, (rows,)))
    return reshape(solution, tuple(a.shape[b.ndim:]))

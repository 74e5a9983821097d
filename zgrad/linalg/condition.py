"""``cond``: the condition number of each matrix, as ``torch.linalg.cond``: from the singular
values for the 2-norms, else the norm of the matrix times the norm of its inverse (inf where the
matrix is singular)."""

from __future__ import annotations

import math
from typing import Any

from zgrad.linalg._checks import matrices, square_matrices
from zgrad.linalg.decompositions import svdvals
from zgrad.linalg.lu import inv_ex
from zgrad.linalg.norms import matrix_norm
from zgrad.ops.indexing import where

__all__ = ["cond"]

_INVERSE_NORMS = ("fro", "nuc", math.inf, -math.inf, 1, -1)


def cond(A: Any, p: Any = None) -> Any:  # noqa: N803 - PyTorch's names
    """The condition number of each matrix of ``A`` in the ``p``-norm: None or 2 (the default:
    largest over smallest singular value), -2 (smallest over largest), or 'fro', 'nuc', inf, -inf,
    1, -1 (square matrices: ||A|| ||A^-1||, inf for a singular one).

    Raises:
        RuntimeError: another ``p`` (PyTorch's message). ShapeError: a non-square matrix for the
            norms that need the inverse.
    """
    if p is None or p in (2, -2):
        values = svdvals(matrices(A, "linalg.cond"))
        largest, smallest = values[..., 0], values[..., -1]
        return smallest / largest if p == -2 else largest / smallest
    if p not in _INVERSE_NORMS:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    a = square_matrices(A, f"linalg.cond(ord={p})")
    inverse, info = inv_ex(a)
    number = matrix_norm(a, p) * matrix_norm(where(info.reshape(tuple(info.shape) + (1, 1)) > 0, 0.0, inverse), p)
    return where(info > 0, math.inf, number)

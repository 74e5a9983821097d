"""``CosineSimilarity`` and ``PairwiseDistance``, as PyTorch's."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.vector import cosine_similarity, pairwise_distance

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(Module):
    """The cosine similarity of two inputs along ``dim``; see :func:`zgrad.nn.functional.cosine_similarity`."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Any, x2: Any) -> Any:
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """||x1 - x2 + eps||_p over the last dimension; see :func:`zgrad.nn.functional.pairwise_distance`."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Any, x2: Any) -> Any:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

"""``LocalResponseNorm``: normalization across neighbouring channels, as
``torch.nn.LocalResponseNorm``, over :func:`zgrad.nn.functional.local_response_norm`."""

from __future__ import annotations

from typing import Any

from zgrad.nn.module import Module
from zgrad.ops.local_response_norm import local_response_norm

__all__ = ["LocalResponseNorm"]


class LocalResponseNorm(Module):
    """x / (k + alpha * mean of x ** 2 over ``size`` neighbouring channels) ** beta, over
    (N, C, ...) input."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"

"""``zgrad.nn.modules.sparse``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.sparse import Embedding, EmbeddingBag

__all__ = ["Embedding", "EmbeddingBag"]

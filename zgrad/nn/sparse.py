"""Embedding tables: ``Embedding`` and ``EmbeddingBag``, as PyTorch's."""

from __future__ import annotations

from typing import Any

from zgrad.creation import empty
from zgrad.engine.grad_mode import no_grad
from zgrad.nn import init
from zgrad.nn.module import Module, Parameter
from zgrad.ops.embedding import embedding, embedding_bag, normalize_padding_idx

__all__ = ["Embedding", "EmbeddingBag"]


def _table(num_embeddings: int, embedding_dim: int, weight: Any, device: Any, dtype: Any) -> tuple[Parameter, bool]:
    """The weight Parameter (given, or new and uninitialized) and whether it is new.

    Raises:
        ValueError: a given weight of another shape.
    """
    if weight is None:
        return Parameter(empty(num_embeddings, embedding_dim, dtype=dtype, device=device)), True
    if tuple(weight.shape) != (num_embeddings, embedding_dim):
        raise ValueError(f"Shape of weight does not match num_embeddings and embedding_dim: got {list(weight.shape)}, "
                         f"expected {[num_embeddings, embedding_dim]}")
    return (weight if isinstance(weight, Parameter) else Parameter(weight)), False


class _TableBase(Module):
    """The table and the lookup options Embedding and EmbeddingBag share."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None, max_norm: float | None,
                 norm_type: float, scale_grad_by_freq: bool, sparse: bool, _weight: Any, _freeze: bool, device: Any,
                 dtype: Any) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = normalize_padding_idx(padding_idx, num_embeddings)
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self.weight, fresh = _table(num_embeddings, embedding_dim, _weight, device, dtype)
        self.weight.requires_grad_(not _freeze)
        if fresh:
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the table from N(0, 1) and zero the padding row, as PyTorch."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        for name, default in (("padding_idx", None), ("max_norm", None), ("norm_type", 2),
                              ("scale_grad_by_freq", False), ("sparse", False)):
            if getattr(self, name) != default:
                text += f", {name}={getattr(self, name)}"
        return text

    @classmethod
    def _pretrained(cls, embeddings: Any, freeze: bool, **options: Any) -> Any:
        if embeddings.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        table = cls(rows, cols, _weight=embeddings, **options)
        table.weight.requires_grad_(not freeze)
        return table


class Embedding(_TableBase):
    """A lookup table: ``forward(input)`` maps integer indices of any shape to rows,
    input.shape + (embedding_dim,).

    ``padding_idx``'s row starts at zero and gets no gradient; ``max_norm`` renormalizes looked-up
    rows in place; ``scale_grad_by_freq`` divides each row's gradient by its count in the batch.
    The table starts as N(0, 1), as PyTorch's.

    Raises:
        IndexError: an index outside [0, num_embeddings), naming the layer ("Embedding(10, 3): index
            out of range in self: got index 12, valid indices are 0..9").
        NotImplementedError: ``sparse=True`` (zgrad has no sparse gradients).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Any = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                         _weight, _freeze, device, dtype)

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        try:
            return embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.sparse)
        except IndexError as error:  # the lookup's "index out of range in self", named by the layer
            error.args = (f"{self!r}: {error}",)
            raise

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True, padding_idx: int | None = None,
                        max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> "Embedding":
        """An Embedding over the given (num_embeddings, embedding_dim) table (frozen by default)."""
        return cls._pretrained(embeddings, freeze, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                               scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


class EmbeddingBag(_TableBase):
    """Sums, means or maxima of bags of embedding rows: ``forward(input, offsets=None,
    per_sample_weights=None)`` -> (num_bags, embedding_dim).

    Bags are the rows of a 2-D ``input``, or the slices of a 1-D ``input`` that ``offsets`` starts
    (with ``include_last_offset``, offsets ends with the end of the last bag). See
    :func:`zgrad.nn.functional.embedding_bag`.

    Raises:
        ValueError: a bad ``mode``, malformed offsets (PyTorch's messages).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: Any = None, include_last_offset: bool = False, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None) -> None:
        if mode not in ("sum", "mean", "max"):
            raise ValueError("mode has to be one of sum, mean or max")
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                         _weight, False, device, dtype)
        self.mode, self.include_last_offset = mode, include_last_offset

    def forward(self, input: Any, offsets: Any = None, per_sample_weights: Any = None) -> Any:  # noqa: A002
        try:
            return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                                 self.mode, self.sparse, per_sample_weights, self.include_last_offset,
                                 self.padding_idx)
        except IndexError as error:  # the lookup's "index out of range in self", named by the layer
            error.args = (f"{self!r}: {error}",)
            raise

    def extra_repr(self) -> str:
        return super().extra_repr() + f", mode={self.mode!r}" + (
            ", include_last_offset=True" if self.include_last_offset else "")

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> "EmbeddingBag":
        """An EmbeddingBag over the given (num_embeddings, embedding_dim) table (frozen by default)."""
        return cls._pretrained(embeddings, freeze, max_norm=max_norm, norm_type=norm_type,
                               scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                               include_last_offset=include_last_offset, padding_idx=padding_idx)

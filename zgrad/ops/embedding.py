"""Embedding lookups (``embedding``, ``embedding_bag``), with PyTorch's argument checks and errors.

Forward gathers rows (or reduces bags of rows) in one kernel; backward scatter-adds the gradient
rows into a zeroed table of the weight's shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.engine.grad_mode import no_grad
from zgrad.kernels import dispatch, dispatch_pointwise
from zgrad.kernels import dispatch_sequence as DS
from zgrad.ops._args import tensor_arg
from zgrad.ops.backward_ops import OnceDifferentiable, detached, linear_in_grad

__all__ = ["Embedding", "EmbeddingBag", "embedding", "embedding_bag", "normalize_padding_idx"]


class Embedding(Op):
    """out[...] = weight[indices[...]]; the padding row gets no gradient."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, weight, indices, padding_idx, scale_grad_by_freq):
        ctx.rows = weight.shape[0]
        ctx.padding_idx, ctx.scale_grad_by_freq = padding_idx, scale_grad_by_freq
        ctx.save_for_backward(indices)  # the caller's array: a later in-place change of it is caught
        return DS.embedding(weight, indices)

    @staticmethod
    def backward(ctx, grad):
        indices = detached(ctx.saved_tensors[0])

        def add_rows(g):
            return DS.embedding_backward(g, indices, ctx.rows, ctx.padding_idx, ctx.scale_grad_by_freq)

        if not on_graph(grad):
            return add_rows(grad), None, None, None
        if ctx.scale_grad_by_freq:
            return OnceDifferentiable.apply(add_rows(detached(grad)), "EmbeddingBackward (scale_grad_by_freq)",
                                            grad), None, None, None

        def read_rows(g):  # the adjoint: each position reads its row (the padding row passes nothing)
            rows = DS.embedding(g, indices)
            if ctx.padding_idx is None:
                return rows
            kept = dispatch_pointwise.compare("ne", indices, ctx.padding_idx)
            return dispatch.binary("mul", rows, dispatch.cast(kept, rows.dtype).reshape(*indices.shape, 1))

        return linear_in_grad(grad, add_rows, read_rows), None, None, None


class EmbeddingBag(Op):
    """Per bag, the sum, mean or max of its rows (sum mode: each times its per-sample weight)."""

    @staticmethod
    def forward(ctx, weight, indices, bounds, per_sample_weights, mode, padding_idx, scale_grad_by_freq):
        out, bag_size, max_indices = DS.embedding_bag(weight, indices, bounds, per_sample_weights, mode, padding_idx)
        ctx.args = (bounds, mode, padding_idx, scale_grad_by_freq, bag_size, max_indices)
        ctx.save_for_backward(weight, per_sample_weights, indices)
        return out

    @staticmethod
    def backward(ctx, grad):
        weight, per_sample_weights, indices = ctx.saved_tensors
        bounds, mode, padding_idx, scale_grad_by_freq, bag_size, max_indices = ctx.args
        grad_weight, grad_psw = DS.embedding_bag_backward(
            grad, weight, indices, bounds, per_sample_weights, mode, padding_idx, scale_grad_by_freq, bag_size,
            max_indices, ctx.needs_input_grad[0], ctx.needs_input_grad[3])
        return grad_weight, None, None, grad_psw, None, None, None


def normalize_padding_idx(padding_idx: int | None, num_embeddings: int) -> int | None:
    """``padding_idx`` in [0, num_embeddings) (negative counts from the end), or None.

    Raises:
        ValueError: out of range, with PyTorch's message.
    """
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"Padding_idx must be within num_embeddings (got padding_idx={padding_idx}, "
                         f"num_embeddings={num_embeddings})")
    return padding_idx % num_embeddings


def _check_weight(weight: Any, what: str) -> None:
    tensor_arg(weight, what)
    if weight.ndim != 2:
        raise ValueError(f"{what}: weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")


def _indices(input: Any, num_embeddings: int, what: str) -> np.ndarray:  # noqa: A002 - torch's name
    return DS.check_embedding_indices(tensor_arg(input, what)._data, num_embeddings)


def _renorm(weight: Any, indices: np.ndarray, max_norm: float | None, norm_type: float) -> None:
    if max_norm is not None:
        with no_grad():  # PyTorch's embedding_renorm_: an untracked in-place update of the table
            DS.embedding_renorm_(weight._data, indices, max_norm, norm_type)


def embedding(input: Any, weight: Any, padding_idx: int | None = None, max_norm: float | None = None,  # noqa: A002
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Any:
    """Rows of ``weight`` (num_embeddings, D) picked by the integer tensor ``input``: input.shape + (D,).

    ``padding_idx``'s row gets no gradient; with ``max_norm``, the looked-up rows whose
    ``norm_type``-norm exceeds it are first rescaled in place (as PyTorch does).

    Raises:
        IndexError: an index outside [0, num_embeddings) ("index out of range in self").
        TypeError: non-integer indices.
        ValueError: a weight that is not 2-D, a bad ``padding_idx``.
        NotImplementedError: ``sparse=True`` (zgrad has no sparse gradients).
    """
    _check_weight(weight, "embedding")
    if sparse:
        raise NotImplementedError("embedding: sparse=True is not supported (zgrad has no sparse gradients); "
                                  "use sparse=False")
    padding_idx = normalize_padding_idx(padding_idx, weight.shape[0])
    indices = _indices(input, weight.shape[0], "embedding")
    _renorm(weight, indices, max_norm, norm_type)
    return Embedding.apply(weight, indices, padding_idx, scale_grad_by_freq)


def _bag_bounds(input: Any, offsets: Any, include_last_offset: bool) -> tuple[np.ndarray, np.ndarray]:  # noqa: A002
    """(flat indices, bag bounds (num_bags + 1,)), checked as PyTorch does.

    With ``include_last_offset`` the last offset ends the last bag (PyTorch documents it as the
    input's length, the CSR convention; indices after it belong to no bag).
    """
    data = input._data
    if data.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets).__name__}")
        # Every row is a bag, include_last_offset or not (as PyTorch).
        bounds = np.arange(data.shape[0] + 1, dtype=np.int64) * data.shape[1]
        return data.reshape(-1), dispatch.to_device(bounds, dispatch.device_type_of(data))
    if data.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        offsets_array = dispatch.to_device(tensor_arg(offsets, "embedding_bag")._data, "cpu")  # checked on the host
        if offsets_array.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        if offsets_array.dtype.kind not in "iu":
            raise TypeError(f"embedding_bag: offsets must be an integer tensor, got {offsets_array.dtype}")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {data.ndim}")
    if include_last_offset and offsets_array.size < 1:
        raise ValueError("include_last_offset: number of offset should be at least 1")
    if offsets_array.size:
        if offsets_array[0] != 0:
            raise ValueError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                             f"position 0. However, got {int(offsets_array[0])}")
        if offsets_array[-1] > data.size:
            raise ValueError(f"offsets[-1] can not be greater than input's length {data.size}, "
                             f"but got {int(offsets_array[-1])}")
        if np.any(np.diff(offsets_array) < 0):
            raise ValueError(f"embedding_bag: offsets must be non-decreasing, got {offsets_array.tolist()}")
    bounds = offsets_array if include_last_offset else np.append(offsets_array, data.size)
    return data, dispatch.to_device(np.ascontiguousarray(bounds, dtype=np.int64), dispatch.device_type_of(data))


def embedding_bag(input: Any, weight: Any, offsets: Any = None, max_norm: float | None = None,  # noqa: A002
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Any = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Any:
    """Sums, means or maxima of bags of embedding rows, without materializing the rows: (num_bags, D).

    Bags are the rows of a 2-D ``input`` (B, N), or the slices of a 1-D ``input`` that ``offsets``
    starts (with ``include_last_offset``, offsets also holds the end of the last bag). Entries
    equal to ``padding_idx`` are skipped (a mean counts only the others); an empty bag gives zeros.
    ``per_sample_weights`` (input's shape, sum mode only) scales each row first.

    Raises:
        ValueError: malformed offsets or shapes, an unknown mode, as PyTorch's messages.
        IndexError: an index outside [0, num_embeddings).
        NotImplementedError: ``per_sample_weights`` outside sum mode, or ``sparse=True``.
    """
    _check_weight(weight, "embedding_bag")
    tensor_arg(input, "embedding_bag")
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, then "
                         f"it must have the same shape as the input ({list(input.shape)})")
    if mode not in DS.EMBEDDING_BAG_MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if sparse:
        raise NotImplementedError("embedding_bag: sparse=True is not supported (zgrad has no sparse gradients); "
                                  "use sparse=False")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}').")
    padding_idx = normalize_padding_idx(padding_idx, weight.shape[0])
    data, bounds = _bag_bounds(input, offsets, include_last_offset)
    indices = DS.check_embedding_indices(data, weight.shape[0])
    _renorm(weight, indices, max_norm, norm_type)
    if per_sample_weights is not None:
        tensor_arg(per_sample_weights, "embedding_bag")
        if per_sample_weights.dtype != weight.dtype:
            raise RuntimeError(f"embedding_bag: expected per_sample_weights of dtype {weight.dtype}, "
                               f"got {per_sample_weights.dtype}")
        if per_sample_weights.ndim == 2:
            per_sample_weights = per_sample_weights.reshape(-1)
    return EmbeddingBag.apply(weight, indices, bounds, per_sample_weights, mode, padding_idx, scale_grad_by_freq)

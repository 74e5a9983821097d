"""Self-attention's packed input projection split into per-head q, k and v, and back: the layout
step of :func:`zgrad.ops.multihead_attention.multi_head_attention_forward`, as one op each way.

The projection is (N, L, 3E) (a batch-first input, projected in its own memory order) or
(L, N, 3E); q, k and v come out as (N * heads, L, E / heads), contiguous, as the batched
products take them. Split, each of the three is one copy (a 4-D permutation of its third of the
projection); its gradient is three copies back into one projection-shaped array. Composed from
chunk, reshape and transpose instead, the same step copies four times forward (the heads of q, k
and v, and a batch-first input) and six times backward (the reshapes' gradients and the chunks'
concatenation).
"""

from __future__ import annotations

from typing import Any

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch
from zgrad.tensor import Tensor

__all__ = ["MergeHeads", "SplitHeads", "split_heads"]


def _head_views(projection: Any, heads: int, batch_major: bool) -> list[Any]:
    """The (N, heads, L, head_dim) views of q, k and v inside a (N, L, 3E) or (L, N, 3E) array."""
    first, second, width = projection.shape
    embed = width // 3
    order = (0, 2, 1, 3) if batch_major else (1, 2, 0, 3)
    return [projection[..., part * embed:(part + 1) * embed].reshape(first, second, heads, embed // heads)
            .transpose(order) for part in range(3)]


def _split(projection: Any, heads: int, batch_major: bool) -> tuple[Any, Any, Any]:
    return tuple(dispatch.contiguous(view).reshape(-1, *view.shape[2:])
                 for view in _head_views(projection, heads, batch_major))


def _merge(q: Any, k: Any, v: Any, heads: int, batch_major: bool) -> Any:
    total, length, head_dim = q.shape
    batch = total // heads
    shape = (batch, length) if batch_major else (length, batch)
    projection = dispatch.empty((*shape, 3 * heads * head_dim), q.dtype, dispatch.device_type_of(q))
    for view, part in zip(_head_views(projection, heads, batch_major), (q, k, v)):
        dispatch.copy_into(view, part.reshape(batch, heads, length, head_dim))
    return projection


class SplitHeads(Op):
    """(q, k, v) of a packed projection (see the module docstring); the gradient merges theirs."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, projection, heads, batch_major):
        ctx.heads, ctx.batch_major = heads, batch_major
        return _split(projection, heads, batch_major)

    @staticmethod
    def backward(ctx, dq, dk, dv):
        merged = (MergeHeads.apply(dq, dk, dv, ctx.heads, ctx.batch_major) if isinstance(dq, Tensor)
                  else _merge(dq, dk, dv, ctx.heads, ctx.batch_major))
        return merged, None, None


class MergeHeads(Op):
    """A packed projection from its (q, k, v): :class:`SplitHeads` inverted (its gradient)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, q, k, v, heads, batch_major):
        ctx.heads, ctx.batch_major = heads, batch_major
        return _merge(q, k, v, heads, batch_major)

    @staticmethod
    def backward(ctx, grad):
        parts = (SplitHeads.apply(grad, ctx.heads, ctx.batch_major) if isinstance(grad, Tensor)
                 else _split(grad, ctx.heads, ctx.batch_major))
        return (*parts, None, None)


def split_heads(projection: Tensor, heads: int, batch_major: bool) -> tuple[Tensor, Tensor, Tensor]:
    """q, k and v, each (N * ``heads``, L, head_dim), of a packed (N, L, 3E) projection when
    ``batch_major``, else (L, N, 3E)."""
    return SplitHeads.apply(projection, heads, batch_major)


"""Reductions and layout ops: sum, mean, reshape, permute, slicing, stack, cat."""

from __future__ import annotations

import numpy as np

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch as D


def _expand_reduced(grad, shape, axes, keepdim):
    """Broadcast a reduced gradient back to ``shape`` (a read-only view, no copy)."""
    if not keepdim:
        grad = grad.reshape(tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return np.broadcast_to(grad, shape)


def _axes(dim, ndim):
    return D._normalize_axes(dim, ndim)


class Sum(Op):
    @staticmethod
    def forward(ctx, x, dim, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, _axes(dim, x.ndim), keepdim
        return D.reduce_sum(x, ctx.axes, keepdim)

    @staticmethod
    def backward(ctx, grad):
        return _expand_reduced(grad, ctx.shape, ctx.axes, ctx.keepdim), None, None


class Mean(Op):
    @staticmethod
    def forward(ctx, x, dim, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, _axes(dim, x.ndim), keepdim
        count = int(np.prod([x.shape[a] for a in ctx.axes])) if x.ndim else 1
        ctx.scale = 1.0 / max(count, 1)
        total = D.reduce_sum(x, ctx.axes, keepdim, dtype=D.float_dtype(x.dtype))
        return D.binary("mul", total, ctx.scale)

    @staticmethod
    def backward(ctx, grad):
        return _expand_reduced(D.binary("mul", grad, ctx.scale), ctx.shape, ctx.axes, ctx.keepdim), None, None


class Reshape(Op):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        try:
            return x.reshape(shape)
        except ValueError:
            raise ValueError(f"shape {list(shape)} is invalid for input of size {x.size} (shape {list(x.shape)})") from None

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.shape), None


class Permute(Op):
    @staticmethod
    def forward(ctx, x, dims):
        if sorted(d % max(x.ndim, 1) for d in dims) != list(range(x.ndim)):
            raise ValueError(f"permute: dims {list(dims)} are not a permutation of the {x.ndim} dimensions")
        ctx.inverse = tuple(np.argsort([d % x.ndim for d in dims]))
        return x.transpose(dims)

    @staticmethod
    def backward(ctx, grad):
        return grad.transpose(ctx.inverse), None


class GetItem(Op):
    @staticmethod
    def forward(ctx, x, index):
        ctx.shape, ctx.dtype, ctx.index = x.shape, x.dtype, index
        out = x[index]
        # A full integer index gives a numpy scalar, not an array; tensors always hold arrays.
        return np.asarray(out) if isinstance(out, np.generic) else out

    @staticmethod
    def backward(ctx, grad):
        return D.slice_backward(grad, ctx.index, ctx.shape, ctx.dtype), None


class Stack(Op):
    @staticmethod
    def forward(ctx, dim, *xs):
        ctx.dim = dim % (xs[0].ndim + 1)
        return D.stack(xs, dim)

    @staticmethod
    def backward(ctx, grad):
        lead = (slice(None),) * ctx.dim
        return (None, *(grad[lead + (i,)] for i in range(grad.shape[ctx.dim])))


class Cat(Op):
    @staticmethod
    def forward(ctx, dim, *xs):
        out = D.concatenate(xs, dim)
        ctx.dim = dim % xs[0].ndim
        ctx.sizes = [x.shape[ctx.dim] for x in xs]
        return out

    @staticmethod
    def backward(ctx, grad):
        lead = (slice(None),) * ctx.dim
        parts, start = [], 0
        for size in ctx.sizes:
            parts.append(grad[lead + (slice(start, start + size),)])
            start += size
        return (None, *parts)

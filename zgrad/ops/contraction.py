"""Tensor contractions: ``einsum`` and ``tensordot``, reduced to one matrix product per pair of
operands (batch labels kept as broadcast batch dimensions, contracted labels flattened into the
inner dimension), so they run and differentiate wherever ``matmul`` does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch
from zgrad.ops._args import tensor_arg
from zgrad.ops.functions import matmul, mul, permute, reshape
from zgrad.ops.reduce import sum as _sum
from zgrad.tensor import Tensor
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out

__all__ = ["einsum", "tensordot"]

Labels = list[str]


def _sum_labels(x: Any, labels: Labels, drop: set[str], keepdim: bool = False) -> tuple[Any, Labels]:
    """``x`` summed over the dimensions whose labels are in ``drop``."""
    dims = tuple(i for i, label in enumerate(labels) if label in drop)
    if not dims:
        return x, labels
    return _sum(x, dims, keepdim), (labels if keepdim else [label for label in labels if label not in drop])


def _diagonal(x: Any, labels: Labels) -> tuple[Any, Labels]:
    """``x`` with each label that repeats reduced to one dimension (its diagonal, as ``"ii->i"``)."""
    while len(set(labels)) < len(labels):
        i = next(k for k, label in enumerate(labels) if labels.index(label) != k)
        j = labels.index(labels[i])
        n = x.shape[i]
        if x.shape[j] != n:
            raise ShapeError(f"einsum(): subscript {labels[i]} is repeated for operand but the sizes don't match, "
                             f"{x.shape[j]} != {n}")
        eye_shape = [1] * x.ndim
        eye_shape[i] = eye_shape[j] = n
        eye = dispatch.asarray(np.eye(n, dtype=x.dtype).reshape(eye_shape), None, dispatch.device_type_of(x._data))
        x = _sum(mul(x, Tensor(eye)), i, dtype=x.dtype)  # a diagonal keeps the dtype (a sum would not)
        labels = labels[:i] + labels[i + 1:]
    return x, labels


def _contract(a: Any, la: Labels, b: Any, lb: Labels, keep: set[str]) -> tuple[Any, Labels]:
    """Contract ``a`` (labels ``la``) with ``b`` (labels ``lb``): labels of both that are not in
    ``keep`` are summed; returns the product and its labels (batch, then a's, then b's)."""
    a, la = _sum_labels(a, la, set(la) - set(lb) - keep)
    b, lb = _sum_labels(b, lb, set(lb) - set(la) - keep)
    batch = [label for label in la if label in lb and label in keep]
    inner = [label for label in la if label in lb and label not in keep]
    for label in inner:  # a size-1 dimension broadcasts against the other operand's: sum that side first
        size_a, size_b = a.shape[la.index(label)], b.shape[lb.index(label)]
        if size_a != size_b and 1 in (size_a, size_b):
            if size_a == 1:
                b, _ = _sum_labels(b, lb, {label}, keepdim=True)
            else:
                a, _ = _sum_labels(a, la, {label}, keepdim=True)
    left = [label for label in la if label not in lb]
    right = [label for label in lb if label not in la]
    a_sizes, b_sizes = dict(zip(la, a.shape)), dict(zip(lb, b.shape))
    if not inner:  # nothing to sum: a broadcast product (an outer product, bool included, as PyTorch's)
        a_part = permute(a, [la.index(k) for k in batch + left])
        b_part = permute(b, [lb.index(k) for k in batch + right])
        a_part = reshape(a_part, a_part.shape + (1,) * len(right))
        b_part = reshape(b_part, b_part.shape[:len(batch)] + (1,) * len(left) + b_part.shape[len(batch):])
        return mul(a_part, b_part), batch + left + right
    inner_a, inner_b = math.prod(a_sizes[k] for k in inner), math.prod(b_sizes[k] for k in inner)
    if inner_a != inner_b:
        raise ShapeError(f"contracted dimensions need to match, but first has sizes {[a_sizes[k] for k in inner]} and "
                         f"second has sizes {[b_sizes[k] for k in inner]}")
    a3 = reshape(permute(a, [la.index(k) for k in batch + left + inner]),
                 tuple(a_sizes[k] for k in batch) + (math.prod(a_sizes[k] for k in left), inner_a))
    b3 = reshape(permute(b, [lb.index(k) for k in batch + inner + right]),
                 tuple(b_sizes[k] for k in batch) + (inner_b, math.prod(b_sizes[k] for k in right)))
    product = matmul(a3, b3)
    shape = product.shape[:len(batch)] + tuple(a_sizes[k] for k in left) + tuple(b_sizes[k] for k in right)
    return reshape(product, shape), batch + left + right


def _term_labels(term: str, ndim: int, ellipsis_count: int, position: str) -> Labels:
    """The labels of one subscript term: a letter each, '...' as the last dims of the shared
    ellipsis labels."""
    head, dots, tail = term.partition("...")
    for k, char in enumerate(head + tail):
        if not char.isalpha():
            raise ValueError(f"einsum(): invalid subscript given at index {k} in the equation string, subscripts must "
                             f"be in [a-zA-Z] ({position})")
    if not dots:
        if ndim != len(term):
            raise ShapeError(f"einsum(): the number of subscripts in the equation ({len(term)}) does not match the "
                             f"number of dimensions ({ndim}) for {position} and no ellipsis was given")
        return list(term)
    count = ndim - len(head) - len(tail)
    if count < 0:
        raise ShapeError(f"einsum(): the number of subscripts in the equation ({len(head) + len(tail)}) is more than "
                         f"the number of dimensions ({ndim}) for {position}")
    return list(head) + [f"...{k}" for k in range(ellipsis_count - count, ellipsis_count)] + list(tail)


@autocast_op()
def einsum(equation: str, *operands: Any) -> Any:
    """Sums of products of the operands' elements, as ``torch.einsum``: ``"ij,jk->ik"``, with
    ``...`` for broadcast dimensions, repeated subscripts for diagonals, and the implicit output
    (the ellipsis dimensions, then the subscripts that appear once, in alphabetical order) when
    there is no ``->``. Operands may also come as one list.

    Raises:
        ValueError: a malformed equation, or an operand count that does not match it.
        ShapeError: sizes of one subscript that differ and do not broadcast.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    tensors = [tensor_arg(x, "einsum") for x in operands]
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(tensors):
        which = "fewer" if len(tensors) < len(terms) else "more"
        raise ValueError(f"einsum(): {which} operands were provided than specified in the equation")
    ellipsis_count = max((t.ndim - len(term) + 3 for t, term in zip(tensors, terms) if "..." in term), default=0)
    inputs = [_diagonal(t, _term_labels(term, t.ndim, ellipsis_count, f"operand {k}"))
              for k, (t, term) in enumerate(zip(tensors, terms))]
    if arrow:
        output = _term_labels(rhs, len(rhs.replace("...", "")) + ellipsis_count, ellipsis_count, "the output")
        seen = {label for _, labels in inputs for label in labels}
        for label in output:
            if label not in seen:
                raise ValueError(f"einsum(): output subscript {label} does not appear in the equation for any input "
                                 "operand")
    else:
        letters = [c for c in lhs if c.isalpha()]
        output = [f"...{k}" for k in range(ellipsis_count)] + sorted(c for c in set(letters) if letters.count(c) == 1)
    result, labels = inputs[0]
    for k in range(1, len(inputs)):
        keep = set(output).union(*(set(lab) for _, lab in inputs[k + 1:]))
        result, labels = _contract(result, labels, *inputs[k], keep)
    result, labels = _sum_labels(result, labels, set(labels) - set(output))
    return result if labels == output else permute(result, [labels.index(label) for label in output])


@accepts_out("exact")
@autocast_op()
def tensordot(a: Any, b: Any, dims: Any = 2) -> Any:
    """The sum of products over the last ``dims`` dimensions of ``a`` and the first ``dims`` of
    ``b`` (an int), or over the dimension lists ``dims = (dims_a, dims_b)``; the result has a's
    free dimensions, then b's.

    Raises:
        ShapeError: contracted sizes differ.
        DTypeError: the dtypes differ (PyTorch's message; PyTorch promotes none in a product).
    """
    a, b = tensor_arg(a, "tensordot"), tensor_arg(b, "tensordot")
    if a.dtype != b.dtype:
        raise DTypeError(f"both inputs should have same dtype (got {a.dtype} and {b.dtype}: cast one to the other)")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise ValueError(f"tensordot expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise ValueError("both dimension lists should have same length")
    la, lb = [f"a{k}" for k in range(a.ndim)], [f"b{k}" for k in range(b.ndim)]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise ShapeError(f"contracted dimensions need to match, but first has size {a.shape[da]} in dim {da} and "
                             f"second has size {b.shape[db]} in dim {db}")
        lb[db] = la[da]
    free = set(la + lb) - {la[d] for d in dims_a}
    result, _ = _contract(a, la, b, lb, free)
    return result

"""The in-place methods of :class:`zgrad.Tensor`: ``add_``, ``mul_``, ``clamp_``, ``fill_``,
``scatter_``, ``-=`` and friends (the random fills, ``uniform_`` and its kin, are in
:mod:`zgrad.tensor_creation`, over :meth:`_overwrite`).

PyTorch's rules hold. An in-place change of a leaf that requires grad, or of a view of one, is an
error unless grad mode is off (``with zgrad.no_grad():``, as optimizers do). Where no graph is
recorded (grad mode off, or nothing involved requires grad) the kernel writes straight into the
tensor's memory. Otherwise the op is recorded: the out-of-place op runs on a snapshot of the old
value (what PyTorch's in-place derivatives keep as the original), its result is written into the
tensor's memory, and the tensor takes over the result's history, so gradients flow through the
in-place op as through the out-of-place one.

Every change counts one version of the memory (:mod:`zgrad.engine.versions`): a backward that
needs a value saved before the change refuses to run, with PyTorch's "modified by an inplace
operation" error, whether the change went through the tensor itself or through a view of it.

A change through a view reaches its base, as in PyTorch: ``y = x * 2; y[0].mul_(3)`` gives ``y``
the history "old ``y`` with the view's new value in its elements" (:mod:`zgrad.engine.view_history`),
and every view of ``y`` (the changed one included) takes its elements of that history the next
time it is used. A view of a leaf that requires grad is refused, and so is a view made with grad
mode off (PyTorch's rules).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from zgrad import ops
from zgrad.creation import as_tensor
from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.engine.versions import bump, leaf_owning
from zgrad.engine.view_history import WriteThroughView
from zgrad.errors import AutogradError, DTypeError, ShapeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_pointwise
from zgrad.kernels.memory_overlap import check_inplace
from zgrad.kernels.promotion import can_cast, is_floating, result_type
from zgrad.kernels.view_geometry import ViewGeometry, shares_allocation
from zgrad.ops import _args, elementwise, functions, indexing
from zgrad.ops.shape import Expand
from zgrad.tensor import NO_GRAD_VIEW_INPLACE_ERROR, Tensor, gradient_edge, refresh_view, tensor_methods

__all__ = ["TensorInplace", "LEAF_INPLACE_ERROR", "VIEW_OF_LEAF_INPLACE_ERROR"]

LEAF_INPLACE_ERROR = ("a leaf Variable that requires grad is being used in an in-place operation; "
                      "wrap the update in `with zgrad.no_grad():`")
VIEW_OF_LEAF_INPLACE_ERROR = ("a view of a leaf Variable that requires grad is being used in an in-place operation; "
                              "wrap the update in `with zgrad.no_grad():`, or clone() the view first")


def _array(x: Any) -> Any:
    return x._data if isinstance(x, Tensor) else x


def _replacing(old: Tensor, new: Tensor) -> Tensor:
    """``new`` recorded as what replaced ``old``: the gradient ``old`` gets is zero, not none
    (PyTorch's CopyBackwards and fills), so that every tensor upstream still receives one."""
    true = Tensor(dispatch.full((), True, np.bool_, dispatch.device_type_of(new._data)))
    return ops.where(true, new, old)


def _requires_grad(x: Any) -> bool:
    return isinstance(x, Tensor) and x.requires_grad  # the property: a view whose base changed takes its new history


@tensor_methods
class TensorInplace:
    """The in-place methods of :class:`zgrad.Tensor` (bound onto it; never instantiated)."""

    # --- the machinery --------------------------------------------------------------------------

    def _records(self, *others: Any) -> bool:
        """Whether an in-place op on self with ``others`` must be recorded in the graph.

        Raises:
            AutogradError: grad mode is on, and self is a leaf that requires grad, a view of one, or
                a view made with grad mode off of a tensor that requires grad.
        """
        if not is_grad_enabled():
            return False
        base = self._view_base
        if base is not None:
            if self._view_no_grad and base._requires_grad:
                raise AutogradError(NO_GRAD_VIEW_INPLACE_ERROR)
            refresh_view(self)
        if self._requires_grad and self.grad_fn is None:
            raise AutogradError(LEAF_INPLACE_ERROR)
        base_requires_grad = base is not None and base._requires_grad
        records = self._requires_grad or base_requires_grad or any(_requires_grad(o) for o in others)
        if records and ((base_requires_grad and base.grad_fn is None)
                        or (self.grad_fn is not None and leaf_owning(self._data) is not None)):
            raise AutogradError(VIEW_OF_LEAF_INPLACE_ERROR)
        return records

    def _check_shapes(self, arrays: list[Any]) -> None:
        """PyTorch's check that the operands broadcast to self's shape.

        Raises:
            ShapeError: a broadcast that would change self's shape.
        """
        shape = self.shape
        for a in arrays:
            other_shape = getattr(a, "shape", ())
            if other_shape != shape and dispatch.broadcast_shape(shape, other_shape) != shape:
                raise ShapeError(f"output with shape {list(shape)} doesn't match the broadcast shape "
                                 f"{list(dispatch.broadcast_shape(shape, other_shape))}")

    def _check_operands(self, *others: Any, true_division: bool = False) -> None:
        """PyTorch's checks of an in-place arithmetic op: the operands broadcast to self's shape,
        and the result type casts to self's dtype.

        Raises:
            ShapeError: a broadcast that would change self's shape. DTypeError: a result type self
                cannot hold.
        """
        arrays = [_array(o) for o in others]
        self._check_shapes(arrays)
        if is_floating(self.dtype) and not any(getattr(a, "dtype", None) is not None and a.dtype.kind == "c"
                                               for a in arrays):
            return  # every real operand casts to a floating tensor (the check costs more than the op on small tensors)
        result = result_type(self._data, *arrays)
        if true_division:
            result = dispatch.float_dtype(result)
        if not can_cast(result, self.dtype):
            raise DTypeError(f"result type {dispatch.scalar_type_name(result)} can't be cast to the desired output "
                             f"type {dispatch.scalar_type_name(self.dtype)}")

    def _inplace(self, write: Callable[[], Any], record: Callable[[Any], Any], *others: Any) -> Any:
        """Run ``write()`` on self's memory, or, when the op must be recorded, adopt ``record(old)``:
        the out-of-place result computed from a snapshot of self's old value."""
        if not self._records(*others):
            write()
            bump(self._data)
            return self
        old = Tensor(dispatch.cast(self._data, self.dtype), self._requires_grad, _grad_fn=self.grad_fn,
                     _output_nr=self._output_nr)
        result = record(old)
        if result.shape != self.shape:
            raise ShapeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(result.shape)}")
        dispatch_pointwise.write(self._data, result._data)
        bump(self._data)
        self.grad_fn, self._output_nr, self._requires_grad = result.grad_fn, result._output_nr, result._requires_grad
        if self._view_base is not None:
            self._write_through_base()
        return self

    def _write_through_base(self) -> None:
        """After an in-place change of this view, make its base's history the base's old value with
        the view's new one in the view's elements, and this view's history its elements of that."""
        base = self._view_base
        if not shares_allocation(self._data, base._data):  # the base's memory was replaced (``.data =``)
            self._view_base = None
            return
        old_base = gradient_edge(base) if base._requires_grad else None
        new_view = gradient_edge(self) if self._requires_grad else None
        if old_base is None and new_view is None:
            return
        node = WriteThroughView(ViewGeometry.of(self._data, base._data), old_base, new_view, base._data)
        base.grad_fn, base._output_nr, base._requires_grad = node, 0, True
        refresh_view(self)

    def _overwrite(self, fill: Callable[[Any], Any]) -> Any:
        """Set every element to what ``fill(array)`` writes; recorded (with a zero gradient to the
        old value) when self is part of the graph."""
        if not self._records():
            fill(self._data)
            bump(self._data)
            return self
        fresh = dispatch.empty(self.shape, self.dtype, dispatch.device_type_of(self._data))
        fill(fresh)
        return self._inplace(lambda: None, lambda old: _replacing(old, Tensor(fresh)))

    # --- fills and copies -----------------------------------------------------------------------

    def fill_(self, value: Any) -> Any:
        """Set every element to ``value`` (a number or a one-element tensor; differentiable with
        respect to a 0-d tensor)."""
        if isinstance(value, Tensor) and value.ndim == 0 and value.requires_grad and is_grad_enabled():
            return self.copy_(value)
        value = _args.scalar_arg(value, "fill_")
        return self._overwrite(lambda a: dispatch_pointwise.write(a, value))

    def zero_(self) -> Any:
        return self.fill_(0)

    def copy_(self, src: Any) -> Any:
        """Copy ``src`` (broadcast to self's shape, cast to self's dtype) into self; differentiable
        with respect to ``src``."""
        self._check_shapes([_array(src)])

        def record(old: Tensor) -> Tensor:
            source = src if isinstance(src, Tensor) else as_tensor(src, self.dtype, self.device)
            new = Expand.apply(source.to(device=self.device, dtype=self.dtype), self.shape)  # a node even for src of self's shape
            return _replacing(old, new) if old._requires_grad else new

        return self._inplace(lambda: dispatch_pointwise.write(self._data, _array(src)), record, src)

    def scatter_(self, dim: int, index: Any, src: Any = None, *, value: Any = None) -> Any:
        """self[..., index[..., j, ...], ...] = src[..., j, ...] along ``dim`` (or ``value`` everywhere
        ``index`` points); ``scatter_(dim, index, 2.0)`` passes a number as ``src``."""
        src = indexing.scatter_source(src, value)
        index_array = _args.index_arg(index, "scatter_")
        return self._inplace(
            lambda: dispatch_index.scatter(self._data, dim, index_array, _array(src)),
            lambda old: ops.scatter(old, dim, index, src), src)

    def masked_fill_(self, mask: Any, value: Any) -> Any:
        """Set the elements where ``mask`` (a bool tensor broadcast to self) is True to ``value``."""
        mask_array = indexing.mask_arg(mask, "masked_fill_")
        self._check_shapes([mask_array])
        return self._inplace(
            lambda: dispatch_index.masked_fill_(self._data, mask_array, _array(value)),
            lambda old: ops.masked_fill(old, mask, value), value)

    def __setitem__(self, index: Any, value: Any) -> None:
        """``x[index] = value`` (basic, integer-array or mask indexing; ``value`` a number or a
        tensor broadcast to ``x[index]``), differentiable with respect to ``x`` and ``value``."""
        key = _args.index_key(index)
        self._inplace(lambda: indexing.put(self._data, key, _array(value)),
                      lambda old: indexing.index_put(old, key, value), value)

    # --- arithmetic -----------------------------------------------------------------------------

    def _binary_(self, op: str, other: Any) -> Any:
        self._check_operands(other, true_division=op == "div")
        return self._inplace(lambda: dispatch_pointwise.inplace_binary(op, self._data, _array(other)),
                             lambda old: getattr(ops, op)(old, other), other)

    def add_(self, other: Any, *, alpha: float = 1) -> Any:
        """self += alpha * other (``alpha`` a number, or a one-element tensor read as one)."""
        alpha = _args.scalar_arg(alpha, "add_")
        if alpha == 1:
            return self._binary_("add", other)
        self._check_operands(other)
        return self._inplace(lambda: dispatch_pointwise.add_scaled_(self._data, _array(other), alpha),
                             lambda old: ops.add(old, ops.mul(other, alpha)), other)

    def sub_(self, other: Any, *, alpha: float = 1) -> Any:
        """self -= alpha * other (``alpha`` a number, or a one-element tensor read as one)."""
        functions.refuse_bool_subtraction(self, other)
        alpha = _args.scalar_arg(alpha, "sub_")
        return self._binary_("sub", other) if alpha == 1 else self.add_(other, alpha=-alpha)

    def mul_(self, other: Any) -> Any:
        return self._binary_("mul", other)

    def div_(self, other: Any, *, rounding_mode: str | None = None) -> Any:
        """self /= other, or self = div(self, other, rounding_mode=...) (see :func:`zgrad.div`)."""
        if rounding_mode is None:
            return self._binary_("div", other)
        self._check_operands(other)
        return self._inplace(
            lambda: dispatch_pointwise.write(self._data, ops.div(Tensor(self._data), other, rounding_mode=rounding_mode)._data),
            lambda old: ops.div(old, other, rounding_mode=rounding_mode), other)

    def addcmul_(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """self += value * tensor1 * tensor2 (``value`` a number, or a one-element tensor read as one)."""
        value = _args.scalar_arg(value, "addcmul_")
        self._check_operands(tensor1, tensor2)
        return self._inplace(
            lambda: dispatch_pointwise.addcmul_(self._data, _array(tensor1), _array(tensor2), value),
            lambda old: ops.add(old, ops.mul(ops.mul(tensor1, tensor2), value)), tensor1, tensor2)

    def addcdiv_(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """self += value * tensor1 / tensor2 (``value`` a number, or a one-element tensor read as one)."""
        value = _args.scalar_arg(value, "addcdiv_")
        self._check_operands(tensor1, tensor2, true_division=True)
        return self._inplace(
            lambda: dispatch_pointwise.addcdiv_(self._data, _array(tensor1), _array(tensor2), value),
            lambda old: ops.add(old, ops.mul(ops.div(tensor1, tensor2), value)), tensor1, tensor2)

    def clamp_(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's argument names
        """Clamp every element into [min, max] (numbers or tensors, as :func:`zgrad.clamp`) in place."""
        if elementwise.tensor_bounds(min, max, "clamp_"):
            bounds = [b for b in (min, max) if b is not None]
            self._check_operands(*bounds)
            check_inplace(self._data, *(b._data for b in bounds))
            return self._inplace(
                lambda: dispatch_pointwise.write(self._data, ops.clamp(Tensor(self._data), min, max)._data),
                lambda old: ops.clamp(old, min, max), *bounds)
        low, high = elementwise.clamp_bounds(min, max)
        return self._inplace(lambda: dispatch_pointwise.clamp(self._data, low, high, out=self._data),
                             lambda old: ops.clamp(old, low, high))

    clip_ = clamp_

    def renorm_(self, p: float, dim: int, maxnorm: float) -> Any:
        """Scale each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` down to it, in place."""
        return self._inplace(lambda: dispatch_pointwise.write(self._data, ops.renorm(self.detach(), p, dim, maxnorm)._data),
                             lambda old: ops.renorm(old, p, dim, maxnorm))

    def relu_(self) -> Any:
        """max(self, 0) in place (what ``nn.ReLU(inplace=True)`` runs)."""
        functions.refuse_bool_relu(self)
        return self._inplace(lambda: dispatch_pointwise.unary_inplace("relu", self._data),
                             lambda old: ops.relu(old))

    def _product_(self, op: Any, *factors: Any, beta: float, alpha: float) -> Any:
        """self = op(self, *factors, beta=beta, alpha=alpha) (a scaled product added to self)."""
        def write() -> None:
            result = op(self.detach(), *factors, beta=beta, alpha=alpha)
            self._check_shapes([result._data])
            dispatch_pointwise.write(self._data, result._data)

        return self._inplace(write, lambda old: op(old, *factors, beta=beta, alpha=alpha), *factors)

    def addmm_(self, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """self = beta * self + alpha * (mat1 @ mat2), in place."""
        return self._product_(ops.addmm, mat1, mat2, beta=beta, alpha=alpha)

    def baddbmm_(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """self = beta * self + alpha * bmm(batch1, batch2), in place."""
        return self._product_(ops.baddbmm, batch1, batch2, beta=beta, alpha=alpha)

    def addbmm_(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """self = beta * self + alpha * (the batch sum of bmm(batch1, batch2)), in place."""
        return self._product_(ops.addbmm, batch1, batch2, beta=beta, alpha=alpha)

    def addmv_(self, mat: Any, vec: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """self = beta * self + alpha * (mat @ vec), in place."""
        return self._product_(ops.addmv, mat, vec, beta=beta, alpha=alpha)

    def addr_(self, vec1: Any, vec2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """self = beta * self + alpha * outer(vec1, vec2), in place."""
        return self._product_(ops.addr, vec1, vec2, beta=beta, alpha=alpha)

    def __iadd__(self, other: Any) -> Any:
        return self.add_(other)

    def __isub__(self, other: Any) -> Any:
        return self.sub_(other)

    def __imul__(self, other: Any) -> Any:
        return self.mul_(other)

    def __itruediv__(self, other: Any) -> Any:
        return self.div_(other)

    # --- history --------------------------------------------------------------------------------

    def detach_(self) -> Any:
        """Make this tensor a leaf that does not require grad (its memory is untouched)."""
        self.grad_fn, self._output_nr, self._requires_grad = None, 0, False
        return self

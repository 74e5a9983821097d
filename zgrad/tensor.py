"""``zgrad.Tensor``: an n-d array with autograd.

A tensor wraps an array (a numpy array on CPU) and, when it requires grad, either is a leaf
(gradients accumulate into ``.grad``) or has a ``grad_fn``: the backward node of the op that made
it. Tensors hash by identity, so they can be dictionary keys (``get_gradients`` relies on it).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from zgrad.device import CPU, Device, as_device
from zgrad.autograd.function import gradient_edge
from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.engine.graph import AccumulateGrad
from zgrad.engine.graph_task import run_backward
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch

__all__ = ["Tensor", "RemovableHandle"]


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks = hooks
        self._hook = hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


class Tensor:
    """An n-d array that can record the operations applied to it for automatic differentiation.

    Create tensors with :func:`zgrad.tensor`, :func:`zgrad.zeros`, :func:`zgrad.from_numpy` and
    friends rather than with this constructor, which wraps an existing array as is.
    """

    __slots__ = ("_data", "_requires_grad", "grad", "grad_fn", "_output_nr", "_accumulator", "__weakref__")
    __array_priority__ = 1000  # numpy defers to our reflected operators

    def __init__(self, data: Any, requires_grad: bool = False, *, _grad_fn: Any = None, _output_nr: int = 0) -> None:
        self._data = data
        self._requires_grad = requires_grad
        self.grad: Tensor | None = None
        self.grad_fn = _grad_fn
        self._output_nr = _output_nr
        self._accumulator: AccumulateGrad | None = None

    # --- attributes -----------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def device(self) -> Device:
        return CPU if dispatch.device_type_of(self._data) == "cpu" else Device("cuda", 0)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set ``requires_grad`` in place on a leaf tensor and return it.

        Raises:
            AutogradError: the tensor is not a leaf, or is not floating point.
        """
        if not self.is_leaf:
            raise AutogradError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if requires_grad and self.dtype.kind not in "fc":
            raise AutogradError(f"only Tensors of floating point dtype can require gradients, got {self.dtype}")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def data(self) -> "Tensor":
        """A tensor sharing this one's memory, detached from the graph."""
        return Tensor(self._data)

    @property
    def T(self) -> "Tensor":
        return _ops.transpose(self, 0, 1) if self.ndim == 2 else _ops.permute(self, tuple(reversed(range(self.ndim))))

    # --- conversion -----------------------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """The data as a numpy array, sharing memory on CPU (also for tensors that require grad)."""
        return dispatch.backend_of(self._data).to_host(self._data)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype, copy=False)

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number.

        Raises:
            ValueError: the tensor has more than one element.
        """
        if self._data.size != 1:
            raise ValueError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self._data.size} values is ambiguous")
        return bool(self.item())

    def detach(self) -> "Tensor":
        """A tensor sharing this one's memory that does not require grad and has no history."""
        return Tensor(self._data)

    def clone(self) -> "Tensor":
        return _ops.clone(self)

    def to(self, target: Any) -> "Tensor":
        """A copy in ``target`` dtype (numpy dtype) or on ``target`` device; self if already there."""
        if isinstance(target, (str, Device)):
            device = as_device(target)
            if device == self.device:
                return self
            dispatch.backend(device.type)
            raise NotImplementedError(f"moving tensors to {device} is not supported yet")
        dtype = np.dtype(target)
        return self if dtype == self.dtype else _ops.cast(self, dtype)

    def float(self) -> "Tensor":
        return self.to(np.float32)

    def double(self) -> "Tensor":
        return self.to(np.float64)

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._data.__dlpack_device__()

    # --- autograd -------------------------------------------------------------------------------

    def _grad_accumulator(self) -> AccumulateGrad:
        if self._accumulator is None:
            self._accumulator = AccumulateGrad(self)
        return self._accumulator

    def _accumulate_grad(self, grad: Any) -> None:
        if self.grad is None:
            self.grad = Tensor(dispatch.cast(grad, self.dtype))
        else:
            be = dispatch.backend_of(self.grad._data)
            be.add(self.grad._data, grad, self.grad._data)

    def backward(self, gradient: "Tensor | None" = None, retain_graph: bool = False) -> None:
        """Compute the gradient of this tensor with respect to the graph leaves into their ``.grad``.

        Args:
            gradient: the gradient of the final objective with respect to this tensor; may be
                omitted for a one-element tensor (then 1).
            retain_graph: keep the graph's saved values so backward can run through it again.

        Blocks until done. Raises:
            AutogradError: the tensor does not require grad, a gradient is needed but missing or of
                the wrong shape, or the graph was already freed.
        """
        if not self.requires_grad:
            raise AutogradError("element 0 of tensors does not require grad and does not have a grad_fn")
        if gradient is None:
            if self._data.size != 1:
                raise AutogradError(f"grad can be implicitly created only for scalar outputs, got shape {list(self.shape)}")
            grad = dispatch.full(self.shape, 1, self.dtype, dispatch.device_type_of(self._data))
        else:
            grad = gradient._data if isinstance(gradient, Tensor) else np.asarray(gradient)
            if grad.shape != self.shape:
                raise AutogradError(
                    f"Mismatch in shape: grad_output[0] has a shape of {list(grad.shape)} and output[0] has a shape "
                    f"of {list(self.shape)}."
                )
        edge = gradient_edge(self)
        run_backward([edge], [grad], retain_graph=retain_graph)

    def register_hook(self, hook: Callable[["Tensor"], "Tensor | None"]) -> RemovableHandle:
        """Call ``hook(grad)`` whenever this tensor's gradient is computed; a returned tensor replaces it.

        Raises:
            AutogradError: the tensor does not require grad.
        """
        if not self.requires_grad:
            raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")

        def array_hook(grad: Any) -> Any:
            result = hook(Tensor(grad))
            if result is None:
                return None
            array = result._data if isinstance(result, Tensor) else result
            if array.shape != grad.shape:
                raise AutogradError(f"hook returned a gradient of shape {list(array.shape)}; expected {list(grad.shape)}")
            return array

        node, index = (self._grad_accumulator(), 0) if self.grad_fn is None else (self.grad_fn, self._output_nr)
        node.register_pre_hook(index, array_hook)
        return RemovableHandle(node.pre_hooks[index], array_hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[["Tensor"], None]) -> RemovableHandle:
        """Call ``hook(tensor)`` after each backward pass has accumulated this leaf's gradient
        (into ``.grad``; in a distributed autograd context, into the context: read it there).

        Raises:
            AutogradError: the tensor is not a leaf, or does not require grad.
        """
        if not self.requires_grad:
            raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise AutogradError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        hooks = self._grad_accumulator().post_hooks

        def tensor_hook(variable: Any) -> None:
            hook(variable)

        hooks.append(tensor_hook)
        return RemovableHandle(hooks, tensor_hook)

    def _set_grad_array(self, grad: Any) -> None:
        """Make ``.grad`` a tensor over array ``grad`` (shared, not copied)."""
        self.grad = Tensor(grad)

    # --- in-place updates (outside the graph) ---------------------------------------------------

    def _check_inplace(self) -> None:
        if self.requires_grad and is_grad_enabled():
            raise AutogradError(
                "a leaf Variable that requires grad is being used in an in-place operation; "
                "wrap the update in `with zgrad.no_grad():`" if self.is_leaf else
                "in-place operations on tensors that are part of the graph are not supported; use out-of-place ops"
            )

    def zero_(self) -> "Tensor":
        self._check_inplace()
        self._data[...] = 0
        return self

    def fill_(self, value: float) -> "Tensor":
        self._check_inplace()
        self._data[...] = value
        return self

    def copy_(self, src: Any) -> "Tensor":
        self._check_inplace()
        self._data[...] = src._data if isinstance(src, Tensor) else src
        return self

    def _inplace(self, op: str, other: Any) -> "Tensor":
        self._check_inplace()
        value = other._data if isinstance(other, Tensor) else other
        getattr(dispatch.backend_of(self._data), op)(self._data, value, self._data)
        return self

    def add_(self, other: Any) -> "Tensor":
        return self._inplace("add", other)

    def sub_(self, other: Any) -> "Tensor":
        return self._inplace("sub", other)

    def mul_(self, other: Any) -> "Tensor":
        return self._inplace("mul", other)

    def div_(self, other: Any) -> "Tensor":
        return self._inplace("div", other)

    # --- ops ------------------------------------------------------------------------------------

    def __add__(self, other: Any) -> "Tensor":
        return _ops.add(self, other)

    def __radd__(self, other: Any) -> "Tensor":
        return _ops.add(other, self)

    def __sub__(self, other: Any) -> "Tensor":
        return _ops.sub(self, other)

    def __rsub__(self, other: Any) -> "Tensor":
        return _ops.sub(other, self)

    def __mul__(self, other: Any) -> "Tensor":
        return _ops.mul(self, other)

    def __rmul__(self, other: Any) -> "Tensor":
        return _ops.mul(other, self)

    def __truediv__(self, other: Any) -> "Tensor":
        return _ops.div(self, other)

    def __rtruediv__(self, other: Any) -> "Tensor":
        return _ops.div(other, self)

    def __matmul__(self, other: Any) -> "Tensor":
        return _ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> "Tensor":
        return _ops.matmul(other, self)

    def __pow__(self, other: Any) -> "Tensor":
        return _ops.pow(self, other)

    def __rpow__(self, other: Any) -> "Tensor":
        return _ops.pow(other, self)

    def __neg__(self) -> "Tensor":
        return _ops.neg(self)

    def __getitem__(self, index: Any) -> "Tensor":
        return _ops.getitem(self, index)

    def _compare(self, ufunc: Callable, other: Any) -> "Tensor":
        return Tensor(ufunc(self.numpy(), other.numpy() if isinstance(other, Tensor) else other))

    def __eq__(self, other: Any) -> "Tensor":  # type: ignore[override]
        return self._compare(np.equal, other)

    def __ne__(self, other: Any) -> "Tensor":  # type: ignore[override]
        return self._compare(np.not_equal, other)

    def __lt__(self, other: Any) -> "Tensor":
        return self._compare(np.less, other)

    def __le__(self, other: Any) -> "Tensor":
        return self._compare(np.less_equal, other)

    def __gt__(self, other: Any) -> "Tensor":
        return self._compare(np.greater, other)

    def __ge__(self, other: Any) -> "Tensor":
        return self._compare(np.greater_equal, other)

    __hash__ = object.__hash__

    def sum(self, dim: Any = None, keepdim: bool = False) -> "Tensor":
        return _ops.sum(self, dim, keepdim)

    def mean(self, dim: Any = None, keepdim: bool = False) -> "Tensor":
        return _ops.mean(self, dim, keepdim)

    def argmax(self, dim: int | None = None) -> "Tensor":
        return Tensor(np.argmax(self.numpy(), axis=dim))

    def reshape(self, *shape: Any) -> "Tensor":
        return _ops.reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)

    view = reshape

    def flatten(self) -> "Tensor":
        return _ops.reshape(self, (-1,))

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        return _ops.transpose(self, dim0, dim1)

    def permute(self, *dims: Any) -> "Tensor":
        return _ops.permute(self, dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims)

    def exp(self) -> "Tensor":
        return _ops.exp(self)

    def log(self) -> "Tensor":
        return _ops.log(self)

    def tanh(self) -> "Tensor":
        return _ops.tanh(self)

    def sigmoid(self) -> "Tensor":
        return _ops.sigmoid(self)

    def relu(self) -> "Tensor":
        return _ops.relu(self)

    def softmax(self, dim: int = -1) -> "Tensor":
        return _ops.softmax(self, dim)

    def log_softmax(self, dim: int = -1) -> "Tensor":
        return _ops.log_softmax(self, dim)

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        extra = ""
        if self.dtype != np.float32 and self.dtype != np.int64:
            extra += f", dtype={self.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{self.grad_fn.name}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"


from zgrad import ops as _ops  # noqa: E402  (ops need Tensor defined first)

"""``zgrad.Tensor``: an n-d array with autograd.

A tensor wraps an array (a numpy array on CPU) and, when it requires grad, either is a leaf
(gradients accumulate into ``.grad``) or has a ``grad_fn``: the backward node of the op that made
it. Tensors hash by identity, so they can be dictionary keys (``get_gradients`` relies on it).

This module holds what a tensor is (storage, attributes, conversions to Python and numpy,
autograd) and knows no op. The methods that run ops (operators, math, layout, ``to``, in-place
updates) are defined over the ops by :mod:`zgrad.tensor_math` and :mod:`zgrad.tensor_inplace`,
which bind them onto :class:`Tensor` with :func:`tensor_methods` when ``zgrad`` is imported: the
ops make tensors, so they come after this module, and the methods after the ops.
"""

from __future__ import annotations

import warnings
import weakref
from types import FunctionType
from typing import Any, Callable

import numpy as np

from zgrad.device import CPU, Device, as_device, is_device_index
from zgrad.engine.graph import AccumulateGrad, Edge, InputMetadata
from zgrad.engine.hooks import RemovableHandle
from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.engine.versions import mark_leaf_memory
from zgrad.engine.view_history import ViewOfBase
from zgrad.errors import AutogradError, DTypeError, ShapeError, ZgradError
from zgrad.kernels import dispatch
from zgrad.kernels.promotion import get_default_dtype, is_floating
from zgrad.kernels.view_geometry import ViewGeometry, shares_allocation
from zgrad.memory_formats import Size, as_size, contiguous_format, dim_order, is_laid_out, preserve_format
from zgrad.printing import add_suffixes, print_options, tensor_body

__all__ = ["Tensor", "parse_to_args", "gradient_edge", "tensor_methods", "link_views", "link_view",
           "refresh_view", "NO_GRAD_VIEW_INPLACE_ERROR", "NO_GRAD_VIEW_OF_CHANGED_BASE_ERROR"]

# dtypes a tensor's repr leaves out besides the default dtype, as PyTorch does (an empty tensor's names them)
_REPR_DEFAULT_DTYPES = (np.dtype(np.int64), np.dtype(np.bool_))


class _ListedHookHandle(RemovableHandle):
    """The handle of a hook kept in a list (a node's per-input hooks, a leaf's post-accumulate
    hooks): ``remove()`` takes it out; otherwise the handle of module and node hooks."""

    def __init__(self, hooks: list, hook: Callable) -> None:
        super().__init__({})
        self._hooks = hooks
        self._hook = hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def parse_to_args(*args: Any, device: Any = None, dtype: Any = None,
                  non_blocking: bool = False) -> tuple[Device | None, np.dtype | None]:
    """The (device, dtype) of a ``to(...)`` call: ``to(device)``, ``to(dtype)``,
    ``to(device, dtype)``, ``to(tensor)`` (its device and dtype), or keywords.

    Raises:
        TypeError: more than two positional arguments, or one that is neither a device nor a dtype.
    """
    if len(args) > 2:
        raise TypeError(f"to() received {len(args)} positional arguments; expected at most (device, dtype)")
    for arg in args:
        if arg is None:
            continue
        if isinstance(arg, Tensor):
            device, dtype = arg.device, arg.dtype
        elif isinstance(arg, (str, Device)) or is_device_index(arg):
            device = arg  # an int is an accelerator index, as in PyTorch: to(0) is to("cuda:0")
        else:
            try:
                dtype = np.dtype(arg)
            except TypeError:
                raise TypeError(f"to() received an invalid argument {arg!r}: expected a device, a dtype or a Tensor") from None
    return (None if device is None else as_device(device)), (None if dtype is None else np.dtype(dtype))


class Tensor:
    """An n-d array that can record the operations applied to it for automatic differentiation.

    Create tensors with :func:`zgrad.tensor`, :func:`zgrad.zeros`, :func:`zgrad.from_numpy` and
    friends rather than with this constructor, which wraps an existing array as is.
    """

    # _view_base_fn and _view_no_grad are set (and read) only on views: see link_views
    __slots__ = ("_data", "_requires_grad", "_grad", "grad_fn", "_output_nr", "_accumulator", "_view_base", "_view_base_fn",
                 "_view_no_grad", "__weakref__")
    __array_priority__ = 1000  # numpy defers to our reflected operators

    def __init__(self, data: Any = None, requires_grad: bool = False, *sizes: int, _grad_fn: Any = None,
                 _output_nr: int = 0) -> None:
        if type(data) is not np.ndarray and (type(data) in _LEGACY_DATA or isinstance(data, Tensor)):
            data, requires_grad = _legacy_array(data, requires_grad, sizes), False
        self._data = data
        self._requires_grad = requires_grad
        self._grad: Tensor | None = None
        self.grad_fn = _grad_fn
        self._output_nr = _output_nr
        self._accumulator: AccumulateGrad | None = None
        self._view_base: Tensor | None = None  # the tensor this one is a view of (see link_views)
        if requires_grad and _grad_fn is None:
            mark_leaf_memory(self)

    # --- attributes -----------------------------------------------------------------------------

    @property
    def shape(self) -> Size:
        return as_size(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def device(self) -> Device:
        return CPU if dispatch.device_type_of(self._data) == "cpu" else Device("cuda", 0)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_xpu(self) -> bool:
        """False: zgrad has no XPU backend (programs that route XPU tensors ask it)."""
        return False

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    def size(self, dim: int | None = None) -> Any:
        """The shape, or with ``dim`` the size of that dimension (negative counts from the end).

        Raises:
            IndexError: ``dim`` is out of range.
        """
        if dim is None:
            return self.shape
        if not self.ndim:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        n = self.ndim
        if not -n <= dim < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
        return self.shape[dim]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def is_floating_point(self) -> bool:
        return is_floating(self.dtype)

    def is_contiguous(self, memory_format: Any = None) -> bool:
        """Whether the elements lie densely in C order, or in the order ``memory_format`` names
        (``zgrad.channels_last``...), sizes of 1 aside."""
        if memory_format is None or memory_format is contiguous_format or memory_format is preserve_format:
            return bool(self._data.flags.c_contiguous)
        try:
            order = dim_order(memory_format, self.ndim)
        except RuntimeError:  # a channels-last format of another rank: not laid out so (PyTorch answers False)
            return False
        return is_laid_out(self.shape, self.stride(), order)

    @property
    def grad(self) -> "Tensor | None":
        """The gradient accumulated by backward passes (None until the first, or after ``zero_grad``).
        A non-leaf's is None, with PyTorch's warning, unless :meth:`retain_grad` was called."""
        grad = self._grad
        if grad is None and self.grad_fn is not None and not self.retains_grad:
            warnings.warn(_NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        """Set (or clear, with None) the gradient, as PyTorch checks it.

        Raises:
            TypeError: neither a tensor nor None. ShapeError: another size. DTypeError: another dtype.
            ZgradError: another device.
        """
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if tuple(value.shape) != tuple(self.shape):
                raise ShapeError(f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of size "
                                 f"'{list(self.shape)}'. Please ensure that the gradient and the tensor are the same "
                                 f"size")
            if value.dtype != self.dtype:
                raise DTypeError(f"attempting to assign a gradient with dtype '{value.dtype}' to a tensor with dtype "
                                 f"'{self.dtype}'. The gradient must match the tensor's dtype")
            if value.device != self.device:
                raise ZgradError(f"assigned grad has data located on a different device: {value.device} (the tensor "
                                 f"is on {self.device})")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    @property
    def is_leaf(self) -> bool:
        if self._view_base is not None:
            refresh_view(self)
        return self.grad_fn is None

    @property
    def requires_grad(self) -> bool:
        if self._view_base is not None:
            refresh_view(self)
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
        if requires_grad and not is_floating(self.dtype):
            raise AutogradError(f"only Tensors of floating point dtype can require gradients, got {self.dtype}")
        self._requires_grad = bool(requires_grad)
        if requires_grad:
            mark_leaf_memory(self)
        return self

    @property
    def data(self) -> "Tensor":
        """A tensor sharing this one's memory, detached from the graph."""
        return Tensor(self._data)

    @data.setter
    def data(self, value: "Tensor") -> None:
        """Make this tensor hold ``value``'s array (no copy), outside the graph, as PyTorch's ``.data =``."""
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be set to a Tensor, got {type(value).__name__}")
        self._rebind(value._data)

    @property
    def _base(self) -> "Tensor | None":
        """The tensor this one is a view of (the start of a chain of views), or None."""
        return self._view_base

    def _is_view(self) -> bool:
        """Whether this tensor is a view of another (see :attr:`_base`)."""
        return self._view_base is not None

    def _rebind(self, array: Any) -> None:
        """Hold ``array`` from now on (it may differ in shape, dtype or device), keeping the
        metadata of this leaf's gradient node in step."""
        self._data = array
        self._view_base = None
        if self._accumulator is not None:
            self._accumulator.input_metadata = [InputMetadata.of(array)]

    # --- conversion -----------------------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """The data as a numpy array, sharing memory (also for tensors that require grad).

        Raises:
            TypeError: a CUDA tensor (copy it to the host first with ``.cpu()``, as in PyTorch).
        """
        if dispatch.device_type_of(self._data) != "cpu":
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. "
                            "Use Tensor.cpu() to copy the tensor to host memory first.")
        return self._data

    def _host(self) -> np.ndarray:
        """The data on the host: the array itself on CPU, a copy of a device tensor (blocks)."""
        return dispatch.to_device(self._data, "cpu")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype, copy=False)

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number (bool for a bool tensor).

        Raises:
            ValueError: the tensor has more than one element.
        """
        if self._data.size != 1:
            raise ShapeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._host().reshape(()).item()

    def tolist(self) -> Any:
        """The data as nested Python lists of Python numbers (a number for a 0-d tensor)."""
        return self._host().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __format__(self, format_spec: str) -> str:
        """A 0-d tensor formats as its number (``f"{loss:.4f}"``); any other tensor only with an
        empty spec, as its ``str``, as in PyTorch."""
        if self._data.ndim == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self._data.size} values is ambiguous")
        return bool(self.item())

    def detach(self) -> "Tensor":
        """A tensor sharing this one's memory that does not require grad and has no history."""
        return Tensor(self._data)

    def __deepcopy__(self, memo: dict) -> "Tensor":
        """``copy.deepcopy``: a leaf of the same type (a Parameter stays one) with its own copy of
        the data on the same device, the same ``requires_grad``, and a deep copy of ``.grad``.

        Raises:
            RuntimeError: a tensor that is not a graph leaf (PyTorch's message).
        """
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.  If you were attempting to deepcopy a module, this may be "
                               "because of a torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        copied = type(self).__new__(type(self))
        Tensor.__init__(copied, dispatch.cast(self._data, self.dtype), self._requires_grad)
        memo[id(self)] = copied
        copied.grad = None if self.grad is None else self.grad.__deepcopy__(memo)
        return copied

    def __dlpack__(self, **kwargs: Any) -> Any:
        """A DLPack capsule of the tensor's data, without a copy (a CUDA tensor's on a GPU; the
        CUDA simulator has none).

        Raises:
            BufferError: a CUDA tensor in the simulator.
        """
        return dispatch.dlpack_capsule(self._data, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return dispatch.dlpack_device(self._data)

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA Array Interface of a CUDA tensor on a GPU (absent on CPU and in the simulator)."""
        if dispatch.device_type_of(self._data) != "cuda":
            raise AttributeError("a CPU tensor has no __cuda_array_interface__")
        return self._data.__cuda_array_interface__

    # --- autograd -------------------------------------------------------------------------------

    def _grad_accumulator(self) -> AccumulateGrad:
        if self._accumulator is None:
            self._accumulator = AccumulateGrad(self)
        return self._accumulator

    def _accumulate_grad(self, grad: Any) -> None:
        """Add ``grad`` (an array; or a tensor, recorded, in a pass with create_graph=True) into ``.grad``."""
        if isinstance(grad, Tensor):
            grad = grad if grad.dtype == self.dtype else grad.to(self.dtype)
            self._grad = grad if self._grad is None else self._grad + grad
        elif self._grad is None:
            self._grad = Tensor(dispatch.cast(grad, self.dtype))
        else:
            be = dispatch.backend_of(self._grad._data)
            be.add(self._grad._data, grad, self._grad._data)

    def register_hook(self, hook: Callable[["Tensor"], "Tensor | None"]) -> RemovableHandle:
        """Call ``hook(grad)`` whenever this tensor's gradient is computed; a returned tensor replaces it.

        Raises:
            AutogradError: the tensor does not require grad.
        """
        if not self.requires_grad:
            raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")

        def array_hook(grad: Any) -> Any:
            on_graph = isinstance(grad, Tensor)  # a pass with create_graph=True
            result = hook(grad if on_graph else Tensor(grad))
            if result is None:
                return None
            if on_graph:
                if result.shape != grad.shape:
                    raise AutogradError(f"hook returned a gradient of shape {list(result.shape)}; expected {list(grad.shape)}")
                return result
            array = result._data if isinstance(result, Tensor) else result
            if array.shape != grad.shape:
                raise AutogradError(f"hook returned a gradient of shape {list(array.shape)}; expected {list(grad.shape)}")
            return array

        node, index = (self._grad_accumulator(), 0) if self.grad_fn is None else (self.grad_fn, self._output_nr)
        node.register_pre_hook(index, array_hook)
        hooks = node.pre_hooks[index]
        if any(isinstance(h, _RetainGrad) for h in hooks):  # .grad takes the gradient after every hook, as PyTorch's
            hooks.sort(key=lambda h: isinstance(h, _RetainGrad))
        return _ListedHookHandle(hooks, array_hook)

    def retain_grad(self) -> None:
        """Make ``.grad`` of this non-leaf tensor hold (accumulate) its gradient after backward, as
        a leaf's does; nothing to do on a leaf.

        Raises:
            AutogradError: the tensor does not require grad.
        """
        if not self.requires_grad:
            raise AutogradError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is not None and not self.retains_grad:
            self.grad_fn.register_pre_hook(self._output_nr, _RetainGrad(self))

    @property
    def retains_grad(self) -> bool:
        """Whether :meth:`retain_grad` was called on this non-leaf tensor."""
        hooks = self.grad_fn.pre_hooks.get(self._output_nr, ()) if self.grad_fn is not None else ()
        return any(isinstance(h, _RetainGrad) and h.tensor() is self for h in hooks)

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
        return _ListedHookHandle(hooks, tensor_hook)

    def _set_grad_array(self, grad: Any) -> None:
        """Make ``.grad`` a tensor over array ``grad`` (shared, not copied)."""
        self._grad = Tensor(grad)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        """PyTorch's layout under the options of :func:`zgrad.set_printoptions`."""
        prefix = "tensor("
        suffixes = [] if self.device.type == "cpu" else [f"device='{self.device}'"]
        if self._data.size == 0 and self.ndim != 1 or self._data.size and not print_options().edgeitems:
            suffixes.append(f"size={tuple(self.shape)}")
        default_dtypes = (get_default_dtype(),) if self._data.size == 0 else (get_default_dtype(), *_REPR_DEFAULT_DTYPES)
        if self.dtype not in default_dtypes:
            suffixes.append(f"dtype={self.dtype}")
        if self.grad_fn is not None:
            suffixes.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        return add_suffixes(prefix + tensor_body(self._host(), len(prefix)), suffixes, len(prefix))


_NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be "
    "populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf Tensor, "
    "use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you access "
    "the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for more informations.")
_NO_GRAD_VIEW_ADVICE = ("Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
                        "code by moving both the view and the inplace either both inside the no_grad block (if you "
                        "don't want the inplace to be tracked) or both outside (if you want the inplace to be tracked).")
NO_GRAD_VIEW_INPLACE_ERROR = ("A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
                              + _NO_GRAD_VIEW_ADVICE)
NO_GRAD_VIEW_OF_CHANGED_BASE_ERROR = ("A view was created in no_grad mode and its base or another view of its base has "
                                      "been modified inplace with grad mode enabled. " + _NO_GRAD_VIEW_ADVICE)


class _RetainGrad:
    """The pre-hook :meth:`Tensor.retain_grad` puts on a tensor's ``grad_fn``: accumulates the
    gradient into the tensor's ``.grad`` (a weak reference: the graph does not keep it alive)."""

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = weakref.ref(tensor)

    def __call__(self, grad: Any) -> None:
        tensor = self.tensor()
        if tensor is not None:
            tensor._accumulate_grad(grad)


# What PyTorch's legacy constructor takes, where zgrad's takes an array: Tensor(), Tensor(*sizes), Tensor(Size),
# Tensor(sequence) (and what it refuses: a float or a bool)
_LEGACY_DATA = frozenset({type(None), int, list, tuple, range, Size, float, bool})


def _legacy_array(data: Any, second: Any, sizes: tuple[int, ...]) -> np.ndarray:
    """The array of PyTorch's legacy ``Tensor()`` (no elements), ``Tensor(*sizes)`` (uninitialized)
    or ``Tensor(sequence)``, of the default dtype.

    Raises:
        TypeError: another combination of arguments. ShapeError: a negative size.
    """
    dtype = get_default_dtype()
    if data is None:
        return np.empty((0,), dtype)
    if type(data) in (float, bool):
        raise TypeError(f"Tensor(): expected sizes (ints) or one sequence of data, got a {type(data).__name__}")
    if isinstance(data, Tensor):
        if data.dtype != dtype or second is not False or sizes:
            raise TypeError(f"Tensor(): expected a tensor of the default dtype {dtype} to alias, got {data.dtype}")
        return data._data
    if type(data) is Size:
        data = tuple(data) + (() if second is False else (second,)) + sizes
        second, sizes = data[1] if len(data) > 1 else False, data[2:]
        data = data[0] if data else 0
        if not data and second is False:
            return np.empty((0,), dtype)
    if type(data) is int:  # (a numpy scalar stays what zgrad wraps as a 0-d array)
        dims = (data,) + (() if second is False else (second,)) + sizes
        dims = tuple(int(n) if isinstance(n, np.integer) else n for n in dims)
        if not all(type(n) is int for n in dims):
            raise TypeError(f"Tensor(): expected sizes (ints) or one sequence of data, got {dims!r}")
        if min(dims) < 0:
            raise ShapeError(f"Trying to create tensor with negative dimension {min(dims)}: {list(dims)}")
        return np.empty(dims, dtype)
    if second is not False or sizes:
        raise TypeError("Tensor(): expected sizes (ints) or one sequence of data, got a sequence and more arguments")
    return np.array(data, dtype=dtype)


def link_views(source: Tensor, outputs: Any) -> None:
    """Make each of ``outputs`` (tensors a view op returned for ``source``) that is a view of
    ``source``'s memory, in its dtype, a view of ``source``'s base (the start of its chain of views).

    A view knows its base (``_view_base``, PyTorch's ``_base``) and the base's ``grad_fn`` when the
    view's history was last made from it (``_view_base_fn``): :func:`refresh_view` compares them.
    """
    made_without_grad = not is_grad_enabled()
    for out in outputs:
        link_view(source, out, made_without_grad)


def link_view(source: Tensor, out: Tensor, made_without_grad: bool) -> None:
    """:func:`link_views` for one output, made with grad mode off if ``made_without_grad``."""
    base = source._view_base
    if base is None:
        base = source
    array, base_array = out._data, base._data
    if (array.dtype is base_array.dtype or array.dtype == base_array.dtype) and shares_allocation(array, base_array):
        out._view_base, out._view_base_fn, out._view_no_grad = base, base.grad_fn, made_without_grad


def refresh_view(view: Tensor) -> None:
    """Give ``view`` a new history from its base if the base changed in place since its history
    was made (PyTorch regenerates a view's ``grad_fn`` so): its elements of the base's new value.

    Raises:
        AutogradError: the view was made with grad mode off, and is used with it on (PyTorch's
            refusal: whether the change should reach the view is ambiguous).
    """
    base = view._view_base
    if base.grad_fn is view._view_base_fn:
        return
    if not shares_allocation(view._data, base._data):  # the base's memory was replaced (``.data =``)
        view._view_base = None
        return
    if base.grad_fn is None:  # the base was detached in place (detach_): its views keep their history
        view._view_base_fn = None
        return
    if view._view_no_grad:
        if is_grad_enabled():
            raise AutogradError(NO_GRAD_VIEW_OF_CHANGED_BASE_ERROR)
        return
    view._view_base_fn = base.grad_fn
    node = ViewOfBase(ViewGeometry.of(view._data, base._data), Edge(base.grad_fn, base._output_nr), view._data)
    view.grad_fn, view._output_nr, view._requires_grad = node, 0, True


def gradient_edge(tensor: Tensor) -> Edge:
    """The edge a gradient for ``tensor`` flows along: its grad_fn, or its leaf accumulator."""
    base = tensor._view_base
    if base is not None and base.grad_fn is not tensor._view_base_fn:
        refresh_view(tensor)
    if tensor.grad_fn is not None:
        return Edge(tensor.grad_fn, tensor._output_nr)
    return Edge(tensor._grad_accumulator(), 0)


def tensor_methods(namespace: type) -> type:
    """Class decorator that makes the functions and properties defined in the body of
    ``namespace`` attributes of :class:`Tensor`, as if they were written in its class body: the
    same objects (a call costs what it would there), named ``Tensor.<name>`` in tracebacks and
    error messages. ``namespace`` is a plain holder, never instantiated.

    Raises:
        TypeError: a name :class:`Tensor` already defines (each method has one definition).
    """
    for name, value in vars(namespace).items():
        if isinstance(value, (FunctionType, property)):
            if name in vars(Tensor):
                raise TypeError(f"Tensor.{name} is defined twice: in {namespace.__module__}.{namespace.__qualname__} "
                                f"and before it; keep one definition")
            function = value.fget if isinstance(value, property) else value
            function.__qualname__ = f"Tensor.{function.__name__}"
            setattr(Tensor, name, value)
    return namespace

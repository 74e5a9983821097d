"""``zgrad.nn.parameter``: :class:`Parameter`, and the uninitialized parameters and buffers of lazy
modules (:mod:`zgrad.nn.modules.lazy`), as PyTorch's ``torch.nn.parameter``.

An uninitialized tensor has a dtype, a device and ``requires_grad`` but no shape and no data yet:
:meth:`UninitializedTensorMixin.materialize` gives it both, and it becomes a :class:`Parameter`
(or a plain tensor, for a buffer) in place, so optimizers and containers that hold it keep working.
Until then, touching its data raises PyTorch's ``ValueError`` (its ``shape``, a ``RuntimeError``);
its dtype, device, ``requires_grad``, ``grad``, ``size()`` (``[0]``), ``data`` (an empty tensor),
``to``/``cpu``/``cuda`` and ``copy.deepcopy`` work, as in PyTorch.
"""

from __future__ import annotations

import sys
from typing import Any

from zgrad.creation import empty
from zgrad.engine.versions import mark_leaf_memory
from zgrad.kernels import dispatch
from zgrad.memory_formats import Size
from zgrad.nn.module import Buffer, Parameter
from zgrad.tensor import Tensor, parse_to_args

__all__ = ["Buffer", "Parameter", "UninitializedBuffer", "UninitializedParameter", "UninitializedTensorMixin",
           "is_lazy"]

_SHAPE_MESSAGE = ("Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
                  "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
                  "`forward` to initialize the parameters before accessing their attributes.")
_SHARE_MESSAGE = ("Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize the "
                  "parameters before calling `module.share_memory()`.")


def _reader() -> Any:
    """The frame that reached into an uninitialized tensor (the first outside this module)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame


def _caller_name() -> str:
    """How PyTorch's message names what used an uninitialized tensor: the zgrad function the user
    called (the outermost zgrad frame of the innermost run of them on the stack, wrappers made
    by decorators skipped), as ``<function name>`` or, for a Tensor method,
    ``<method 'name' of 'zgrad.Tensor' objects>``."""
    frame, entry = _reader(), None
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "zgrad":
        if entry is None or "<locals>" not in frame.f_code.co_qualname:
            entry = frame.f_code
        frame = frame.f_back
    if entry is None:
        return "<unknown>"
    owner, _, name = entry.co_qualname.rpartition(".")
    if owner.startswith("Tensor"):  # Tensor's methods are defined on its mixins (TensorMath, ...)
        return f"<method '{name}' of 'zgrad.Tensor' objects>"
    return f"<function {entry.co_qualname}>"


def _raw(tensor: Any) -> Any:
    """The placeholder array (empty, of the dtype and device) behind an uninitialized tensor."""
    return object.__getattribute__(tensor, "_data")


class UninitializedTensorMixin:
    """What :class:`UninitializedParameter` and :class:`UninitializedBuffer` share: a tensor whose
    shape is not known yet. ``cls_to_become`` is the class it takes when materialized."""

    __slots__ = ()
    cls_to_become: type = Tensor
    _uninitialized = True  # read by Module.state_dict / load_state_dict (which cannot import this module)

    def __getattribute__(self, name: str) -> Any:
        if name == "_data":  # every op reads a tensor's data through this slot
            raise self._use_error(_caller_name())
        return object.__getattribute__(self, name)

    def _use_error(self, what: str) -> ValueError:
        return ValueError(f"Attempted to use an uninitialized parameter in {what}. This error happens when you are "
                          "using a `LazyModule` or explicitly manipulating "
                          f"`zgrad.nn.parameter.{type(self).__name__}` objects. When using LazyModules Call "
                          "`forward` with a dummy batch to initialize the parameters before calling zgrad functions")

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Give the tensor ``shape`` (an int or a sequence of ints), with uninitialized memory of
        its dtype and on its device (or ``dtype`` / ``device``), and make it a ``cls_to_become``
        in place (the same object: optimizers and modules holding it see the change).

        Raises:
            RuntimeError: a tensor that requires grad given a non-floating dtype (PyTorch's message).
        """
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        array = _raw(self)
        device = dispatch.device_type_of(array) if device is None else device
        data = empty(*shape, dtype=array.dtype if dtype is None else dtype, device=device)
        if self._requires_grad and not data.is_floating_point():
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
        self._rebind(data._data)
        self.__class__ = self.cls_to_become
        if self._requires_grad:
            mark_leaf_memory(self)

    # --- what an uninitialized tensor answers, as PyTorch's ----------------------------------------

    @property
    def shape(self) -> Size:
        """Raises: a RuntimeError (PyTorch's, which names ``load_state_dict``), or, read by a zgrad
        function other than Module's, the ValueError of any use (PyTorch's functions raise it first)."""
        reader = getattr(_reader(), "f_globals", {}).get("__name__", "")
        if reader.partition(".")[0] == "zgrad" and reader != "zgrad.nn.module":
            raise self._use_error(_caller_name())
        raise RuntimeError(_SHAPE_MESSAGE)

    @property
    def dtype(self) -> Any:
        return _raw(self).dtype

    @property
    def device(self) -> Any:
        return Tensor(_raw(self)).device

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def data(self) -> Tensor:
        """An empty tensor of the dtype, on the device (PyTorch's placeholder)."""
        return Tensor(_raw(self))

    def size(self, dim: int | None = None) -> Any:
        return Tensor(_raw(self)).size(dim)

    def is_floating_point(self) -> bool:
        return Tensor(_raw(self)).is_floating_point()

    def is_contiguous(self, memory_format: Any = None) -> bool:
        """True, so that an optimizer can be made before the parameters exist."""
        return True

    def __len__(self) -> int:
        raise self._use_error("<method '__len__' of 'zgrad.Tensor' objects>")

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        raise self._use_error("<method 'requires_grad_' of 'zgrad.Tensor' objects>")

    def share_memory_(self) -> Tensor:
        raise RuntimeError(_SHARE_MESSAGE)

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """An empty tensor of the new dtype and device (PyTorch's placeholder converted), which
        ``Module.to`` rebinds this parameter to; a buffer returns an uninitialized buffer."""
        kwargs.pop("copy", None)
        kwargs.pop("memory_format", None)
        device, dtype = parse_to_args(*args, **kwargs)
        placeholder = empty(0, dtype=self.dtype if dtype is None else dtype,
                            device=self.device if device is None else device)
        return placeholder

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False, memory_format: Any = None) -> Tensor:
        return self.to("cuda" if device is None else device)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    def __format__(self, format_spec: str) -> str:
        return format(repr(self), format_spec)

    def __deepcopy__(self, memo: dict) -> Any:
        """A new uninitialized tensor of the same class, dtype, device and ``requires_grad``."""
        if id(self) not in memo:
            memo[id(self)] = type(self)(self._requires_grad, self.device, self.dtype)
        return memo[id(self)]


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet, as ``torch.nn.parameter.UninitializedParameter``:
    a lazy module's weight until its first forward; :meth:`materialize` makes it a
    :class:`Parameter` (the same object)."""

    __slots__ = ()
    cls_to_become = Parameter

    def __init__(self, requires_grad: bool = True, device: Any = None, dtype: Any = None) -> None:
        Tensor.__init__(self, empty(0, dtype=dtype, device=device)._data, False)
        self._requires_grad = bool(requires_grad)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet, as ``torch.nn.parameter.UninitializedBuffer``: a lazy
    module's running statistics until its first forward; :meth:`materialize` makes it a plain
    tensor (the same object)."""

    __slots__ = ()
    cls_to_become = Tensor

    def __init__(self, requires_grad: bool = False, device: Any = None, dtype: Any = None) -> None:
        Tensor.__init__(self, empty(0, dtype=dtype, device=device)._data, False)
        self._requires_grad = bool(requires_grad)

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """An uninitialized buffer of the new dtype and device (``Module.to`` replaces buffers
        with what ``to`` returns, and a lazy module's must stay uninitialized)."""
        placeholder = UninitializedTensorMixin.to(self, *args, **kwargs)
        return UninitializedBuffer(self._requires_grad, placeholder.device, placeholder.dtype)


def is_lazy(param: Any) -> bool:
    """Whether ``param`` is an uninitialized parameter or buffer (not materialized yet)."""
    return isinstance(param, UninitializedTensorMixin)

"""``Module`` and ``Parameter``: the containers models are built from."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator, Mapping, NamedTuple

import numpy as np

from zgrad.compiler import compile as compile_callable
from zgrad.creation import empty, empty_like
from zgrad.device import cuda_device
from zgrad.kernels import dispatch
from zgrad.tensor import Tensor, parse_to_args
from zgrad.errors import ShapeError, StateDictError
from zgrad.kernels.promotion import BFLOAT16, is_floating
from zgrad.memory_formats import Size
from zgrad.nn.module_hooks import call_with_hooks
from zgrad.engine.hooks import RemovableHandle

__all__ = ["Buffer", "Module", "Parameter", "IncompatibleKeys"]

_HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks", "_forward_hooks_with_kwargs",
               "_forward_hooks_always_called", "_backward_hooks", "_backward_pre_hooks", "_state_dict_pre_hooks",
               "_state_dict_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")


class Parameter(Tensor):
    """A leaf tensor that a :class:`Module` registers as one of its parameters."""

    __slots__ = ()

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        if data is None:
            data = np.empty((0,), dtype=np.float32)
        array = data._data if isinstance(data, Tensor) else data
        if dispatch.device_type_of(array) == "cpu":
            array = np.asarray(array, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        super().__init__(dispatch.contiguous(array))
        self.requires_grad_(requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class Buffer(Tensor):
    """A tensor that a :class:`Module` registers as a buffer when assigned to one of its
    attributes (``self.mean = nn.Buffer(zeros(3))``), as PyTorch's: module state that is not a
    parameter. It shares ``data``'s memory (detached, keeping its ``requires_grad``);
    ``persistent=False`` keeps it out of the state dict."""

    __slots__ = ("persistent",)

    def __init__(self, data: Tensor | None = None, *, persistent: bool = True) -> None:
        if data is None:
            data = empty(0)
        super().__init__(data._data)
        self.requires_grad_(data.requires_grad)
        self.persistent = persistent

    def __deepcopy__(self, memo: dict) -> "Buffer":
        copied = super().__deepcopy__(memo)
        copied.persistent = self.persistent
        return copied


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: the keys it did not find, and the keys it did not use."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"  # PyTorch's words, which training logs print
        return f"IncompatibleKeys(missing_keys={self.missing_keys!r}, unexpected_keys={self.unexpected_keys!r})"

    __str__ = __repr__


def _uninitialized(value: Any) -> bool:
    """Whether ``value`` is a lazy module's uninitialized parameter or buffer
    (:mod:`zgrad.nn.parameter`, which imports this module), which has no data yet."""
    return getattr(type(value), "_uninitialized", False)


def _registered(hooks: dict, hook: Callable[..., Any]) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def _check_name(name: Any, kind: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')


class Module:
    """Base class of models: holds parameters, buffers and sub-modules assigned as attributes.

    Subclasses implement ``forward``; calling the module calls it. Parameters (:class:`Parameter`)
    are trained; buffers (:meth:`register_buffer`) are state that is not trained, such as running
    statistics, and like parameters they are saved by :meth:`state_dict` (unless registered with
    ``persistent=False``) and converted by :meth:`to`.
    """

    training: bool
    _version: int = 1  # PyTorch's: the state-dict format version of a module class
    dump_patches: bool = False
    call_super_init: bool = False

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        for name in _HOOK_DICTS:
            object.__setattr__(self, name, OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_is_full_backward_hook", None)  # which kind _backward_hooks holds

    # --- attribute routing ----------------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() is called")
        params, buffers, modules = self._parameters, self._buffers, self._modules
        if isinstance(value, Parameter):
            self.__dict__.pop(name, None)
            buffers.pop(name, None)
            modules.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            params[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(zgrad.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            self.__dict__.pop(name, None)
            params.pop(name, None)
            buffers.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            modules[name] = value
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(zgrad.nn.Module or None expected)")
            modules[name] = None
        elif isinstance(value, Buffer):
            self.register_buffer(name, value, value.persistent)
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(zgrad.nn.Buffer, zgrad.Tensor or None expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    # --- registration ---------------------------------------------------------------------------

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a ``None`` placeholder, as a layer without bias does) under ``name``.

        Raises:
            TypeError: ``param`` is not a Parameter or None, or ``name`` is not a string.
            KeyError: ``name`` is empty, dotted, or already another attribute.
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(zgrad.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: module state that is not a parameter (e.g. BatchNorm's running mean).

        Args:
            name: the attribute name.
            tensor: the buffer, or None (then it is skipped by ``buffers()`` and ``state_dict()``).
            persistent: whether ``state_dict()`` includes it.

        Raises:
            TypeError: ``tensor`` is not a Tensor or None, or ``name`` is not a string.
            KeyError: ``name`` is empty, dotted, or already another attribute.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(zgrad.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a child module (or a ``None`` placeholder) under ``name``.

        Raises:
            TypeError: ``module`` is not a Module or None.
            KeyError: ``name`` is empty, dotted, or already another attribute.
        """
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        """The descendant module at dotted path ``target`` ("" is this module), as PyTorch's.

        Raises:
            AttributeError: a step of the path that is missing or not a module (PyTorch's messages).
        """
        module = self
        if target == "":
            return module
        for step in target.split("."):
            if not hasattr(module, step):
                raise AttributeError(f"{module._get_name()} has no attribute `{step}`")
            module = getattr(module, step)
            if not isinstance(module, Module):
                raise AttributeError(f"`{step}` is not an nn.Module")
        return module

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Put ``module`` at dotted path ``target`` (its parent must exist), as PyTorch's; with
        ``strict``, only where a submodule already is.

        Raises:
            ValueError: an empty ``target``, or ``module`` that is not a Module.
            AttributeError: a missing parent, a step that is not a module, or (``strict``) no
                submodule at ``target``.
        """
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        *path, last = target.split(".")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent = self.get_submodule(".".join(path))
        if strict and not hasattr(parent, last):
            raise AttributeError(f"{parent._get_name()} has no attribute `{last}`")
        if hasattr(parent, last) and not isinstance(getattr(parent, last), Module):
            raise AttributeError(f"`{last}` is not an nn.Module")
        setattr(parent, last, module)

    def get_parameter(self, target: str) -> "Parameter":
        """The parameter at dotted path ``target``, as PyTorch's.

        Raises:
            AttributeError: a missing module or attribute, or one that is not a Parameter.
        """
        module, name = self._owner_of(target)
        value = getattr(module, name)
        if not isinstance(value, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return value

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``, as PyTorch's.

        Raises:
            AttributeError: a missing module or attribute, or one that is not a buffer.
        """
        module, name = self._owner_of(target)
        if name not in module._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return getattr(module, name)

    def _owner_of(self, target: str) -> tuple["Module", str]:
        """The submodule holding the attribute at dotted path ``target``, and the attribute's name.

        Raises:
            AttributeError: a missing submodule or attribute (PyTorch's messages).
        """
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
        return module, name

    def _get_name(self) -> str:
        return type(self).__name__

    # --- forward --------------------------------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        name = type(self).__name__
        raise NotImplementedError(f'Module [{name}] is missing the required "forward" function: {name} must implement forward()')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hooks = self.__dict__
        if hooks.get("_forward_pre_hooks") or hooks.get("_forward_hooks") or hooks.get("_backward_hooks") \
                or hooks.get("_backward_pre_hooks"):
            return call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Compile this module's forward in place, as PyTorch's ``Module.compile``: the arguments
        are :func:`zgrad.compile`'s and checked as it checks them; zgrad runs eagerly, so the module
        runs on unchanged (its ``state_dict`` keys stay as they are, as PyTorch's do here).

        Raises:
            RuntimeError, ValueError, NotImplementedError: arguments :func:`zgrad.compile` refuses.
        """
        compile_callable(self.__call__, *args, **kwargs)

    # --- hooks ----------------------------------------------------------------------------------

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before every ``forward``, as PyTorch's: a non-None result
        replaces the positional arguments (a single value is wrapped in a tuple). With
        ``with_kwargs`` it is ``hook(module, args, kwargs)`` and may return ``(args, kwargs)``;
        ``prepend`` runs it before the hooks already registered. Returns a handle whose
        ``remove()`` unregisters the hook."""
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after every ``forward``, as PyTorch's: a non-None
        result replaces the output. With ``with_kwargs`` it is ``hook(module, args, kwargs,
        output)``; ``always_call`` runs it (with output None) even when ``forward`` raises;
        ``prepend`` runs it before the hooks already registered."""
        handle = RemovableHandle(self._forward_hooks,
                                 extra_dict=[self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_output)`` when the gradients of the module's outputs are
        computed, as PyTorch's: a non-None result replaces ``grad_output``."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_input, grad_output)`` when the gradients of the module's
        positional arguments are computed, as PyTorch's: ``grad_input`` has an entry per
        positional argument (None without a gradient); a non-None result replaces it.

        Raises:
            RuntimeError: the module has had a :meth:`register_backward_hook` hook (PyTorch's message).
        """
        self._check_backward_hook_kind(full=True)
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_backward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """The deprecated form of :meth:`register_full_backward_hook`, as PyTorch's: ``hook(module,
        grad_input, grad_output)`` is a hook on the backward node of the output's first tensor, so
        it sees that node's gradients (which are the module's only when its forward is one op);
        PyTorch's FutureWarnings say when they are not. The node is zgrad's, and its inputs'
        order can differ from PyTorch's (``Linear``'s node takes input, weight, bias; PyTorch's
        ``AddmmBackward0`` bias, input, transposed weight).

        Raises:
            RuntimeError: the module has had a full backward hook (PyTorch's message).
        """
        self._check_backward_hook_kind(full=False)
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        return handle

    def _check_backward_hook_kind(self, full: bool) -> None:
        if self._is_full_backward_hook is (not full):
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        object.__setattr__(self, "_is_full_backward_hook", full)

    # --- traversal ------------------------------------------------------------------------------

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """(qualified name, module) for this module and every descendant, depth first, self first.

        A module reachable along several paths is listed once unless ``remove_duplicate=False``.
        """
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        return (m for _, m in self.named_modules())

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """(name, module) of the direct children, each module once."""
        seen: set[int] = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator["Module"]:
        return (m for _, m in self.named_children())

    def _named_members(self, table: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        seen: set[int] = set()
        for module_name, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{module_name}.{name}" if module_name else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(qualified name, parameter) pairs of this module and (with ``recurse``) its descendants, each once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(qualified name, buffer) pairs of this module and (with ``recurse``) its descendants, each once."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        return (b for _, b in self.named_buffers(recurse=recurse))

    def apply(self, fn: Callable[["Module"], Any]) -> "Module":
        """Call ``fn`` on every descendant (children first) and then on this module; returns self.

        Typical use is initialization: ``model.apply(init_weights)``.
        """
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # --- training state -------------------------------------------------------------------------

    def train(self, mode: bool = True) -> "Module":
        """Set training mode (what Dropout and BatchNorm look at) here and in every descendant.

        Raises:
            ValueError: ``mode`` is not a bool.
        """
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for child in self.children():
            child.train(mode)
        return self

    def eval(self) -> "Module":
        """Evaluation mode: ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Set ``requires_grad`` on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the ``.grad`` of every parameter (set to None, or zero it in place)."""
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad._data[...] = 0

    # --- state dict -----------------------------------------------------------------------------

    def _own_state_entries(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """This module's own parameters and persistent buffers under their state-dict keys."""
        for name, param in self._parameters.items():
            if param is not None:
                yield prefix + name, param
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                yield prefix + name, buf

    def _state_entries(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """Every parameter and persistent buffer under its state-dict key (shared ones under each key)."""
        yield from self._own_state_entries(prefix)
        for name, child in self._modules.items():
            if child is not None:
                yield from child._state_entries(f"{prefix}{name}.")

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    def get_extra_state(self) -> Any:
        """What a module saves in its state dict besides tensors (under ``_extra_state``), as
        PyTorch's: override it together with :meth:`set_extra_state`.

        Raises:
            RuntimeError: called on a module that does not override it (PyTorch's message).
        """
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called. Please file "
                           "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to "
                           "report this bug.")

    def set_extra_state(self, state: Any) -> None:
        """Take back what :meth:`get_extra_state` saved, when a state dict is loaded.

        Raises:
            RuntimeError: the state dict has an ``_extra_state`` for a module that does not override
                it (PyTorch's message).
        """
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called. Please file "
                           "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to "
                           "report this bug.")

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        """Put this module's own state (not its children's) into ``destination``, as PyTorch's
        overridable method: parameters, persistent buffers, then :meth:`get_extra_state`'s."""
        for name, value in self._own_state_entries(prefix):
            destination[name] = value if keep_vars or _uninitialized(value) else Tensor(value._data.copy())
        if self._has_extra_state():
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *, destination: Any = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Parameters and persistent buffers by qualified name: detached copies, or the tensors
        themselves with ``keep_vars=True``. (PyTorch returns detached views sharing memory; zgrad
        copies, so a state dict sent to another worker is a snapshot.) A lazy module's
        uninitialized parameters and buffers are in it as themselves, as in PyTorch. Each module's
        state-dict pre-hooks run before it saves, its post-hooks after its children have."""
        out = OrderedDict() if destination is None else destination
        for hook in list(self._state_dict_pre_hooks.values()):
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(out, prefix, keep_vars)
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination=out, prefix=f"{prefix}{name}.", keep_vars=keep_vars)
        for hook in list(self._state_dict_hooks.values()):
            if hook(self, out, prefix, {}) is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return out

    def register_state_dict_pre_hook(self, hook: Callable[..., None]) -> RemovableHandle:
        """Call ``hook(module, prefix, keep_vars)`` before ``state_dict`` saves this module, as PyTorch's."""
        return _registered(self._state_dict_pre_hooks, hook)

    def register_state_dict_post_hook(self, hook: Callable[..., None]) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata)`` once ``state_dict`` has saved
        this module and its children (it may change ``state_dict`` in place), as PyTorch's."""
        return _registered(self._state_dict_hooks, hook)

    def register_load_state_dict_pre_hook(self, hook: Callable[..., None]) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before ``load_state_dict`` reads anything, as PyTorch's: it
        may rename or convert entries of ``state_dict`` (a copy of the caller's) in place, and
        append messages to ``error_msgs`` to make the load fail."""
        return _registered(self._load_state_dict_pre_hooks, hook)

    def register_load_state_dict_post_hook(self, hook: Callable[..., None]) -> RemovableHandle:
        """Call ``hook(module, incompatible_keys)`` once ``load_state_dict`` has loaded, as
        PyTorch's: it may remove entries from ``incompatible_keys.missing_keys`` and
        ``unexpected_keys`` before ``strict`` judges them.

        Raises (at load time):
            AssertionError: the hook returned something (PyTorch's message)."""
        return _registered(self._load_state_dict_post_hooks, hook)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> IncompatibleKeys:
        """Copy values into the parameters and persistent buffers of the same names (cast to their
        dtypes and devices), or with ``assign=True`` put the values themselves in their places, as
        PyTorch's: a value that is not a Parameter becomes one, sharing its memory (a contiguous
        copy of a non-contiguous value: zgrad's parameters are contiguous), with the parameter's
        ``requires_grad`` (an optimizer built before then holds the old parameters).

        Returns the missing keys (in the module's order) and the unexpected ones (in the state
        dict's). Raises, with PyTorch's messages:
            StateDictError: with ``strict``, names missing from or unexpected in ``state_dict``
                (a RuntimeError and a KeyError).
            ShapeError: a value's shape differs from its parameter's or buffer's (a RuntimeError
                and a ValueError).
            RuntimeError: an uninitialized (lazy) value for an initialized parameter or buffer.

        A lazy module (:mod:`zgrad.nn.modules.lazy`) first materializes its uninitialized
        parameters and buffers that ``state_dict`` has values for, with their shapes.
        """
        state_dict = OrderedDict(state_dict)  # pre-hooks may change it: the caller's stays as it is
        modules = [(f"{name}." if name else "", module) for name, module in self.named_modules()]
        hook_errors: list[str] = []
        for module_prefix, module in modules:
            for hook in list(module._load_state_dict_pre_hooks.values()):
                hook(module, state_dict, module_prefix, {}, strict, [], [], hook_errors)
        for module_prefix, module in modules:
            lazy_load = getattr(type(module), "_lazy_load_hook", None)
            if lazy_load is not None:
                lazy_load(module, state_dict, module_prefix)
        own = dict(self._state_entries())
        extras = {p + "_extra_state": m for p, m in modules if m._has_extra_state()}
        missing = [name for p, m in modules for name in [k for k, _ in m._own_state_entries(p)]
                   + ([p + "_extra_state"] if m._has_extra_state() else []) if name not in state_dict]
        unexpected = [name for name in state_dict if name not in own and name not in extras]
        post_hooked = any(m._load_state_dict_post_hooks for _, m in modules)
        errors = [f"{what} key(s) in state_dict: " + ", ".join(f'"{k}"' for k in keys) + ". "
                  for what, keys in (("Missing", missing), ("Unexpected", unexpected)) if keys] if strict else []
        key_errors = len(errors)
        if post_hooked:  # the hooks may still clear the keys: they are judged after them
            errors, key_errors = [], 0
        errors += hook_errors
        # Check every shape before copying anything, so a failed load leaves the module unchanged.
        arrays = {}
        for name, value in state_dict.items():
            if name not in own:
                continue
            if _uninitialized(value) or _uninitialized(own[name]):
                if _uninitialized(value) and _uninitialized(own[name]):
                    continue  # two lazy modules: nothing to copy yet
                (value if _uninitialized(value) else own[name]).shape  # raises: it has no shape
            if not isinstance(value, (Tensor, np.ndarray)):
                errors.append(f'While copying the parameter named "{name}", expected zgrad.Tensor or Tensor-like '
                              f"object from checkpoint but received {type(value)}")
                continue
            array = value._data if isinstance(value, Tensor) else value
            if array.shape != own[name].shape:
                errors.append(f"size mismatch for {name}: copying a param with shape {Size(array.shape)!r} from "
                              f"checkpoint, the shape in current model is {Size(own[name].shape)!r}.")
            arrays[name] = array
        if errors:
            message = f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors)
            raise StateDictError(message) if key_errors or hook_errors else ShapeError(message)
        for name, array in arrays.items():
            if assign:
                self._assign_state(name, state_dict[name], own[name])
            else:
                own[name]._data[...] = dispatch.to_device(array, dispatch.device_type_of(own[name]._data))
        for key, module in extras.items():
            if key in state_dict:
                module.set_extra_state(state_dict[key])
        incompatible = IncompatibleKeys(missing, unexpected)
        if post_hooked:
            for _, module in reversed(modules):  # a module's after its children's, as PyTorch's
                for hook in list(module._load_state_dict_post_hooks.values()):
                    if hook(module, incompatible) is not None:
                        raise AssertionError(
                            "Hooks registered with ``register_load_state_dict_post_hook`` are not expected to return "
                            "new values, if incompatible_keys need to be modified, it should be done inplace.")
            errors = [f"{what} key(s) in state_dict: " + ", ".join(f'"{k}"' for k in keys) + ". "
                      for what, keys in (("Missing", missing), ("Unexpected", unexpected)) if keys] if strict else []
            if errors:
                raise StateDictError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                                     + "\n\t".join(errors))
        return incompatible

    def _assign_state(self, name: str, value: Any, current: Tensor) -> None:
        """Put ``value`` in the place of the parameter or buffer ``current`` at key ``name``."""
        owner, attribute = self._owner_of(name)
        tensor = value if isinstance(value, Tensor) else Tensor(value)
        if attribute in owner._parameters:
            if not isinstance(tensor, Parameter):
                tensor = Parameter(tensor, requires_grad=current.requires_grad)
            else:
                tensor.requires_grad_(current.requires_grad)
            owner._parameters[attribute] = tensor
        else:
            owner._buffers[attribute] = tensor

    # --- device and dtype -----------------------------------------------------------------------

    def _apply(self, convert: Callable[[Tensor], Tensor], recurse: bool = True) -> "Module":
        """Convert every parameter (in place, keeping the Parameter object and its grad) and buffer
        (this module's own only, without ``recurse``)."""
        for module in self.modules() if recurse else (self,):
            for param in module._parameters.values():
                if param is not None:
                    converted = convert(param)._data
                    if param.requires_grad and not (is_floating(converted.dtype) or converted.dtype.kind == "c"):
                        raise RuntimeError("data set to a tensor that requires gradients must be floating point or "
                                           "complex dtype")
                    param._rebind(converted)
                    if param.grad is not None:
                        param.grad._rebind(convert(param.grad)._data)
            for name, buf in module._buffers.items():
                if buf is not None:
                    module._buffers[name] = convert(buf)
        return self

    def to(self, *args: Any, memory_format: Any = None, **kwargs: Any) -> "Module":
        """Move or cast parameters and buffers: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``
        or ``to(tensor)``. A dtype applies to floating-point tensors only; returns self.

        ``memory_format`` is accepted as PyTorch's, and the parameters stay C-contiguous: zgrad's
        optimizers update contiguous parameters, and a layout changes no result.

        Raises:
            TypeError: a non-floating dtype.
            ZgradError: a CUDA device where none can be used.
        """
        device, dtype = parse_to_args(*args, **kwargs)
        if dtype is not None and not is_floating(dtype):
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}")
        return self._apply(lambda t: t.to(device, dtype if is_floating(t.dtype) else None))

    def to_empty(self, *, device: Any, recurse: bool = True) -> "Module":
        """Give every parameter and buffer new, uninitialized memory of its shape and dtype on
        ``device`` (this module's own only, without ``recurse``), as PyTorch's; returns self.

        Raises:
            ZgradError: a device zgrad cannot hold tensors on.
        """
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def type(self, dst_type: Any) -> "Module":
        """Cast every parameter and buffer to ``dst_type`` (a dtype, or a type name such as
        ``"zgrad.DoubleTensor"``), floating or not, as PyTorch's; returns self.

        Raises:
            RuntimeError: a parameter that requires grad would get a dtype that is not floating
                or complex (PyTorch's message).
        """
        return self._apply(lambda t: t.type(dst_type))

    def cpu(self) -> "Module":
        return self.to("cpu")

    def share_memory(self) -> "Module":
        """Move every parameter and buffer (and gradient) into shared memory
        (:meth:`Tensor.share_memory_`), so that processes forked later or sent this module through
        ``zgrad.multiprocessing`` train the same values; returns self."""
        return self._apply(lambda t: t.share_memory_())

    def cuda(self, device: Any = None) -> "Module":
        """Move parameters and buffers to a CUDA device (an index, "cuda:N", a device, or None for
        the current). Raises ZgradError: no CUDA device here, or not a CUDA device."""
        return self.to(cuda_device(device))

    def float(self) -> "Module":
        return self.to(np.float32)

    def double(self) -> "Module":
        return self.to(np.float64)

    def half(self) -> "Module":
        return self.to(np.float16)

    def bfloat16(self) -> "Module":
        return self.to(BFLOAT16)

    # --- repr -----------------------------------------------------------------------------------

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        """PyTorch's layout: a one-line ``extra_repr`` inline, else its lines and then each child's,
        indented, one per line."""
        extra = self.extra_repr().split("\n") if self.extra_repr() else []
        children = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        if len(extra) == 1 and not children:
            return f"{type(self).__name__}({extra[0]})"
        lines = extra + children
        return f"{type(self).__name__}(" + ("\n  " + "\n  ".join(lines) + "\n" if lines else "") + ")"


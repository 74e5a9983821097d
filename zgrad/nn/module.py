"""``Module`` and ``Parameter``: the containers models are built from."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterator, Mapping

import numpy as np

from zgrad.tensor import Tensor

__all__ = ["Module", "Parameter"]


class Parameter(Tensor):
    """A leaf tensor that a :class:`Module` registers as one of its parameters."""

    __slots__ = ()

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        array = data._data if isinstance(data, Tensor) else np.asarray(data)
        super().__init__(np.ascontiguousarray(array))
        self.requires_grad_(requires_grad)


class Module:
    """Base class of models: holds parameters, buffers and sub-modules assigned as attributes.

    Subclasses implement ``forward``; calling the module calls it. Buffers
    (:meth:`register_buffer`) are tensors that belong to the model's state without being
    trained, such as running statistics: DDP broadcasts them from rank 0.
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() is called")
        if name in self._buffers and (value is None or isinstance(value, Tensor)) and not isinstance(value, Parameter):
            self._buffers[name] = value
            return
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is None:
            self._parameters[name] = None
        else:
            setattr(self, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: module state that is not a parameter (``persistent=False`` keeps it out
        of ``state_dict``). Assigning a tensor to ``name`` later replaces it.

        Raises:
            KeyError: ``name`` is already a parameter or a sub-module.
            TypeError: ``tensor`` is neither a tensor nor None.
        """
        if name in self._parameters or name in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """(qualified name, buffer) pairs of this module and its sub-modules, each once."""
        return self._named_members("_buffers", prefix)

    def buffers(self) -> Iterator[Tensor]:
        return (b for _, b in self.named_buffers())

    def add_module(self, name: str, module: "Module") -> None:
        setattr(self, name, module)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator["Module"]:
        return (m for _, m in self.named_modules())

    def children(self) -> Iterator["Module"]:
        return iter(self._modules.values())

    def _named_members(self, table: str, prefix: str) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        for module_name, module in self.named_modules(prefix):
            for name, member in getattr(module, table).items():
                if member is None or id(member) in seen:
                    continue
                seen.add(id(member))
                yield (f"{module_name}.{name}" if module_name else name), member

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """(qualified name, parameter) pairs of this module and its sub-modules, each once."""
        return self._named_members("_parameters", prefix)

    def parameters(self) -> Iterator[Parameter]:
        return (p for _, p in self.named_parameters())

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the ``.grad`` of every parameter (set to None, or zero it in place)."""
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad._data[...] = 0

    def _persistent_state(self) -> "OrderedDict[str, Tensor]":
        state: OrderedDict[str, Tensor] = OrderedDict(self.named_parameters())
        for module_name, module in self.named_modules():
            for name, buf in module._buffers.items():
                if buf is not None and name not in module._non_persistent:
                    state[f"{module_name}.{name}" if module_name else name] = buf
        return state

    def state_dict(self) -> "OrderedDict[str, Tensor]":
        """Detached copies of every parameter and persistent buffer, by qualified name."""
        return OrderedDict((name, Tensor(t._data.copy())) for name, t in self._persistent_state().items())

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> None:
        """Copy values into the parameters of the same names.

        Raises:
            KeyError: with ``strict``, names missing from or unexpected in ``state_dict``.
            ValueError: a value's shape differs from its parameter's.
        """
        own = dict(self._persistent_state())
        missing = sorted(set(own) - set(state_dict))
        unexpected = sorted(set(state_dict) - set(own))
        if strict and (missing or unexpected):
            raise KeyError(f"Error(s) in loading state_dict for {type(self).__name__}: missing keys {missing}, unexpected keys {unexpected}")
        # Check every shape before copying anything, so a failed load leaves the module unchanged.
        arrays = {}
        for name, value in state_dict.items():
            if name not in own:
                continue
            array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
            if array.shape != own[name].shape:
                raise ValueError(
                    f"size mismatch for {name}: copying a param with shape {list(array.shape)}, "
                    f"the shape in current model is {list(own[name].shape)}"
                )
            arrays[name] = array
        for name, array in arrays.items():
            own[name]._data[...] = array

    def train(self, mode: bool = True) -> "Module":
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"  ({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        body = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({body})"
        return f"{type(self).__name__}({body}\n" + "\n".join(lines) + "\n)"

"""Parameter containers: ``ParameterList`` and ``ParameterDict``.

Their tensors are registered parameters of the container (a tensor that is not a Parameter is
made one, as PyTorch does), so ``parameters()``, ``to()`` and state dicts reach them under the
keys PyTorch gives: ``"0"``, ``"1"``, ... or the dict's keys. A ParameterList also holds other
objects, kept as plain attributes. Neither has a ``forward``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping

from zgrad.nn.containers import named_pairs
from zgrad.nn.module import Module, Parameter
from zgrad.tensor import Tensor
from zgrad.tensor_info import type_name

__all__ = ["ParameterList", "ParameterDict"]


def _as_parameter(value: Any) -> Any:
    """A tensor as a Parameter (a Parameter as itself); any other object as it is."""
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


def _described(value: Any, dtype_name: str) -> str:
    if not isinstance(value, Tensor):
        return f"Object of type: {type(value).__name__}"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    device = f" ({value.device})" if value.device.type == "cuda" else ""
    return f"{kind} containing: [{dtype_name} of size {'x'.join(str(n) for n in value.shape)}{device}]"


class ParameterList(Module):
    """A list of parameters (and other objects), registered under "0", "1", ... in order."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _index(self, index: int) -> str:
        if not -self._size <= index < self._size:
            raise IndexError(f"index {index} is out of range")
        return str(index % self._size)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return ParameterList(self[i] for i in range(self._size)[index])
        return getattr(self, self._index(index))

    def __setitem__(self, index: int, value: Any) -> None:
        setattr(self, self._index(index), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(self._size))

    def __iadd__(self, values: Iterable[Any]) -> "ParameterList":
        return self.extend(values)

    def __dir__(self) -> list[str]:
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, value: Any) -> "ParameterList":
        """Add ``value`` (a tensor becomes a Parameter) at the end; returns self."""
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        """Append each of ``values``; returns self.

        Raises:
            TypeError: ``values`` is not iterable, or is a single tensor.
        """
        if isinstance(values, Tensor) or not isinstance(values, Iterable):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got "
                            f"{type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({i}): {_described(value, f'zgrad.{value.dtype}' if isinstance(value, Tensor) else '')}"
                         for i, value in enumerate(self))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters by name (a tensor value becomes a Parameter), in insertion order."""

    def __init__(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)  # a missing key is an AttributeError, as in PyTorch

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        if "." in key:
            raise KeyError('parameter name can\'t contain "."')
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def keys(self) -> Iterable[str]:
        return self._keys.keys()

    def values(self) -> Iterable[Any]:
        return [self[key] for key in self._keys]

    def items(self) -> Iterable[tuple[str, Any]]:
        return [(key, self[key]) for key in self._keys]

    def get(self, key: str, default: Any = None) -> Any:
        """The value under ``key``, or ``default``."""
        return self[key] if key in self._keys else default

    def pop(self, key: str) -> Any:
        """Remove and return the value under ``key``.

        Raises:
            KeyError: no such key.
        """
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[str, Any]:
        """Remove and return the last (key, value) inserted.

        Raises:
            KeyError: the dict is empty.
        """
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self._keys:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def copy(self) -> "ParameterDict":
        """A new ParameterDict holding the same parameters (not copies of them)."""
        return ParameterDict(self.items())

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> "ParameterDict":
        return ParameterDict((key, default) for key in keys)

    def update(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        """Add or replace entries from a ParameterDict or OrderedDict (in its order), another
        mapping (in sorted key order, as PyTorch), or (key, value) pairs.

        Raises:
            TypeError: an entry that is not a (key, value) pair.
        """
        if isinstance(parameters, (ParameterDict, OrderedDict)):
            pairs = list(parameters.items())
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = parameters
        for key, value in named_pairs(pairs, "ParameterDict", "value"):
            self[key] = value

    def __or__(self, other: Any) -> "ParameterDict":
        merged = self.copy()
        merged.update(other)
        return merged

    def __ror__(self, other: Any) -> "ParameterDict":
        merged = ParameterDict(other)
        merged.update(self)
        return merged

    def __ior__(self, other: Any) -> "ParameterDict":
        self.update(other)
        return self

    def extra_repr(self) -> str:
        return "\n".join(
            f"  ({key}): "
            + _described(value, type_name(value.dtype, value.device.type) if isinstance(value, Tensor) else "")
            for key, value in self.items())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")

"""Module containers: ``Sequential``, ``ModuleList``, ``ModuleDict``.

Their children are registered sub-modules, so parameters, buffers, ``train()``/``eval()``,
``to()`` and state dicts reach everything inside them. Children are named ``"0"``, ``"1"``, ...
(or by their keys), as in PyTorch, so state-dict keys match PyTorch's.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping

from zgrad.nn.module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict", "named_pairs"]


def named_pairs(entries: Mapping[str, Any] | Iterable[tuple[str, Any]], owner: str, what: str) -> Iterator[tuple]:
    """The (name, value) pairs of a mapping or of an iterable of pairs, as a dict container's
    ``update`` takes them.

    Raises:
        TypeError: an entry that is not a pair (PyTorch's message, naming ``owner`` and ``what``).
    """
    pairs = entries.items() if isinstance(entries, Mapping) else entries
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{owner} update sequence element #{i} should be a (name, {what}) pair, "
                            f"got {type(pair).__name__}")
        yield pair


def _check_module(module: Any, where: str) -> Module:
    if not isinstance(module, Module):
        raise TypeError(f"{where} expects Modules, got {type(module).__name__}")
    return module


def _position(index: int, length: int, what: str) -> int:
    """``index`` in [0, length), negatives counting from the end.

    Raises:
        IndexError: out of range.
    """
    if not -length <= index < length:
        raise IndexError(f"index {index} is out of range for {what} of length {length}")
    return index % length


class _Indexed(Module):
    """Children kept in order under the names "0", "1", ...; renumbered after a removal."""

    def _renumber(self, modules: Iterable[Module]) -> None:
        self._modules.clear()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: int | slice) -> Any:
        items = list(self._modules.items())
        if isinstance(index, slice):
            return self._sliced(items[index])
        return items[_position(index, len(items), type(self).__name__)][1]

    def __setitem__(self, index: int, module: Module) -> None:
        keys = list(self._modules)
        self._modules[keys[_position(index, len(keys), type(self).__name__)]] = _check_module(module, type(self).__name__)

    def __delitem__(self, index: int | slice) -> None:
        modules = list(self._modules.values())
        if isinstance(index, slice):
            del modules[index]
        else:
            del modules[_position(index, len(modules), type(self).__name__)]
        self._renumber(modules)

    def append(self, module: Module) -> "_Indexed":
        """Add ``module`` at the end; returns self."""
        self._modules[str(len(self))] = _check_module(module, type(self).__name__)
        return self

    def extend(self, modules: Iterable[Module]) -> "_Indexed":
        """Add each of ``modules`` at the end; returns self."""
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Put ``module`` before position ``index`` (as list.insert)."""
        modules = list(self._modules.values())
        modules.insert(index, _check_module(module, type(self).__name__))
        self._renumber(modules)

    def pop(self, index: int = -1) -> Module:
        """Remove and return the module at ``index``."""
        module = self[index]
        del self[index]
        return module

    def __dir__(self) -> list[str]:
        return [k for k in super().__dir__() if not k.isdigit()]


class Sequential(_Indexed):
    """Modules applied one after the other: ``Sequential(m1, m2, ...)`` or ``Sequential(OrderedDict)``
    (children then keep the dict's names). Indexing with a slice gives a Sequential."""

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, _check_module(m, "Sequential"))
            return
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential expects Modules, got {type(m).__name__} at position {i}")
            self.add_module(str(i), m)

    def _sliced(self, items: list[tuple[str, Module]]) -> "Sequential":
        return Sequential(OrderedDict(items))

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(_Indexed):
    """A list of modules, registered as children (a plain Python list would hide their parameters).
    It has no ``forward``: the owner decides how to call them."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _sliced(self, items: list[tuple[str, Module]]) -> "ModuleList":
        return ModuleList(m for _, m in items)

    def __repr__(self) -> str:
        """PyTorch's: consecutive children that print alike print once, as ``(0-11): 12 x Block(...)``."""
        runs: list[list] = []  # [first index, last index, repr]
        for i, module in enumerate(self):
            text = repr(module)
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        name = type(self).__name__  # a subclass prints its own name (ParametrizationList), as PyTorch's
        if not runs:
            return f"{name}()"
        lines = [(f"({first}): " if first == last else f"({first}-{last}): {last - first + 1} x ")
                 + text.replace("\n", "\n  ") for first, last, text in runs]
        return f"{name}(\n  " + "\n  ".join(lines) + "\n)"

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return ModuleList([*self, *other])


class ModuleDict(Module):
    """A dict of modules by name, registered as children, in insertion order. It has no
    ``forward``."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, _check_module(module, "ModuleDict"))

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove and return the module under ``key``."""
        return self._modules.pop(key)

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add or replace modules from a mapping or from (name, module) pairs.

        Raises:
            TypeError: an entry that is not a (name, module) pair.
        """
        for name, module in named_pairs(modules, "ModuleDict", "module"):
            self[name] = module

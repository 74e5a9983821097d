"""Lazy submodules for the backends' kernel packages: a kernel module is imported (and numba with
it) on the first access to it as an attribute of its package, so importing a backend imports no
numba and compiles nothing.

A package opts in with ``__getattr__ = lazy_submodules(__name__, __all__)`` (PEP 562). Host code
then writes ``from zgrad.kernels.cpu import kernels`` at the top and ``kernels.conv.im2col(...)``
at the call: the first access imports ``zgrad.kernels.cpu.kernels.conv``, which the import system
then binds on the package, so every later access is a plain attribute lookup.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

__all__ = ["lazy_submodules"]


def lazy_submodules(
    package: str, names: Collection[str], import_lock: Callable[[], Any] = contextlib.nullcontext
) -> Callable[[str], ModuleType]:
    """A module ``__getattr__`` for ``package`` that imports its submodule ``name`` on first access.

    Args:
        package: the package's ``__name__``.
        names: its submodules (the package's ``__all__``); other names raise AttributeError.
        import_lock: a context manager factory held while a submodule imports (the CUDA kernels
            import under the simulator's launch lock).
    """

    def __getattr__(name: str) -> ModuleType:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        with import_lock():
            return importlib.import_module(f"{package}.{name}")

    return __getattr__

"""Call targets travel as ``"module:qualname"`` and resolve only inside allowed modules.

A callee resolves a target only when its module is ``__main__``, one of zgrad's compute modules
(ops, tensor factories, ``nn``, ``optim``: pure computation, no files, no processes), named (or
below one named) in ``[rpc] allowed_modules``, or when the whole name is one of zgrad's own RPC
entry points (:data:`ZGRAD_ENTRY_POINTS`). The rest of zgrad is not callable by peers: it holds
functions that run files, import modules or write keys, which must never run on a peer's word.
A target resolves only to a callable whose ``__module__`` is its module, so an allowed module
cannot be used as a stepping stone to what it imports (``mymodule:os`` or ``mymodule:system``
are refused). Private and dunder attributes never resolve.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any, Callable, Iterable

from zgrad.errors import ZgradError

__all__ = ["TargetError", "target_name", "resolve_target", "ALWAYS_ALLOWED", "ZGRAD_ENTRY_POINTS"]

ALWAYS_ALLOWED = ("__main__", "zgrad.ops", "zgrad.creation", "zgrad.nn", "zgrad.optim")
# The functions and classes zgrad itself calls on other workers (kept in sync by a test).
ZGRAD_ENTRY_POINTS = frozenset({
    "zgrad.distributed.rpc.api:collect_debug_info",
    "zgrad.distributed.rpc.rref:invoke_method",
    "zgrad.distributed.optim.optimizer:LocalOptimizer",
    "zgrad.distributed.optim.optimizer:local_step",
    "zgrad.launch.demo:Stage",
    "zgrad.launch.demo:stage_forward",
    "zgrad.launch.demo:stage_predict",
})
MAX_TARGET_LENGTH = 512


class TargetError(ZgradError):
    """A call target cannot be named or is not allowed; the message says how to allow it."""


def target_name(func: Callable[..., Any]) -> str:
    """The wire name ``"module:qualname"`` of a module-level function or class.

    Raises:
        TargetError: ``func`` is not callable, or is a lambda, a nested function or a bound
            method of an instance (those have no name another process can resolve).
    """
    if not callable(func):
        raise TargetError(f"an RPC target must be a function or a class, got {type(func).__name__}")
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    bound_to = getattr(func, "__self__", None)
    bound_to_instance = bound_to is not None and not isinstance(bound_to, (type, types.ModuleType))
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname or bound_to_instance:
        raise TargetError(
            f"cannot call {func!r} over RPC: targets must be module-level functions or classes "
            "(no lambdas, nested functions or bound methods); use RRef proxies for methods of remote objects"
        )
    return f"{module}:{qualname}"


def _module_allowed(module: str, allowed: Iterable[str]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in (*ALWAYS_ALLOWED, *allowed))


def resolve_target(name: Any, allowed_modules: Iterable[str], worker: str) -> Callable[..., Any]:
    """Resolve a received target name to the callable it names, if the allow-list permits.

    Args:
        name: the received ``"module:qualname"``.
        allowed_modules: ``[rpc] allowed_modules`` of this worker.
        worker: this worker's name, for the error message.

    Raises:
        TargetError: malformed name, a module outside the allow-list, a private attribute, or an
            object not defined in that module; the message says how to allow it.
    """
    allowed_modules = tuple(allowed_modules)
    if not isinstance(name, str) or len(name) > MAX_TARGET_LENGTH or name.count(":") != 1:
        raise TargetError(f"malformed RPC target {str(name)[:80]!r}: expected 'module:qualname'")
    module_name, qualname = name.split(":")
    if name not in ZGRAD_ENTRY_POINTS and not _module_allowed(module_name, allowed_modules):
        raise TargetError(
            f"RPC target {name!r} is not allowed on worker {worker!r}: module {module_name!r} is not in the allow-list "
            f"({', '.join((*ALWAYS_ALLOWED, *allowed_modules))}). To allow it, add {module_name!r} to "
            "[rpc] allowed_modules in the config of the worker that runs it."
        )
    parts = qualname.split(".")
    if not all(parts) or any(p.startswith("_") for p in parts):
        raise TargetError(f"RPC target {name!r} is not allowed on worker {worker!r}: private or dunder names do not resolve")
    try:
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"RPC target {name!r}: module {module_name!r} cannot be imported on worker {worker!r}: {exc}") from exc
    obj: Any = module
    for part in parts:
        obj = getattr(obj, part, None)
        if obj is None:
            raise TargetError(f"RPC target {name!r} does not exist on worker {worker!r}")
    defined_in = getattr(obj, "__module__", None)
    if not callable(obj) or defined_in != module_name:
        raise TargetError(
            f"RPC target {name!r} is not allowed on worker {worker!r}: it resolves to an object defined in "
            f"{defined_in!r}, not in {module_name!r}; only callables defined in an allowed module can be called"
        )
    return obj

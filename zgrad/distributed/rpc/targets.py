"""Call targets travel as ``"module:qualname"`` and resolve only inside allowed modules.

The same names carry functions, classes and methods passed as RPC *values*, and the classes of
objects sent by attribute dict (``codec.py``): nothing arrives by pickle, everything by name.

A callee resolves a name only when its module is

- ``__main__`` (``__mp_main__``, the name a script has in a ``spawn`` child, is the same);
- a module of the running program: already imported and loaded from the main script's own
  directory (``rnn.py`` next to ``main.py``), as a program split into a few files expects;
- one of zgrad's compute modules (ops, tensor factories, ``nn``, ``optim``: pure computation,
  no files, no processes);
- named (or below one named) in ``[rpc] allowed_modules``;

or when the whole name is one of zgrad's own RPC entry points (:data:`ZGRAD_ENTRY_POINTS`). The
rest of zgrad is not callable by peers: it holds functions that run files, import modules or
write keys, which must never run on a peer's word. A name resolves only to an object whose
``__module__`` is its module, so an allowed module cannot be used as a stepping stone to what
it imports (``mymodule:os`` or ``mymodule:system`` are refused). Dunder names never resolve;
single-underscore names resolve in the program's and the configured modules (helpers such as
``_call_method`` are common there) but not in zgrad's, whose private functions are no API.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any, Callable, Iterable

from zgrad.errors import ZgradError

__all__ = ["TargetError", "target_name", "resolve_target", "name_resolver", "NAMES_REMEMBERED", "ALWAYS_ALLOWED", "ZGRAD_ENTRY_POINTS"]

ALWAYS_ALLOWED = ("__main__", "zgrad.ops", "zgrad.creation", "zgrad.nn", "zgrad.optim")
# The module name a script has in a child started by multiprocessing's spawn or forkserver.
SPAWNED_MAIN = "__mp_main__"
# The functions and classes zgrad itself calls on other workers or sends as values (kept in sync
# by a test).
ZGRAD_ENTRY_POINTS = frozenset({
    "zgrad.distributed.rpc.api:collect_debug_info",
    "zgrad.distributed.rpc.rref:invoke_method",
    "zgrad.distributed.optim.optimizer:LocalOptimizer",
    "zgrad.distributed.optim.optimizer:local_step",
    "zgrad.distributed.nn.remote_module:RemoteModule",
    "zgrad.distributed.nn.remote_module:remote_forward",
    "zgrad.distributed.nn.remote_module:remote_parameter_rrefs",
    "zgrad.distributed.autograd.tracing:collect_recordings",
    "zgrad.distributed.autograd.graph_view:describe_graph",
})
MAX_TARGET_LENGTH = 512
# Names remembered per worker, resolved or to call (a peer naming ever new ones must not grow memory).
NAMES_REMEMBERED = 4096


class TargetError(ZgradError):
    """A call target cannot be named or is not allowed; the message says how to allow it."""


def target_name(func: Callable[..., Any]) -> str:
    """The wire name ``"module:qualname"`` of a module-level function or class, or of a function
    or class defined in a class body (a method taken from its class, a static or class method).

    Raises:
        TargetError: ``func`` is not callable, or is a lambda, a nested function or a method
            bound to an instance (those have no name another process can resolve).
    """
    if not callable(func):
        raise TargetError(f"an RPC target must be a function or a class, got {type(func).__name__}")
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    bound_to = getattr(func, "__self__", None)
    bound_to_instance = bound_to is not None and not isinstance(bound_to, (type, types.ModuleType))
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname or bound_to_instance:
        raise TargetError(
            f"cannot call or send {func!r} over RPC: only module-level functions and classes, and methods taken "
            "from their class (Cls.method), travel by name (no lambdas, nested functions or methods bound to an "
            "instance); use RRef proxies (rref.rpc_sync().method()) for methods of remote objects"
        )
    if module == SPAWNED_MAIN:
        module = "__main__"
    return f"{module}:{qualname}"


def _module_allowed(module: str, allowed: Iterable[str]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in (*ALWAYS_ALLOWED, *allowed))


def _program_module(module_name: str) -> bool:
    """Whether ``module_name`` is a module of the running program: imported already, from a file
    in the directory of the main script (not below it: a virtual environment may live there).
    Never one of zgrad's own: a job run as ``python -m`` on a module of zgrad must not open the
    modules beside it (those of the launcher, say) to peers."""
    if module_name.split(".")[0] == "zgrad":
        return False
    module = sys.modules.get(module_name)
    main = sys.modules.get("__main__")
    module_file = getattr(module, "__file__", None)
    main_file = getattr(main, "__file__", None)
    if not isinstance(module_file, str) or not isinstance(main_file, str):
        return False
    return os.path.dirname(os.path.realpath(module_file)) == os.path.dirname(os.path.realpath(main_file))


def _private(part: str, module_name: str) -> bool:
    return part.startswith("__") or (part.startswith("_") and module_name.split(".")[0] == "zgrad")


def resolve_target(name: Any, allowed_modules: Iterable[str], worker: str, what: str = "RPC target") -> Callable[..., Any]:
    """Resolve a received ``"module:qualname"`` to the callable it names, if the allow-list permits.

    Args:
        name: the received ``"module:qualname"``.
        allowed_modules: ``[rpc] allowed_modules`` of this worker.
        worker: this worker's name, for the error message.
        what: what the name stands for, for the error message ("RPC target", "function value").

    Raises:
        TargetError: malformed name, a module outside the allow-list, a dunder (or zgrad-private)
            attribute, or an object not defined in that module; the message says how to allow it.
    """
    allowed_modules = tuple(allowed_modules)
    if not isinstance(name, str) or len(name) > MAX_TARGET_LENGTH or name.count(":") != 1:
        raise TargetError(f"malformed {what} {str(name)[:80]!r}: expected 'module:qualname'")
    module_name, qualname = name.split(":")
    if module_name == SPAWNED_MAIN:
        module_name = "__main__"
    if name not in ZGRAD_ENTRY_POINTS and not _module_allowed(module_name, allowed_modules) \
            and not _program_module(module_name):
        raise TargetError(
            f"{what} {name!r} is not allowed on worker {worker!r}: module {module_name!r} is not in the allow-list "
            f"({', '.join((*ALWAYS_ALLOWED, *allowed_modules))}, and the modules next to the main script). To allow it, "
            f"add {module_name!r} to [rpc] allowed_modules in the config of the worker that receives it."
        )
    parts = qualname.split(".")
    if not all(parts) or any(_private(p, module_name) for p in parts):
        raise TargetError(f"{what} {name!r} is not allowed on worker {worker!r}: dunder and zgrad-private names do not resolve")
    try:
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"{what} {name!r}: module {module_name!r} cannot be imported on worker {worker!r}: {exc}") from exc
    obj: Any = module
    for part in parts:
        obj = getattr(obj, part, None)
        if obj is None:
            raise TargetError(f"{what} {name!r} does not exist on worker {worker!r}")
    defined_in = getattr(obj, "__module__", None)
    if defined_in == SPAWNED_MAIN:
        defined_in = "__main__"
    if not callable(obj) or defined_in != module_name:
        raise TargetError(
            f"{what} {name!r} is not allowed on worker {worker!r}: it resolves to an object defined in "
            f"{defined_in!r}, not in {module_name!r}; only callables defined in an allowed module resolve"
        )
    return obj


def name_resolver(allowed_modules: Iterable[str], worker: str) -> Callable[[Any, str], Callable[..., Any]]:
    """``resolve(name, what)``: :func:`resolve_target` under one worker's allow-list (what the
    codec takes to rebuild functions and classes, and a callee to find a call's target)."""
    allowed = tuple(allowed_modules)

    def resolve(name: Any, what: str) -> Callable[..., Any]:
        return resolve_target(name, allowed, worker, what)

    return resolve

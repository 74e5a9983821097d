"""``zgrad.compile`` and ``zgrad.compiler``, as PyTorch's, for a runtime without a graph compiler.

zgrad runs every program eagerly: its ops are already compiled Numba kernels, and it has no graph
capture (TorchDynamo, FX) to fuse them further. ``zgrad.compile(model)`` therefore checks its
arguments as ``torch.compile`` does and returns ``model`` itself, which computes exactly what the
compiled model would (PyTorch's ``backend="eager"`` runs the same ops). A program written for
``torch.compile`` runs unchanged; it just is not fused. Differences a program could notice: the
result is the model itself, not a wrapper, so its ``state_dict`` keys have no ``_orig_mod.``
prefix; and a callable backend, which would be handed a captured graph, is refused.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["compile", "disable", "is_compiling", "is_dynamo_compiling", "list_backends", "reset",
           "allow_in_graph", "assume_constant_result", "cudagraph_mark_step_begin"]

_BACKENDS = ("cudagraphs", "inductor", "eager", "aot_eager")
_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


def compile(model: Callable | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,  # noqa: A001
            backend: str | Callable | None = None, mode: str | None = None, options: dict | None = None,
            name: str | None = None, disable: bool = False, **_: Any) -> Any:
    """``model`` (a module or a function), to be run as it is: see the module docstring. Without
    ``model``, a decorator that does the same.

    Args:
        fullgraph, dynamic, options, name, disable: PyTorch's; nothing to change without a compiler.
        backend: None or one of :func:`list_backends`; all run eagerly.
        mode: None or one of PyTorch's modes.

    Raises:
        TypeError: ``model`` is not callable.
        RuntimeError: an unknown ``mode``, or both ``mode`` and ``options`` (PyTorch's messages).
        ValueError: an unknown backend name.
        NotImplementedError: a callable backend (it needs a captured graph, which zgrad does not make).
    """
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if callable(backend):
        raise NotImplementedError(
            "zgrad.compile: a callable backend is handed a captured graph (torch.fx), and zgrad captures none: it "
            "runs every program eagerly. Pass backend=None (or a name from zgrad.compiler.list_backends())")
    if backend is not None and backend not in _BACKENDS:
        raise ValueError(f"Invalid backend: {backend!r}, see `zgrad.compiler.list_backends()` for available backends.")
    if model is None:
        return lambda fn: compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                  options=options, name=name, disable=disable)
    if not callable(model):
        raise TypeError(f"A callable function is expected, but {type(model)} is provided.")
    return model


def list_backends(exclude_tags: Any = ("debug", "experimental")) -> list[str]:
    """The backend names :func:`compile` takes (every one runs eagerly in zgrad)."""
    return sorted(_BACKENDS)


def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None) -> Any:
    """``fn`` itself (nothing is compiled to leave out); without ``fn``, a decorator."""
    return (lambda f: f) if fn is None else fn


def allow_in_graph(fn: Callable) -> Callable:
    """``fn`` itself: there is no graph to allow it in."""
    return fn


def assume_constant_result(fn: Callable) -> Callable:
    """``fn`` itself: there is no graph to fold its result into."""
    return fn


def is_compiling() -> bool:
    """False: zgrad never traces a program."""
    return False


def is_dynamo_compiling() -> bool:
    """False: zgrad never traces a program."""
    return False


def reset() -> None:
    """Nothing to reset: zgrad keeps no compiled graphs."""


def cudagraph_mark_step_begin() -> None:
    """Nothing to mark: zgrad records no CUDA graphs."""

"""Which process group world a thread works with (mirrors ``zgrad/distributed/rpc/state.py``).

A process normally runs one rank, so one world (one ``init_process_group``). With several ranks
as threads of one process (the ``inproc`` transport, tests) each world is bound to the thread
that created it, to its groups' threads, and, while they run hooks, to DDP's reducer threads. A
thread bound to none uses the process's only world.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from zgrad.errors import ZgradError

if TYPE_CHECKING:
    from zgrad.distributed.collectives.process_group import World

__all__ = ["NOT_INITIALIZED", "bind_thread", "bound_world", "current_world", "register_world", "unregister_world"]

NOT_INITIALIZED = (
    "Default process group has not been initialized, please make sure to call init_process_group. "
    "(zgrad.distributed.init_process_group(rank=..., world_size=..., init_method='tcp://host:port'), or start the "
    "job with zgrad-launch)"
)


class _Binding(threading.local):
    world: "World | None" = None


class _Worlds:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: list["World"] = []
        self.local = _Binding()


_worlds = _Worlds()


def bind_thread(world: "World | None") -> "World | None":
    """Make ``world`` the calling thread's (None unbinds); returns the previous binding."""
    previous, _worlds.local.world = _worlds.local.world, world
    return previous


def bound_world() -> "World | None":
    """The world bound to the calling thread, if any (not the fallback)."""
    return _worlds.local.world


def register_world(world: "World") -> None:
    with _worlds.lock:
        _worlds.live.append(world)
    bind_thread(world)


def unregister_world(world: "World") -> None:
    with _worlds.lock:
        if world in _worlds.live:
            _worlds.live.remove(world)
    if _worlds.local.world is world:
        bind_thread(None)


def current_world(required: bool = True) -> "World | None":
    """The calling thread's world: its binding, else the process's only one.

    Raises:
        ZgradError: none is initialized (PyTorch's text, plus how to fix it), or several run in
            this process and the thread is bound to none (with ``required``; else None).
    """
    bound = _worlds.local.world
    if bound is not None and not bound.destroyed:
        return bound
    with _worlds.lock:
        live = list(_worlds.live)
    if len(live) == 1:
        return live[0]
    if not required:
        return None
    if not live:
        raise ZgradError(NOT_INITIALIZED)
    raise ZgradError(f"{len(live)} process groups run in this process and this thread is bound to none: use the "
                     "thread that called init_process_group")

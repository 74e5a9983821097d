"""Which process-group world a thread works with (:class:`~zgrad.distributed.binding.ThreadBinding`):
each world is bound to the thread that created it, to its groups' threads and, while they run
hooks, to DDP's reducer threads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zgrad.distributed.binding import ThreadBinding
from zgrad.errors import ZgradError

if TYPE_CHECKING:
    from zgrad.distributed.collectives.process_group import World

__all__ = ["NOT_INITIALIZED", "bind_thread", "bound_world", "current_world", "register_world", "unregister_world"]

NOT_INITIALIZED = (
    "Default process group has not been initialized, please make sure to call init_process_group. "
    "(zgrad.distributed.init_process_group(rank=..., world_size=..., init_method='tcp://host:port'), or start the "
    "job with zgrad-launch)"
)


_worlds: ThreadBinding["World"] = ThreadBinding(lambda world: not world.destroyed)


def bind_thread(world: "World | None") -> "World | None":
    """Make ``world`` the calling thread's (None unbinds); returns the previous binding."""
    return _worlds.bind(world)


def bound_world() -> "World | None":
    """The world bound to the calling thread, if any (not the fallback)."""
    return _worlds.bound()


def register_world(world: "World") -> None:
    _worlds.register(world)


def unregister_world(world: "World") -> None:
    _worlds.unregister(world)


def current_world(required: bool = True) -> "World | None":
    """The calling thread's world: its binding, else the process's only one.

    Raises:
        ZgradError: none is initialized (PyTorch's text, plus how to fix it), or several run in
            this process and the thread is bound to none (with ``required``; else None).
    """
    world, live = _worlds.current()
    if world is not None or not required:
        return world
    if not live:
        raise ZgradError(NOT_INITIALIZED)
    raise ZgradError(f"{len(live)} process groups run in this process and this thread is bound to none: use the "
                     "thread that called init_process_group")

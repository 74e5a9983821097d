"""``RemovableHandle``, what registering a module or node hook returns (public as PyTorch's
``torch.utils.hooks.RemovableHandle``: ``zgrad.utils.hooks.RemovableHandle``).

Hooks live in an ordered dict keyed by the handle's ``id``; a hook registered with an option
(``with_kwargs``, ``always_call``) also has its id in one or more extra dicts, which ``remove``
clears too.
"""

from __future__ import annotations

import itertools
from typing import Any

__all__ = ["RemovableHandle"]

_ids = itertools.count()


class RemovableHandle:
    """``remove()`` (or leaving a ``with`` block) unregisters the hook; ``id`` is its key."""

    def __init__(self, hooks_dict: dict, *, extra_dict: dict | list | None = None) -> None:
        self.hooks_dict = hooks_dict
        self.id = next(_ids)
        extras = extra_dict if isinstance(extra_dict, list) else [] if extra_dict is None else [extra_dict]
        self.extra_dicts = extras

    def remove(self) -> None:
        self.hooks_dict.pop(self.id, None)
        for extra in self.extra_dicts:
            extra.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

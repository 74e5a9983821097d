"""Scratch arrays that kernels reuse from call to call instead of allocating them each time.

A fresh array pays for its pages on first touch: for the scratch of a convolution, once glibc
hands freed blocks back to the kernel, more than the copies that fill it (figures:
bench/README.md, Design figures). A :class:`Workspace` keeps the largest
array it handed out under each name. :func:`workspace` lends one per call from a shared free
list, so concurrent calls never share arrays and the memory held is the peak concurrency times
one call's scratch (not a copy per thread that ever ran a kernel).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np

__all__ = ["Workspace", "workspace"]


class Workspace:
    """Named scratch arrays; an array stays valid until the same name is asked for again."""

    def __init__(self) -> None:
        self._held: dict[str, np.ndarray] = {}

    def take(self, name: str, shape: tuple[int, ...] | int, dtype: np.dtype) -> np.ndarray:
        """A C-contiguous array of ``shape`` and ``dtype`` (contents undefined)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        held = self._held.get(name)
        if held is None or held.nbytes < nbytes:
            held = self._held[name] = np.empty(nbytes, np.uint8)
        return held[:nbytes].view(dtype).reshape(shape)


_free: list[Workspace] = []
_free_lock = threading.Lock()


@contextlib.contextmanager
def workspace() -> Iterator[Workspace]:
    """Borrow a workspace for the block (made when every one is in use) and give it back after."""
    with _free_lock:
        lent = _free.pop() if _free else Workspace()
    try:
        yield lent
    finally:
        with _free_lock:
            _free.append(lent)

"""Version counters of array memory: what catches an in-place change of a value saved for backward.

PyTorch counts the in-place changes of every storage; an op records the count of each tensor it
saves for backward, and its backward refuses to run when a count has moved since. zgrad's tensors
wrap arrays, and a view shares the memory of its base, so the count here belongs to the array
that owns the memory (the last array of a view's ``base`` chain): a change made through any view
(``x[0].add_(1)``, an LSTM's output, which views the states its backward keeps) counts for all.

Counters exist only for memory some recorded op saved; an in-place change of other memory costs a
dictionary lookup. The same registry knows which memory belongs to a leaf that requires grad, so
that an in-place change through a *view* of such a leaf is refused as PyTorch refuses it.

Writes that bypass the tensor API (``tensor.numpy()[...] = ...``, optimizers' fused kernels) are
not counted, as in PyTorch.
"""

from __future__ import annotations

import weakref
from typing import Any, Sequence

import numpy as np

from zgrad.errors import AutogradError
from zgrad.kernels.view_geometry import memory_owner

__all__ = ["Snapshot", "snapshot", "verify", "bump", "mark_leaf_memory", "leaf_owning", "MODIFIED_SAVED_ERROR"]

MODIFIED_SAVED_ERROR = "one of the variables needed for gradient computation has been modified by an inplace operation"


class _Counter:
    __slots__ = ("version", "owner_ref")


_counters: dict[int, _Counter] = {}
_leaf_tensors: dict[int, Any] = {}  # id(memory owner) -> weakref to the leaf tensor that owns it

Snapshot = tuple  # ((counter, version at save, array), ...)


def _counter(owner: np.ndarray) -> _Counter:
    key = id(owner)
    counter = _counters.get(key)
    if counter is None:
        fresh = _Counter()
        fresh.version = 0
        counter = _counters.setdefault(key, fresh)  # atomic: two threads saving the same memory agree
        if counter is fresh:
            # Forget the counter with the memory (the id may then be reused by another array).
            counter.owner_ref = weakref.ref(owner, lambda _, key=key: _counters.pop(key, None))
    return counter


def snapshot(values: Sequence[Any]) -> Snapshot:
    """The version of every array (or tensor's array) among ``values``, as saved for backward."""
    taken = []
    for value in values:
        array = value if type(value) is np.ndarray else getattr(value, "_data", None)
        if type(array) is np.ndarray:
            counter = _counter(memory_owner(array))
            taken.append((counter, counter.version, array))
    return tuple(taken)


def verify(taken: Snapshot, node_name: str) -> None:
    """Check that nothing in ``taken`` was changed in place since it was saved.

    Raises:
        AutogradError: PyTorch's "modified by an inplace operation", naming the array and the node.
    """
    for counter, version, array in taken:
        if counter.version != version:
            raise AutogradError(
                f"{MODIFIED_SAVED_ERROR}: a {array.dtype} array of shape {list(array.shape)}, which {node_name} saved "
                f"for its backward, is at version {counter.version}; expected version {version} instead. Compute it "
                "out of place (y = y * 2 instead of y.mul_(2)) or clone() it before changing it."
            )


def bump(array: np.ndarray) -> None:
    """Count one in-place change of ``array``'s memory (a no-op unless a recorded op saved it)."""
    if type(array) is not np.ndarray:
        return
    counter = _counters.get(id(memory_owner(array)))
    if counter is not None:
        counter.version += 1


def mark_leaf_memory(tensor: Any) -> None:
    """Note that ``tensor``, a leaf that requires grad, owns its array's memory."""
    array = tensor._data
    if type(array) is not np.ndarray:
        return
    key = id(memory_owner(array))
    _leaf_tensors[key] = weakref.ref(tensor, lambda _, key=key: _forget_leaf(key, _))


def _forget_leaf(key: int, ref: Any) -> None:
    if _leaf_tensors.get(key) is ref:
        del _leaf_tensors[key]


def leaf_owning(array: Any) -> Any:
    """The live leaf tensor that requires grad and owns ``array``'s memory, or None."""
    if type(array) is not np.ndarray:
        return None
    ref = _leaf_tensors.get(id(memory_owner(array)))
    leaf = None if ref is None else ref()
    # The registry is keyed by the memory the leaf had when marked: its data may since have been
    # replaced (``.data =``, moved to a device), and that memory's id taken by another array.
    if leaf is None or not leaf._requires_grad or leaf.grad_fn is not None or type(leaf._data) is not np.ndarray \
            or memory_owner(leaf._data) is not memory_owner(array):
        return None
    return leaf

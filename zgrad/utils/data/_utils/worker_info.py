"""What a process knows about being a DataLoader worker: :func:`get_worker_info`, and where its
``default_collate`` allocates batches (the shared memory the batch travels in).

The state belongs to the process, as PyTorch's: the worker loop sets it once, before the
dataset's code runs; in the main process it stays empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["WorkerInfo", "get_worker_info", "set_worker_state", "set_batch_allocator", "batch_allocator"]

Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]


@dataclass(frozen=True)
class WorkerInfo:
    """The DataLoader worker this process is.

    Attributes:
        id: this worker's index, in ``[0, num_workers)``.
        num_workers: how many workers the loader runs.
        seed: the seed this worker's generators got (``base_seed + id``; see ``DataLoader``).
        dataset: this process's copy of the dataset.
    """

    id: int
    num_workers: int
    seed: int
    dataset: Any


class _WorkerState:
    """The process's worker identity and the allocator the current batch is built with."""

    def __init__(self) -> None:
        self.info: WorkerInfo | None = None
        self.allocator: Allocator | None = None


_state = _WorkerState()


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker process, its :class:`WorkerInfo` (``id``, ``num_workers``, ``seed``,
    ``dataset``); None in the main process.

    An ``IterableDataset`` uses it in ``__iter__`` (or a ``worker_init_fn``) to read only its
    worker's share of the data.
    """
    return _state.info


def set_worker_state(info: WorkerInfo) -> None:
    """Called once by the worker loop, before any of the dataset's code runs."""
    _state.info = info


def set_batch_allocator(allocator: Allocator | None) -> None:
    """Where ``default_collate`` puts the batches it stacks from now on (None: ordinary memory)."""
    _state.allocator = allocator


def batch_allocator() -> Allocator | None:
    """The allocator set by :func:`set_batch_allocator`: a worker's shared memory, else None."""
    return _state.allocator

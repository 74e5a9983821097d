"""``DistributedSampler``: each rank of a data-parallel job loads its own share of a dataset.

The share is PyTorch's: the order (a permutation when shuffling) is padded by wrapping around to
a multiple of ``num_replicas`` (or cut down to one with ``drop_last``), and rank ``r`` takes every
``num_replicas``-th index from ``r``. The permutation depends only on ``seed + epoch``, so every
rank computes the same one without talking to the others; it is numpy's
``default_rng(seed + epoch).permutation(len(dataset))``, not PyTorch's (zgrad does not reproduce
PyTorch's generator), and the rest of the construction is PyTorch's to the index.

This module belongs to the distributed layer (it reads the default process group for the rank
and world size it is not given), so ``zgrad.utils.data`` does not import it; import it as
PyTorch programs do, ``from zgrad.utils.data.distributed import DistributedSampler``.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from zgrad.utils.data._random import seeded_generator
from zgrad.utils.data.sampler import Sampler

__all__ = ["DistributedSampler"]

_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call init_process_group. "
                    "(Or give DistributedSampler num_replicas= and rank= explicitly.)")


def _default_world() -> tuple[int, int]:
    """(world size, rank) of the default process group, read when a sampler needs them.

    Raises:
        ValueError: no process group is initialized (PyTorch's error).
    """
    from zgrad.distributed.collectives.api import get_rank, get_world_size, is_initialized  # loads the transport

    if not is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    return get_world_size(), get_rank()


class DistributedSampler(Sampler):
    """The indices of ``dataset`` that rank ``rank`` of ``num_replicas`` loads.

    Args:
        dataset: a dataset with ``__len__`` (the same on every rank).
        num_replicas: the number of ranks (default: the default process group's world size).
        rank: this rank (default: its rank in the default process group).
        shuffle: a new permutation per epoch (call :meth:`set_epoch` before each epoch's iterator).
        seed: the permutation's seed, the same on every rank.
        drop_last: drop the tail that does not divide evenly, instead of padding by wrapping.

    Each rank gets ``ceil(len / num_replicas)`` indices (``ceil((len - num_replicas) /
    num_replicas)`` with ``drop_last`` when the length does not divide): the ranks' sets are
    disjoint apart from the padding and together cover the dataset (all but the dropped tail).

    Raises:
        ValueError: ``rank`` outside ``[0, num_replicas - 1]``, or no process group to default
            them from (PyTorch's errors).
    """

    def __init__(self, dataset: Any, num_replicas: int | None = None, rank: int | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            world_size, world_rank = _default_world()
            num_replicas = world_size if num_replicas is None else num_replicas
            rank = world_rank if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if drop_last and len(dataset) % num_replicas != 0:
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            order = seeded_generator(self.seed + self.epoch).permutation(n).tolist()
        else:
            order = list(range(n))
        return iter(self._share(order))

    def _share(self, order: list[int]) -> list[int]:
        """This rank's indices of ``order`` (a permutation of the dataset's indices), padded or
        cut as the class docstring says."""
        if self.drop_last:
            order = order[: self.total_size]
        else:
            padding = self.total_size - len(order)
            if padding <= len(order):
                order = order + order[:padding]
            else:
                order = order + (order * math.ceil(padding / len(order)))[:padding]
        return order[self.rank:self.total_size:self.num_replicas]

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration use the permutation of ``epoch`` (with ``shuffle``); every rank
        must pass the same ``epoch``."""
        self.epoch = epoch
